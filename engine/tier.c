/*
 * tier.c - the engine (engine/): finished batches from the cluster tier,
 * made by batch workers anywhere (feedfs-fill --batches; issue 37): what
 * the batch table and the workers call.  Layer: the engine, below
 * batch.c (fill hands a batch over, drop_data gives one back) and
 * sched.c (the workers convert a fetched batch's slots); above budget.c.
 * The tier's thread, which looks batches up, is tier_look.c's; the
 * readers' positions, tier_pos.c's.
 *
 * A fetched batch's samples (tier_raw) are kept by bufpool.c for the
 * next batch where batches are made as they are read (lazy: their images
 * buffers are never written, so those are not fresh pages either).  From
 * malloc, samples of 32 MB and more (glibc's largest mmap threshold:
 * feed_keep_freed_memory) were fresh pages at every fetch, cleared by the
 * kernel: 256 images at 224 are 38.5 MB, and bench/disagg-bench's
 * from-tier row at batch 256 took 75,000 page faults an epoch and 0.320
 * ms of CPU an image, against 500 and 0.281 kept here.  Other fetched
 * batches' samples are malloc'd: bufpool's few places are then their
 * images buffers' (were they taken by these, every batch's buffer would
 * be fresh pages: a fifth of a fetched batch's cost here).
 *
 * With cluster and cluster_batches, a batch of a strict job (not
 * gpu = on) that gets data goes to the tier queue (tier_take) instead of
 * the workers' queues, and tier_look.c's thread decides: fetched from
 * the tier, its images are made here from the worker's samples, at a
 * fraction of the cost of making them; else its slots are queued to be
 * made here.  Float images with no op at the output conversion are made
 * as they are read (tier_read: each request's bytes converted and mixed
 * into a buffer of the FUSE thread's, whose caches the kernel then
 * copies them from; the batch's own buffer is never written past its
 * header); others slot by slot when fetched (tier_slot: the output
 * conversion and random_erasing's box, then the batch op as for any
 * batch).  Batches made here are not stored in the tier: the workers
 * make what the tier holds.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tier_int.h"
#include "util/replybuf.h"
#include "util/sbuf.h"

/* The wait bound when nothing was measured yet, and its bounds. */
#define WAIT_UNKNOWN_NS 5000000000ull
#define WAIT_MIN_NS 500000000ull
#define WAIT_MAX_NS 30000000000ull
/* A mount's claim: three times its batch time, within these (seconds). */
#define CLAIM_MIN_S 3
#define CLAIM_MAX_S 60

/* ---- measured times --------------------------------------------------- */

/*
 * The time this mount takes to make a batch of len samples of j, from
 * its workers' measured time per sample (0: nothing measured yet).
 */
uint64_t
tier_batch_ns(struct feed *f, struct job *j, uint32_t len)
{
	uint64_t n = atomic_load(&j->st.samples);
	uint64_t busy = atomic_load(&j->st.busy_ns);
	unsigned th = f->nthreads ? f->nthreads : 1;

	if (n < 8)
		return 0;
	return busy / n * len / th;
}

/* How long a batch a worker holds is waited for. */
uint64_t
tier_wait_bound(struct feed *f, struct job *j, uint32_t len)
{
	uint64_t w = f->cfg->mount.cluster_batch_wait, est;

	if (w != CFG_COUNT_AUTO)
		return w * 1000000000ull;
	if ((est = tier_batch_ns(f, j, len)) == 0)
		return WAIT_UNKNOWN_NS;
	w = 2 * est;
	return w < WAIT_MIN_NS	 ? WAIT_MIN_NS
	       : w > WAIT_MAX_NS ? WAIT_MAX_NS
				 : w;
}

unsigned
tier_claim_ttl(struct feed *f, struct job *j, uint32_t len)
{
	uint64_t s = 3 * tier_batch_ns(f, j, len) / 1000000000ull + 1;

	return s < CLAIM_MIN_S	 ? CLAIM_MIN_S
	       : s > CLAIM_MAX_S ? CLAIM_MAX_S
				 : (unsigned)s;
}

/* ---- the queue (locked) ----------------------------------------------- */

void
tier_q_remove(struct tier *t, struct batch *b)
{
	struct batch **pp = &t->head, *prev = NULL;

	for (; *pp; prev = *pp, pp = &(*pp)->t.next) {
		if (*pp != b)
			continue;
		*pp = b->t.next;
		if (t->tail == b)
			t->tail = prev;
		b->t.next = NULL;
		b->t.queued = false;
		return;
	}
}

void
tier_q_push(struct tier *t, struct batch *b)
{
	b->t.next = NULL;
	if (t->tail)
		t->tail->t.next = b;
	else
		t->head = b;
	t->tail = b;
	b->t.queued = true;
}

/* ---- the engine's calls (locked) -------------------------------------- */

bool
tier_take(struct feed *f, struct batch *b)
{
	struct tier *t = f->tier;

	if (t == NULL || !t->jobs[b->key.job].on || b->r.rv != NULL || t->stop)
		return false;
	b->t.poll = 0;
	b->t.since = b->t.dsince = 0;
	tier_q_push(t, b);
	pthread_cond_signal(&t->cv);
	return true;
}

/* Whether batches of j's epoch are made as they are read (tier_fetched):
 * float images with no op at the output conversion. */
static bool
lazy_job(const struct job *j, uint32_t epoch)
{
	return j->cfg->dtype != XF_UINT8 &&
	       !xf_has_output_ops(job_geo(j, epoch)->pl);
}

uint8_t *
tier_raw(struct feed *f, const struct batch *b, uint64_t len)
{
	uint8_t *raw = lazy_job(b->job, b->key.epoch)
			   ? bufpool_get(f, len)
			   : malloc(len ? len : 1);

	if (raw != NULL)
		budget_add(&f->budget, len);
	return raw;
}

void
tier_raw_free(struct feed *f, const struct batch *b, uint8_t *raw,
    uint64_t len)
{
	if (raw == NULL)
		return;
	budget_sub(&f->budget, len);
	if (lazy_job(b->job, b->key.epoch))
		bufpool_put(f, raw, len); /* counted there, if kept */
	else
		free(raw);
}

/* Give b's fetched samples back. */
static void
raw_free(struct feed *f, struct batch *b)
{
	tier_raw_free(f, b, b->t.raw, b->t.raw_len);
	b->t.raw = NULL;
	b->t.raw_len = 0;
}

void
tier_fetched(struct feed *f, struct batch *b, uint8_t *raw, uint64_t len)
{
	const struct job *j = b->job;

	(void)f;
	b->t.raw = raw;
	b->t.raw_len = len;
	/*
	 * Float images whose samples have no part at the conversion
	 * (random_erasing's box is drawn on each sample, before a mix):
	 * converted and mixed as they are read (tier_read), from the
	 * samples kept until the batch's data is dropped.  Its slots then
	 * only take their ids, and mix_one makes only its labels.
	 */
	b->t.lazy = lazy_job(j, b->key.epoch);
	if (b->t.lazy && j->soft)
		job_mix_draw(j, b->key.epoch, b->key.rank, b->key.world,
		    b->key.batch, &b->t.mix);
}

void
tier_drop(struct feed *f, struct batch *b)
{
	if (f->tier != NULL && b->t.queued)
		tier_q_remove(f->tier, b);
	raw_free(f, b);
	b->t.lazy = false;
	b->t.since = b->t.dsince = 0;
}

void
tier_done(struct feed *f, struct batch *b)
{
	if (!b->t.lazy) /* else read from until its data is dropped */
		raw_free(f, b);
}

/* ---- a fetched batch's slots (unlocked) -------------------------------- */

int
tier_slot(struct feed *f, struct batch *b, uint32_t s, uint32_t *id)
{
	const struct job *j = b->job;
	const struct job_geo *geo = job_geo(j, b->key.epoch);
	const struct xf_pipeline *pl = geo->pl;
	const int64_t *ids =
	    (const int64_t *)(b->file[BK_IDS] + b->g.hdr[BK_IDS]);
	struct xf_image im = {.w = pl->out_w,
	    .h = pl->out_h,
	    .px = b->t.raw + (size_t)s * geo->raw_bytes};
	uint64_t key;
	uint8_t *dst;

	(void)f;
	*id = (uint32_t)ids[s]; /* checked: < plan.n */
	if (b->t.lazy) /* tier_fetched: converted as read */
		return 0;
	dst = sched_slot(b, s);
	key = job_sample_key(j, b->key.epoch, *id);
	/* What xf_run_suffix does after the ops (transforms/ops.c). */
	xf_convert(&im, pl->normalize, pl->mean, pl->std, j->cfg->dtype,
	    j->cfg->layout, dst);
	for (size_t i = 0; i < pl->nops; i++)
		xf_run_op_output(pl, i, key, j->cfg->dtype, j->cfg->layout,
		    pl->out_w, pl->out_h, dst);
	return 0;
}

/* ---- a lazy batch's images, as they are read (unlocked) ----------------- */

/* A value cut by a range's ends is made whole around them, here. */
#define SLACK 64

int
tier_read(struct feed *f, struct batch *b, uint64_t off, size_t size,
    const void **ptr)
{
	const struct job *j = b->job;
	const struct job_geo *geo = job_geo(j, b->key.epoch);
	const struct xf_pipeline *pl = geo->pl;
	const uint64_t hdr = b->g.hdr[BK_IMAGES], start = off, end = off + size;
	const size_t es = j->cfg->dtype == XF_FLOAT16 ? 2 : 4;
	const uint64_t per = (uint64_t)pl->out_w * pl->out_h * 3; /* values */
	uint8_t *out;
	uint64_t v, ve;

	(void)f;
	/*
	 * The thread's reply buffer (a request's megabyte): the values just
	 * converted are still in its caches when the kernel copies them to
	 * the reader.
	 */
	if ((out = ff_reply_buf(size + 2 * SLACK)) == NULL)
		return -ENOMEM;
	/* Each value at an address of its alignment (the reply's first
	 * byte may be any of a value's). */
	out += SLACK + (start % es + es - hdr % es) % es;
	*ptr = out;
	if (off < hdr) {
		size_t k = end < hdr ? size : (size_t)(hdr - off);

		memcpy(out, b->file[BK_IMAGES] + off, k);
		off += k;
	}
	if (off >= end)
		return 0;
	/*
	 * The whole values with a byte in [off, end): a value cut by the
	 * range's start or end is made whole in the slack around it.
	 */
	for (v = (off - hdr) / es, ve = (end - hdr + es - 1) / es; v < ve;) {
		uint64_t s = v / per;
		size_t e0 = (size_t)(v - s * per),
		       e1 = (size_t)(ve - s * per < per ? ve - s * per : per);
		struct xf_image im = {.w = pl->out_w, .h = pl->out_h},
				prev = im;
		int r;

		if (s >= b->g.len)
			return -EIO; /* past the samples: feed_read bounds it */
		im.px = b->t.raw + s * geo->raw_bytes;
		prev.px = b->t.raw + (s ? s - 1 : b->g.len - 1) * geo->raw_bytes;
		r = xf_convert_range(&im, &prev, j->soft ? &b->t.mix : NULL,
		    pl->normalize, pl->mean, pl->std, j->cfg->dtype,
		    j->cfg->layout, e0, e1,
		    out + ((int64_t)(hdr + v * es) - (int64_t)start));
		if (r != 0)
			return r;
		v += e1 - e0;
	}
	return 0;
}

void
tier_free(struct feed *f)
{
	struct tier *t = f->tier;

	if (t == NULL)
		return;
	pthread_cond_destroy(&t->cv);
	free(t->jobs);
	free(t);
	f->tier = NULL;
}

/* ---- stats --------------------------------------------------------------- */

void
tier_stats(struct feed *f, struct sbuf *sb)
{
	static const struct {
		const char *name, *help;
		size_t off;
		bool secs;
	} c[] = {
#define C(n, fld, h, s) {n, h, offsetof(struct tier_job, fld), s}
	    C("feedfs_cluster_batches_total", batches,
		"Batches served whole from the cluster tier (made by batch "
		"workers; converted here).",
		false),
	    C("feedfs_cluster_batch_waits_total", waits,
		"Batches a worker held that the mount waited for.", false),
	    C("feedfs_cluster_batch_timeouts_total", timeouts,
		"Waits for a worker's batch that ran out: made here.", false),
	    C("feedfs_cluster_batch_refused_total", refused,
		"Batches of the tier refused (tag, MAC, length, ids): made "
		"here.",
		false),
	    C("feedfs_cluster_batch_local_total", local,
		"Batches looked up in the tier and made here.", false),
	    C("feedfs_cluster_batch_wait_seconds_total", wait_ns,
		"Time batches waited on workers' claims.", true),
	    C("feedfs_cluster_batch_bytes_in_total", bytes,
		"Bytes of batches fetched from the tier.", false),
#undef C
	};
	struct tier *t = f->tier;

	sb_printf(sb,
	    "# HELP feedfs_cluster_batch_errors_total Calls of the tier's "
	    "finished batches that a server failed.\n"
	    "# TYPE feedfs_cluster_batch_errors_total counter\n"
	    "feedfs_cluster_batch_errors_total %" PRIu64 "\n",
	    t ? (uint64_t)atomic_load(&t->errors) : 0);
	for (size_t k = 0; k < sizeof(c) / sizeof(c[0]); k++) {
		sb_printf(sb, "# HELP %s %s\n# TYPE %s counter\n", c[k].name,
		    c[k].help, c[k].name);
		for (size_t i = 0; t && i < f->njobs; i++) {
			atomic_uint_fast64_t *v =
			    (atomic_uint_fast64_t *)((char *)&t->jobs[i] +
						     c[k].off);

			if (!t->jobs[i].on)
				continue;
			if (c[k].secs)
				sb_printf(sb, "%s{job=\"%s\"} %.6f\n",
				    c[k].name, f->jobs[i].name,
				    (double)atomic_load(v) / 1e9);
			else
				sb_printf(sb, "%s{job=\"%s\"} %" PRIu64 "\n",
				    c[k].name, f->jobs[i].name,
				    (uint64_t)atomic_load(v));
		}
	}
	sb_printf(sb, "# HELP feedfs_cluster_batch_wait_bound_seconds How "
		      "long a batch a worker holds is waited for now.\n"
		      "# TYPE feedfs_cluster_batch_wait_bound_seconds gauge\n");
	for (size_t i = 0; t && i < f->njobs; i++)
		if (t->jobs[i].on)
			sb_printf(sb,
			    "feedfs_cluster_batch_wait_bound_seconds{job=\"%"
			    "s\"}"
			    " %.3f\n",
			    f->jobs[i].name,
			    (double)tier_wait_bound(f, &f->jobs[i],
				(uint32_t)f->jobs[i].plan.batch_size) /
				1e9);
}
