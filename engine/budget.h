/*
 * budget.h - the memory budget: every byte the daemon holds for readers,
 * counted against `memory` in one place.  Layer: the engine (engine/),
 * its bottom; it includes nothing of the engine, and the holders of memory
 * above it (batch.c, bufpool.c, order.c, relaxed*.c, sched.c) call it.  It
 * calls them back only through the reclaimers they registered, as the
 * Linux kernel's allocator asks its shrinkers.
 *
 * The budget (memory: the `memory` key less the cache's share) counts in
 * mem_used every byte the engine holds:
 *
 *  - the workers' scratch arenas (sched.c, transforms/arena.c): their
 *    caps, counted from sched_start to sched_stop, whatever they hold,
 *    and the buffers too large for them (a large image decoded), counted
 *    while a worker holds them, what is cheap to give back given first
 *    (past the budget, a worker that holds none waits while others do);
 *  - what it can give back: batches' data, kept buffers, relaxed views'
 *    finished samples and spare sample buffers, epoch orders.
 *    budget_make_room asks their holders, the cheapest to make again
 *    first (enum budget_rank);
 *  - metadata (meta_used, part of mem_used): batch structs, open handles
 *    and their label and id files, open text files (stats, mixture),
 *    relaxed views and the contents they chose, and the FUSE nodes
 *    (fs/nodes.c, feed.node_bytes).  It has a cap of its own, meta_cap,
 *    a quarter of the budget.  What metadata can be made again goes first
 *    (idle relaxed views keep only what they chose: see relaxed.c), then
 *    the choices of finished relaxed epochs, forgotten (a bit an epoch
 *    stays, so that their batches are refused, never chosen again); when
 *    the rest is at the cap, a new batch struct, handle, text or relaxed
 *    view is refused, and the open (or the read that needs it) fails with
 *    ENOMEM, counted (meta_refused) and logged.  Nodes are never refused
 *    (the kernel holds them until it forgets them): past half the cap,
 *    fs/ asks the kernel to forget the oldest names.
 *
 * The generated text files (README, info.json, samples.tsv) are counted
 * in mem_used outside both parts: they are made once at setup.  So the
 * daemon holds at most `memory` whatever readers open, save what was
 * being made when more was counted (a batch, a few samples) and names
 * the kernel has not forgotten yet.  A batch larger than what the budget
 * leaves for one is refused at mount (feed.c), and a read whose batch
 * does not fit beside the metadata held fails (batch_wait_room).
 *
 * Locking: every function is called with the lock given to budget_init
 * held (feed.lock), reclaimers are called with it held and may not drop
 * it.  Memory given back (budget_sub, budget_meta_sub) and budget_wake
 * wake every thread in budget_wait, under that lock: a thread that found
 * no room and waits cannot miss the bytes given back after it looked.
 */
#ifndef FEEDFS_BUDGET_H
#define FEEDFS_BUDGET_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * The reclaimers, in the order they are asked: after one gives something
 * back the budget looks again and starts over from the first, so a later
 * one is asked only when none before it has anything left.
 *
 * For data (budget_make_room):
 *   BUDGET_DONE_BATCHES  batch.c: a batch read to its end that no file
 *                        holds (least recently used first), destroyed;
 *   BUDGET_SAMPLES       relaxed_reclaim.c: a spare sample buffer, else
 *                        the finished samples of the least recently used
 *                        idle view (which owes them again);
 *   BUDGET_ORDERS        order.c: the least recently used epoch order
 *                        that nothing uses;
 *   BUDGET_IDLE_BATCHES  batch.c, only with BUDGET_ANY: the best idle
 *                        batch (unheld before held, read to its end
 *                        before not, then least recently used); one held
 *                        open keeps its struct and is built again;
 *   BUDGET_KEPT          bufpool.c: buffers kept for reuse.  Their bytes
 *                        count as room (kept), and they are freed last,
 *                        once the others made the rest of the room,
 *                        sparing the one the caller will take (ask.keep).
 * For metadata (budget_meta_room, budget_meta_fits):
 *   BUDGET_META_VIEWS    relaxed_reclaim.c: the least recently used
 *                        idle view that chose nothing, else a finished
 *                        epoch's choices, forgotten;
 *   BUDGET_META_BATCHES  batch.c: the best idle batch that no file holds.
 */
enum budget_rank {
	BUDGET_DONE_BATCHES,
	BUDGET_SAMPLES,
	BUDGET_ORDERS,
	BUDGET_IDLE_BATCHES,
	BUDGET_KEPT,
	BUDGET_META_VIEWS,
	BUDGET_META_BATCHES,
	BUDGET_NRANKS
};

/* What a reclaimer is asked for. */
struct budget_ask {
	uint64_t need; /* bytes wanted */
	uint64_t keep; /* BUDGET_KEPT: a kept buffer of this size (the
			  caller's next) is spared once; 0: none */
};

struct budget_reclaimer {
	const char *name;
	/* Give back one thing it holds; whether it did.  Locked. */
	bool (*reclaim)(void *arg, const struct budget_ask *ask);
	/* Bytes it holds only for reuse, counted as room (NULL: none). */
	uint64_t (*kept)(void *arg);
	void *arg;
};

/*
 * The budget's state.  Its members are listed once here so that struct
 * feed can hold them as the Linux kernel's struct_group_tagged() does: as
 * a struct budget, and as members of its own (feed->mem_used), which
 * the engine's white-box test reads.  Fields set by hand: memory and
 * meta_cap (feed_new); the rest is the budget's.
 */
#define BUDGET_MEMBERS                                                         \
	uint64_t memory;	       /* the budget */                        \
	uint64_t mem_used, mem_peak;   /* everything counted */                \
	uint64_t meta_used, meta_peak; /* metadata, part of mem_used */        \
	uint64_t meta_cap;	       /* its own cap, within memory */        \
	uint64_t meta_refused;	       /* metadata refused at the cap */       \
	unsigned room_waiting;	       /* threads in budget_wait */            \
	pthread_cond_t room;	       /* memory given back, or a wake */      \
	pthread_mutex_t *room_lock;    /* what every call holds */             \
	struct budget_reclaimer reclaimers[BUDGET_NRANKS]

struct budget {
	BUDGET_MEMBERS;
};

/* An empty budget of memory bytes (meta_cap: a quarter) under lock. */
void budget_init(struct budget *b, uint64_t memory, pthread_mutex_t *lock);
void budget_fini(struct budget *b);

/* Register r at rank (one per rank; r is copied).  Before any use. */
void budget_register(
    struct budget *b, enum budget_rank rank, const struct budget_reclaimer *r);

/* Count bytes in or out (data: mem_used; meta: both).  Giving back wakes
 * the threads waiting for room.  Locked. */
void budget_add(struct budget *b, uint64_t bytes);
void budget_sub(struct budget *b, uint64_t bytes);
void budget_meta_add(struct budget *b, uint64_t bytes);
void budget_meta_sub(struct budget *b, uint64_t bytes);

/* Whether more is counted than the budget.  Locked. */
bool budget_over(const struct budget *b);

#define BUDGET_ANY 1u /* budget_make_room: idle batches may go too */

/*
 * Give memory back, asking the data reclaimers in rank order, until need
 * more bytes fit (kept buffers counted as room), then free kept buffers
 * (sparing one of keep bytes) until need - keep more fit.  Returns
 * whether need fits.  Locked.
 */
bool budget_make_room(
    struct budget *b, uint64_t need, unsigned how, uint64_t keep);

/*
 * Give back everything the data reclaimers may give (idle batches too),
 * then every kept buffer: what an idle mount holds only for speed
 * (engine/idle.c).  Metadata stays: forgetting a relaxed epoch's choices
 * would refuse its batches, not merely slow them.  Returns the bytes
 * uncounted.  Locked.
 */
uint64_t budget_shrink(struct budget *b);

/* Whether bytes more metadata fit under meta_cap, after asking the meta
 * reclaimers.  Nothing counted, nothing logged.  Locked. */
bool budget_meta_fits(struct budget *b, uint64_t bytes);
/*
 * budget_meta_fits, then room for the bytes among the data too (batches
 * give way to metadata within its cap).  A false is counted in
 * meta_refused and logged (every thousandth); the caller refuses what it
 * was making with -ENOMEM.  Locked.
 */
bool budget_meta_room(struct budget *b, uint64_t bytes);
/* budget_meta_room and budget_meta_add: 0, or -ENOMEM at the cap. */
int budget_meta_take(struct budget *b, uint64_t bytes);

/*
 * The room condition.  budget_wait: wait until memory is given back or
 * budget_wake is called (the lock is released meanwhile); the caller
 * looks again (budget_make_room) in a loop.  budget_wait_ns: the same,
 * for at most ns nanoseconds.  budget_wake: something that may make room
 * changed (a batch became idle, the mount stops).  Locked.
 */
void budget_wait(struct budget *b);
void budget_wait_ns(struct budget *b, long ns);
void budget_wake(struct budget *b);

#endif
