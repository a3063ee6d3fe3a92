/*
 * test_budget - the memory budget (engine/budget.c) on its own: holders
 * that register reclaimers as batch.c, relaxed.c, order.c and bufpool.c
 * do, each holding counted items of a few bytes.
 *
 * Checks: the reclaimers are asked in rank order, starting over after
 * each one that gives something back, idle batches only with BUDGET_ANY,
 * kept buffers counted as room and freed last sparing the caller's; the
 * metadata cap (its reclaimers in order, the data making room for it);
 * budget_shrink giving back every data holder's part and no metadata;
 * ENOMEM at the cap, counted; and no lost wakeups: threads waiting for
 * room all return once room is given back, by budget_sub or by a holder
 * that can give back again (budget_wake).  The engine's own use of the
 * budget is test_engine's.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/budget.h"
#include "tests/testlib.h"

/* budget_make_room(b, need, how, keep) returns ok, and the ranks that gave
 * something back were asked in this order (a string of ranks). */
#define ROOM(b, need, how, keep, ok, order)                                    \
	do {                                                                   \
		trace[0] = 0;                                                  \
		CHECK(budget_make_room(b, need, how, keep) == (ok));           \
		CHECK_EQ_STR(trace, order);                                    \
	} while (0)

/* A holder: n items of size bytes, counted in the budget. */
struct holder {
	struct budget *b;
	enum budget_rank rank;
	unsigned n;
	uint64_t size;
	bool meta;     /* counted as metadata */
	bool blocked;  /* gives nothing back (busy) */
	uint64_t keep; /* the last ask's keep (BUDGET_KEPT) */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char trace[256]; /* ranks asked that gave something, as digits */

static bool
reclaim(void *arg, const struct budget_ask *ask)
{
	struct holder *h = arg;
	size_t l = strlen(trace);

	h->keep = ask->keep;
	if (h->blocked || h->n == 0)
		return false;
	/* BUDGET_KEPT: one item of size keep is the caller's. */
	if (h->rank == BUDGET_KEPT && ask->keep == h->size && h->n == 1)
		return false;
	h->n--;
	if (h->meta)
		budget_meta_sub(h->b, h->size);
	else
		budget_sub(h->b, h->size);
	if (l + 1 < sizeof(trace)) {
		trace[l] = (char)('0' + h->rank);
		trace[l + 1] = 0;
	}
	return true;
}

static uint64_t
kept(void *arg)
{
	struct holder *h = arg;

	return h->n * h->size;
}

static void
hold(struct budget *b, struct holder *h, enum budget_rank rank, unsigned n,
    uint64_t size)
{
	struct budget_reclaimer r = {
	    "test", reclaim, rank == BUDGET_KEPT ? kept : NULL, h};

	*h = (struct holder){b, rank, n, size,
	    rank == BUDGET_META_VIEWS || rank == BUDGET_META_BATCHES, false, 0};
	for (unsigned i = 0; i < n; i++)
		if (h->meta)
			budget_meta_add(b, size);
		else
			budget_add(b, size);
	budget_register(b, rank, &r);
}

/* The five data reclaimers, two items of 10 bytes each. */
static void
test_order(void)
{
	struct budget b;
	struct holder h[BUDGET_KEPT + 1];

	pthread_mutex_lock(&lock);
	budget_init(&b, 100, &lock);
	for (int r = BUDGET_DONE_BATCHES; r <= BUDGET_KEPT; r++)
		hold(&b, &h[r], r, 2, 10);
	CHECK_EQ_INT(b.mem_used, 100);
	CHECK_EQ_INT(b.mem_peak, 100);

	/* Kept buffers are room: 20 bytes fit without asking anyone but
	 * the pool, which then gives them back. */
	ROOM(&b, 20, 0, 0, true, "44");
	CHECK_EQ_INT(b.mem_used, 80);

	/* Without BUDGET_ANY: done batches, samples, orders, never idle
	 * batches; each asked again from the first. */
	ROOM(&b, 90, 0, 0, false, "001122");
	CHECK_EQ_INT(b.mem_used, 20);
	CHECK_EQ_INT(h[BUDGET_IDLE_BATCHES].n, 2);

	/* With it, the idle batches go last. */
	ROOM(&b, 90, BUDGET_ANY, 0, true, "3");
	CHECK_EQ_INT(b.mem_used, 10);

	/* A holder that gets something again is asked first again. */
	h[BUDGET_DONE_BATCHES].n = 1;
	h[BUDGET_ORDERS].n = 1;
	budget_add(&b, 20);
	ROOM(&b, 100, BUDGET_ANY, 0, true, "023");
	CHECK_EQ_INT(b.mem_used, 0);
	CHECK(!budget_over(&b));
	CHECK_EQ_INT(b.mem_peak, 100);
	budget_fini(&b);
	pthread_mutex_unlock(&lock);
}

/* Kept buffers: counted as room, freed once the rest fits, sparing one of
 * the caller's size (asked with keep). */
static void
test_kept(void)
{
	struct budget b;
	struct holder pool, done;

	pthread_mutex_lock(&lock);
	budget_init(&b, 100, &lock);
	hold(&b, &done, BUDGET_DONE_BATCHES, 3, 20);
	hold(&b, &pool, BUDGET_KEPT, 2, 20);
	CHECK_EQ_INT(b.mem_used, 100);
	/* 40 kept is room for 40: the batches stay, one buffer is freed
	 * (100 + 40 - 20 > 100), the caller's is spared. */
	ROOM(&b, 40, 0, 20, true, "4");
	CHECK_EQ_INT(pool.keep, 20);
	CHECK_EQ_INT(pool.n, 1);
	CHECK_EQ_INT(done.n, 3);
	/* 60: a batch goes first, then the last buffer is kept for the
	 * caller. */
	ROOM(&b, 60, 0, 20, true, "0");
	CHECK_EQ_INT(pool.n, 1);
	budget_fini(&b);
	pthread_mutex_unlock(&lock);
}

/*
 * budget_shrink (an idle mount, issue 36): every data reclaimer until
 * none gives anything, idle batches included, then every kept buffer
 * (batches put theirs there); metadata untouched.
 */
static void
test_shrink(void)
{
	struct budget b;
	struct holder h[BUDGET_NRANKS];

	pthread_mutex_lock(&lock);
	budget_init(&b, 1000, &lock);
	for (int r = BUDGET_DONE_BATCHES; r <= BUDGET_META_BATCHES; r++)
		hold(&b, &h[r], r, 2, 10);
	CHECK_EQ_INT(b.mem_used, 140);
	CHECK_EQ_INT(b.meta_used, 40);
	trace[0] = 0;
	CHECK_EQ_INT(budget_shrink(&b), 100);
	CHECK_EQ_STR(trace, "0011223344");
	CHECK_EQ_INT(b.mem_used, 40);
	CHECK_EQ_INT(h[BUDGET_META_VIEWS].n, 2);
	CHECK_EQ_INT(h[BUDGET_META_BATCHES].n, 2);
	/* A busy holder keeps its part; nothing left: 0. */
	h[BUDGET_IDLE_BATCHES].n = 1;
	h[BUDGET_IDLE_BATCHES].blocked = true;
	budget_add(&b, 10);
	CHECK_EQ_INT(budget_shrink(&b), 0);
	CHECK_EQ_INT(b.mem_used, 50);
	budget_fini(&b);
	pthread_mutex_unlock(&lock);
}

/* The metadata cap: its reclaimers in order, then the data makes room. */
static void
test_meta_cap(void)
{
	struct budget b;
	struct holder views, structs, done;

	pthread_mutex_lock(&lock);
	budget_init(&b, 400, &lock);
	CHECK_EQ_INT(b.meta_cap, 100);
	b.memory = 390; /* set by hand, as feed_new does */
	hold(&b, &done, BUDGET_DONE_BATCHES, 10, 30);
	hold(&b, &views, BUDGET_META_VIEWS, 2, 20);
	hold(&b, &structs, BUDGET_META_BATCHES, 2, 20);
	CHECK_EQ_INT(b.meta_used, 80);
	CHECK_EQ_INT(b.mem_used, 380);
	/* 20 fits the cap as it is; the data gives 20 more room. */
	trace[0] = 0;
	CHECK(budget_meta_room(&b, 20));
	CHECK_EQ_STR(trace, "0");
	budget_meta_add(&b, 20);
	CHECK_EQ_INT(b.meta_used, 100);
	CHECK(!budget_over(&b));
	/* 50 more: the views first, then the structs. */
	trace[0] = 0;
	CHECK(budget_meta_fits(&b, 50));
	CHECK_EQ_STR(trace, "556");
	CHECK(b.meta_used + 50 <= b.meta_cap);
	CHECK_EQ_INT(b.meta_refused, 0);
	CHECK_EQ_INT(b.meta_peak, 100);
	budget_fini(&b);
	pthread_mutex_unlock(&lock);
}

/* At the cap with nothing to give back: -ENOMEM, counted, nothing
 * counted in; room again once metadata is given back. */
static void
test_enomem(void)
{
	struct budget b;
	struct holder views;

	pthread_mutex_lock(&lock);
	budget_init(&b, 400, &lock);
	hold(&b, &views, BUDGET_META_VIEWS, 5, 20);
	views.blocked = true;
	CHECK_EQ_INT(b.meta_used, 100);
	CHECK_EQ_INT(budget_meta_take(&b, 1), -ENOMEM);
	CHECK(!budget_meta_room(&b, 1));
	CHECK(!budget_meta_fits(&b, 1));
	CHECK_EQ_INT(b.meta_refused, 2); /* meta_fits counts nothing */
	CHECK_EQ_INT(b.meta_used, 100);
	CHECK_EQ_INT(b.mem_used, 100);
	/* Nothing at all registered: the same. */
	b.reclaimers[BUDGET_META_VIEWS].reclaim = NULL;
	CHECK_EQ_INT(budget_meta_take(&b, 1), -ENOMEM);
	budget_meta_sub(&b, 20);
	CHECK_EQ_INT(budget_meta_take(&b, 20), 0);
	CHECK_EQ_INT(b.meta_used, 100);
	CHECK_EQ_INT(b.meta_refused, 3);
	budget_fini(&b);
	pthread_mutex_unlock(&lock);
}

/* No lost wakeups. */
#define WAITERS 8

static struct budget wb;
static struct holder busy;
static unsigned got;

/* A thread that needs 10 bytes: waits until they fit, then holds them. */
static void *
waiter(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	while (!budget_make_room(&wb, 10, BUDGET_ANY, 0))
		budget_wait(&wb);
	budget_add(&wb, 10);
	got++;
	pthread_mutex_unlock(&lock);
	return NULL;
}

/* Start WAITERS threads and return once every one waits for room. */
static void
start_waiters(pthread_t *t)
{
	got = 0;
	for (int i = 0; i < WAITERS; i++)
		if (pthread_create(&t[i], NULL, waiter, NULL) != 0) {
			perror("pthread_create");
			exit(99);
		}
	for (;;) {
		unsigned w;

		pthread_mutex_lock(&lock);
		w = wb.room_waiting;
		pthread_mutex_unlock(&lock);
		if (w == WAITERS)
			return;
		usleep(1000);
	}
}

static void
on_alarm(int sig)
{
	static const char m[] = "test_budget: waiters never woken (a lost "
				"wakeup)\n";
	ssize_t n;

	(void)sig;
	n = write(2, m, sizeof(m) - 1);
	(void)n;
	_exit(1);
}

static void
test_wakeups(void)
{
	pthread_t t[WAITERS];

	signal(SIGALRM, on_alarm);
	alarm(120); /* a hang is a failure, not a timeout of the harness */
	pthread_mutex_lock(&lock);
	budget_init(&wb, WAITERS * 10, &lock);
	budget_add(&wb, WAITERS * 10); /* full, nothing to give back */
	pthread_mutex_unlock(&lock);

	/* Room given back by whoever held it: every waiter gets its 10. */
	start_waiters(t);
	pthread_mutex_lock(&lock);
	CHECK_EQ_INT(got, 0);
	budget_sub(&wb, WAITERS * 10);
	pthread_mutex_unlock(&lock);
	for (int i = 0; i < WAITERS; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ_INT(got, WAITERS);
	CHECK_EQ_INT(wb.mem_used, WAITERS * 10);
	CHECK_EQ_INT(wb.room_waiting, 0);

	/* Room a holder can make again (a batch no longer read): the
	 * holder's wake lets the waiters ask it. */
	pthread_mutex_lock(&lock);
	budget_sub(&wb, WAITERS * 10);
	hold(&wb, &busy, BUDGET_IDLE_BATCHES, WAITERS, 10);
	busy.blocked = true;
	pthread_mutex_unlock(&lock);
	start_waiters(t);
	pthread_mutex_lock(&lock);
	CHECK_EQ_INT(got, 0);
	busy.blocked = false;
	budget_wake(&wb);
	pthread_mutex_unlock(&lock);
	for (int i = 0; i < WAITERS; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ_INT(got, WAITERS);
	CHECK_EQ_INT(busy.n, 0);
	CHECK_EQ_INT(wb.mem_used, WAITERS * 10);

	/* A timed wait returns by itself. */
	pthread_mutex_lock(&lock);
	budget_wait_ns(&wb, 1000000);
	CHECK_EQ_INT(wb.room_waiting, 0);
	budget_fini(&wb);
	pthread_mutex_unlock(&lock);
	alarm(0);
}

int
main(void)
{
	test_order();
	test_kept();
	test_shrink();
	test_meta_cap();
	test_enomem();
	test_wakeups();
	return TEST_SUMMARY();
}
