/*
 * check.h - `feedfs --check CONFIG|DIR`: a dataset checked before the
 * first epoch (issue 26).  Layer: core/ (the model), over the datasets
 * and transforms/, whose header probes (transforms/probe.h) read every
 * format; fs/main.c calls it.  The parts: core/check_int.h.
 *
 * For every dataset of the config: every sample's header is read (a
 * bounded number of bytes, through the same safe opens as the mount),
 * and the report says how many samples each class has, which files are
 * unreadable, unsupported, truncated or corrupt and why, which classes
 * are empty, and which files in class directories the scan does not take
 * (a .bmp, a .tif).  For every job: the cache its prefix needs in each
 * cache_format (raw exact from the headers; lossless and jpeg(Q)
 * estimated by encoding an even sample of the images), against its
 * cache_size.  With full, every image is decoded as a worker decodes it
 * (exact, and as slow as a cold epoch's decode).
 *
 * Nothing is written: no cache, no shard index (shards are indexed from
 * their headers again).  Not thread safe; one run at a time.
 */
#ifndef FEEDFS_CHECK_H
#define FEEDFS_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct cfg;

/*
 * Check c's datasets and jobs, writing the report to out.  0: no
 * problem found; 1: problems (listed); -errno with err when a dataset
 * cannot be opened at all (the mount would refuse it too).
 */
int check_run(
    const struct cfg *c, bool full, FILE *out, char *err, size_t errlen);

/*
 * The header check of one image: size bytes at base in fd, read with
 * pread, never outside them.  0 (ok: *w, *h set) or 1 unreadable,
 * 2 unsupported, 3 truncated, 4 corrupt, with why.  For fuzz/fuzz_check.c.
 */
int check_header(int fd, uint64_t base, uint64_t size, uint64_t max_pixels,
    uint32_t *w, uint32_t *h, char *why, size_t len);

#endif
