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
 * every sample exactly once.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/engine.h"
#include "core/sample.h"
#include "tests/testlib.h"

static char dir[] = "/tmp/test_engine.XXXXXX";

static struct feed *
start(const char *memory, unsigned readahead, const char *order)
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
	fprintf(fp,
	    "[mount]\ncache_size = 0\nthreads = 2\nmemory = %s\n"
	    "readahead = %u\n[dataset d]\nroot = %s/data\n"
	    "[job j]\nbatch_size = 6\nepochs = 3\norder = %s\n"
	    "pipeline = decode resize(40) cache random_resized_crop(32) "
	    "flip(0.5) normalize(imagenet)\n",
	    memory, readahead, dir, order);
	fclose(fp);
	if (cfg_load(path, &c, err, sizeof(err)) != 0 ||
	    feed_new(c, NULL, NULL, &f, err, sizeof(err)) != 0 ||
	    feed_start(f) != 0) {
		fprintf(stderr, "setup: %s\n", err);
		exit(99);
	}
	return f;
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
		const void *p;
		size_t n;

		CHECK_EQ_INT(feed_read(f, h, off, 100000, &p, &n), 0);
		if (n == 0)
			break;
		memcpy(buf + off, p, n);
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
	/* The opened batch and readahead 3: four batches in memory. */
	pthread_mutex_lock(&f->lock);
	CHECK_EQ_INT(f->nbatches, 4);
	for (uint64_t b = 2; b < 6; b++) {
		struct feed_key n = {0, 0, 1, 1, b};

		CHECK(batch_find(f, &n, false) != NULL);
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

		job_batch_geom(j, 1, 0, &g);
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

int
main(void)
{
	char cmd[1024];
	const char *bd = getenv("FF_BUILDDIR");

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 99;
	}
	snprintf(cmd, sizeof(cmd),
	    "%s/tests/gen-jpegs %s/data --n 40 --classes 3 --seed 3 "
	    ">/dev/null",
	    bd ? bd : ".", dir);
	if (system(cmd) != 0) {
		fprintf(stderr, "gen-jpegs failed\n");
		return 99;
	}
	test_bytes_and_budget();
	test_small_budget();
	test_relaxed();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return TEST_SUMMARY();
}
