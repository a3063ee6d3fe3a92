/*
 * job.c - jobs: setup, batch geometry, counters (see job.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/format.h"
#include "core/job.h"
#include "core/npy.h"
#include "gpu/feedfs_cuda.h"
#include "gpu/gpu.h"

/* asprintf, with *out NULL on failure. */
static int __attribute__((format(printf, 2, 3)))
strf(char **out, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(out, fmt, ap);
	va_end(ap);
	if (n < 0)
		*out = NULL;
	return n < 0 ? -ENOMEM : 0;
}

/* The texts of the job's cache keys (see job.h). */
static int
key_texts(struct job *j, const struct cfg_job *cj)
{
	char sfx[64];

	cache_fmt_suffix(cj->cache_format, sfx, sizeof(sfx));
	if (strf(&j->cache_text, "%s%s", j->prefix, sfx) != 0 ||
	    strf(&j->key_text, "%s\nmax_pixels %" PRIu64 "\n%s",
		j->cache_text, cj->max_pixels, xf_decoder_id()) != 0 ||
	    strf(&j->tier_text, "%s\nmax_pixels %" PRIu64 "\n%s", j->prefix,
		cj->max_pixels, xf_decoder_id()) != 0)
		return -ENOMEM;
	return 0;
}

int
job_init(struct job *j, const struct cfg *c, const struct cfg_job *cj,
    const struct dataset *ds, char *err, size_t errlen)
{
	char msg[512];
	size_t plen;
	int r;

	memset(j, 0, sizeof(*j));
	j->cfg = cj;
	j->ds = ds;
	j->pl = cj->pl;
	/*
	 * Refused before anything is mounted; probed in a child process so
	 * that CUDA is first opened after fuse_daemonize() (feed_start).
	 */
	if (cj->gpu && (r = gpu_probe(msg, sizeof(msg))) != 0) {
		snprintf(
		    err, errlen, "%s:%d: gpu = on: %s", c->path, cj->line, msg);
		goto fail;
	}
	plen = xf_prefix_text(j->pl, NULL, 0);
	if ((j->prefix = malloc(plen + 1)) == NULL ||
	    (j->logged = calloc((ds->n + 7) / 8, 1)) == NULL) {
		snprintf(err, errlen, "out of memory");
		r = -ENOMEM;
		goto fail;
	}
	xf_prefix_text(j->pl, j->prefix, plen + 1);
	if ((r = key_texts(j, cj)) != 0) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	j->plan.n = ds->n;
	j->plan.batch_size = (uint32_t)cj->batch_size;
	j->plan.seed = cj->seed;
	j->plan.shuffle = cj->shuffle;
	j->plan.drop_last = cj->drop_last;
	if (plan_nbatches(&j->plan, 1) > 999999) {
		snprintf(err, errlen,
		    "%s:%d: %zu samples make %" PRIu64 " batches of %" PRIu64
		    " per epoch; batch names have six "
		    "digits: use a larger batch_size",
		    c->path, cj->line, ds->n, plan_nbatches(&j->plan, 1),
		    cj->batch_size);
		r = -EINVAL;
		goto fail;
	}
	j->sample_bytes = xf_sample_bytes(j->pl, cj->dtype);
	j->raw_bytes = xf_sample_bytes(j->pl, XF_UINT8);
	j->slot_bytes = cj->gpu ? j->raw_bytes : j->sample_bytes;
	j->descr = cj->dtype == XF_UINT8     ? "|u1"
		   : cj->dtype == XF_FLOAT16 ? "<f2"
					     : "<f4";
	j->shape[0] = cj->batch_size;
	if (cj->layout == XF_CHW) {
		j->shape[1] = 3;
		j->shape[2] = j->pl->out_h;
		j->shape[3] = j->pl->out_w;
	} else {
		j->shape[1] = j->pl->out_h;
		j->shape[2] = j->pl->out_w;
		j->shape[3] = 3;
	}
	return 0;
fail:
	job_fini(j);
	return r;
}

void
job_fini(struct job *j)
{
	free(j->prefix);
	free(j->cache_text);
	free(j->key_text);
	free(j->tier_text);
	j->cache_text = j->key_text = j->tier_text = NULL;
	free(j->logged);
	j->prefix = NULL;
	j->logged = NULL;
}

size_t
job_npy_header(
    const struct job *j, uint32_t len, enum batch_kind kind, char *buf)
{
	uint64_t shape[4];

	if (kind != BK_IMAGES) {
		shape[0] = len;
		return npy_header(buf, "<i8", shape, 1);
	}
	memcpy(shape, j->shape, sizeof(shape));
	shape[0] = len;
	return npy_header(buf, j->descr, shape, 4);
}

void
job_batch_geom(
    const struct job *j, uint32_t world, uint64_t b, struct batch_geom *g)
{
	uint64_t shape[4];

	memcpy(shape, j->shape, sizeof(shape));
	g->len = plan_batch_len(&j->plan, world, b);
	shape[0] = g->len;
	g->hdr[BK_IMAGES] = (uint32_t)npy_header_len(j->descr, shape, 4);
	g->hdr[BK_LABELS] = g->hdr[BK_IDS] =
	    (uint32_t)npy_header_len("<i8", shape, 1);
	g->hdr[BK_CUDA] = 0;
	g->size[BK_IMAGES] =
	    g->hdr[BK_IMAGES] + (uint64_t)g->len * j->sample_bytes;
	g->size[BK_LABELS] = g->size[BK_IDS] =
	    g->hdr[BK_LABELS] + (uint64_t)g->len * sizeof(int64_t);
	g->size[BK_CUDA] = FEEDFS_CUDA_DESC_SIZE;
	g->raw_size = (uint64_t)g->len * j->raw_bytes;
}

static uint64_t
now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec;
}

void
job_rate_add(struct job_stats *st)
{
	uint64_t sec = now_sec(), old;
	unsigned i = (unsigned)(sec % JOB_RATE_SECS);

	/*
	 * The first sample of a new second claims the bucket and restarts
	 * its count; a count that races with the claim may be lost, which
	 * a rate gauge can afford.
	 */
	old = atomic_load(&st->rate_sec[i]);
	if (old != sec &&
	    atomic_compare_exchange_strong(&st->rate_sec[i], &old, sec))
		atomic_store(&st->rate_n[i], 0);
	atomic_fetch_add(&st->rate_n[i], 1);
}

double
job_rate(struct job_stats *st, unsigned secs)
{
	uint64_t sec = now_sec(), n = 0;

	for (unsigned i = 0; i < JOB_RATE_SECS; i++) {
		uint64_t s = atomic_load(&st->rate_sec[i]);

		if (s < sec && s + secs >= sec)
			n += atomic_load(&st->rate_n[i]);
	}
	return (double)n / secs;
}
