/*
 * batch_text.c - a batch's captions, batch-NNNNNN.text.jsonl (a job with
 * text; the file itself is core/job_text.c's): its size at stat time,
 * its making at an open and at a read.  Layer: the engine (engine/),
 * below files.c and ns.c, which call it; it calls pin.c, batch.c,
 * order.c and relaxed_reclaim.c.
 *
 * Like .labels.npy and .ids.npy, the file comes from the plan when the
 * plan fixes the batch (order = strict, on_error = fail): its size and
 * bytes then cost no decoding.  Otherwise the batch's content decides
 * (order = relaxed chooses the samples as they finish, on_error =
 * substitute replaces a failed one), so a stat of the file makes the
 * batch, as a read would, and the file is made from its ids once it is
 * ready: the size told is the size read.  A batch that failed has an
 * empty text, and reads of it fail as the .npy's do.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "engine/engine.h"

bool
feed_batch_planned(const struct feed *f, const struct feed_key *k)
{
	const struct cfg_job *cj = f->jobs[k->job].cfg;

	return cj->on_error == CFG_ON_ERROR_FAIL &&
	       cj->order == CFG_ORDER_STRICT;
}

void
feed_epoch_opened(struct feed *f, const struct feed_key *k)
{
	if (!job_is_mixture(&f->jobs[k->job]))
		return;
	pthread_mutex_lock(&f->lock);
	if (k->epoch >= f->jobs[k->job].opened)
		f->jobs[k->job].opened = k->epoch + 1;
	pthread_mutex_unlock(&f->lock);
}

/* The planned ids of batch k into *ids (malloc'd) and *len.  Not locked. */
static int
plan_ids(struct feed *f, const struct feed_key *k, int64_t **ids, uint32_t *len)
{
	struct job *j = &f->jobs[k->job];
	uint32_t n = plan_batch_len(&j->plan, k->world, k->batch);
	uint64_t *pos = malloc((n ? n : 1) * sizeof(*pos));
	int64_t *v = malloc((n ? n : 1) * sizeof(*v));
	struct order *o = NULL;

	if (pos != NULL && v != NULL) {
		plan_batch_positions(
		    &j->plan, k->rank, k->world, k->batch, pos);
		pthread_mutex_lock(&f->lock);
		o = order_get(f, k->job, k->epoch);
		for (uint32_t s = 0; o && s < n; s++)
			v[s] = o->ids[pos[s] % j->plan.n];
		order_put(o);
		pthread_mutex_unlock(&f->lock);
	}
	free(pos);
	if (o == NULL) {
		free(v);
		return -ENOMEM;
	}
	*ids = v;
	*len = n;
	return 0;
}

int
feed_text_plan_file(
    struct feed *f, const struct feed_key *k, struct feed_handle *h)
{
	const struct job *j = &f->jobs[k->job];
	int64_t *ids;
	uint32_t n;
	uint64_t len;
	int r;

	if ((r = plan_ids(f, k, &ids, &n)) != 0)
		return r;
	len = job_batch_text_len(j, ids, n);
	if ((h->data = malloc(len ? (size_t)len : 1)) == NULL) {
		free(ids);
		return -ENOMEM;
	}
	job_batch_text(j, ids, n, (char *)h->data);
	h->len = (size_t)len;
	free(ids);
	return 0;
}

/*
 * Batch k held and pinned whole (made, waited for), for its ids: 0 with
 * *b, or -errno (-EIO: it failed; -ESTALE: a relaxed epoch forgotten).
 * Locked; may unlock while waiting.  text_unhold lets it go.
 */
static int
text_hold(struct feed *f, const struct feed_key *k, struct batch **out)
{
	struct feed_handle tmp = {.kind = BK_TEXT};
	int r;

	if (f->jobs[k->job].cfg->order == CFG_ORDER_RELAXED) {
		if (relaxed_forgotten(f, k))
			return -ESTALE;
		relaxed_touch(f, k);
	}
	if ((tmp.b = batch_get(f, k, BN_OPEN)) == NULL)
		return -ENOMEM;
	tmp.b->refs++;
	if ((r = feed_pin(f, &tmp, true)) != 0) {
		tmp.b->refs--;
		batch_unref(f, tmp.b);
		return r;
	}
	*out = tmp.b;
	return 0;
}

static void
text_unhold(struct feed *f, struct batch *b)
{
	feed_unpin(f, b);
	b->refs--;
	batch_unref(f, b);
}

uint64_t
feed_text_size(struct feed *f, const struct feed_key *k)
{
	struct batch *b;
	int64_t *ids;
	uint32_t n;
	uint64_t len = 0;

	if (!feed_key_valid(f, k) || !f->jobs[k->job].text)
		return 0;
	feed_epoch_opened(f, k);
	if (feed_batch_planned(f, k)) {
		if (plan_ids(f, k, &ids, &n) != 0)
			return 0;
		len = job_batch_text_len(&f->jobs[k->job], ids, n);
		free(ids);
		return len;
	}
	pthread_mutex_lock(&f->lock);
	if (text_hold(f, k, &b) == 0) {
		len = job_batch_text_len(b->job,
		    (const int64_t *)(b->file[BK_IDS] + b->g.hdr[BK_IDS]),
		    b->g.len);
		text_unhold(f, b);
	}
	pthread_mutex_unlock(&f->lock);
	return len;
}

int
feed_text_read(struct feed *f, struct feed_handle *h)
{
	struct batch *b = h->b;
	uint64_t len;
	char *s;
	int r;

	pthread_mutex_lock(&h->lock);
	if (h->data != NULL) {
		pthread_mutex_unlock(&h->lock);
		return 0;
	}
	pthread_mutex_lock(&f->lock);
	r = feed_pin(f, h, true);
	pthread_mutex_unlock(&f->lock);
	if (r != 0) {
		pthread_mutex_unlock(&h->lock);
		return r;
	}
	/* Pinned whole: its ids stay as they are while it is made. */
	len = job_batch_text_len(b->job,
	    (const int64_t *)(b->file[BK_IDS] + b->g.hdr[BK_IDS]), b->g.len);
	if ((s = malloc(len ? (size_t)len : 1)) != NULL)
		job_batch_text(b->job,
		    (const int64_t *)(b->file[BK_IDS] + b->g.hdr[BK_IDS]),
		    b->g.len, s);
	pthread_mutex_lock(&f->lock);
	feed_unpin(f, b);
	r = s == NULL ? -ENOMEM : budget_meta_take(&f->budget, len);
	if (r == 0)
		h->meta += len;
	pthread_mutex_unlock(&f->lock);
	if (r != 0)
		free(s);
	else {
		h->data = (uint8_t *)s;
		h->len = (size_t)len;
	}
	pthread_mutex_unlock(&h->lock);
	return r;
}
