/*
 * dsopen.h - the model (core/): a dataset as a config section names it.
 * It opens the dataset layer's index (dataset/dataset.h) with what the
 * config adds over it: a class list (classes = FILE) and the shard index
 * kept under cache_dir.
 */
#ifndef FEEDFS_DSOPEN_H
#define FEEDFS_DSOPEN_H

#include <stddef.h>

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
