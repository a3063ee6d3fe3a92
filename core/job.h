/*
 * job.h - a job as the engine runs it: its config, dataset, pipeline, the
 * geometry of its batch files and its counters.  Private to core/ (fs/
 * sees jobs through feed.h and ns.h); the tests use it directly.
 */
#ifndef FEEDFS_JOB_H
#define FEEDFS_JOB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/dataset.h"
#include "core/feed.h"
#include "core/plan.h"
#include "transforms/xf.h"

#define JOB_RATE_SECS 16
/* Epochs whose cache hits and misses are kept (.feedfs/stats). */
#define JOB_EPOCH_SLOTS 4

/* Per-job counters, updated atomically by every worker. */
struct job_stats {
	atomic_uint_fast64_t cache_hits, cache_misses; /* the local cache */
	/* The cluster tier: local misses it served, and those it lacked. */
	atomic_uint_fast64_t cluster_hits, cluster_misses;
	atomic_uint_fast64_t samples, decode_errors, substituted;
	atomic_uint_fast64_t batches, batch_errors;
	atomic_uint_fast64_t busy_ns;
	atomic_uint_fast64_t read_wait_ns, read_waits; /* readers waiting */
	/* Samples finished per second, the last JOB_RATE_SECS seconds. */
	atomic_uint_fast64_t rate_sec[JOB_RATE_SECS], rate_n[JOB_RATE_SECS];
	/*
	 * The local cache's hits and misses of the last JOB_EPOCH_SLOTS
	 * epochs: slot epoch % JOB_EPOCH_SLOTS, taken over by a newer epoch
	 * (epoch1 = epoch + 1; 0: unused).  Approximate by a few samples
	 * when two epochs share a slot at the turn.
	 */
	struct {
		atomic_uint_fast64_t epoch1, hits, misses;
	} ep[JOB_EPOCH_SLOTS];
};

struct cluster;

struct job {
	const struct cfg_job *cfg;
	const struct dataset *ds;
	const struct xf_pipeline *pl; /* cfg's, parsed by cfg_load */
	struct plan plan;
	char *prefix;         /* canonical prefix text, "" when nothing cached */
	char *cache_text;     /* prefix and cache_format's suffix: the text of
				 the local cache's index and per-prefix stats */
	char *key_text;       /* what a cached value depends on, hashed into
				 its local key: cache_text, max_pixels and
				 the decoder's version */
	char *tier_text;      /* the same for the cluster tier, which keeps
				 raw pixels: without the format's suffix */
	size_t sample_bytes;  /* bytes of one output sample */
	size_t raw_bytes;     /* of one uint8 HWC sample (gpu = on: the
				 device converts) */
	size_t slot_bytes;    /* what a worker makes per sample: raw_bytes
				 with gpu = on, else sample_bytes */
	const char *descr;    /* npy dtype of the images */
	uint64_t shape[4];    /* of one batch of B: B, then H W C or C H W */
	atomic_uchar *logged; /* one bit per sample: its failure was logged */
	atomic_bool source_logged; /* a failure of the dataset was logged */
	struct cluster *cluster; /* the cluster tier, or NULL (not owned;
				    set by feed_start and feedfs-fill) */
	struct job_stats st;
};

/* The files of one batch: their sizes (header included) and headers. */
struct batch_geom {
	uint32_t len;              /* samples */
	uint64_t size[BK_COUNT];   /* bytes of each file */
	uint32_t hdr[BK_COUNT];    /* header bytes (0 for BK_CUDA) */
	uint64_t raw_size;         /* len uint8 HWC samples (a .cuda batch) */
};

/*
 * Build a job of config c (errors are "FILE:LINE: message").  ds must
 * outlive it.  With gpu = on, probes for a device (in a child process).
 */
int job_init(struct job *j, const struct cfg *c, const struct cfg_job *cj,
    const struct dataset *ds, char *err, size_t errlen);
void job_fini(struct job *j);

/* The geometry of batch b of a rank view of world ranks. */
void job_batch_geom(const struct job *j, uint32_t world, uint64_t b,
    struct batch_geom *g);
/* The .npy header of a file of kind of len samples; returns its length
 * (buf holds NPY_MAX_HEADER bytes). */
size_t job_npy_header(const struct job *j, uint32_t len, enum batch_kind kind,
    char *buf);

/* Count one finished sample in the per-second window (approximate). */
void job_rate_add(struct job_stats *st);
/* Samples per second over the last complete `secs` (< JOB_RATE_SECS). */
double job_rate(struct job_stats *st, unsigned secs);

#endif
