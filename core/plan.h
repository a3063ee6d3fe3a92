/*
 * plan.h - the model (core/): the epoch plan: shuffle, shards (rank
 * views), batches.
 *
 * Pure functions of (n, seed, epoch, shuffle, drop_last, batch size, rank,
 * world): determinism follows from that.  The order of an epoch is a
 * permutation of 0..n-1 seeded by (seed, epoch), identity without shuffle.
 * Rank R of W is PyTorch's DistributedSampler: the order padded by wrapping
 * around (or cut, with drop_last) to a multiple of W, rank R takes
 * positions R, R+W, ...  The rank's list is then cut into batches of B, the
 * last one partial unless drop_last.  world = 1 is the whole epoch.
 */
#ifndef FEEDFS_PLAN_H
#define FEEDFS_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct plan {
	size_t n;            /* samples in the dataset */
	uint32_t batch_size; /* B >= 1 */
	uint64_t seed;
	bool shuffle, drop_last;
};

/* Samples in rank R's list (the same for every rank). */
uint64_t plan_rank_len(const struct plan *p, uint32_t world);
/* Batches per epoch of each rank. */
uint64_t plan_nbatches(const struct plan *p, uint32_t world);
/* Samples in batch b (B, or fewer for the last); 0 if b is out of range. */
uint32_t plan_batch_len(const struct plan *p, uint32_t world, uint64_t b);

/* The epoch's order: perm[i] = sample id at position i.  perm has n slots. */
void plan_permutation(const struct plan *p, uint32_t epoch, uint32_t *perm);

/*
 * The position (index into the epoch order) of element k of rank R's list:
 * the view's batches take k = 0, 1, ... in turn, B at a time.
 */
uint64_t plan_position(
    const struct plan *p, uint32_t rank, uint32_t world, uint64_t k);

/*
 * Positions (indices into the epoch order) of batch b of rank R of W;
 * pos has plan_batch_len() slots.  Returns the count.
 */
uint32_t plan_batch_positions(const struct plan *p, uint32_t rank,
    uint32_t world, uint64_t b, uint64_t *pos);

#endif
