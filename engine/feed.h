/*
 * feed.h - the engine of a mount, as fs/ sees it: jobs by index, batch
 * files by key, and the generated text files.  Layer: the engine
 * (engine/), its interface: fs/ and tools/ include it.
 *
 * A batch is identified by (job, rank, world, epoch, batch).  Opening one of
 * its files (feed_open) makes the batch exist in memory and queues its
 * samples for the worker pool; it also queues the next `readahead` batches
 * of the same view, within the `memory` budget.  feed_read blocks until the
 * batch is complete.  Batches that no open file holds are released when
 * memory is needed, those read to their end first.  The structs behind it
 * are private to engine/ (engine/engine.h).
 *
 * Thread safety: every function may be called from any thread once
 * feed_start returned, except feed_free.
 */
#ifndef FEEDFS_FEED_H
#define FEEDFS_FEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/batch_kind.h"
#include "core/config.h"
#include "dataset/dataset.h"

#define FEED_MAX_WORLD 1024

struct feed;
struct feed_handle;
struct feed_pin; /* a read's hold on the bytes it returned */

struct feed_key {
	uint32_t job;
	uint32_t rank, world; /* world 1: the whole epoch */
	uint32_t epoch;
	uint64_t batch;
};

/*
 * The generated text files: fixed (README, info.json, samples.tsv), or
 * live, made at each open (.feedfs/stats, .feedfs/log, JOB/errors.tsv).
 */
enum feed_text { FT_README, FT_INFO, FT_SAMPLES, FT_STATS, FT_LOG, FT_ERRORS };
#define FEED_TEXT_LIVE(t) ((t) >= FT_STATS)

/*
 * Load the datasets and check the jobs of c (taken: freed by feed_free, or
 * here on failure), and make the text files.  Starts no thread.  Errors
 * are "FILE:LINE: message".
 */
int feed_new(struct cfg *c, ds_progress_fn progress, void *arg,
    struct feed **out, char *err, size_t errlen);
/*
 * The mount point (resolved), before feed_start: the cache names this
 * mount by it (feedfs-cache stats, and a remount's handover: cache.h).
 */
int feed_set_mountpoint(struct feed *f, const char *path);
/* Open the cache and start the workers (after any fork). */
int feed_start(struct feed *f);
/*
 * Make freed memory stay with the process (glibc's mallopt): call once in
 * main, before any thread.  See feed.c.
 */
void feed_keep_freed_memory(void);
/*
 * Dataset i of c for a program over the engine (feedfs-fill): opened as a
 * mount opens it, its remote shards' indexes from and into the cluster
 * tier cl (may be NULL) and many streamed at once (engine/prefill.c),
 * without the one pass's fill.  0, or -errno with err.
 */
struct cluster;
int feed_open_dataset(const struct cfg *c, size_t i, int index_fd,
    struct cluster *cl, struct dataset **out, char *err, size_t errlen);
void feed_free(struct feed *f);

/* The config's jobs: 0 .. feed_njobs - 1 (their views come after). */
size_t feed_njobs(const struct feed *f);
/*
 * Views (views = N): a job's count of them (1: none), and the job index
 * of its view v < N: job itself for view 0, for v >= 1 a job of the
 * engine past feed_njobs, whose batch files are the .viewV.npy files of
 * job's batches (their images only: labels and ids are view 0's).
 */
uint32_t feed_job_views(const struct feed *f, size_t job);
size_t feed_job_view(const struct feed *f, size_t job, uint32_t view);
/* Index of the job called name, or -1. */
int feed_find_job(const struct feed *f, const char *name);
const char *feed_job_name(const struct feed *f, size_t job);
uint32_t feed_job_epochs(const struct feed *f, size_t job);
/* Whether the job's batches have .cuda files (gpu = on). */
bool feed_job_cuda(const struct feed *f, size_t job);
/* Whether the job's batches have .text.jsonl files (its dataset's text). */
bool feed_job_text(const struct feed *f, size_t job);
/* Batches per epoch of each rank of world. */
uint64_t feed_job_nbatches(const struct feed *f, size_t job, uint32_t world);

/*
 * Mixtures.  An epoch of a mixture job is opened by the first feed_open of
 * any of its batch files (any rank view) or the first read of its weights
 * (feed_mixture_text); its weights are fixed from then on, and so are
 * those of every epoch before the highest one opened.
 */
#define FEED_MIX_NEXT UINT32_MAX
/* Whether the job is a mixture (has JOB/mixture). */
bool feed_job_mixture(const struct feed *f, size_t job);
/* Whether any job is: the mount is then read-write (JOB/mixture only). */
bool feed_writable(const struct feed *f);
/*
 * The weights "NAME:W ...\n" of epoch (which this opens), or with
 * FEED_MIX_NEXT those of the first epoch after the highest opened (what
 * JOB/mixture reads): *text is counted in the memory budget, and the
 * caller frees it with feed_text_free.  -ENOENT (not a mixture), -ENOMEM
 * (also with the budget's metadata at its cap).
 */
int feed_mixture_text(
    struct feed *f, size_t job, uint32_t epoch, char **text, size_t *len);
/*
 * A write of JOB/mixture: the weights of line (core/mix.h) from the first
 * epoch after the highest opened on.  A bad line is -EINVAL, logged with
 * why, and changes nothing; -EROFS for a job that is not a mixture.  The
 * caller checks who writes.
 */
int feed_mixture_set(struct feed *f, size_t job, const char *line, size_t len);

/* Whether key names a batch that exists (epoch, batch, rank < world). */
bool feed_key_valid(const struct feed *f, const struct feed_key *k);
/* Size of the file of kind of batch k (header included); 0 for BK_TEXT. */
uint64_t feed_file_size(const struct feed *f, const struct feed_key *k,
    enum batch_kind kind);
/*
 * Size of batch k's .text.jsonl: from the plan (strict order, on_error =
 * fail), else from the batch's content, which this makes and waits for
 * as a read would (0 when it fails).  Opens a mixture's epoch, as an
 * open does.  May block; not with any lock of the caller's held.
 */
uint64_t feed_text_size(struct feed *f, const struct feed_key *k);

/* Open a batch file; starts its preparation and the readahead. */
int feed_open(struct feed *f, const struct feed_key *k, enum batch_kind kind,
    struct feed_handle **out);
/*
 * Bytes [off, off+size) of the file, clipped at its end: *ptr stays valid
 * until feed_read_end(*pin), which the caller calls once it has used them
 * (after a successful feed_read only; it may come after feed_release).  Blocks until the batch is ready (and
 * until memory allows it to be made); -EIO if it failed.  Between reads,
 * an open file pins nothing: under memory pressure an idle batch's data
 * is given back and made again, to the same bytes, by its next read.
 */
int feed_read(struct feed *f, struct feed_handle *h, uint64_t off,
    size_t size, const void **ptr, size_t *len, struct feed_pin **pin);
void feed_read_end(struct feed *f, struct feed_pin *pin); /* NULL: none */
void feed_release(struct feed *f, struct feed_handle *h);

/*
 * A text file (job is ignored for FT_README, FT_STATS and FT_LOG).
 * README, info.json and samples.tsv are made once and shared: *text stays
 * valid until feed_free, and *owned is NULL.  The live ones are made
 * anew: *owned is the text, counted in the memory budget, which the
 * caller frees with feed_text_free.  -ENOMEM (also with the budget's
 * metadata at its cap).
 */
int feed_text(struct feed *f, enum feed_text t, size_t job,
    const char **text, size_t *len, char **owned);
/* The length of a fixed text file (0 for a live one). */
size_t feed_text_len(const struct feed *f, enum feed_text t, size_t job);
/* Free an owned text of feed_text or feed_mixture_text (NULL is fine). */
void feed_text_free(struct feed *f, char *owned);

/*
 * fs/'s inode table: count bytes of its nodes in or out of the memory
 * budget's metadata.  Never refused (the kernel holds a node until it
 * forgets it): feed_nodes_add says whether the nodes passed their share,
 * half the metadata cap, and feed_nodes_excess how many bytes of them
 * the kernel should forget to come back under three quarters of that
 * share.  Thread safe; call them without fs/'s own lock held.
 */
bool feed_nodes_add(struct feed *f, uint64_t bytes);
void feed_nodes_sub(struct feed *f, uint64_t bytes);
uint64_t feed_nodes_excess(struct feed *f);

#endif
