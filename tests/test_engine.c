/*
 * test_engine - the batch table, the memory budget and the scheduler,
 * driven in-process without a mount: feed_new/feed_start over a generated
 * dataset, then feed_open/feed_read/feed_release as FUSE would call them.
 *
 * Checks: bytes equal to sample_make's in-process output; the readahead
 * queues the next batches within the budget and not beyond it; every byte
 * counted in the budget is uncounted again (mem_used returns to the text
 * files' share once the batches and orders are gone); the budget holds
 * with many batches opened and read in turn; a relaxed epoch delivers
 * every sample exactly once; idle relaxed views keep only what they chose,
 * and metadata keeps its cap.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/ns.h"
#include "core/sample.h"
#include "transforms/rng.h"
#include "tests/testlib.h"

static char dir[] = "/tmp/test_engine.XXXXXX";

static struct feed *
start_cfg(const char *memory, unsigned readahead, const char *order,
    const char *jobname, const char *root, unsigned batch)
{
	char path[512], err[2048];
	struct cfg *c = NULL;
	struct feed *f = NULL;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/feedfs.conf", dir);
	if ((fp = fopen(path, "w")) == NULL) {
		perror(path);
		exit(99);
	}
	/*
	 * decode(scaled): the batches are what these tests count against
	 * the budget; Pillow's full decode of gen-jpegs' larger images
	 * (up to 533x400) passes a worker's arena at the smallest budgets,
	 * and such a sample's buffers may pass the budget by themselves
	 * (sched.c's scratch_outside; test_png_memory.py tests that).
	 */
	fprintf(fp,
	    "[mount]\ncache_size = 0\nthreads = 2\nmemory = %s\n"
	    "readahead = %u\n[dataset d]\nroot = %s/%s\n"
	    "[job %s]\nbatch_size = %u\nepochs = 3\norder = %s\n"
	    "pipeline = decode(scaled) resize(40) cache "
	    "random_resized_crop(32) flip(0.5) normalize(imagenet)\n",
	    memory, readahead, dir, root, jobname, batch, order);
	fclose(fp);
	if (cfg_load(path, &c, err, sizeof(err)) != 0 ||
	    feed_new(c, NULL, NULL, &f, err, sizeof(err)) != 0 ||
	    feed_start(f) != 0) {
		fprintf(stderr, "setup: %s\n", err);
		exit(99);
	}
	return f;
}

static struct feed *
start(const char *memory, unsigned readahead, const char *order)
{
	return start_cfg(memory, readahead, order, "j", "data", 6);
}

/* The bytes mem_used holds with no batch and no order: the text files. */
static uint64_t
text_bytes(struct feed *f)
{
	uint64_t n = f->readme.len;

	for (size_t i = 0; i < f->njobs; i++)
		n += f->info[i].len + f->samples[i].len;
	return n;
}

/* Read a whole batch file through the engine into a malloc'd buffer. */
static uint8_t *
read_all(
    struct feed *f, const struct feed_key *k, enum batch_kind kind, size_t *len)
{
	struct feed_handle *h;
	uint64_t size = feed_file_size(f, k, kind), off = 0;
	uint8_t *buf = malloc(size);

	CHECK_EQ_INT(feed_open(f, k, kind, &h), 0);
	while (off < size) {
		struct feed_pin *pin;
		const void *p;
		size_t n;

		CHECK_EQ_INT(feed_read(f, h, off, 100000, &p, &n, &pin), 0);
		if (n == 0) {
			feed_read_end(f, pin);
			break;
		}
		memcpy(buf + off, p, n);
		feed_read_end(f, pin);
		off += n;
	}
	feed_release(f, h);
	CHECK(off == size);
	*len = (size_t)size;
	return buf;
}

static void
test_bytes_and_budget(void)
{
	struct feed *f = start("64M", 3, "strict");
	struct job *j = &f->jobs[0];
	struct feed_key k = {0, 0, 1, 1, 2};
	uint32_t order[64];
	uint64_t pos[6];
	char err[512];
	uint8_t *imgs, *ids, *want;
	size_t len, ilen;

	imgs = read_all(f, &k, BK_IMAGES, &len);
	ids = read_all(f, &k, BK_IDS, &ilen);
	plan_permutation(&j->plan, 1, order);
	plan_batch_positions(&j->plan, 0, 1, 2, pos);
	want = malloc(j->sample_bytes);
	for (uint32_t s = 0; s < 6; s++) {
		uint32_t id = order[pos[s]];
		const int64_t *v = (const int64_t *)(ids + ilen - 6 * 8);

		CHECK_EQ_INT(v[s], id);
		CHECK_EQ_INT(
		    sample_make(j, NULL, 1, id, false, want, err, sizeof(err)),
		    0);
		CHECK(memcmp(imgs + len - (6 - s) * j->sample_bytes, want,
			  j->sample_bytes) == 0);
	}
	free(want);
	free(imgs);
	free(ids);
	/*
	 * Readahead 3: those batches in memory, and the opened one, unless a
	 * worker starting one of them took its buffer (read to its end, no
	 * file holds it: batch.c, batch_images_buf), which the kept buffers'
	 * count says.
	 */
	pthread_mutex_lock(&f->lock);
	{
		struct feed_key opened = {0, 0, 1, 1, 2};
		bool kept = batch_find(f, &opened) != NULL;

		CHECK_EQ_INT(f->nbatches, kept ? 4 : 3);
		CHECK(kept || f->pool_reused > 0);
	}
	for (uint64_t b = 3; b < 6; b++) {
		struct feed_key n = {0, 0, 1, 1, b};

		CHECK(batch_find(f, &n) != NULL);
	}
	CHECK(f->mem_used <= f->memory);
	pthread_mutex_unlock(&f->lock);
	/* Everything counted is uncounted: tear the batches down. */
	sched_stop(f);
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < FEED_HASH; i++)
		while (f->table[i])
			batch_destroy(f, f->table[i]);
	order_free_all(f);
	{
		uint64_t m = f->memory;

		bufpool_free_all(f);
		f->memory = m;
	}
	CHECK_EQ_INT(f->npool, 0);
	CHECK_EQ_INT(f->nbatches, 0);
	CHECK_EQ_INT(f->mem_used, text_bytes(f));
	pthread_mutex_unlock(&f->lock);
	feed_free(f);
}

/* A budget of about three batches: readahead stops at it, and a reader
 * going through two epochs never holds more than the budget and one
 * demanded batch. */
static void
test_small_budget(void)
{
	struct feed *f = start("16M", 50, "strict");
	struct job *j = &f->jobs[0];
	uint64_t per, peak = 0;

	{
		struct batch_geom g;

		job_batch_geom(j, 0, 1, 0, &g);
		per = g.size[BK_IMAGES] + 2 * g.size[BK_LABELS] + 6 * 8;
	}
	f->memory = f->mem_used + 3 * per; /* the test's budget */
	for (uint32_t e = 0; e < 2; e++)
		for (uint64_t b = 0; b < plan_nbatches(&j->plan, 1); b++) {
			struct feed_key k = {0, 0, 1, e, b};
			size_t len;

			free(read_all(f, &k, BK_IMAGES, &len));
			pthread_mutex_lock(&f->lock);
			if (f->mem_used > peak)
				peak = f->mem_used;
			CHECK(f->nbatches <= 4);
			pthread_mutex_unlock(&f->lock);
		}
	CHECK(peak <= f->memory + per);
	/* Batches given back left their images buffers for the next ones:
	 * most batches of two epochs took one (allocated: about the first
	 * four, the budget's, and the last batch's other size). */
	pthread_mutex_lock(&f->lock);
	CHECK(f->pool_reused >= 2 * plan_nbatches(&j->plan, 1) - 8);
	pthread_mutex_unlock(&f->lock);
	CHECK(atomic_load(&j->st.batches) >= 2 * plan_nbatches(&j->plan, 1));
	feed_free(f);
}

/* order = relaxed: every sample once per epoch, labels matching ids. */
static void
test_relaxed(void)
{
	struct feed *f = start("64M", 2, "relaxed");
	struct job *j = &f->jobs[0];
	size_t n = j->ds->n;
	unsigned *seen = calloc(n, sizeof(*seen));
	uint64_t nb = plan_nbatches(&j->plan, 1);

	CHECK_EQ_INT(nb, 7); /* 40 samples in 6s: stepping by 3 visits all */
	for (uint64_t b = 0; b < nb; b++) {
		struct feed_key k = {0, 0, 1, 0, (b * 3) % nb}; /* nb = 7 */
		size_t ilen, llen;
		uint8_t *ids = read_all(f, &k, BK_IDS, &ilen);
		uint8_t *labels = read_all(f, &k, BK_LABELS, &llen);
		uint32_t len = plan_batch_len(&j->plan, 1, k.batch);
		const int64_t *v = (const int64_t *)(ids + ilen - len * 8);
		const int64_t *l = (const int64_t *)(labels + llen - len * 8);

		for (uint32_t s = 0; s < len; s++) {
			CHECK(v[s] >= 0 && (size_t)v[s] < n);
			if (v[s] >= 0 && (size_t)v[s] < n) {
				seen[v[s]]++;
				CHECK_EQ_INT(l[s], j->ds->samples[v[s]].label);
			}
		}
		free(ids);
		free(labels);
	}
	for (size_t i = 0; i < n; i++)
		CHECK_EQ_INT(seen[i], 1);
	free(seen);
	feed_free(f);
}

/*
 * Issue 12 item 4: opening batch files escapes no budget.  200 opens
 * without a read hold no data beyond the budget; reading each of them in
 * turn, all still open, keeps the budget too (idle open batches give their
 * data back and are made again, to the same bytes, when read again).
 */
static void
test_opens_bounded(void)
{
	struct feed *f = start_cfg("16M", 2, "strict", "j", "data", 2);
	struct job *j = &f->jobs[0];
	uint64_t nb = plan_nbatches(&j->plan, 1), per;
	struct feed_handle *h[200];
	struct batch_geom g;
	size_t n = 0, len1, len2;
	uint8_t *first, *again;
	struct feed_key k0 = {0, 0, 1, 0, 0};

	job_batch_geom(j, 0, 1, 0, &g);
	per = g.size[BK_IMAGES] + 2 * g.size[BK_LABELS] + g.len * 8;
	/* Four batches, and the handles and batch structs (metadata). */
	f->memory =
	    f->mem_used + 4 * per +
	    3 * nb * (sizeof(struct feed_handle) + sizeof(struct batch));
	first = read_all(f, &k0, BK_IMAGES, &len1);
	for (uint32_t e = 0; e < 3 && n < 200; e++)
		for (uint64_t b = 0; b < nb && n < 200; b++) {
			struct feed_key k = {0, 0, 1, e, b};

			CHECK_EQ_INT(feed_open(f, &k, BK_IMAGES, &h[n]), 0);
			n++;
		}
	CHECK(n == 3 * nb);
	/*
	 * The handles (metadata, 2.5 batches' worth here) came while the
	 * first batches were being made, which cannot give their data back
	 * until they are ready: over by what came meanwhile, a batch or two.
	 * The reads below make room again.
	 */
	pthread_mutex_lock(&f->lock);
	CHECK(f->mem_used <= f->memory + 2 * per);
	pthread_mutex_unlock(&f->lock);
	/* Read every open file, all of them held open. */
	for (size_t i = 0; i < n; i++) {
		struct feed_pin *pin;
		const void *p;
		size_t got;

		CHECK_EQ_INT(feed_read(f, h[i], 0, 1 << 20, &p, &got, &pin), 0);
		feed_read_end(f, pin);
		pthread_mutex_lock(&f->lock);
		CHECK(f->mem_used <= f->memory + per);
		pthread_mutex_unlock(&f->lock);
	}
	/* Batch 0 of epoch 0 was given back and is made again the same. */
	again = read_all(f, &k0, BK_IMAGES, &len2);
	CHECK(len1 == len2 && memcmp(first, again, len1) == 0);
	for (size_t i = 0; i < n; i++)
		feed_release(f, h[i]);
	free(first);
	free(again);
	feed_free(f);
}

/*
 * Issue 12 item 2: relaxed order, a small budget, readahead 4, batches
 * opened out of order (8, 0, 16, 4, ...): every batch fills (no reader
 * waits forever) and every sample comes once.
 */
static void
test_relaxed_out_of_order(void)
{
	struct feed *f = start_cfg("16M", 4, "relaxed", "j", "data", 2);
	struct job *j = &f->jobs[0];
	uint64_t nb = plan_nbatches(&j->plan, 1), per;
	size_t n = j->ds->n;
	unsigned *seen = calloc(n, sizeof(*seen));
	static const uint64_t first[] = {8, 0, 16, 4, 12, 1};
	bool *done = calloc(nb, sizeof(*done));
	struct batch_geom g;

	job_batch_geom(j, 0, 1, 0, &g);
	per = g.size[BK_IMAGES] + 2 * g.size[BK_LABELS] + g.len * 8;
	f->memory = f->mem_used + 5 * per;
	for (uint64_t i = 0; i < nb + 6; i++) {
		uint64_t b = i < 6 ? first[i] : i - 6;
		struct feed_key k = {0, 0, 1, 0, b};
		size_t ilen;
		uint8_t *ids;
		uint32_t len;

		if (b >= nb || done[b])
			continue;
		done[b] = true;
		ids = read_all(f, &k, BK_IDS, &ilen);
		len = plan_batch_len(&j->plan, 1, b);
		for (uint32_t s = 0; s < len; s++) {
			int64_t id =
			    ((const int64_t *)(ids + ilen - len * 8))[s];

			if (id >= 0 && (size_t)id < n)
				seen[id]++;
		}
		free(ids);
	}
	for (size_t i = 0; i < n; i++)
		CHECK_EQ_INT(seen[i], 1);
	free(seen);
	free(done);
	feed_free(f);
}

/*
 * Issue 12 item 3: a relaxed batch's content stays fixed for the life of
 * the mount, also after its data was given back and after many other
 * views (more than the 16 once kept) were read.
 */
static void
test_relaxed_fixed(void)
{
	struct feed *f = start_cfg("16M", 0, "relaxed", "j", "data", 8);
	struct job *j = &f->jobs[0];
	struct feed_key k = {0, 0, 1, 0, 1};
	size_t l1, l2, l;
	uint8_t *a = read_all(f, &k, BK_IDS, &l1), *b;

	for (uint32_t w = 2; w < 22; w++) {
		struct feed_key o = {0, 0, w, 1, 0};

		free(read_all(f, &o, BK_IMAGES, &l));
	}
	pthread_mutex_lock(&f->lock);
	f->memory = 0; /* everything idle must go */
	batch_make_room(f, 1, true);
	CHECK(batch_find(f, &k) == NULL);
	f->memory = 64u << 20;
	pthread_mutex_unlock(&f->lock);
	b = read_all(f, &k, BK_IDS, &l2);
	CHECK(l1 == l2 && memcmp(a, b, l1) == 0);
	free(a);
	free(b);
	(void)j;
	feed_free(f);
}

/* The order of (job 0, epoch) among the kept ones, or NULL.  Locked. */
static struct order *
find_order(struct feed *f, uint32_t epoch)
{
	for (struct order *o = f->orders; o; o = o->next)
		if (o->job == 0 && o->epoch == epoch)
			return o;
	return NULL;
}

/*
 * Issue 17 item 13: an idle relaxed view keeps only what it chose.  After
 * one batch of each of 21 views, no view holds an order; once the budget
 * gives everything back, only the views' choices stay counted, and a
 * finished sample that no batch took is owed.  Then the first view is read
 * to its end: every sample once (the owed one too), batch 0 rebuilt to the
 * same bytes, the epoch order made again to the same bytes, and the
 * positions, never stored, are the plan's.  At the end every byte counted
 * is uncounted.
 */
static void
test_relaxed_idle(void)
{
	struct feed *f = start_cfg("64M", 0, "relaxed", "j", "data", 6);
	struct job *j = &f->jobs[0];
	uint64_t nb = plan_nbatches(&j->plan, 1), views = 0, memory;
	struct feed_key k0 = {0, 0, 1, 0, 0};
	size_t n = j->ds->n, l0, li0, l, li;
	unsigned *seen = calloc(n, sizeof(*seen));
	uint8_t *ids0 = read_all(f, &k0, BK_IDS, &l0);
	uint8_t *img0 = read_all(f, &k0, BK_IMAGES, &li0), *ids, *img;
	uint32_t *order0 = malloc(j->plan.n * sizeof(*order0));
	struct rview *rv0 = NULL;
	struct rsample *x;
	struct order *o;
	char err[512];

	for (uint32_t w = 2; w < 22; w++) {
		struct feed_key k = {0, w - 1, w, 1 + w % 2, 0};

		free(read_all(f, &k, BK_IDS, &l));
	}
	pthread_mutex_lock(&f->lock);
	for (struct order *od = f->orders; od; od = od->next)
		CHECK_EQ_INT(od->refs, 0); /* no idle view holds one */
	for (struct rview *rv = f->rviews; rv; rv = rv->next) {
		CHECK(rv->order == NULL && rv->inflight == 0);
		CHECK_EQ_INT(rv->nchosen, 1);
		views++;
		if (rv->world == 1)
			rv0 = rv;
	}
	CHECK_EQ_INT(views, 21);
	CHECK_EQ_INT(f->nrviews, 21);
	CHECK(rv0 != NULL && find_order(f, 0) != NULL);
	if (!rv0 || !find_order(f, 0)) {
		pthread_mutex_unlock(&f->lock);
		return;
	}
	memcpy(order0, find_order(f, 0)->ids, j->plan.n * sizeof(*order0));
	/* A sample finished that no batch took: element 6 of the view, made
	 * as relaxed_start makes it, on the view's ready list. */
	CHECK_EQ_INT(rv0->started, 6);
	x = malloc(sizeof(*x) + j->slot_bytes);
	x->buf = (uint8_t *)(x + 1);
	x->msg = NULL;
	x->next = NULL;
	x->elem = 6;
	x->err = sample_make_slot(j, NULL, 0, order0,
	    plan_position(&j->plan, 0, 1, 6), false, x->buf, &x->id, false, err,
	    sizeof(err));
	CHECK_EQ_INT(x->err, 0);
	rv0->ready = rv0->ready_tail = x;
	rv0->started = 7;
	feed_mem_add(f, j->slot_bytes);
	/* Everything that can be given back goes. */
	memory = f->memory;
	f->memory = 0;
	batch_make_room(f, 1, true);
	f->memory = memory;
	CHECK(f->orders == NULL);
	CHECK_EQ_INT(f->nbatches, 0);
	CHECK_EQ_INT(f->spare_bytes, 0);
	CHECK(rv0->ready == NULL && rv0->nowed == 1 && rv0->owed[0] == 6);
	{
		uint64_t meta = 0;

		for (struct rview *rv = f->rviews; rv; rv = rv->next)
			meta += rv->mem;
		CHECK_EQ_INT(f->meta_used, meta);
		CHECK_EQ_INT(f->mem_used, text_bytes(f) + meta + f->pool_bytes +
						  f->scratch_reserved);
	}
	pthread_mutex_unlock(&f->lock);

	/* The view read to its end: each sample once, batch 0 the same. */
	for (uint64_t b = 0; b < nb; b++) {
		struct feed_key k = {0, 0, 1, 0, b};
		uint32_t len = plan_batch_len(&j->plan, 1, b);
		const int64_t *v;

		ids = read_all(f, &k, BK_IDS, &l);
		v = (const int64_t *)(ids + l - len * 8);
		for (uint32_t s = 0; s < len; s++)
			if (v[s] >= 0 && (size_t)v[s] < n)
				seen[v[s]]++;
		if (b == 0) {
			img = read_all(f, &k, BK_IMAGES, &li);
			CHECK(l == l0 && memcmp(ids, ids0, l) == 0);
			CHECK(li == li0 && memcmp(img, img0, li) == 0);
			free(img);
		}
		free(ids);
	}
	for (size_t i = 0; i < n; i++)
		CHECK_EQ_INT(seen[i], 1);
	pthread_mutex_lock(&f->lock);
	o = find_order(f, 0);
	CHECK(o && memcmp(o->ids, order0, j->plan.n * sizeof(*order0)) == 0);
	pthread_mutex_unlock(&f->lock);
	/* The positions a view computes are the batches' plan. */
	for (uint32_t w = 1; w < 9; w++)
		for (uint32_t r = 0; r < w; r++) {
			uint64_t nbw = plan_nbatches(&j->plan, w);
			uint64_t pos[6], e = 0;

			for (uint64_t b = 0; b < nbw; b++) {
				uint32_t m = plan_batch_positions(
				    &j->plan, r, w, b, pos);

				for (uint32_t s = 0; s < m; s++, e++)
					CHECK_EQ_INT(
					    plan_position(&j->plan, r, w, e),
					    pos[s]);
			}
		}

	/* Every byte counted is uncounted. */
	feed_drain(f);
	pthread_mutex_lock(&f->lock);
	CHECK_EQ_INT(f->nrviews, 0);
	CHECK_EQ_INT(f->meta_used, 0);
	CHECK_EQ_INT(f->spare_bytes, 0);
	CHECK_EQ_INT(f->mem_used, text_bytes(f));
	pthread_mutex_unlock(&f->lock);
	free(seen);
	free(ids0);
	free(img0);
	free(order0);
	feed_free(f);
}

/*
 * Issue 17 item 13: metadata has a cap of its own.  At the cap, an open
 * that needs a new batch struct or handle fails with ENOMEM (counted),
 * and works again once handles are released.
 */
static void
test_meta_cap(void)
{
	struct feed *f = start_cfg("64M", 0, "strict", "j", "data", 2);
	struct feed_handle *h[64];
	size_t n = 0;
	int r = 0;

	pthread_mutex_lock(&f->lock);
	f->meta_cap = f->meta_used +
		      8 * (sizeof(struct feed_handle) + sizeof(struct batch));
	pthread_mutex_unlock(&f->lock);
	while (n < 64) {
		struct feed_key k = {0, 0, 1, 0, n};

		if ((r = feed_open(f, &k, BK_IMAGES, &h[n])) != 0)
			break;
		n++;
	}
	CHECK_EQ_INT(r, -ENOMEM);
	CHECK_EQ_INT(n, 8);
	pthread_mutex_lock(&f->lock);
	CHECK(f->meta_used <= f->meta_cap);
	CHECK_EQ_INT(f->meta_refused, 1);
	pthread_mutex_unlock(&f->lock);
	/* One read (its batch ready) and released: its batch can go. */
	{
		struct feed_pin *pin;
		const void *p;
		size_t got;

		CHECK_EQ_INT(
		    feed_read(f, h[n - 1], 0, 1 << 20, &p, &got, &pin), 0);
		feed_read_end(f, pin);
		feed_release(f, h[--n]);
	}
	{
		struct feed_key k = {0, 0, 1, 1, 0};

		CHECK_EQ_INT(feed_open(f, &k, BK_IMAGES, &h[n]), 0);
		n++;
	}
	while (n > 0)
		feed_release(f, h[--n]);
	feed_free(f);
}

/*
 * Issue 12 item 1: with gpu = on, a batch's .cuda samples (raw), .npy
 * images, labels and ids are one batch, also in relaxed order: each raw
 * slot is the sample its id names, and the .npy is its conversion.  (No
 * device here: the job is switched to gpu = on after its setup, which is
 * all the engine looks at; the staging itself is test_gpu's.)
 */
static void
test_gpu_batches(const char *order)
{
	struct feed *f = start_cfg("64M", 1, order, "j", "data", 6);
	struct job *j = &f->jobs[0];
	uint8_t *raw = malloc(j->raw_bytes), *img = malloc(j->sample_bytes);
	char err[512];

	((struct cfg_job *)j->cfg)->gpu = true;
	j->slot_bytes = j->geo0.slot_bytes = j->raw_bytes;
	for (uint64_t b = 0; b < 3; b++) {
		struct feed_key k = {0, 0, 1, 2, (b * 5) % 7};
		size_t ilen, llen, len;
		uint8_t *ids = read_all(f, &k, BK_IDS, &ilen);
		uint8_t *labels = read_all(f, &k, BK_LABELS, &llen);
		uint8_t *imgs = read_all(f, &k, BK_IMAGES, &len);
		uint32_t n = plan_batch_len(&j->plan, 1, k.batch);
		struct batch *bt;

		pthread_mutex_lock(&f->lock);
		bt = batch_find(f, &k);
		CHECK(bt != NULL && bt->raw != NULL);
		pthread_mutex_unlock(&f->lock);
		for (uint32_t s = 0; bt && s < n; s++) {
			int64_t id = ((const int64_t *)(ids + ilen - n * 8))[s];

			CHECK_EQ_INT(
			    ((const int64_t *)(labels + llen - n * 8))[s],
			    j->ds->samples[id].label);
			CHECK_EQ_INT(sample_make(j, NULL, 2, (uint32_t)id, true,
					 raw, err, sizeof(err)),
			    0);
			CHECK(memcmp(bt->raw + s * j->raw_bytes, raw,
				  j->raw_bytes) == 0);
			CHECK_EQ_INT(sample_make(j, NULL, 2, (uint32_t)id,
					 false, img, err, sizeof(err)),
			    0);
			CHECK(memcmp(imgs + len - (n - s) * j->sample_bytes,
				  img, j->sample_bytes) == 0);
		}
		free(ids);
		free(labels);
		free(imgs);
	}
	free(raw);
	free(img);
	feed_free(f);
}

/* Issue 12 item 13: the cache key depends on max_pixels and the decoder. */
static void
test_key_text(void)
{
	struct feed *f = start("64M", 0, "strict");
	struct job *j = &f->jobs[0];
	char want[256];

	snprintf(want, sizeof(want),
	    "decode(scaled) resize(40)\nmax_pixels %u\n%s",
	    XF_DEFAULT_MAX_PIXELS, xf_decoder_id());
	CHECK_EQ_STR(j->key_text, want);
	CHECK(strncmp(xf_decoder_id(), "libjpeg-turbo ", 14) == 0);
	feed_free(f);
}

/*
 * Issue 28: a job that sets neither shuffle_seed nor aug_seed keeps its
 * bytes: its shuffle is seeded by seed and its samples' draws are the
 * stream of (RNG_DOMAIN_SAMPLE, seed, epoch, id), as before the keys.
 */
static void
test_default_seeds(void)
{
	struct feed *f = start("64M", 0, "strict");
	struct job *j = &f->jobs[0];

	CHECK(j->plan.seed == j->cfg->seed && j->aug_seed == j->cfg->seed);
	CHECK_EQ_INT(j->view, 0);
	for (uint32_t e = 0; e < 3; e++)
		for (uint32_t id = 0; id < 40; id += 7)
			CHECK(job_sample_key(j, e, id) ==
			      rng_key(RNG_DOMAIN_SAMPLE, j->cfg->seed, e, id));
	CHECK_EQ_INT(feed_njobs(f), 1);
	CHECK_EQ_INT(feed_job_views(f, 0), 1);
	feed_free(f);
}

/* Issue 12 item 14: odd names in samples.tsv and info.json; a job name of
 * 128 characters is listed whole and found. */
static void
test_names(void)
{
	char name[129], path[1024], ent[NS_NAME_MAX];
	char cmd[sizeof(path) + sizeof(dir) + 64];
	const char *text;
	size_t len;
	char *owned;
	struct ns_key root, c;
	struct feed *f;
	FILE *fp;

	memset(name, 'n', 128);
	name[128] = '\0';
	snprintf(path, sizeof(path), "%s/odd/cl\xff", dir);
	if (mkdir(path, 0700) != 0)
		perror(path);
	snprintf(path, sizeof(path), "%s/odd/cl\xff/a\tb\nc\\.jpg", dir);
	snprintf(
	    cmd, sizeof(cmd), "cp %s/data/class000/*000.jpg '%s'", dir, path);
	if ((fp = fopen(path, "w")) != NULL)
		fclose(fp);
	CHECK(system(cmd) == 0);
	f = start_cfg("64M", 0, "strict", name, "odd", 2);
	CHECK_EQ_INT(feed_text(f, FT_SAMPLES, 0, &text, &len, &owned), 0);
	CHECK(len > 0 &&
	      strstr(text, "0\tcl\xff/a\\tb\\nc\\\\.jpg\t0\n") == text);
	CHECK_EQ_INT(feed_text(f, FT_INFO, 0, &text, &len, &owned), 0);
	CHECK(strstr(text, "\"cl\\ufffd\"") != NULL);
	ns_root(&root);
	CHECK(ns_entry(f, &root, 2, ent, sizeof(ent), &c));
	CHECK_EQ_STR(ent, name);
	CHECK_EQ_INT(ns_child(f, &root, name, &c), 0);
	CHECK_EQ_INT(c.type, NS_JOB);
	feed_free(f);
}

int
main(void)
{
	char cmd[1024];

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 99;
	}
	if (test_gen_jpegs(dir, 40, 3, 3) != 0)
		return 99;
	test_bytes_and_budget();
	test_small_budget();
	test_relaxed();
	test_opens_bounded();
	test_relaxed_out_of_order();
	test_relaxed_fixed();
	test_relaxed_idle();
	test_meta_cap();
	test_key_text();
	test_default_seeds();
	test_gpu_batches("strict");
	test_gpu_batches("relaxed");
	snprintf(cmd, sizeof(cmd), "mkdir %s/odd", dir);
	CHECK(system(cmd) == 0);
	test_names();
	test_rmtree(dir);
	return TEST_SUMMARY();
}
