/*
 * stage.c - .cuda files: the first read of one waits for its raw batch
 * (uint8 HWC samples), stages it on the device, where the job's dtype,
 * layout and normalization are applied, and answers with the descriptor
 * of the device buffer; the buffer goes back to the pool when the file
 * is released (see engine.h, gpu/gpu.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "core/engine.h"
#include "core/log.h"
#include "gpu/gpu.h"

/* Stage the ready raw batch of h and make its descriptor. */
static int
stage(struct feed *f, struct feed_handle *h)
{
	struct batch *b = h->b;
	const struct job *j = b->job;
	struct gpu_conv cv = {j->pl->out_w, j->pl->out_h, j->cfg->dtype,
	    j->cfg->layout, j->pl->normalize, {0}, {0}};
	struct feedfs_cuda_desc d;
	char msg[512];
	int r;

	memcpy(cv.mean, j->pl->mean, sizeof(cv.mean));
	memcpy(cv.std, j->pl->std, sizeof(cv.std));
	if ((r = gpu_stage(f->gpu, &cv, b->raw, b->g.len, &h->gbuf, msg,
		 sizeof(msg))) != 0) {
		log_err("%s/epoch-%04" PRIu32 "/batch-%06" PRIu64 ".cuda: %s",
		    j->cfg->name, b->key.epoch, b->key.batch, msg);
		return r == -ENOSPC || r == -E2BIG ? -ENOSPC : -EIO;
	}
	gpu_buf_desc(f->gpu, h->gbuf, &d);
	d.ndim = 4;
	memcpy(d.shape, j->shape, sizeof(d.shape));
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
	if (!h->gbuf && !h->gerr) {
		pthread_mutex_lock(&f->lock);
		r = feed_pin(f, h, true);
		b->used = ++f->tick;
		pthread_mutex_unlock(&f->lock);
		h->gerr = r ? r : stage(f, h);
		pthread_mutex_lock(&f->lock);
		if (r == 0) {
			b->consumed =
			    true; /* on the device: release it first */
			feed_unpin(f, b);
		}
		pthread_mutex_unlock(&f->lock);
	}
	r = h->gerr;
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
