/*
 * stage.c - .cuda files: the first read of one waits for its raw batch
 * (uint8 HWC samples), stages it on the device, where the job's dtype,
 * layout and normalization are applied, and answers with the descriptor
 * of the device buffer; the buffer goes back to the pool when the file
 * is released (see engine.h, gpu/gpu.h).  Layer: the engine (engine/),
 * below files.c, above pin.c and gpu/.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "engine/engine.h"
#include "util/log.h"
#include "gpu/gpu.h"
#include "gpu/pool.h"
#include "transforms/xf.h"

/*
 * The job's dtype and layout in gpu/'s terms, the descriptor's codes:
 * gpu/ includes nothing of transforms/.  A switch, so that a dtype or a
 * layout added to xf.h without a code here is a -Wswitch warning.
 */
static enum feedfs_cuda_dtype
cuda_dtype(enum xf_dtype d)
{
	switch (d) {
	case XF_UINT8:
		return FEEDFS_CUDA_UINT8;
	case XF_FLOAT16:
		return FEEDFS_CUDA_FLOAT16;
	case XF_FLOAT32:
		return FEEDFS_CUDA_FLOAT32;
	}
	return FEEDFS_CUDA_FLOAT32;
}

static enum feedfs_cuda_layout
cuda_layout(enum xf_layout l)
{
	switch (l) {
	case XF_HWC:
		return FEEDFS_CUDA_NHWC;
	case XF_CHW:
		return FEEDFS_CUDA_NCHW;
	}
	return FEEDFS_CUDA_NCHW;
}

/* The pool of job i: an equal share of gpu_memory among gpu = on jobs. */
static int
job_pool(struct feed *f, size_t i, char *msg, size_t len)
{
	uint32_t n = 0;

	for (size_t k = 0; k < f->njobs; k++)
		n += f->jobs[k].cfg->gpu;
	return gpu_job_pool(f->gpu, (uint32_t)i,
	    gpu_pool_share(f->cfg->mount.gpu_memory, n), msg, len);
}

int
stage_start(struct feed *f)
{
	char msg[512];
	int r;

	for (size_t i = 0; f->gpu && i < f->njobs; i++)
		if (f->jobs[i].cfg->gpu &&
		    (r = job_pool(f, i, msg, sizeof(msg))) != 0) {
			log_err("gpu = on (job %s): %s", f->jobs[i].cfg->name,
			    msg);
			return r;
		}
	return 0;
}

int
stage_probe(
    const struct cfg *c, const struct cfg_job *cj, char *err, size_t errlen)
{
	char msg[512];
	int r;

	/*
	 * Refused before anything is mounted; probed in a child process so
	 * that CUDA is first opened after fuse_daemonize() (feed_start).
	 */
	if (!cj->gpu || (r = gpu_probe(msg, sizeof(msg))) == 0)
		return 0;
	snprintf(err, errlen, "%s:%d: gpu = on: %s", c->path, cj->line, msg);
	return r;
}

/*
 * Stage the ready raw batch of h and make its descriptor.  -EAGAIN when
 * the job's pool is full now: the next read tries again.
 */
static int
stage(struct feed *f, struct feed_handle *h)
{
	struct batch *b = h->b;
	const struct job *j = b->job;
	const struct job_geo *geo = job_geo(j, b->key.epoch);
	struct gpu_conv cv = {geo->pl->out_w, geo->pl->out_h,
	    cuda_dtype(j->cfg->dtype), cuda_layout(j->cfg->layout),
	    geo->pl->normalize, {0}, {0}};
	struct feedfs_cuda_desc d;
	char msg[512];
	int r;

	memcpy(cv.mean, geo->pl->mean, sizeof(cv.mean));
	memcpy(cv.std, geo->pl->std, sizeof(cv.std));
	if ((r = job_pool(f, (size_t)(j - f->jobs), msg, sizeof(msg))) != 0 ||
	    (r = gpu_stage(f->gpu, (uint32_t)(j - f->jobs), &cv, b->raw,
		 b->g.len, &h->gbuf, msg, sizeof(msg))) != 0) {
		log_err("%s/epoch-%04" PRIu32 "/batch-%06" PRIu64 ".cuda: %s",
		    j->cfg->name, b->key.epoch, b->key.batch, msg);
		return r == -ENOSPC ? -EAGAIN : r == -E2BIG ? -ENOSPC : -EIO;
	}
	gpu_buf_desc(f->gpu, h->gbuf, &d);
	d.ndim = 4;
	memcpy(d.shape, geo->shape, sizeof(d.shape));
	d.shape[0] = b->g.len;
	feedfs_cuda_encode(&d, h->desc);
	return 0;
}

int
stage_read(struct feed *f, struct feed_handle *h, uint64_t off, size_t size,
    const void **ptr, size_t *len)
{
	struct batch *b = h->b;
	int r;

	pthread_mutex_lock(&h->lock);
	r = h->gerr;
	if (!h->gbuf && !h->gerr) {
		int pin;

		pthread_mutex_lock(&f->lock);
		pin = feed_pin(f, h, true);
		b->used = ++f->tick;
		pthread_mutex_unlock(&f->lock);
		r = pin ? pin : stage(f, h);
		pthread_mutex_lock(&f->lock);
		if (pin == 0) {
			if (r == 0) /* on the device: release it first */
				b->consumed = true;
			feed_unpin(f, b);
		}
		pthread_mutex_unlock(&f->lock);
		/* A full pool is not this file's failure: not kept. */
		if (pin == 0 && r == -EAGAIN)
			r = -ENOSPC;
		else
			h->gerr = r;
	}
	pthread_mutex_unlock(&h->lock);
	if (r != 0)
		return r;
	if (off >= FEEDFS_CUDA_DESC_SIZE)
		size = 0;
	else if (size > FEEDFS_CUDA_DESC_SIZE - off)
		size = (size_t)(FEEDFS_CUDA_DESC_SIZE - off);
	*ptr = h->desc + (off < FEEDFS_CUDA_DESC_SIZE ? off : 0);
	*len = size;
	return 0;
}

void
stage_release(struct feed *f, struct feed_handle *h)
{
	gpu_put(f->gpu, h->gbuf); /* back to the pool */
	pthread_mutex_destroy(&h->lock);
}
