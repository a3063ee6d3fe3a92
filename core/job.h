/*
 * job.h - the model (core/): a job as the engine (engine/) runs it: its
 * config, dataset, pipeline, the geometry of its batch files and its
 * counters.  For the engine, the tools and the tests; fs/ sees jobs
 * through engine/feed.h and engine/ns.h.  Made in job.c (setup) and
 * job_mix.c (a mixture's sources); job_batch.c lays out its batch files,
 * job_stats.c keeps its counters.
 */
#ifndef FEEDFS_JOB_H
#define FEEDFS_JOB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/batch_kind.h"
#include "core/config.h"
#include "dataset/dataset.h"
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
	/* of decode_errors: the source did not answer (-EHOSTDOWN) */
	atomic_uint_fast64_t unavailable;
	atomic_uint_fast64_t prefetched; /* sources read ahead (sched.c) */
	atomic_uint_fast64_t batches, batch_errors;
	atomic_uint_fast64_t busy_ns;
	atomic_uint_fast64_t put_ns; /* workers' CPU in local cache puts and
					cache_format's encode (and a jpeg's
					decode of what a miss serves) */
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

/*
 * The time at least one reader waited for a batch (pin.c's wait_ready):
 * the readers waiting now, since when (CLOCK_MONOTONIC, ns), and the spans
 * that ended.  Under feed.lock.  Unlike read_wait_ns, which sums every
 * reader's waits, it grows at most as fast as the clock.
 */
struct starved {
	unsigned waiting;
	uint64_t since_ns, ns;
};

/* Its seconds until now (ns): the ended spans and the one going on. */
static inline uint64_t
starved_ns(const struct starved *s, uint64_t now)
{
	return s->ns + (s->waiting ? now - s->since_ns : 0);
}

struct cluster;

/*
 * The samples that failed, the latest failure last: at most
 * JOB_ERRORS_MAX of them (each once, with its latest reason, at most 512
 * bytes), so a job holds at most about 600 KB of them; the oldest go
 * first.  Served as JOB/errors.tsv.  Under its lock.
 */
#define JOB_ERRORS_MAX 1000
struct job_error {
	uint32_t id;
	char *why;
};
struct job_errlog {
	pthread_mutex_t lock;
	struct job_error v[JOB_ERRORS_MAX]; /* v[(start + i) % MAX], i < n */
	size_t start, n;
	uint64_t total; /* samples ever noted (listed or gone) */
};

/* A source of a job: its dataset and the range of global ids it has. */
struct job_source {
	const struct dataset *ds;
	uint32_t start;		      /* its sample i is global id start + i */
	atomic_uint_fast64_t samples; /* made (feedfs_source_samples_total) */
};

/* A step of a mixture's weights: from epoch on (core/mix.h units). */
struct job_step {
	uint32_t epoch;
	uint64_t *w; /* one per source */
};

/*
 * The geometry of the image files of an epoch: the pipeline that makes
 * them and its sizes.  A job without a resolution schedule has one for
 * every epoch; with one, one per size the schedule takes.
 */
struct job_geo {
	const struct xf_pipeline *pl;
	size_t sample_bytes; /* bytes of one output sample */
	size_t raw_bytes;    /* of one uint8 HWC sample */
	size_t slot_bytes;   /* raw_bytes with gpu = on, else sample_bytes */
	uint64_t shape[4];   /* of one batch of B: B, then H W C or C H W */
};

struct job {
	const struct cfg_job *cfg;
	/*
	 * A view of a job with views = N (cfg_job.views): view 0 is the job
	 * itself, views 1..N-1 are jobs of their own in the engine (same
	 * dataset, shuffle and batches, their own pipeline tail and random
	 * draws), served as batch-NNNNNN.viewV.npy of the job.  name is
	 * "JOB" for view 0 and "JOB.viewV" for the others (.feedfs/stats).
	 */
	uint32_t view;
	uint32_t view_main; /* view >= 1, in a mount: view 0's index in
			       feed.jobs, whose epoch orders it shares */
	uint32_t view_base; /* view 0 of a job with views, in a mount: the
			       index in feed.jobs of view 1 (views 1..N-1
			       follow it) */
	char *name;
	uint64_t aug_seed; /* cfg_job_aug_seed */
	/* The geometry of each epoch (job_geo): geo0 for the pipeline as
	 * written, geos[ngeos] (pipelines owned) with a schedule. */
	struct job_geo geo0;
	struct job_geo *geos;
	size_t ngeos;
	/*
	 * The samples by global id: the dataset, or for a mixture the
	 * concatenation of its sources (owned: merged), each sample's path
	 * relative to its source's root, its label in the union class list:
	 * the classes of the first source in their order, then each later
	 * source's classes not seen before, in its order.  class_src[c] has
	 * bit s set when source s has class c.
	 */
	const struct dataset *ds;
	struct dataset *merged;
	uint64_t *class_src;
	struct job_source *src;
	size_t nsrc;		/* 1 for a job over one dataset */
	const char **src_names; /* nsrc dataset names */
	/*
	 * A mixture's weights by epoch: steps sorted by epoch, the last one
	 * at or before an epoch in force for it.  Epochs below `opened` are
	 * fixed: a change of weights (job_set_weights) applies from opened
	 * on.  In a mount these three are under feed.lock.
	 */
	struct job_step *steps;
	size_t nsteps;
	uint32_t opened;
	const struct xf_pipeline *pl; /* cfg's, parsed by cfg_load */
	struct plan plan;
	char *prefix;         /* canonical prefix text, "" when nothing cached */
	char *cache_text;     /* prefix and cache_format's suffix: the text of
				 the local cache's index and per-prefix stats */
	char *key_text;       /* what a cached value depends on, hashed into
				 its key (the local cache's and the cluster
				 tier's: both hold the job's cache_format):
				 cache_text, max_pixels and the decoder's
				 version */
	/* geo0's sizes and shape (the pipeline as written); slot_bytes is
	 * the largest of any epoch's (a relaxed view's sample buffers).
	 * What depends on the epoch goes through job_geo. */
	size_t sample_bytes;  /* bytes of one output sample */
	size_t raw_bytes;     /* of one uint8 HWC sample (gpu = on: the
				 device converts) */
	size_t slot_bytes;    /* what a worker makes per sample: raw_bytes
				 with gpu = on, else sample_bytes */
	/* A batch op (pipeline's last op): its batches are mixed when
	 * complete (job_mix_batch) and .labels.npy is float32 (B, nclasses)
	 * soft labels instead of int64 (B,).  nclasses: the dataset's. */
	bool soft;
	uint32_t nclasses;
	/* Multi-label (the dataset's multi): .labels.npy is float32 (B,
	 * nclasses) multi-hot rows (mixed by a batch op when soft). */
	bool multi;
	/* Captions (the dataset's text): each batch has a .text.jsonl. */
	bool text;
	uint32_t *mlabels; /* a mixture's multi-label lists, remapped: the
			      merged samples' labels point into it */
	const char *descr;    /* npy dtype of the images */
	uint64_t shape[4];    /* of one batch of B: B, then H W C or C H W */
	atomic_uchar *logged; /* one bit per sample: its failure was logged */
	struct job_errlog *errlog; /* JOB/errors.tsv */
	atomic_bool source_logged; /* a failure of the dataset was logged */
	/* When a source not answering was last said (CLOCK_MONOTONIC, s):
	 * at most once a minute, however many samples it fails. */
	atomic_uint_fast64_t unavail_said;
	/* Whether the last sample made read its source (a miss, or no cache):
	 * the scheduler then prefetches the files of the slots ahead
	 * (sample_prefetch); in a warm epoch they are not read at all. */
	atomic_bool reads_source;
	struct cluster *cluster; /* the cluster tier, or NULL (not owned;
				    set by feed_start and feedfs-fill) */
	struct job_stats st;
	struct starved starved; /* its readers' (under feed.lock) */
};

/* The files of one batch: their sizes (header included) and headers. */
struct batch_geom {
	uint32_t len;              /* samples */
	uint64_t size[BK_COUNT];   /* bytes of each file (0 for BK_CUDA: a
				      descriptor the engine makes) */
	uint32_t hdr[BK_COUNT];    /* header bytes (0 for BK_CUDA) */
	uint64_t raw_size;         /* len uint8 HWC samples (a .cuda batch) */
};

/*
 * Build a job of config c (errors are "FILE:LINE: message").  ds must
 * outlive it.  With gpu = on, whether a device is here is the engine's
 * question (stage_probe, after this).
 */
int job_init(struct job *j, const struct cfg *c, const struct cfg_job *cj,
    const struct dataset *ds, char *err, size_t errlen);
void job_fini(struct job *j);
/* job_init of view `view` of cj (0: the job itself; < cj->views). */
int job_init_view(struct job *j, const struct cfg *c, const struct cfg_job *cj,
    const struct dataset *ds, uint32_t view, char *err, size_t errlen);
/*
 * A job's prefix alone, before its dataset is open (the one pass of
 * engine/prefill.c): cfg, pl, prefix, cache_text and key_text, what
 * sample_fill_bytes needs, and nothing else (no dataset, plan, or
 * counters to show).  0 or -ENOMEM; job_fini frees it.
 */
int job_init_prefix(struct job *j, const struct cfg_job *cj);
/* The geometry of epoch's image files (its resolution, with a schedule). */
const struct job_geo *job_geo(const struct job *j, uint32_t epoch);
/* The key of the random stream of sample id in epoch (of j's view). */
uint64_t job_sample_key(const struct job *j, uint32_t epoch, uint32_t id);
/*
 * The texts of job cj's cache entries without building the job (for
 * feedfs-cache): *index, its prefix and cache_format (the text the index
 * shows), and *key, what its keys hash (job.key_text).  malloc'd.
 */
int job_cache_texts(const struct cfg_job *cj, char **index, char **key);
/*
 * job_init for any job of c: ds holds one opened dataset per c->datasets
 * (NULL for those no job uses); a mixture takes its sources from it.
 */
int job_init_all(struct job *j, const struct cfg *c, const struct cfg_job *cj,
    const struct dataset *const *ds, char *err, size_t errlen);

/* Whether j is a mixture (mixture =). */
bool job_is_mixture(const struct job *j);
/* The source of global id, and the id within it (*local). */
struct job_source *job_source_of(
    const struct job *j, uint32_t id, uint32_t *local);
/* The weights in force for epoch (a mixture; nsrc entries). */
const uint64_t *job_weights(const struct job *j, uint32_t epoch);
/*
 * Weights w (nsrc, copied) from epoch `from` on, up to the next step of
 * the schedule after it (a step at `from` itself is replaced).  -ENOMEM.
 */
int job_set_weights(struct job *j, uint32_t from, const uint64_t *w);
/*
 * The epoch's order into ids (plan.n entries): plan_permutation, or a
 * mixture's order by the weights of job_weights(epoch).  -ENOMEM.
 */
int job_order(const struct job *j, uint32_t epoch, uint32_t *ids);

/* The geometry of batch b of epoch of a rank view of world ranks. */
void job_batch_geom(const struct job *j, uint32_t epoch, uint32_t world,
    uint64_t b, struct batch_geom *g);
/* The .npy header of a file of kind of len samples of epoch; returns its
 * length (buf holds NPY_MAX_HEADER bytes). */
size_t job_npy_header(const struct job *j, uint32_t epoch, uint32_t len,
    enum batch_kind kind, char *buf);

/*
 * Batch ops (xf.h): the draw of batch b of rank view rank of world in
 * epoch (its stream: RNG_DOMAIN_BATCHMIX, the job's seed, epoch, and
 * (world, rank, b)); the soft labels of len samples ids under draw m into
 * out (len x nclasses float32), -ENOMEM; and a complete batch mixed in
 * place: images px (len samples of sample_bytes; NULL: mixed as they are
 * read, by engine/tier.c's tier_read under the same draw), labels from
 * ids into labels, tmp one sample.  Only for a job with soft set, save that
 * job_mix_batch of a multi-label job without a batch op makes its
 * multi-hot rows alone (job_float_labels: what a complete batch needs).
 */
void job_mix_draw(const struct job *j, uint32_t epoch, uint32_t rank,
    uint32_t world, uint64_t b, struct xf_mix *m);
int job_soft_labels(const struct job *j, const struct xf_mix *m,
    const int64_t *ids, uint32_t len, float *out);
int job_mix_batch(const struct job *j, uint32_t epoch, uint32_t rank,
    uint32_t world, uint64_t b, uint32_t len, void *px, const int64_t *ids,
    float *labels, void *tmp);

/* Whether j's .labels.npy is float32 (B, nclasses) rows (a batch op's soft
 * labels, multi-hot rows) rather than int64 (B,). */
static inline bool
job_float_labels(const struct job *j)
{
	return j->soft || j->multi;
}

/*
 * The label rows of len samples ids into out (len x nclasses float32):
 * one-hot or multi-hot, mixed under m as a batch op's soft labels (m
 * NULL: as they are).  An id out of range (a failed slot) gives a row
 * of zeros.  -ENOMEM.  Only for a job with job_float_labels.
 */
int job_label_rows(const struct job *j, const struct xf_mix *m,
    const int64_t *ids, uint32_t len, float *out);

/*
 * A batch's .text.jsonl (core/job_text.c): the captions of its len
 * samples ids (in its order), one JSON string a line (util/jsonstr.h).
 * job_batch_text_len says its bytes; job_batch_text writes them at out
 * (that many).  A sample without one (an id out of range, a bad sample of
 * a batch that fails) has "".  The one place that makes the file: the
 * mount's plan and batches call it, and so can a batch worker.
 */
uint64_t job_batch_text_len(const struct job *j, const int64_t *ids,
    uint32_t len);
void job_batch_text(
    const struct job *j, const int64_t *ids, uint32_t len, char *out);

/* Count one finished sample in the per-second window (approximate). */
void job_rate_add(struct job_stats *st);
/* Samples per second over the last complete `secs` (< JOB_RATE_SECS),
 * from the first of them that made a sample on; job_rate_at: at second
 * sec of CLOCK_MONOTONIC (the seconds job_rate_add counts in), for tests. */
double job_rate(struct job_stats *st, unsigned secs);
double job_rate_at(struct job_stats *st, unsigned secs, uint64_t sec);

/*
 * A sample of j failed (why: the log's message, naming its file): listed
 * in JOB/errors.tsv, once per sample, with its latest reason (a sample
 * listed already moves to the end).  Thread safe.
 */
void job_note_error(struct job *j, uint32_t id, const char *why);
/*
 * JOB/errors.tsv: "# id<TAB>path<TAB>reason" then one line per failed
 * sample, oldest first (path as in samples.tsv; fields escaped as there).
 * malloc'd; NULL when out of memory.
 */
char *job_errors_tsv(struct job *j, size_t *len);

#endif
