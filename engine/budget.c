/*
 * budget.c - the memory budget (budget.h): the counters, their peaks, the
 * metadata cap, the reclaimers asked in rank order, and the room
 * condition.  Layer: the engine (engine/), its bottom; it calls the
 * holders of memory only through the reclaimers they registered.  Every
 * function is called with the budget's lock held.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "engine/budget.h"
#include "util/log.h"

void
budget_init(struct budget *b, uint64_t memory, pthread_mutex_t *lock)
{
	memset(b, 0, sizeof(*b));
	b->memory = memory;
	b->meta_cap = memory / 4;
	b->room_lock = lock;
	pthread_cond_init(&b->room, NULL);
}

void
budget_fini(struct budget *b)
{
	pthread_cond_destroy(&b->room);
}

void
budget_register(
    struct budget *b, enum budget_rank rank, const struct budget_reclaimer *r)
{
	b->reclaimers[rank] = *r;
}

void
budget_add(struct budget *b, uint64_t bytes)
{
	b->mem_used += bytes;
	if (b->mem_used > b->mem_peak)
		b->mem_peak = b->mem_used;
}

void
budget_sub(struct budget *b, uint64_t bytes)
{
	b->mem_used -= bytes;
	pthread_cond_broadcast(&b->room);
}

void
budget_meta_add(struct budget *b, uint64_t bytes)
{
	b->meta_used += bytes;
	if (b->meta_used > b->meta_peak)
		b->meta_peak = b->meta_used;
	budget_add(b, bytes);
}

void
budget_meta_sub(struct budget *b, uint64_t bytes)
{
	b->meta_used -= bytes;
	budget_sub(b, bytes);
}

bool
budget_over(const struct budget *b)
{
	return b->mem_used > b->memory;
}

/* Ask the reclaimer at rank for one thing; false when none registered. */
static bool
ask(struct budget *b, enum budget_rank rank, const struct budget_ask *a)
{
	const struct budget_reclaimer *r = &b->reclaimers[rank];

	return r->reclaim != NULL && r->reclaim(r->arg, a);
}

/* Bytes held only for reuse: room. */
static uint64_t
kept(struct budget *b)
{
	uint64_t n = 0;

	for (int i = 0; i < BUDGET_NRANKS; i++)
		if (b->reclaimers[i].kept)
			n += b->reclaimers[i].kept(b->reclaimers[i].arg);
	return n;
}

bool
budget_make_room(struct budget *b, uint64_t need, unsigned how, uint64_t keep)
{
	struct budget_ask a = {need, keep};

	/* Kept buffers are room: the others give back only when they are
	 * not enough.  The first that gives anything: look again. */
	while (b->mem_used - kept(b) + need > b->memory)
		if (!ask(b, BUDGET_DONE_BATCHES, &a) &&
		    !ask(b, BUDGET_SAMPLES, &a) && !ask(b, BUDGET_ORDERS, &a) &&
		    !((how & BUDGET_ANY) && ask(b, BUDGET_IDLE_BATCHES, &a)))
			return false;
	/* Then the kept buffers, but the caller's. */
	a.need = need - keep;
	while (b->mem_used + a.need > b->memory && ask(b, BUDGET_KEPT, &a))
		;
	return true;
}

uint64_t
budget_shrink(struct budget *b)
{
	struct budget_ask a = {UINT64_MAX, 0};
	uint64_t before = b->mem_used;

	while (ask(b, BUDGET_DONE_BATCHES, &a) || ask(b, BUDGET_SAMPLES, &a) ||
	       ask(b, BUDGET_ORDERS, &a) || ask(b, BUDGET_IDLE_BATCHES, &a))
		;
	while (ask(b, BUDGET_KEPT, &a)) /* last: the batches put theirs here */
		;
	return before > b->mem_used ? before - b->mem_used : 0;
}

bool
budget_meta_fits(struct budget *b, uint64_t bytes)
{
	struct budget_ask a = {bytes, 0};

	while (b->meta_used + bytes > b->meta_cap)
		if (!ask(b, BUDGET_META_VIEWS, &a) &&
		    !ask(b, BUDGET_META_BATCHES, &a))
			return false;
	return true;
}

bool
budget_meta_room(struct budget *b, uint64_t bytes)
{
	if (budget_meta_fits(b, bytes)) {
		/* Within the cap, batches' data gives way to it. */
		budget_make_room(b, bytes, BUDGET_ANY, 0);
		return true;
	}
	if (b->meta_refused++ % 1000 == 0)
		log_warn("memory: metadata at its cap of %" PRIu64 " bytes "
			 "(open files, batches, relaxed views, names): %" PRIu64
			 " refused with ENOMEM so far; raise `memory`",
		    b->meta_cap, b->meta_refused);
	return false;
}

int
budget_meta_take(struct budget *b, uint64_t bytes)
{
	if (!budget_meta_room(b, bytes))
		return -ENOMEM;
	budget_meta_add(b, bytes);
	return 0;
}

void
budget_wait(struct budget *b)
{
	b->room_waiting++;
	pthread_cond_wait(&b->room, b->room_lock);
	b->room_waiting--;
}

void
budget_wait_ns(struct budget *b, long ns)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ns / 1000000000;
	ts.tv_nsec += ns % 1000000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	b->room_waiting++;
	pthread_cond_timedwait(&b->room, b->room_lock, &ts);
	b->room_waiting--;
}

void
budget_wake(struct budget *b)
{
	pthread_cond_broadcast(&b->room);
}
