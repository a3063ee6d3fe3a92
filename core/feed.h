/*
 * feed.h - the engine of a mount: jobs, workers, batches in memory.
 *
 * A batch is identified by (job, rank, world, epoch, batch).  Opening one of
 * its files (feed_open) makes the batch exist in memory and queues its
 * samples for the worker pool; it also queues the next `readahead` batches
 * of the same view, within the `memory` budget.  feed_read blocks until the
 * batch is complete.  Batches that no open file holds are released when
 * memory is needed, those read to their end first.
 *
 * Thread safety: every function may be called from any thread once
 * feed_start returned, except feed_free.  Lock order: feed.lock, then
 * nothing (the cache and the transforms take no lock of ours).
 */
#ifndef FEEDFS_FEED_H
#define FEEDFS_FEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/config.h"
#include "core/dataset.h"
#include "core/sample.h"

#define FEED_MAX_WORLD 1024

struct feed;
struct feed_handle;

struct feed_key {
	uint32_t job;
	uint32_t rank, world; /* world 1: the whole epoch */
	uint32_t epoch;
	uint64_t batch;
};

/*
 * Load the datasets and check the jobs of c (taken: freed by feed_free, or
 * here on failure).  Starts no thread.  Errors are "FILE:LINE: message".
 */
int feed_new(struct cfg *c, ds_progress_fn progress, void *arg,
    struct feed **out, char *err, size_t errlen);
/* Open the cache and start the workers (after any fork). */
int feed_start(struct feed *f);
void feed_free(struct feed *f);

const struct cfg *feed_cfg(const struct feed *f);
size_t feed_njobs(const struct feed *f);
struct job *feed_job(struct feed *f, size_t i);
/* Index of the job called name, or -1. */
int feed_find_job(const struct feed *f, const char *name);

/* Whether key names a batch that exists (epoch, batch, rank < world). */
bool feed_key_valid(struct feed *f, const struct feed_key *k);
/* Size of the file of kind of batch k (header included). */
uint64_t feed_file_size(struct feed *f, const struct feed_key *k,
    enum batch_kind kind);

/* Open a batch file; starts its preparation and the readahead. */
int feed_open(struct feed *f, const struct feed_key *k, enum batch_kind kind,
    struct feed_handle **out);
/*
 * Bytes [off, off+size) of the file, clipped at its end: *ptr stays valid
 * until feed_release.  Blocks until the batch is ready; -EIO if it failed.
 */
int feed_read(struct feed *f, struct feed_handle *h, uint64_t off,
    size_t size, const void **ptr, size_t *len);
void feed_release(struct feed *f, struct feed_handle *h);

/* Generated text files; malloc'd, the caller frees. */
char *feed_readme(struct feed *f, size_t *len);
char *feed_info_json(struct feed *f, size_t job, size_t *len);
char *feed_samples_tsv(struct feed *f, size_t job, size_t *len);
char *feed_stats(struct feed *f, size_t *len);

#endif
