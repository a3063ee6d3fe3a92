/*
 * ds_int.h - what the files of the dataset index share (dataset.c: ds_open,
 * ds_free and the manifest; ds_scan.c: the ImageFolder scan; ds_safeopen.c:
 * ds_sample_open and the open through no symbolic link).  Not for use
 * outside core/dataset.c and core/ds_*.c.
 */
#ifndef FEEDFS_DS_INT_H
#define FEEDFS_DS_INT_H

#include <stddef.h>

#include "core/dataset.h"

/* The progress callback runs every this many samples found. */
#define DS_PROGRESS_EVERY 1000

/* Free n samples at v, their paths, and v. */
void ds_free_samples(struct ds_sample *v, size_t n);

/*
 * The ImageFolder scan of ds->root (realpath of root, which is named as
 * given in messages): sets ds->classes and ds->nclasses (ds_free frees
 * them, on error too), and on success ds->samples and ds->n, sorted by
 * path.  No samples at all is -ENOENT.  0 or -errno with a message in err.
 */
int ds_scan(struct dataset *ds, const char *root, ds_progress_fn progress,
    void *arg, char *err, size_t errlen);

/*
 * openat(dirfd, rel, flags) following no symbolic link and never leaving
 * dirfd: openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS where the kernel
 * has it (and FEEDFS_DS_NO_OPENAT2 is not set: the tests try both), else
 * component by component with O_NOFOLLOW.  A link anywhere gives ELOOP
 * (or ENOTDIR for one in place of a directory), ".." gives EXDEV.
 * Returns the descriptor, or -1 with errno set.  Thread-safe.
 */
int ds_open_beneath(int dirfd, const char *rel, int flags);

#endif
