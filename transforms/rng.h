/*
 * rng.h - counter-based random numbers.  Layer: transforms
 * (transforms/).
 *
 * Every random draw in feedfs is a pure function of (key, counter): no state
 * is shared between threads or carried between samples, so a sample's
 * augmentation depends only on (seed, epoch, sample id) and never on which
 * worker ran it or in which order.  The mixer is SplitMix64's finalizer
 * (Steele, Lea, Flood 2014), which passes BigCrush when fed a counter.
 */
#ifndef FEEDFS_RNG_H
#define FEEDFS_RNG_H

#include <stdint.h>

/* Domains keep the streams of different uses apart. */
#define RNG_DOMAIN_SHUFFLE 0x53485546464c4531ULL /* "SHUFFLE1" */
#define RNG_DOMAIN_SAMPLE 0x53414d504c453031ULL  /* "SAMPLE01" */
/* Mixtures (core/mix.c): each source's shuffle, each batch's interleaving. */
#define RNG_DOMAIN_MIXSRC 0x4d49585352433031ULL	  /* "MIXSRC01" */
#define RNG_DOMAIN_MIXBATCH 0x4d49584241543031ULL /* "MIXBAT01" */
/* Batch ops (transforms/mix.c): a batch's mixup/cutmix draw. */
#define RNG_DOMAIN_BATCHMIX 0x425443484d495831ULL /* "BTCHMIX1" */
/* Views (core/job.c): view v's draws apart from view 0's. */
#define RNG_DOMAIN_VIEW 0x5649455753303031ULL /* "VIEWS001" */

static inline uint64_t
rng_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* The key of one stream: (domain, seed, epoch, id). */
static inline uint64_t
rng_key(uint64_t domain, uint64_t seed, uint64_t epoch, uint64_t id)
{
	return rng_mix(rng_mix(rng_mix(rng_mix(domain) ^ seed) ^ epoch) ^ id);
}

/* The counter-th 64-bit value of stream key. */
static inline uint64_t
rng_u64(uint64_t key, uint64_t counter)
{
	return rng_mix(key ^ rng_mix(counter));
}

/* Uniform double in [0, 1), 53 bits. */
static inline double
rng_uniform(uint64_t key, uint64_t counter)
{
	return (double)(rng_u64(key, counter) >> 11) * 0x1.0p-53;
}

/* Uniform integer in [0, n), n > 0, without modulo bias (Lemire). */
static inline uint64_t
rng_below(uint64_t key, uint64_t counter, uint64_t n)
{
	for (uint64_t i = 0;; i++) {
		uint64_t x = rng_u64(key, counter + (i << 48));
		unsigned __int128 m = (unsigned __int128)x * n;
		uint64_t l = (uint64_t)m;
		if (l >= n || l >= (-n) % n)
			return (uint64_t)(m >> 64);
	}
}

#endif
