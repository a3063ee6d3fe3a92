/*
 * relaxed.c - order = relaxed (see engine.h and DESIGN.md): filling
 * batches as samples finish.  Layer: the engine (engine/), below
 * batch.c and sched.c's workers, above relaxed_reclaim.c (what views
 * give back under pressure, and forgetting), order.c and budget.c.
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
 * What a batch got is kept (chosen), so that a batch whose data was given
 * back and that is read again holds the same samples: 4 bytes per sample
 * chosen and 16 per batch, counted as metadata, and reserved when the
 * batch attaches (a view at the metadata cap refuses new batches rather
 * than forget a choice).  Everything else of a view can be made again:
 * its positions are a function of the plan (plan_position), never
 * stored; its epoch order is held only while something uses the view (an
 * idle view, with no batch attached and no sample being made, gives it
 * back at once); its finished samples that no batch took yet are given
 * back under memory pressure, least recently used view first, and the
 * view then owes them: they are started again (same position, same
 * bytes) before any new one.  An idle view that chose nothing is freed
 * whole under metadata pressure.  So what a view keeps while idle is its
 * chosen list and a counter.  Every function is called with feed.lock
 * held.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "core/sample.h"

#define RSPARE 16      /* spare sample buffers kept per job (counted) */
#define CHOSEN_STEP 64 /* most entries the chosen array grows by */

/*
 * A sample buffer for job: a spare one, else malloc'd (NULL when out of
 * memory).  Spares spare the mmap, page faults and munmap that malloc
 * gives buffers this large.  Spares are counted in the budget; a buffer
 * being made is not (a few per worker), one on a ready list is.
 */
static struct rsample *
rsample_get(struct feed *f, uint32_t job)
{
	struct rsample *x = f->rfree[job];

	if (x) {
		f->rfree[job] = x->next;
		f->nrfree[job]--;
		f->spare_bytes -= f->jobs[job].slot_bytes;
		budget_sub(&f->budget, f->jobs[job].slot_bytes);
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
	if (f->nrfree[job] < RSPARE && !f->stopping) {
		x->next = f->rfree[job];
		f->rfree[job] = x;
		f->nrfree[job]++;
		f->spare_bytes += f->jobs[job].slot_bytes;
		budget_add(&f->budget, f->jobs[job].slot_bytes);
	} else
		free(x);
}

/* The ids chosen for batch of rv, or NULL. */
static const uint32_t *
chosen_find(const struct rview *rv, uint64_t batch)
{
	uint64_t lo = 0, hi = rv->nchosen;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (rv->chosen[mid].batch == batch)
			return rv->chosen[mid].ids;
		if (rv->chosen[mid].batch < batch)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* The metadata a batch of len samples reserves for its choice. */
static uint64_t
choice_bytes(uint32_t len)
{
	return (uint64_t)(len ? len : 1) * sizeof(uint32_t) +
	       sizeof(struct rchosen);
}

/*
 * A view with no batch waiting for samples and no sample being made
 * holds no order (its batches, if any, are chosen): the order goes back
 * to order.c, which keeps a few for reuse.
 */
static void
rview_settle(struct feed *f, struct rview *rv)
{
	if (rv->wait_head || rv->inflight || rv->order == NULL)
		return;
	order_put(rv->order);
	rv->order = NULL;
}

/* The relaxed view of k, made on first use (NULL when out of memory or
 * at the metadata cap). */
static struct rview *
rview_get(struct feed *f, const struct feed_key *k)
{
	struct job *j = &f->jobs[k->job];
	struct rview *rv;
	uint64_t nb;

	for (rv = f->rviews; rv; rv = rv->next)
		if (rv->job == k->job && rv->rank == k->rank &&
		    rv->world == k->world && rv->epoch == k->epoch) {
			rv->used = ++f->tick;
			return rv;
		}
	/* A forgotten epoch is not chosen again (feed_open refuses it). */
	if (relaxed_forgotten(f, k) ||
	    !budget_meta_room(&f->budget, sizeof(*rv)) ||
	    (rv = calloc(1, sizeof(*rv))) == NULL)
		return NULL;
	rv->job = k->job;
	rv->rank = k->rank;
	rv->world = k->world;
	rv->epoch = k->epoch;
	/* The batches' elements, so that drop_last's cut is respected. */
	nb = plan_nbatches(&j->plan, k->world);
	rv->npos = plan_rank_len(&j->plan, k->world);
	if (rv->npos > nb * j->plan.batch_size)
		rv->npos = nb * j->plan.batch_size;
	rview_meta_add(f, rv, sizeof(*rv));
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

/*
 * b is complete: remember what it holds (until its epoch is forgotten), in
 * the metadata it reserved when it attached.  Without memory for it, b is
 * never given back (it stays as it is), which keeps its content fixed.
 */
static void
rview_choose(struct feed *f, struct rview *rv, struct batch *b)
{
	uint32_t len = b->g.len, *c;
	const int64_t *ids =
	    (const int64_t *)(b->file[BK_IDS] + b->g.hdr[BK_IDS]);
	uint64_t at = 0, hi = rv->nchosen;

	if (chosen_find(rv, b->key.batch))
		return;
	if (rv->nchosen == rv->cchosen) {
		/* Doubling from 4, then CHOSEN_STEP at a time. */
		uint64_t n = rv->cchosen < 4 ? 4 : 2 * rv->cchosen;
		struct rchosen *a;

		if (n > rv->cchosen + CHOSEN_STEP)
			n = rv->cchosen + CHOSEN_STEP;
		if ((a = realloc(rv->chosen, n * sizeof(*a))) == NULL)
			return;
		rview_meta_add(f, rv, (n - rv->cchosen) * sizeof(*a));
		rv->chosen = a;
		rv->cchosen = n;
	}
	if ((c = malloc((len ? len : 1) * sizeof(uint32_t))) == NULL)
		return;
	for (uint32_t i = 0; i < len; i++)
		c[i] = (uint32_t)ids[i];
	while (at < hi) { /* where it goes in batch order */
		uint64_t mid = at + (hi - at) / 2;

		if (rv->chosen[mid].batch < b->key.batch)
			at = mid + 1;
		else
			hi = mid;
	}
	memmove(rv->chosen + at + 1, rv->chosen + at,
	    (rv->nchosen - at) * sizeof(*rv->chosen));
	rv->chosen[at].batch = b->key.batch;
	rv->chosen[at].ids = c;
	rv->nchosen++;
	/* The reservation becomes the choice's. */
	budget_meta_sub(&f->budget, b->r.reserved);
	b->r.reserved = 0;
	rview_meta_add(f, rv, (uint64_t)(len ? len : 1) * sizeof(uint32_t));
	b->r.fixed = c;
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
		memcpy(sched_slot(b, s), x->buf,
		    job_geo(j, b->key.epoch)->slot_bytes);
	if (!job_float_labels(j)) /* else from the ids once complete */
		((int64_t *)(b->file[BK_LABELS] + b->g.hdr[BK_LABELS]))[s] =
		    j->ds->samples[x->id].label;
	((int64_t *)(b->file[BK_IDS] + b->g.hdr[BK_IDS]))[s] = x->id;
	rsample_put(f, b->key.job, x);
	if (b->r.filled < b->g.len)
		return;
	rview_unwait(rv, b);
	hand_on(f, rv, b);
	rview_choose(f, rv, b);
	sched_complete(f, b);
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
	budget_add(&f->budget, f->jobs[rv->job].slot_bytes);
}

int
relaxed_attach(struct feed *f, struct batch *b)
{
	struct rview *rv = rview_get(f, &b->key);

	if (rv == NULL)
		return -ENOMEM;
	if ((b->r.fixed = chosen_find(rv, b->key.batch)) != NULL) {
		b->r.rv = rv;
		rv->live++;
		return 0; /* rebuilt like a strict batch from its ids */
	}
	/*
	 * Its choice is kept for good: reserved now, or refused.  (rv is
	 * live from here on: making room never frees it.)
	 */
	b->r.rv = rv;
	rv->live++;
	if (!budget_meta_room(&f->budget, choice_bytes(b->g.len)) ||
	    (rv->order == NULL &&
		(rv->order = order_get(f, rv->job, rv->epoch)) == NULL)) {
		rv->live--;
		b->r.rv = NULL;
		rview_settle(f, rv);
		return -ENOMEM;
	}
	b->r.reserved = choice_bytes(b->g.len);
	budget_meta_add(&f->budget, b->r.reserved);
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
		budget_sub(&f->budget, b->job->slot_bytes);
		rslot_fill(f, b, x);
	}
	b->r.quota = b->g.len - b->r.filled;
	rview_settle(f, rv); /* b may be full already */
	return 0;
}

void
relaxed_detach(struct feed *f, struct batch *b)
{
	struct rview *rv = b->r.rv;

	rview_unwait(rv, b);
	if (!b->r.fixed)
		hand_on(f, rv, b);
	if (b->r.reserved) /* never chosen */
		budget_meta_sub(&f->budget, b->r.reserved);
	b->r.reserved = 0;
	rv->live--;
	b->r.rv = NULL;
	b->r.fixed = NULL;
	b->r.rnext = NULL;
	rview_settle(f, rv);
}

/*
 * Remote shards: the elements of rv's list after those started, not yet
 * asked for ahead, into out (at most max; see struct ahead in engine.h):
 * the samples the view starts next, whichever batch they go to.  Its
 * order is held (a sample of it is in flight).  Locked.
 */
static size_t
rview_ahead(struct feed *f, struct rview *rv, struct ahead *out, size_t max)
{
	struct job *j = &f->jobs[rv->job];
	uint64_t e = rv->ahead > rv->started ? rv->ahead : rv->started,
		 asked = 0;
	size_t n = 0;

	if (!sample_ahead_worth(j) || j->plan.n == 0)
		return 0;
	for (; e < rv->npos && n < max; e++) {
		uint32_t gid = rv->order->ids[plan_position(&j->plan, rv->rank,
						  rv->world, e) %
					      j->plan.n],
			 id;
		const struct dataset *ds = job_source_of(j, gid, &id)->ds;

		if (ds->robjs != NULL) {
			if (asked + ds->samples[id].size > ds_remote_room(ds))
				break; /* the window is full */
			asked += ds->samples[id].size;
			out[n].j = j;
			out[n++].id = gid;
		}
	}
	rv->ahead = e;
	return n;
}

/*
 * b is only sure to live until the lock is first released: everything
 * after that goes through rv (which its sample in flight keeps) and the
 * job, never through b.
 */
void
relaxed_start(struct feed *f, struct batch *b, char *msg, size_t msglen)
{
	struct rview *rv = b->r.rv;
	struct job *j = b->job;
	uint32_t job = b->key.job;
	struct ahead ahead[REMOTE_AHEAD_MAX];
	size_t nahead;
	struct rsample *x;
	uint32_t id = 0;
	uint64_t e;
	int r;

	b->next++;
	f->queued_slots--;
	if (b->next == b->r.quota)
		sched_dequeue(f, b);
	if (rv->nowed > 0)
		e = rv->owed[--rv->nowed]; /* given back before: again */
	else if (rv->started < rv->npos)
		e = rv->started++;
	else
		return; /* every sample of the view is started */
	rv->inflight++;
	/*
	 * Out of memory: wait until some is given back (or we stop).  The
	 * wait unlocks: b may be given back and freed meanwhile.
	 */
	b = NULL;
	while ((x = rsample_get(f, job)) == NULL && !f->stopping)
		budget_wait_ns(&f->budget, 100000000);
	if (x == NULL) {
		rv->inflight--;
		rview_settle(f, rv);
		return;
	}
	nahead = f->remote ? rview_ahead(f, rv, ahead, REMOTE_AHEAD_MAX) : 0;
	pthread_mutex_unlock(&f->lock);
	for (size_t k = 0; k < nahead; k++)
		sample_prefetch_remote(ahead[k].j, f->cache, ahead[k].id);
	r = sample_make_slot(j, f->cache, rv->epoch, rv->order->ids,
	    plan_position(&j->plan, rv->rank, rv->world, e), j->cfg->gpu,
	    x->buf, &id, true, msg, msglen);
	x->elem = e;
	x->id = id;
	x->err = r;
	if (r != 0)
		x->msg = strdup(msg);
	pthread_mutex_lock(&f->lock);
	rview_deliver(f, rv, x);
	rview_settle(f, rv);
}

