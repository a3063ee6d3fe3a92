/*
 * tier_int.h - the engine (engine/): what tier.c (lookups, waits, the
 * thread) and tier_pos.c (the readers' positions) share.  Private to
 * them.
 *
 * One thread per mount does the tier's network calls, never with
 * feed.lock held: it looks up each batch that fill() hands over
 * (tier_take), fetches it when it is there, waits (polls) while a
 * worker's claim holds it, up to the wait bound, and otherwise claims it
 * for this mount and queues its slots for the workers; and it publishes
 * the readers' positions.  Every field below is under feed.lock but the
 * counters (atomics) and what is set before the thread starts.
 */
#ifndef FEEDFS_TIER_INT_H
#define FEEDFS_TIER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/batch_tier.h"
#include "engine/engine.h"

/* A readahead batch a worker holds is waited for this long at most
 * while no reader waits for it (then cluster_batch_wait applies). */
#define TIER_WAIT_AHEAD_NS 30000000000ull
/* Rank views whose positions a mount publishes, at most. */
#define TIER_VIEWS 64

/* Per job of the engine (its views too). */
struct tier_job {
	bool on;		       /* its batches go through the tier */
	uint8_t print[TIER_KEY_LEN];   /* tier_job_print */
	atomic_uint_fast64_t batches;  /* served whole from the tier */
	atomic_uint_fast64_t waits;    /* batches a worker held, waited for */
	atomic_uint_fast64_t timeouts; /* waits that ran out: made here */
	atomic_uint_fast64_t refused;  /* fetched and refused: made here */
	atomic_uint_fast64_t local;    /* looked up, absent: made here */
	atomic_uint_fast64_t wait_ns;  /* time batches waited on claims */
	atomic_uint_fast64_t bytes;    /* bytes fetched */
};

/* A rank view a reader reads, and where its position is published. */
struct tier_view {
	uint32_t job; /* the config's job (view 0) */
	uint32_t world, rank, epoch;
	uint64_t batch;
	bool used, dirty;
	int slot;	  /* its note, -1 until found */
	uint64_t sent_ns; /* last published (feed_mono_ns) */
	uint64_t touched; /* tick of its last open, for replacement */
};

struct tier {
	struct feed *f;
	struct cluster *cl;
	struct tier_job *jobs; /* f->njobs */
	pthread_t thread;
	bool started, stop;
	pthread_cond_t cv;	   /* the thread's: work, or stop */
	struct batch *head, *tail; /* the tier queue (batch_tier.next) */
	struct tier_view views[TIER_VIEWS];
	uint64_t tick;
	uint64_t mount; /* random: this mount in its position notes */
	char who[96];	/* this mount in its claims */
	atomic_uint_fast64_t errors; /* calls a server failed */
};

/* tier.c: b's samples fetched (raw, len bytes, counted in the budget):
 * its slots are converted from them (tier_slot).  Locked. */
void tier_fetched(struct feed *f, struct batch *b, uint8_t *raw,
    uint64_t len);
/* tier.c: a buffer for len bytes of b's fetched samples, counted in the
 * budget (NULL: no memory), and its return.  Locked. */
uint8_t *tier_raw(struct feed *f, const struct batch *b, uint64_t len);
void tier_raw_free(struct feed *f, const struct batch *b, uint8_t *raw,
    uint64_t len);
/* tier.c: the tier queue (locked): in, out. */
void tier_q_push(struct tier *t, struct batch *b);
void tier_q_remove(struct tier *t, struct batch *b);
/* tier.c: the time this mount takes to make a batch of len samples of j
 * (its workers' measured time per sample; 0: nothing measured yet); how
 * long a batch a worker holds is waited for (cluster_batch_wait); how
 * long this mount's claim of one it makes lasts (seconds). */
uint64_t tier_batch_ns(struct feed *f, struct job *j, uint32_t len);
uint64_t tier_wait_bound(struct feed *f, struct job *j, uint32_t len);
unsigned tier_claim_ttl(struct feed *f, struct job *j, uint32_t len);
/* tier_pos.c: publish the positions due (unlocks around the calls);
 * whether any was.  Locked; returns locked. */
bool tier_pos_publish(struct tier *t);
/* tier_pos.c: when a position will be due next (ns; UINT64_MAX none). */
uint64_t tier_pos_due(const struct tier *t);
/* tier_pos.c: count and say once a failed call of the tier; the clock
 * (CLOCK_MONOTONIC, ns) of the waits and the positions. */
void tier_failed(struct tier *t, int r);

#endif
