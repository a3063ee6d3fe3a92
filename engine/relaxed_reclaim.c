/*
 * relaxed_reclaim.c - order = relaxed under memory pressure: the budget's
 * reclaimers of relaxed views (spare and finished samples, idle views,
 * finished epochs' choices), forgetting and the epochs forgotten, and
 * the mount's end (see relaxed.c for what a view keeps and why).  Layer:
 * the engine (engine/), below relaxed.c, batch.c and files.c, above
 * order.c and budget.c.
 *
 * The chosen lists of finished epochs (every batch chosen) would grow
 * with every epoch served, about 4.5 bytes a sample, to the metadata cap
 * and past it (an ImageNet run at the default memory reached it near
 * epoch 80 of 90).  So at the cap, when no idle view that chose nothing
 * is left, the least recently used finished view whose reader has left
 * (a later epoch of its rank view has a view) and that no batch struct
 * names (no file holds one of its batches open, none is being built) is
 * forgotten whole.  What stays is one bit: the epoch is marked forgotten
 * in its rank view's bitmap (struct rforgot), and an open of one of its
 * batches is refused with ESTALE rather than chosen again, which would
 * give a batch read before other samples.  A batch is thus read again
 * with the same bytes, or refused, never with others.  Unfinished epochs
 * keep their choices: they still owe the others' samples.  Every
 * function is called with feed.lock held.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "util/log.h"

/*
 * The epochs of one (job, rank view) whose views were forgotten: bit e
 * of bits is epoch e.  Counted as metadata, never given back.
 */
struct rforgot {
	uint32_t job, rank, world;
	uint64_t nbytes;
	uint8_t *bits;
	struct rforgot *next;
};

static struct rforgot *
forgot_find(struct feed *f, uint32_t job, uint32_t rank, uint32_t world)
{
	for (struct rforgot *g = f->rforgot; g; g = g->next)
		if (g->job == job && g->rank == rank && g->world == world)
			return g;
	return NULL;
}

bool
relaxed_forgotten(struct feed *f, const struct feed_key *k)
{
	struct rforgot *g = forgot_find(f, k->job, k->rank, k->world);

	return g && k->epoch / 8 < g->nbytes &&
	       (g->bits[k->epoch / 8] >> (k->epoch % 8) & 1);
}

void
relaxed_touch(struct feed *f, const struct feed_key *k)
{
	for (struct rview *rv = f->rviews; rv; rv = rv->next)
		if (rv->job == k->job && rv->rank == k->rank &&
		    rv->world == k->world && rv->epoch == k->epoch) {
			rv->used = ++f->tick;
			return;
		}
}

/* Mark rv's epoch forgotten; false when out of memory (nothing marked). */
static bool
forgot_mark(struct feed *f, const struct rview *rv)
{
	struct rforgot *g = forgot_find(f, rv->job, rv->rank, rv->world);
	uint64_t need = rv->epoch / 8 + 1;

	if (g == NULL) {
		if ((g = calloc(1, sizeof(*g))) == NULL)
			return false;
		g->job = rv->job;
		g->rank = rv->rank;
		g->world = rv->world;
		g->next = f->rforgot;
		f->rforgot = g;
		budget_meta_add(&f->budget, sizeof(*g));
	}
	if (need > g->nbytes) {
		uint64_t n = g->nbytes < 32 ? 32 : 2 * g->nbytes;
		uint8_t *bits;

		if (n < need)
			n = need;
		if ((bits = realloc(g->bits, n)) == NULL)
			return false;
		memset(bits + g->nbytes, 0, n - g->nbytes);
		budget_meta_add(&f->budget, n - g->nbytes);
		g->bits = bits;
		g->nbytes = n;
	}
	g->bits[rv->epoch / 8] |= (uint8_t)(1u << (rv->epoch % 8));
	return true;
}

/* Free rv (idle or not: the mount's end) and uncount it. */
static void
rview_free(struct feed *f, struct rview *rv)
{
	while (rv->ready) {
		struct rsample *x = rv->ready;

		rv->ready = x->next;
		budget_sub(&f->budget, f->jobs[rv->job].slot_bytes);
		free(x->msg);
		free(x);
	}
	for (uint64_t i = 0; i < rv->nchosen; i++)
		free(rv->chosen[i].ids);
	free(rv->chosen);
	free(rv->owed);
	order_put(rv->order);
	budget_meta_sub(&f->budget, rv->mem);
	f->nrviews--;
	free(rv);
}

static void
rview_unlink(struct feed *f, struct rview *rv)
{
	for (struct rview **pp = &f->rviews; *pp; pp = &(*pp)->next)
		if (*pp == rv) {
			*pp = rv->next;
			return;
		}
}

/* The mount's end: every view, forgotten epoch and spare freed and
 * uncounted. */
void
relaxed_free_all(struct feed *f)
{
	while (f->rviews) {
		struct rview *rv = f->rviews;

		f->rviews = rv->next;
		rview_free(f, rv);
	}
	while (f->rforgot) {
		struct rforgot *g = f->rforgot;

		f->rforgot = g->next;
		budget_meta_sub(&f->budget, sizeof(*g) + g->nbytes);
		free(g->bits);
		free(g);
	}
	for (size_t i = 0; f->rfree && i < f->njobs; i++)
		while (f->rfree[i]) {
			struct rsample *x = f->rfree[i];

			f->rfree[i] = x->next;
			f->nrfree[i]--;
			f->spare_bytes -= f->jobs[i].slot_bytes;
			budget_sub(&f->budget, f->jobs[i].slot_bytes);
			free(x);
		}
}

/*
 * Give back the finished samples of idle rv that no batch took: the view
 * owes them, and starts them again first.  Returns whether it gave any.
 */
static bool
rview_drop_ready(struct feed *f, struct rview *rv)
{
	bool any = false;

	while (rv->ready) {
		struct rsample *x = rv->ready;

		if (rv->nowed == rv->cowed) {
			uint32_t n = rv->cowed ? 2 * rv->cowed : 4;
			uint64_t *o = realloc(rv->owed, n * sizeof(*o));

			if (o == NULL)
				break; /* kept: nothing is lost */
			rview_meta_add(f, rv, (n - rv->cowed) * sizeof(*o));
			rv->owed = o;
			rv->cowed = n;
		}
		rv->owed[rv->nowed++] = x->elem;
		if ((rv->ready = x->next) == NULL)
			rv->ready_tail = NULL;
		budget_sub(&f->budget, f->jobs[rv->job].slot_bytes);
		free(x->msg);
		free(x);
		any = true;
	}
	return any;
}

/* Whether idle rv's epoch is finished: every batch chosen. */
static bool
rview_finished(struct feed *f, const struct rview *rv)
{
	return !rv->wait_head && !rv->inflight && !rv->live && !rv->ready &&
	       !rv->nowed &&
	       rv->nchosen >= plan_nbatches(&f->jobs[rv->job].plan, rv->world);
}

/*
 * Whether finished rv can be forgotten: its reader gone on to a later
 * epoch of the rank view, and no batch struct naming it (an open file,
 * a batch being built, whose view would be chosen anew).
 */
static bool
rview_forgettable(struct feed *f, const struct rview *rv)
{
	bool later = false;

	for (const struct rview *x = f->rviews; x && !later; x = x->next)
		later = x->job == rv->job && x->rank == rv->rank &&
			x->world == rv->world && x->epoch > rv->epoch;
	if (!later)
		return false;
	for (size_t i = 0; i < FEED_HASH; i++)
		for (const struct batch *b = f->table[i]; b; b = b->hnext)
			if (b->key.job == rv->job && b->key.rank == rv->rank &&
			    b->key.world == rv->world &&
			    b->key.epoch == rv->epoch)
				return false;
	return true;
}

/*
 * The least recently used finished view that can be forgotten, or NULL:
 * candidates by age, the costlier checks on the oldest first.
 */
static struct rview *
forget_victim(struct feed *f)
{
	uint64_t after = 0;

	for (;;) {
		struct rview *old = NULL;

		for (struct rview *rv = f->rviews; rv; rv = rv->next)
			if (rv->used > after &&
			    (!old || rv->used < old->used) &&
			    rview_finished(f, rv))
				old = rv;
		if (old == NULL || rview_forgettable(f, old))
			return old;
		after = old->used;
	}
}

/* Forget finished rv whole, marking its epoch; false: out of memory. */
static bool
rview_forget(struct feed *f, struct rview *rv)
{
	if (!forgot_mark(f, rv))
		return false;
	if (f->rforgotten++ == 0)
		log_info("order = relaxed: metadata at its cap of %llu bytes; "
			 "the choices of finished epochs are forgotten from "
			 "now on (first: job %s, epoch %u, rank %u of %u), "
			 "and their batches cannot be read again in this "
			 "mount",
		    (unsigned long long)f->budget.meta_cap,
		    f->jobs[rv->job].cfg->name, (unsigned)rv->epoch,
		    (unsigned)rv->rank, (unsigned)rv->world);
	rview_unlink(f, rv);
	rview_free(f, rv);
	return true;
}

/*
 * Give back what relaxed views hold and can make again: a spare sample
 * buffer, or the finished samples of the least recently used idle view
 * (which owes them again), or (meta) an idle view that chose nothing,
 * else the least recently used finished epoch that nothing names and
 * that its reader has left (its choices are forgotten).  Returns whether
 * it freed anything.
 */
static bool
relaxed_reclaim(struct feed *f, bool meta)
{
	struct rview *victim = NULL, *old;

	for (size_t j = 0; !meta && j < f->njobs; j++) {
		struct rsample *x = f->rfree[j];

		if (x == NULL)
			continue;
		f->rfree[j] = x->next;
		f->nrfree[j]--;
		f->spare_bytes -= f->jobs[j].slot_bytes;
		budget_sub(&f->budget, f->jobs[j].slot_bytes);
		free(x);
		return true;
	}
	/* Finished samples are taken only while no batch waits (and a
	 * view chose nothing only when no batch points to it). */
	for (struct rview *rv = f->rviews; rv; rv = rv->next)
		if (!rv->wait_head && !rv->inflight &&
		    (meta ? rv->nchosen == 0 && !rv->live
			  : rv->ready != NULL) &&
		    (!victim || rv->used < victim->used))
			victim = rv;
	/* What can be made again first; a choice only when nothing can. */
	if (victim == NULL)
		return meta && (old = forget_victim(f)) != NULL &&
		       rview_forget(f, old);
	if (victim->nchosen == 0 && !victim->live) {
		/* Every sample started is on its ready list or owed: the view
		 * is as new, and made again when used. */
		rview_unlink(f, victim);
		rview_free(f, victim);
		return true;
	}
	return rview_drop_ready(f, victim);
}

/* Reclaimers BUDGET_SAMPLES and BUDGET_META_VIEWS. */
static bool
reclaim_samples(void *arg, const struct budget_ask *ask)
{
	(void)ask;
	return relaxed_reclaim(arg, false);
}

static bool
reclaim_views(void *arg, const struct budget_ask *ask)
{
	(void)ask;
	return relaxed_reclaim(arg, true);
}

void
relaxed_budget(struct feed *f)
{
	struct budget_reclaimer samples = {"relaxed samples", reclaim_samples,
	    NULL, f},
				views = {"relaxed views", reclaim_views, NULL,
				    f};

	budget_register(&f->budget, BUDGET_SAMPLES, &samples);
	budget_register(&f->budget, BUDGET_META_VIEWS, &views);
}
