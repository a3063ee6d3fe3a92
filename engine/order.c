/*
 * order.c - the epochs' orders (job_order), made once per (job, epoch) and
 * shared by the batches and relaxed views that use them.  Layer: the
 * engine (engine/), below batch.c and relaxed.c, above budget.c.  A few
 * that nothing uses are kept for the next batches of the same epoch, and
 * given back under memory pressure (the budget's reclaimer
 * BUDGET_ORDERS).  A mixture's epoch has an order only once it was
 * opened (feed_open): its weights are fixed from then on, and readahead
 * stops at the first epoch whose weights may still change.  Every
 * function is called with feed.lock held (engine.h).
 */
#include <stdlib.h>

#include "engine/engine.h"

#define ORDERS_IDLE 8 /* orders kept when nothing uses them */

static bool order_reclaim(struct feed *f);

struct order *
order_get(struct feed *f, uint32_t job, uint32_t epoch)
{
	struct order *o;
	struct job *j;
	unsigned idle = 0;

	if (f->jobs[job].view > 0) /* a view's order is view 0's */
		job = f->jobs[job].view_main;
	j = &f->jobs[job];
	if (job_is_mixture(j) && epoch >= j->opened)
		return NULL;

	for (o = f->orders; o; o = o->next) {
		if (o->job == job && o->epoch == epoch) {
			o->refs++;
			o->used = ++f->tick;
			return o;
		}
		idle += o->refs == 0;
	}
	if (idle >= ORDERS_IDLE)
		order_reclaim(f);
	/* Room for it (what nobody holds gives way); made anyway if not. */
	budget_make_room(&f->budget, j->plan.n * sizeof(*o->ids), 0, 0);
	if ((o = calloc(1, sizeof(*o))) == NULL)
		return NULL;
	if ((o->ids = malloc(f->jobs[job].plan.n * sizeof(*o->ids))) == NULL) {
		free(o);
		return NULL;
	}
	if (job_order(j, epoch, o->ids) != 0) {
		free(o->ids);
		free(o);
		return NULL;
	}
	budget_add(&f->budget, f->jobs[job].plan.n * sizeof(*o->ids));
	o->job = job;
	o->epoch = epoch;
	o->refs = 1;
	o->used = ++f->tick;
	o->next = f->orders;
	f->orders = o;
	return o;
}

struct order *
order_hold(struct feed *f, uint32_t job, uint32_t epoch)
{
	if (f->jobs[job].view > 0)
		job = f->jobs[job].view_main;
	for (struct order *o = f->orders; o; o = o->next)
		if (o->job == job && o->epoch == epoch) {
			o->refs++;
			return o;
		}
	return NULL;
}

/* Free the least recently used order nothing holds; false: none. */
static bool
order_reclaim(struct feed *f)
{
	struct order *o, **pp, **victim = NULL;

	for (pp = &f->orders; *pp; pp = &(*pp)->next)
		if ((*pp)->refs == 0 &&
		    (!victim || (*pp)->used < (*victim)->used))
			victim = pp;
	if (victim == NULL)
		return false;
	o = *victim;
	*victim = o->next;
	budget_sub(&f->budget, f->jobs[o->job].plan.n * sizeof(*o->ids));
	free(o->ids);
	free(o);
	return true;
}

/* Reclaimer BUDGET_ORDERS. */
static bool
reclaim_orders(void *arg, const struct budget_ask *ask)
{
	(void)ask;
	return order_reclaim(arg);
}

void
order_budget(struct feed *f)
{
	struct budget_reclaimer r = {"unused orders", reclaim_orders, NULL, f};

	budget_register(&f->budget, BUDGET_ORDERS, &r);
}

void
order_put(struct order *o)
{
	if (o)
		o->refs--;
}

void
order_free_all(struct feed *f)
{
	while (f->orders) {
		struct order *o = f->orders;

		f->orders = o->next;
		budget_sub(&f->budget, f->jobs[o->job].plan.n * sizeof(*o->ids));
		free(o->ids);
		free(o);
	}
}
