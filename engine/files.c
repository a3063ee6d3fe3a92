/*
 * files.c - the batch files: open, read and release (see feed.h).  An
 * open makes the batch exist (batch.c) and queues its readahead
 * (sched.c), or, for labels, ids and captions that the plan alone fixes,
 * makes the file from the plan; a read pins the batch until its bytes are
 * there (pin.c); .cuda files go to stage.c, .text.jsonl ones not planned
 * to batch_text.c.  Layer: the engine (engine/), its
 * top beside feed.c: fs/ calls it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "util/log.h"

/*
 * Labels and ids straight from the plan: with on_error = fail and strict
 * order the batch holds exactly its planned samples, so no decoding is
 * needed.  Multi-hot rows and a batch op's soft labels too: its draw
 * depends on the batch's key and the output size alone.
 */
static int
planned_file(struct feed *f, const struct feed_key *k, enum batch_kind kind,
    struct feed_handle *h)
{
	struct job *j = &f->jobs[k->job];
	struct batch_geom g;
	bool soft = kind == BK_LABELS && job_float_labels(j);
	uint64_t *pos;
	struct order *o;
	int64_t *v, *ids = NULL;
	int r = 0;

	job_batch_geom(j, k->epoch, k->world, k->batch, &g);
	h->len = g.size[kind];
	pos = malloc((g.len ? g.len : 1) * sizeof(*pos));
	if (soft)
		ids = malloc((g.len ? g.len : 1) * sizeof(*ids));
	if (!pos || (soft && !ids) || (h->data = malloc(h->len)) == NULL) {
		free(pos);
		free(ids);
		return -ENOMEM;
	}
	job_npy_header(j, k->epoch, g.len, kind, (char *)h->data);
	v = soft ? ids : (int64_t *)(h->data + g.hdr[kind]);
	plan_batch_positions(&j->plan, k->rank, k->world, k->batch, pos);
	pthread_mutex_lock(&f->lock);
	o = order_get(f, k->job, k->epoch);
	for (uint32_t s = 0; o && s < g.len; s++) {
		uint32_t id = o->ids[pos[s]];

		v[s] = kind == BK_IDS || soft ? (int64_t)id
					      : j->ds->samples[id].label;
	}
	order_put(o);
	pthread_mutex_unlock(&f->lock);
	free(pos);
	if (o && soft) {
		struct xf_mix m;

		if (j->soft)
			job_mix_draw(
			    j, k->epoch, k->rank, k->world, k->batch, &m);
		r = job_label_rows(j, j->soft ? &m : NULL, ids, g.len,
		    (float *)(h->data + g.hdr[kind]));
	}
	free(ids);
	return o ? r : -ENOMEM;
}

/*
 * Whether k is a batch of a relaxed epoch that was forgotten
 * (relaxed_reclaim.c): refused, counted and logged (one in a thousand).
 * Locked.
 */
static bool
stale(struct feed *f, const struct cfg_job *cj, const struct feed_key *k)
{
	if (!relaxed_forgotten(f, k))
		return false;
	if (f->rstale++ % 1000 == 0)
		log_warn("order = relaxed: job %s, epoch %u (rank %u of %u) "
			 "was read to its end and its choices forgotten at "
			 "the metadata cap: its batches cannot be read again "
			 "in this mount (ESTALE, %llu so far); raise `memory` "
			 "to keep more epochs",
		    cj->name, (unsigned)k->epoch, (unsigned)k->rank,
		    (unsigned)k->world, (unsigned long long)f->rstale);
	return true;
}

int
feed_open(struct feed *f, const struct feed_key *k, enum batch_kind kind,
    struct feed_handle **out)
{
	const struct cfg_job *cj;
	struct feed_handle *h;
	bool planned;
	uint64_t meta;
	int r;

	if (!feed_key_valid(f, k))
		return -ENOENT;
	cj = f->jobs[k->job].cfg;
	/* A mixture's epoch is opened: its weights are fixed from now on. */
	feed_epoch_opened(f, k);
	if ((kind == BK_CUDA && (!f->gpu || !cj->gpu)) ||
	    (kind == BK_TEXT && !f->jobs[k->job].text))
		return -ENOENT;
	planned = (kind == BK_LABELS || kind == BK_IDS || kind == BK_TEXT) &&
		  feed_batch_planned(f, k);
	/* The handle and its planned file are metadata: counted, capped (a
	 * text's once made). */
	meta = sizeof(*h) +
	       (planned && kind != BK_TEXT ? feed_file_size(f, k, kind) : 0);
	pthread_mutex_lock(&f->lock);
	if (cj->order == CFG_ORDER_RELAXED) {
		if (stale(f, cj, k)) {
			pthread_mutex_unlock(&f->lock);
			return -ESTALE;
		}
		relaxed_touch(f, k); /* not forgotten to make room for this */
	}
	idle_touch(f);
	if ((r = budget_meta_take(&f->budget, meta)) != 0) {
		pthread_mutex_unlock(&f->lock);
		return r;
	}
	pthread_mutex_unlock(&f->lock);
	if ((h = calloc(1, sizeof(*h))) == NULL) {
		r = -ENOMEM;
		goto fail;
	}
	h->kind = kind;
	h->meta = meta;
	if (planned) {
		r = kind == BK_TEXT ? feed_text_plan_file(f, k, h)
				    : planned_file(f, k, kind, h);
		if (r == 0 && kind == BK_TEXT) {
			pthread_mutex_lock(&f->lock);
			if ((r = budget_meta_take(&f->budget, h->len)) == 0)
				h->meta = meta += h->len;
			pthread_mutex_unlock(&f->lock);
		}
		if (r != 0) {
			free(h->data);
			free(h);
			goto fail;
		}
		*out = h;
		return 0;
	}
	if (kind == BK_CUDA || kind == BK_TEXT)
		pthread_mutex_init(&h->lock, NULL);
	pthread_mutex_lock(&f->lock);
	h->b = batch_get(f, k, BN_OPEN);
	r = -ENOMEM;
	/* The only epoch left to forget may have been this one. */
	if (h->b && cj->order == CFG_ORDER_RELAXED && stale(f, cj, k)) {
		batch_unref(f, h->b); /* no reference: gone if empty */
		h->b = NULL;
		r = -ESTALE;
	}
	if (h->b) {
		h->b->refs++;
		if (kind == BK_IMAGES || kind == BK_CUDA) {
			tier_opened(f, k); /* the reader's position */
			sched_readahead(f, k);
		}
	}
	pthread_mutex_unlock(&f->lock);
	if (!h->b) {
		if (kind == BK_CUDA || kind == BK_TEXT)
			pthread_mutex_destroy(&h->lock);
		free(h);
		goto fail;
	}
	*out = h;
	return 0;
fail:
	pthread_mutex_lock(&f->lock);
	feed_meta_sub(f, meta);
	pthread_mutex_unlock(&f->lock);
	return r;
}

int
feed_read(struct feed *f, struct feed_handle *h, uint64_t off, size_t size,
    const void **ptr, size_t *len, struct feed_pin **pin)
{
	struct batch *b = h->b;
	const uint8_t *data;
	uint64_t total;
	int r;

	*pin = NULL;
	if (h->kind == BK_CUDA)
		return stage_read(f, h, off, size, ptr, len);
	if (h->kind == BK_TEXT && b != NULL) {
		/* Made from the batch by the first read, then as planned. */
		if ((r = feed_text_read(f, h)) != 0)
			return r;
		b = NULL;
	}
	if (!b) {
		data = h->data;
		total = h->len;
	} else {
		total = b->g.size[h->kind];
		pthread_mutex_lock(&f->lock);
		idle_touch(f);
		/* The header alone needs no samples, but the gpu images do. */
		r = feed_pin(f, h,
		    off + size > b->g.hdr[h->kind] ||
			(h->kind == BK_IMAGES && b->job->cfg->gpu));
		if (r == 0) {
			if (off + size >= total && h->kind == BK_IMAGES)
				b->consumed = true;
			b->used = ++f->tick;
		}
		pthread_mutex_unlock(&f->lock);
		if (r != 0)
			return r;
		data = b->file[h->kind];
		*pin = (struct feed_pin *)b;
	}
	if (off >= total)
		size = 0;
	else if (size > total - off)
		size = (size_t)(total - off);
	*ptr = data + (off < total ? off : 0);
	*len = size;
	/* A batch from the tier: its samples converted now (pinned). */
	if (b != NULL && h->kind == BK_IMAGES && b->t.lazy && size > 0 &&
	    (r = tier_read(f, b, off, size, ptr)) != 0) {
		feed_read_end(f, *pin);
		*pin = NULL;
		return r;
	}
	return 0;
}

void
feed_read_end(struct feed *f, struct feed_pin *pin)
{
	if (pin == NULL)
		return;
	pthread_mutex_lock(&f->lock);
	feed_unpin(f, (struct batch *)pin);
	pthread_mutex_unlock(&f->lock);
}

void
feed_release(struct feed *f, struct feed_handle *h)
{
	if (h->kind == BK_CUDA)
		stage_release(f, h);
	if (h->kind == BK_TEXT && h->b)
		pthread_mutex_destroy(&h->lock);
	pthread_mutex_lock(&f->lock);
	if (h->b) {
		h->b->refs--;
		batch_unref(f, h->b);
	}
	feed_meta_sub(f, h->meta);
	pthread_mutex_unlock(&f->lock);
	free(h->data);
	free(h);
}
