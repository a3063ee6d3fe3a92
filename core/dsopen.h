/*
 * dsopen.h - the model (core/): a dataset as a config section names it.
 * It opens the dataset layer's index (dataset/dataset.h) with what the
 * config adds over it: a class list (classes = FILE) and the shard index
 * kept under cache_dir.
 */
#ifndef FEEDFS_DSOPEN_H
#define FEEDFS_DSOPEN_H

#include <stddef.h>
#include <stdint.h>

#include "dataset/dataset.h"

struct cfg_dataset;
/*
 * The dataset of a config section: root (+ manifest), or shards whose
 * index is kept in the directory index_fd (-1: not kept; ds_index_open).
 */
int ds_open_cfg(const struct cfg_dataset *d, int index_fd,
    ds_progress_fn progress, void *arg, struct dataset **out, char *err,
    size_t errlen);
/*
 * The same, with what the caller adds to the index pass of remote shards
 * (hooks: NULL for none; dataset.h's struct ds_remote_hooks).
 */
int ds_open_cfg_with(const struct cfg_dataset *d, int index_fd,
    const struct ds_remote_hooks *hooks, ds_progress_fn progress, void *arg,
    struct dataset **out, char *err, size_t errlen);

/* ---- remote shards' indexes in the cluster tier (ds_tier.c) ---- */

/* The tier's payload of an index: rows of this many bytes, at most
 * this many rows (the value envelope's bound on a side). */
#define DS_TIER_ROW 4096u
#define DS_TIER_ROWS_MAX 65535u

struct cluster;
struct cache_val;
/*
 * Hooks (h's index_get, index_put and tier) that have remote shards'
 * indexes from the cluster tier cl and keep them there, sealed and
 * checked as ds_tier.c says.  Nothing for cl NULL.
 */
void ds_tier_hooks(struct cluster *cl, struct ds_remote_hooks *h);
/* The tier key of the index of shard name at version. */
void ds_tier_key(const char *name, const char *version, uint8_t key[32]);
/*
 * An encoded index (d, len) as the tier's value *v (v->data malloc'd:
 * the caller frees it): 0, -EFBIG, -ENOMEM.  ds_tier_unwrap: the index
 * in a value of the tier (*d points into v->data): 0, or -EBADMSG for
 * one that is not of that form (fuzz/fuzz_tier_index.c feeds it).
 */
int ds_tier_wrap(const uint8_t *d, size_t len, struct cache_val *v);
int ds_tier_unwrap(const struct cache_val *v, const uint8_t **d, size_t *len);
/*
 * The shard index of a [mount] section: m->cache_dir/shard-index, made if
 * missing and opened through the cache's own checks of cache_dir
 * (cache_index_open), only where the cache is on (cache_size > 0) and
 * some dataset of c has shards.  The fd (the caller closes it), or -1:
 * the index is off, and *why says why where it was refused (else "").
 * Nothing is written under a cache_dir before it passed those checks.
 */
struct cfg;
int ds_index_open(const struct cfg *c, char *why, size_t whylen);

#endif
