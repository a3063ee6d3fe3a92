/*
 * ds_remote.h - layer: dataset/ (the datasets), remote tar shards: what
 * ds_tar.c calls of dataset/ds_remote.c.  Not for use outside
 * dataset/ds_*.c and the tests.
 */
#ifndef FEEDFS_DS_REMOTE_H
#define FEEDFS_DS_REMOTE_H

#include <sys/stat.h>

#include <stddef.h>

#include "dataset/ds_int.h"
#include "dataset/remote/remote.h"

struct remote_ctx;
struct remote_obj;

/*
 * The context of a dataset whose shards are the n URLs (credentials are
 * loaded where one is s3://).  Initializes libcurl on first call: before
 * any thread.  0 or -errno with err.
 */
int ds_remote_ctx(const struct remote_opts *o, const char *const *urls,
    size_t n, struct remote_ctx **out, char *err, size_t errlen);

/*
 * The n objects of the shard URLs specs (their request URLs and display
 * names) into objs, and their sizes and versions, where probes made many
 * at a time answer (the rest are asked by ds_remote_shard).  0 or -errno
 * with err (a URL that cannot be requested).
 */
int ds_remote_prepare(struct remote_ctx *c, char *const *specs, size_t n,
    struct remote_obj *objs, char *err, size_t errlen);

/*
 * The shard o (prepared): its size and version (remote_probe, unless
 * known already), the stat its kept index is keyed by into *st, and its
 * index (kept in index_fd, else walked from one stream of its bytes).  0
 * or -errno with err.
 */
int ds_remote_shard(struct remote_ctx *c, struct remote_obj *o, int index_fd,
    struct stat *st, struct tar_index *ix, char *err, size_t errlen);

#endif
