/*
 * sample.h - one sample, from source file to output bytes.
 *
 * The prefix result comes from the cache when it can (a hit reads nothing
 * from the source), else the source is read, digested, decoded and the
 * result stored.  The suffix (random ops, output conversion) always runs.
 * Thread safe: any number of workers make samples of one job at once.
 */
#ifndef FEEDFS_SAMPLE_H
#define FEEDFS_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/job.h"

struct cache;

/*
 * Output bytes of sample id for epoch into dst: sample_bytes of the job's
 * dtype and layout, or with raw the uint8 HWC image (raw_bytes) before
 * that conversion (what GPU staging sends the device).  c may be NULL (no
 * cache).  On a read or decode error returns -EIO and says which file and
 * why in err; dst is then undefined.
 */
int sample_make(struct job *j, struct cache *c, uint32_t epoch, uint32_t id,
    bool raw, void *dst, char *err, size_t errlen);

/*
 * The sample that fills a slot whose planned position in the epoch order is
 * pos: the planned one, or with on_error = substitute the next good one of
 * the order.  order is the epoch's order (plan_permutation).  *id_out is
 * the sample used.  Failures are logged (once per sample with substitute)
 * when log is set.
 */
int sample_make_slot(struct job *j, struct cache *c, uint32_t epoch,
    const uint32_t *order, uint64_t pos, bool raw, void *dst,
    uint32_t *id_out, bool log, char *err, size_t errlen);

#endif
