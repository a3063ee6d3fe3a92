/*
 * sample_int.h - the model (core/): what the files of one sample share,
 * private to them.  Calls run one way down: sample.c (the whole sample, a
 * slot), sample_cache.c (the prefix through the local cache and the
 * cluster tier), sample_source.c (the source file).
 */
#ifndef FEEDFS_SAMPLE_INT_H
#define FEEDFS_SAMPLE_INT_H

#include <sys/stat.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/job.h"

struct cache;

/*
 * Sample id's file (a global id of j: its source's), read whole into a
 * buffer from xf_alloc (freed with xf_free); *st gets its fstat.  The open
 * follows no link and refuses anything but a regular file
 * (ds_sample_open).  -EIO for a broken or missing sample, -EAGAIN for a
 * transient failure, -ENODEV when the dataset's root itself is gone,
 * -EHOSTDOWN when a remote shard's server did not answer.  With
 * steady: whether a digest memo of what was read may be made
 * (cache_memo_trusted: the fstat after the read agrees with *st, and the
 * file's times are older than the clock before the open by more than
 * their granularity).
 */
int sample_read(const struct job *j, uint32_t gid, uint8_t **out, size_t *len,
    struct stat *st, bool *steady, char *err, size_t errlen);
/*
 * What the digest memo of sample id is keyed by, with its name: the
 * file's stat, or for a tar member its shard's (ds_sample_stat).  The
 * name "ROOT/SHARD:MEMBER" tells members apart; a file of that name is
 * another inode, so never a stale hit.
 */
int sample_stat(const struct job *j, uint32_t gid, struct stat *st);
/* The path of sample id in path (PATH_MAX); -EIO and err if too long. */
int sample_path(const struct job *j, uint32_t id, char *path, size_t len,
    char *err, size_t errlen);
/*
 * The prefix image of sample id (path: sample_path's): from the local
 * cache c (may be NULL) or the cluster tier when one holds it, else
 * decoded (and stored in both).  Errors name the file.
 */
int sample_prefix(struct job *j, struct cache *c, uint32_t epoch, uint32_t id,
    const char *path, struct xf_image *img, char *err, size_t errlen);

#endif
