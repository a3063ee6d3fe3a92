/*
 * mix.h - the model (core/): mixtures: weights, their text, and the epoch
 * order of a job that draws from several sources.  Pure functions;
 * reentrant.
 *
 * Weights are decimals with at most six fractional digits (more are
 * rounded half up), from 0 to 1000000, kept exactly as integers in
 * millionths (MIX_ONE is 1.0), so that every count computed from them is
 * the same on every machine.  Their text is "NAME:W" pairs separated by
 * blanks or commas ("web:0.7 curated:0.3"); a source not named has weight
 * 0; the sum must be positive.
 *
 * The epoch order (mix_order) of N positions is cut into batches of B
 * (the world-1 batches); batch k of length L takes from source s the
 * largest-remainder share of w_s * L / sum(w) (ties go to the earlier
 * source).  Each source draws from its own permutation of its samples,
 * seeded by (seed, epoch, s) (the identity without shuffle), in order and
 * without replacement, starting over from that permutation's beginning when
 * it is exhausted.  Within a batch the sources' draws are interleaved by
 * a shuffle keyed by (seed, epoch, k) (without shuffle: source by source,
 * in source order).  Global sample ids: source s's sample i is start_s + i,
 * start_s being the sum of the sizes of the sources before it.
 */
#ifndef FEEDFS_MIX_H
#define FEEDFS_MIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/plan.h"

#define MIX_ONE 1000000ULL
#define MIX_MAX_WEIGHT (1000000ULL * MIX_ONE)
#define MIX_MAX_SOURCES 64
#define MIX_NAME_MAX 128 /* CFG_MAX_NAME */

struct mix_pair {
	char name[MIX_NAME_MAX + 1];
	uint64_t w; /* millionths */
};

/*
 * Split text into its pairs: *pairs (malloc'd, the caller frees) and *n.
 * -EINVAL with msg for a malformed pair, a bad or negative weight, a
 * duplicate name, no pair at all or more than MIX_MAX_SOURCES; -ENOMEM.
 */
int mix_split(const char *text, struct mix_pair **pairs, size_t *n, char *msg,
    size_t len);

/*
 * The weights of text over the sources called names[0..n-1] into w[n]
 * (unnamed: 0).  -EINVAL with msg as mix_split, and for an unknown source
 * or a zero sum; w is set on success only.
 */
int mix_weights(const char *text, const char *const *names, size_t n,
    uint64_t *w, char *msg, size_t len);

/* "NAME:W NAME:W\n" of every source (W shortest exact decimal) into buf;
 * returns snprintf's count. */
int mix_format(const char *const *names, const uint64_t *w, size_t n, char *buf,
    size_t len);

/* The largest-remainder counts of L positions by weights w[n] (sum > 0). */
void mix_counts(const uint64_t *w, size_t n, uint32_t L, uint32_t *count);

/*
 * The epoch order: ids[pos] for pos < p->n (N), of sources of sizes
 * size[n] by weights w[n], batches of p->batch_size.  -ENOMEM.
 */
int mix_order(const struct plan *p, uint32_t epoch, const size_t *size,
    const uint64_t *w, size_t n, uint32_t *ids);

#endif
