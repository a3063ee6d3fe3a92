/*
 * plan.c - the model (core/): the epoch plan (see plan.h).
 */
#include "core/plan.h"
#include "transforms/rng.h"

uint64_t
plan_rank_len(const struct plan *p, uint32_t world)
{
	/* DistributedSampler: cut to floor(n/W) with drop_last, else pad. */
	if (p->drop_last && world > 1)
		return p->n / world;
	return (p->n + world - 1) / world;
}

uint64_t
plan_nbatches(const struct plan *p, uint32_t world)
{
	uint64_t len = plan_rank_len(p, world);

	if (p->drop_last)
		return len / p->batch_size;
	return (len + p->batch_size - 1) / p->batch_size;
}

uint32_t
plan_batch_len(const struct plan *p, uint32_t world, uint64_t b)
{
	uint64_t len = plan_rank_len(p, world);
	uint64_t start = b * p->batch_size;

	if (b >= plan_nbatches(p, world))
		return 0;
	return len - start < p->batch_size ? (uint32_t)(len - start)
					   : p->batch_size;
}

void
plan_permutation(const struct plan *p, uint32_t epoch, uint32_t *perm)
{
	uint64_t key = rng_key(RNG_DOMAIN_SHUFFLE, p->seed, epoch, 0);

	for (size_t i = 0; i < p->n; i++)
		perm[i] = (uint32_t)i;
	if (!p->shuffle)
		return;
	/* Fisher-Yates; draw i depends on (seed, epoch, i) only. */
	for (size_t i = p->n; i > 1; i--) {
		uint64_t j = rng_below(key, i, i);
		uint32_t t = perm[i - 1];

		perm[i - 1] = perm[j];
		perm[j] = t;
	}
}

uint64_t
plan_position(const struct plan *p, uint32_t rank, uint32_t world, uint64_t k)
{
	/*
	 * Element k of the rank's list is position rank + k*world of the
	 * padded order; padding wraps around, so that position is
	 * (rank + k*world) mod n.
	 */
	return (rank + k * world) % p->n;
}

uint32_t
plan_batch_positions(const struct plan *p, uint32_t rank, uint32_t world,
    uint64_t b, uint64_t *pos)
{
	uint32_t len = plan_batch_len(p, world, b);

	/* Slot s of batch b is element b*B + s of the rank's list. */
	for (uint32_t s = 0; s < len; s++)
		pos[s] = plan_position(p, rank, world, b * p->batch_size + s);
	return len;
}
