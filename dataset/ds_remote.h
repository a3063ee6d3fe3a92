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

/* The largest member whose digest a stream takes (and whose bytes it
 * hands to ds_remote_hooks.member): larger ones are read by range. */
#define DS_DIGEST_MAX (16u << 20)

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
 * at a time answer (the rest are asked by the pass).  0 or -errno with
 * err (a URL that cannot be requested).
 */
int ds_remote_prepare(struct remote_ctx *c, char *const *specs, size_t n,
    struct remote_obj *objs, char *err, size_t errlen);

/*
 * What ds_tar.c makes of shard i's index ix, or of its failure (ix NULL,
 * why says what failed): its samples.  Called under the pass's lock, one
 * shard at a time.  0 or -ENOMEM.
 */
typedef int (*ds_shard_add_fn)(
    void *arg, size_t i, const struct tar_index *ix, const char *why);

/*
 * The index pass over ds's remote shards (ds->remote, ds->robjs and
 * ds->shards[0..nshards) prepared): for each shard its size and version
 * (probed where ds_remote_prepare's probes did not answer), the stat its
 * kept index is keyed by (ds->shards[i].st), and its index, as
 * dataset.h's struct ds_remote_hooks says (kept, tier, else a stream,
 * hooks->streams of them at once), handed to add.  ds->pass says how it
 * went.  0, or -errno with err: a probe refused for good (a 404, a 403,
 * no version, no Range), every shard failed, -EAGAIN (hooks->defer and a
 * shard to stream), -ENOMEM.
 */
int ds_remote_pass(struct dataset *ds, const struct ds_remote_hooks *hooks,
    int index_fd, ds_shard_add_fn add, void *arg, char *err, size_t errlen);

#endif
