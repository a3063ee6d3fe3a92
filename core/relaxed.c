/*
 * relaxed.c - order = relaxed (see engine.h and DESIGN.md).
 *
 * A relaxed view is one (job, rank view, epoch).  Its samples are started
 * in the view's order, and each finished one goes to the batch that has
 * waited longest for samples (or, with none waiting, to the ready list
 * that the next batch opened takes from first).  A slow image thus lands
 * in a later batch instead of holding back the one being read.  A batch
 * that completes before it started its whole quota (others' samples
 * filled it) hands the rest on to the batch waiting longest, so the last
 * batch of a view always fills.
 *
 * What a batch got is kept (chosen) for the life of the mount, so that a
 * batch whose data was given back and that is read again holds the same
 * samples: 4 bytes per sample of every relaxed view read, counted in the
 * memory budget.  Once every batch of a view is chosen, the view keeps
 * only that.  Every function is called with feed.lock held.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/engine.h"
#include "core/sample.h"

#define RSPARE 16 /* spare sample buffers kept per job (not counted) */

/* A finished sample waiting for a batch. */
struct rsample {
	uint32_t id;
	int err;
	char *msg;
	uint8_t *buf; /* the job's slot_bytes; unused after a failure */
	struct rsample *next;
};

struct rview {
	uint32_t job, rank, world, epoch;
	uint64_t npos, started; /* positions in the view; how many started */
	uint64_t *pos;		/* the view's positions in the epoch order */
	uint64_t nbatches;
	uint32_t **chosen; /* per batch: its ids, once complete */
	uint64_t nchosen;
	struct order *order;
	struct batch *wait_head, *wait_tail; /* batches being filled */
	struct rsample *ready, *ready_tail;  /* finished, not taken yet */
	unsigned live;			     /* batches alive that point here */
	unsigned inflight;		     /* samples being made */
	uint64_t mem;			     /* bytes counted in the budget */
	uint64_t used;
	struct rview *next;
};

/*
 * A sample buffer for job: a spare one, else malloc'd (NULL when out of
 * memory).  Spares spare the mmap, page faults and munmap that malloc
 * gives buffers this large.
 */
static struct rsample *
rsample_get(struct feed *f, uint32_t job)
{
	struct rsample *x = f->rfree[job];

	if (x) {
		f->rfree[job] = x->next;
		f->nrfree[job]--;
	} else if ((x = malloc(sizeof(*x) + f->jobs[job].slot_bytes)) == NULL)
		return NULL;
	x->buf = (uint8_t *)(x + 1);
	x->msg = NULL;
	x->next = NULL;
	return x;
}

/* Back to the spares, or freed. */
static void
rsample_put(struct feed *f, uint32_t job, struct rsample *x)
{
	free(x->msg);
	x->msg = NULL;
	if (f->nrfree[job] < RSPARE) {
		x->next = f->rfree[job];
		f->rfree[job] = x;
		f->nrfree[job]++;
	} else
		free(x);
}

static void
rview_free(struct feed *f, struct rview *rv)
{
	while (rv->ready) {
		struct rsample *x = rv->ready;

		rv->ready = x->next;
		feed_mem_sub(f, f->jobs[rv->job].slot_bytes);
		rsample_put(f, rv->job, x);
	}
	for (uint64_t i = 0; rv->chosen && i < rv->nbatches; i++)
		free(rv->chosen[i]);
	free(rv->chosen);
	free(rv->pos);
	order_put(rv->order);
	feed_mem_sub(f, rv->mem);
	free(rv);
}

/*
 * A view whose batches are all chosen and that nothing uses keeps only the
 * choices: its positions and its order go.
 */
static void
rview_shrink(struct feed *f, struct rview *rv)
{
	uint64_t bytes = rv->npos * sizeof(*rv->pos);

	if (rv->pos == NULL || rv->live || rv->inflight ||
	    rv->nchosen < rv->nbatches)
		return;
	free(rv->pos);
	rv->pos = NULL;
	order_put(rv->order);
	rv->order = NULL;
	rv->mem -= bytes;
	feed_mem_sub(f, bytes);
}

/* The relaxed view of k, made on first use (NULL when out of memory). */
static struct rview *
rview_get(struct feed *f, const struct feed_key *k)
{
	struct job *j = &f->jobs[k->job];
	struct rview *rv;
	uint64_t at = 0;

	for (rv = f->rviews; rv; rv = rv->next)
		if (rv->job == k->job && rv->rank == k->rank &&
		    rv->world == k->world && rv->epoch == k->epoch) {
			rv->used = ++f->tick;
			return rv;
		}
	if ((rv = calloc(1, sizeof(*rv))) == NULL)
		return NULL;
	rv->job = k->job;
	rv->rank = k->rank;
	rv->world = k->world;
	rv->epoch = k->epoch;
	rv->nbatches = plan_nbatches(&j->plan, k->world);
	rv->pos =
	    malloc((plan_rank_len(&j->plan, k->world) + 1) * sizeof(*rv->pos));
	rv->chosen = calloc(rv->nbatches + 1, sizeof(*rv->chosen));
	rv->order = order_get(f, k->job, k->epoch);
	if (!rv->pos || !rv->chosen || !rv->order) {
		rview_free(f, rv);
		return NULL;
	}
	/* The batches' positions, so that drop_last's cut is respected. */
	for (uint64_t b = 0; b < rv->nbatches; b++)
		at += plan_batch_positions(
		    &j->plan, k->rank, k->world, b, rv->pos + at);
	rv->npos = at;
	rv->mem = rv->npos * sizeof(*rv->pos) +
		  (rv->nbatches + 1) * sizeof(*rv->chosen);
	feed_mem_add(f, rv->mem);
	rv->used = ++f->tick;
	rv->next = f->rviews;
	f->rviews = rv;
	f->nrviews++;
	return rv;
}

static void
rview_unwait(struct rview *rv, struct batch *b)
{
	struct batch **pp, *prev = NULL;

	for (pp = &rv->wait_head; *pp; prev = *pp, pp = &(*pp)->r.rnext)
		if (*pp == b) {
			*pp = b->r.rnext;
			if (rv->wait_tail == b)
				rv->wait_tail = prev;
			b->r.rnext = NULL;
			return;
		}
}

/* b is complete: remember what it holds (for the life of the mount). */
static void
rview_choose(struct feed *f, struct rview *rv, struct batch *b)
{
	uint32_t len = b->g.len, **c = &rv->chosen[b->key.batch];
	const int64_t *ids =
	    (const int64_t *)(b->file[BK_IDS] + b->g.hdr[BK_IDS]);

	if (*c || (*c = malloc((len ? len : 1) * sizeof(uint32_t))) == NULL)
		return;
	for (uint32_t i = 0; i < len; i++)
		(*c)[i] = (uint32_t)ids[i];
	rv->nchosen++;
	rv->mem += len * sizeof(uint32_t);
	feed_mem_add(f, len * sizeof(uint32_t));
	b->r.fixed = *c;
}

/*
 * Batch b of rv completed before it started its whole quota: the samples
 * it did not start are owed to the batch that has waited longest.
 */
static void
hand_on(struct feed *f, struct rview *rv, struct batch *b)
{
	uint32_t left = b->r.quota - b->next;
	struct batch *h = rv->wait_head;

	if (left == 0)
		return;
	sched_dequeue(f, b);
	f->queued_slots -= left;
	b->r.quota = b->next;
	if (h == NULL)
		return; /* nobody waits: nothing is owed */
	h->r.quota += left;
	if (h->queued)
		f->queued_slots += left;
	else
		sched_enqueue(f, h);
}

/*
 * The next slot of relaxed batch b (the head of its view's waiting list)
 * gets finished sample x, which is freed.  The copy is done under the
 * lock, which costs about a microsecond per 10 KB and keeps the hand-over
 * simple.
 */
static void
rslot_fill(struct feed *f, struct batch *b, struct rsample *x)
{
	struct job *j = b->job;
	struct rview *rv = b->r.rv;
	uint32_t s = b->r.filled++;

	if (x->err) {
		if (!b->err) {
			b->err = x->err;
			snprintf(b->errmsg, sizeof(b->errmsg), "%s",
			    x->msg ? x->msg : strerror(-x->err));
		}
	} else
		memcpy(sched_slot(b, s), x->buf, j->slot_bytes);
	((int64_t *)(b->file[BK_LABELS] + b->g.hdr[BK_LABELS]))[s] =
	    j->ds->samples[x->id].label;
	((int64_t *)(b->file[BK_IDS] + b->g.hdr[BK_IDS]))[s] = x->id;
	rsample_put(f, b->key.job, x);
	if (b->r.filled < b->g.len)
		return;
	rview_unwait(rv, b);
	hand_on(f, rv, b);
	rview_choose(f, rv, b);
	batch_ready(f, b);
}

/*
 * A sample of rv finished: it goes to the batch that has waited longest,
 * or, with none waiting, to the ready list.  Takes x.
 */
static void
rview_deliver(struct feed *f, struct rview *rv, struct rsample *x)
{
	rv->inflight--;
	if (rv->wait_head) {
		rslot_fill(f, rv->wait_head, x);
		return;
	}
	x->next = NULL;
	if (rv->ready_tail)
		rv->ready_tail->next = x;
	else
		rv->ready = x;
	rv->ready_tail = x;
	feed_mem_add(f, f->jobs[rv->job].slot_bytes);
}

int
relaxed_attach(struct feed *f, struct batch *b)
{
	struct rview *rv = rview_get(f, &b->key);

	if (rv == NULL)
		return -ENOMEM;
	b->r.rv = rv;
	rv->live++;
	if (rv->chosen[b->key.batch]) {
		b->r.fixed = rv->chosen[b->key.batch];
		return 0; /* rebuilt like a strict batch from its ids */
	}
	b->r.rnext = NULL;
	if (rv->wait_tail)
		rv->wait_tail->r.rnext = b;
	else
		rv->wait_head = b;
	rv->wait_tail = b;
	/* A ready list exists only while nothing waits: b is the head. */
	while (b->r.filled < b->g.len && rv->ready && !b->ready) {
		struct rsample *x = rv->ready;

		if ((rv->ready = x->next) == NULL)
			rv->ready_tail = NULL;
		feed_mem_sub(f, b->job->slot_bytes);
		rslot_fill(f, b, x);
	}
	b->r.quota = b->g.len - b->r.filled;
	return 0;
}

void
relaxed_detach(struct feed *f, struct batch *b)
{
	struct rview *rv = b->r.rv;

	rview_unwait(rv, b);
	if (!b->r.fixed)
		hand_on(f, rv, b);
	rv->live--;
	b->r.rv = NULL;
	b->r.fixed = NULL;
	b->r.rnext = NULL;
	rview_shrink(f, rv);
}

void
relaxed_start(struct feed *f, struct batch *b, char *msg, size_t msglen)
{
	struct rview *rv = b->r.rv;
	struct job *j = b->job;
	struct rsample *x;
	uint32_t id = 0;
	uint64_t p;
	int r;

	b->next++;
	f->queued_slots--;
	if (b->next == b->r.quota)
		sched_dequeue(f, b);
	if (rv->started >= rv->npos)
		return; /* every sample of the view is started */
	p = rv->started++;
	rv->inflight++;
	/* Out of memory: wait until some is given back (or we stop). */
	while ((x = rsample_get(f, b->key.job)) == NULL && !f->stopping) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&f->room, &f->lock, &ts);
	}
	if (x == NULL) {
		rv->inflight--;
		return;
	}
	pthread_mutex_unlock(&f->lock);
	r = sample_make_slot(j, f->cache, rv->epoch, rv->order->ids, rv->pos[p],
	    j->cfg->gpu, x->buf, &id, true, msg, msglen);
	x->id = id;
	x->err = r;
	if (r != 0)
		x->msg = strdup(msg);
	pthread_mutex_lock(&f->lock);
	rview_deliver(f, rv, x);
	rview_shrink(f, rv);
}

void
relaxed_free_all(struct feed *f)
{
	while (f->rviews) {
		struct rview *rv = f->rviews;

		f->rviews = rv->next;
		rview_free(f, rv);
	}
	for (size_t i = 0; f->rfree && i < f->njobs; i++)
		while (f->rfree[i]) {
			struct rsample *x = f->rfree[i];

			f->rfree[i] = x->next;
			free(x);
		}
}
