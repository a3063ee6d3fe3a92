/*
 * sample.h - one sample, from source file to output bytes.
 *
 * The prefix result comes from the cache when it can (a hit reads nothing
 * from the source), else the source is read, digested, decoded and the
 * result stored.  The suffix (random ops, output conversion) always runs.
 */
#ifndef FEEDFS_SAMPLE_H
#define FEEDFS_SAMPLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/dataset.h"
#include "core/plan.h"
#include "transforms/xf.h"

struct cache;

#define JOB_RATE_SECS 16

/* Per-job counters, updated atomically by every worker. */
struct job_stats {
	atomic_uint_fast64_t cache_hits, cache_misses;
	atomic_uint_fast64_t samples, decode_errors, substituted;
	atomic_uint_fast64_t batches, batch_errors;
	atomic_uint_fast64_t busy_ns;
	atomic_uint_fast64_t read_wait_ns, read_waits; /* readers waiting */
	/* Samples finished per second, the last JOB_RATE_SECS seconds. */
	atomic_uint_fast64_t rate_sec[JOB_RATE_SECS], rate_n[JOB_RATE_SECS];
};

/* Count one finished sample in the per-second window (approximate). */
void job_rate_add(struct job_stats *st);
/* Samples per second over the last complete `secs` (< JOB_RATE_SECS). */
double job_rate(struct job_stats *st, unsigned secs);

/* A job as the engine runs it: its config, dataset and parsed pipeline. */
struct job {
	const struct cfg_job *cfg;
	const struct dataset *ds;
	struct xf_pipeline *pl;
	struct plan plan;
	char *prefix;        /* canonical prefix text, "" when nothing cached */
	size_t sample_bytes; /* bytes of one output sample */
	size_t raw_bytes;    /* of one uint8 HWC sample (gpu = on: the
				device converts) */
	const char *descr;   /* npy dtype of the images */
	uint64_t shape[4];   /* of one batch of B: B, then H W C or C H W */
	atomic_uchar *logged; /* one bit per sample: its failure was logged */
	struct job_stats st;
};

/* The files of a batch: BK_CUDA (its .cuda descriptor) with gpu = on. */
enum batch_kind { BK_IMAGES, BK_LABELS, BK_IDS, BK_CUDA };

/*
 * Build a job (parses its pipeline; errors are "FILE:LINE: message").
 * ds must outlive it.
 */
int job_init(struct job *j, const struct cfg *c, const struct cfg_job *cj,
    const struct dataset *ds, char *err, size_t errlen);
void job_fini(struct job *j);

/*
 * Output bytes of sample id for epoch into dst (sample_bytes).  c may be
 * NULL (no cache).  On a read or decode error returns -EIO and says which
 * file and why in err; dst is then undefined.
 */
int sample_make(struct job *j, struct cache *c, uint32_t epoch, uint32_t id,
    void *dst, char *err, size_t errlen);

/*
 * The whole batch b of rank/world for epoch, in-process and sequentially:
 * the reference the mount's bytes are compared with.  images gets
 * len * sample_bytes bytes, labels and ids len entries; on_error is
 * followed as the mount follows it.  Returns the count, or -EIO.
 */
int batch_make(struct job *j, struct cache *c, uint32_t epoch, uint32_t rank,
    uint32_t world, uint64_t b, void *images, int64_t *labels, int64_t *ids,
    char *err, size_t errlen);

/*
 * The sample that fills a slot whose planned position in the epoch order is
 * pos: the planned one, or with on_error = substitute the next good one of
 * the order.  perm is the epoch's order (plan_permutation).  *id_out is the
 * sample used.  Failures are logged (once per sample with substitute) when
 * log is set.
 */
int sample_make_slot(struct job *j, struct cache *c, uint32_t epoch,
    const uint32_t *perm, uint64_t pos, void *dst, uint32_t *id_out, bool log,
    char *err, size_t errlen);

/*
 * sample_make_slot, but the output is the uint8 HWC image (raw_bytes)
 * before the dtype/layout conversion: what GPU staging sends the device.
 */
int sample_make_slot_raw(struct job *j, struct cache *c, uint32_t epoch,
    const uint32_t *perm, uint64_t pos, void *dst, uint32_t *id_out, bool log,
    char *err, size_t errlen);

/* The .npy header of a batch of len samples of kind; returns its length. */
size_t job_npy_header(const struct job *j, uint32_t len, enum batch_kind kind,
    char *buf);
/* Bytes of the data (after the header) of such a file. */
uint64_t job_npy_data_bytes(const struct job *j, uint32_t len,
    enum batch_kind kind);

#endif
