/*
 * names.h - the canonical names of the mount's directories and files,
 * parsed without FUSE (so that fuzz/ and the tests can drive the parser).
 *
 * Only the canonical spelling resolves: numbers zero-padded to their width
 * (4 digits for epochs, 6 for batches, none for ranks), no sign, no extra
 * leading zeros, no trailing text.  Every function is pure and reentrant;
 * on failure the out-parameters hold nothing of use.
 */
#ifndef FEEDFS_NAMES_H
#define FEEDFS_NAMES_H

#include <stdbool.h>
#include <stdint.h>

#include "core/feed.h"

/* "rank-R-of-W" with 1 <= W <= FEED_MAX_WORLD and R < W. */
bool fs_parse_rank(const char *name, uint32_t *rank, uint32_t *world);
/* "epoch-NNNN" (any value that fits in 32 bits; the caller checks the job's
 * epoch count). */
bool fs_parse_epoch(const char *name, uint32_t *epoch);
/* "batch-NNNNNN" + ".npy", ".labels.npy", ".ids.npy" or ".cuda". */
bool fs_parse_batch(const char *name, uint64_t *batch, enum batch_kind *kind);

#endif
