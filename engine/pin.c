/*
 * pin.c - a reader's hold on a batch.  Layer: the engine (engine/),
 * below files.c and stage.c; calls batch.c.  feed_pin gets the batch its
 * data (being built or ready; made again when it failed for a source's
 * availability: batch_renew), and with whole waits until its samples
 * are made (counting the wait in the job's stats) and, with gpu = on,
 * its images; feed_unpin lets it go, making room when it was the last
 * reader.  Locked (engine.h).
 */
#include <errno.h>
#include <stdint.h>
#include <time.h>

#include "engine/engine.h"
#include "transforms/xf.h"

/* A reader begins or ends a wait: the spans with one waiting at least. */
static void
starved_begin(struct starved *s, uint64_t now)
{
	if (s->waiting++ == 0)
		s->since_ns = now;
}

static void
starved_end(struct starved *s, uint64_t now)
{
	if (--s->waiting == 0)
		s->ns += now - s->since_ns;
}

/*
 * Wait until b is ready, counting the wait in its job's stats: every
 * reader's (read_wait_ns), and the time the job's readers and the mount's
 * had one waiting at least (starved).  Locked.
 */
static void
wait_ready(struct feed *f, struct batch *b)
{
	struct job *j = b->job;
	uint64_t t0, t1;

	if (b->ready)
		return;
	t0 = feed_mono_ns();
	starved_begin(&j->starved, t0);
	starved_begin(&f->starved, t0);
	while (!b->ready)
		pthread_cond_wait(&b->cv, &f->lock);
	t1 = feed_mono_ns();
	starved_end(&j->starved, t1);
	starved_end(&f->starved, t1);
	atomic_fetch_add(&j->st.read_wait_ns, t1 - t0);
	atomic_fetch_add(&j->st.read_waits, 1);
}

/* The images of a ready gpu = on batch, from its raw samples (an active
 * reader holds b): converted here, unlocked, by the first reader of its
 * .npy; another waits for that one. */
static int
images_from_raw(struct feed *f, struct batch *b)
{
	struct job *j = b->job;
	const struct job_geo *geo = job_geo(j, b->key.epoch);
	uint8_t *img;

	for (;;) {
		while (b->converting)
			pthread_cond_wait(&b->cv, &f->lock);
		if (b->file[BK_IMAGES] || b->err)
			return b->err ? -EIO : 0;
		if (batch_wait_room(f, b, b->img_buf, b->img_buf, true) != 0)
			return -ENOMEM;
		if (!batch_made_meanwhile(b, true))
			break; /* else another reader makes them: wait for it */
	}
	if ((img = bufpool_get(f, b->img_buf)) == NULL)
		return -ENOMEM;
	b->converting = true;
	b->mem += b->img_buf;
	budget_add(&f->budget, b->img_buf);
	pthread_mutex_unlock(&f->lock);
	job_npy_header(j, b->key.epoch, b->g.len, BK_IMAGES, (char *)img);
	for (uint32_t s = 0; s < b->g.len; s++) {
		struct xf_image im = {.w = geo->pl->out_w,
		    .h = geo->pl->out_h,
		    .px = b->raw + (size_t)s * geo->raw_bytes};

		xf_convert(&im, geo->pl->normalize, geo->pl->mean, geo->pl->std,
		    j->cfg->dtype, j->cfg->layout,
		    img + b->g.hdr[BK_IMAGES] + (size_t)s * geo->sample_bytes);
	}
	pthread_mutex_lock(&f->lock);
	b->file[BK_IMAGES] = img;
	b->converting = false;
	pthread_cond_broadcast(&b->cv);
	return 0;
}

int
feed_pin(struct feed *f, struct feed_handle *h, bool whole)
{
	struct batch *b = h->b;
	int r = 0;

	/*
	 * A failure of a source's availability found at a read is older
	 * than the read: the batch is made again, and the read waits for
	 * that (a failure of its bytes stays).
	 */
	batch_renew(f, b);
	if (batch_get(f, &b->key, BN_READ) != b)
		return -ENOMEM;
	b->active++;
	if (whole) {
		wait_ready(f, b);
		if (b->err)
			r = -EIO;
		else if (h->kind == BK_IMAGES && b->job->cfg->gpu)
			r = images_from_raw(f, b);
	}
	/* A header read before any slot was made: the buffer, mapped. */
	if (r == 0 && h->kind == BK_IMAGES)
		r = batch_images_buf(f, b);
	if (r != 0)
		feed_unpin(f, b);
	return r;
}

void
feed_unpin(struct feed *f, struct batch *b)
{
	if (--b->active == 0) {
		b->read_ns = feed_mono_ns(); /* batch.c: a reader in it */
		budget_wake(&f->budget);
		if (b->refs == 0 || budget_over(&f->budget))
			budget_make_room(&f->budget, 0, 0, 0);
	}
}
