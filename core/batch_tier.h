/*
 * batch_tier.h - the model (core/): a finished batch as the cluster tier
 * holds it, shared by the mount (engine/tier*.c) and the batch workers
 * (feedfs-fill --batches, tools/fill-batches.c).  Issue 37.
 *
 * Every batch is a deterministic function of the job's config, its
 * dataset, the epoch, the batch and the rank view, so a worker anywhere
 * makes the bytes the mount would.  The tier holds a batch under its
 * key, a SHA-256 of everything that determines those bytes:
 *
 *   the job's print (tier_job_print): TIER_FORMAT_VERSION, feedfs's
 *   version and its decoders', the job's canonical text (every key that
 *   changes a batch's bytes: batch size, seeds, shuffle, drop_last,
 *   order, on_error, dtype, layout, gpu, max_pixels, cache_format, the
 *   resolution schedule, the view and its pipeline text, with blanks
 *   collapsed), the key text of its cached prefix, and the identity of
 *   each of its datasets (every sample's path and label, the classes,
 *   tar shards' names, sizes and modification times);
 *
 *   then (tier_batch_key) the epoch, the batch, the rank view, a
 *   mixture's weights for that epoch, and the size and modification
 *   time of each of the batch's planned samples, so that a file changed
 *   since a worker read it makes another key: never stale bytes.
 *
 * A worker with another config for the same job name makes other keys:
 * the mount never sees its bytes.  Names (of jobs, datasets, roots) are
 * not in the key: a worker may see the dataset at another path.
 *
 * What a tier batch holds (tier_layout): the batch's samples as the
 * workers make them before the output conversion (uint8 HWC, the bytes
 * a .cuda batch stages), then the ids of the samples used (int64 LE).
 * The mount converts, normalizes, erases and mixes them (the ops of the
 * output conversion and the batch op, engine/tier_slot.c) as its own
 * workers do: 4x fewer bytes on the wire than float32.
 *
 * Readers' positions: a mount publishes, per (job, rank view) it reads,
 * the highest batch opened, in one of TIER_SLOTS notes of the job
 * ("p/" + the job print's first 16 bytes in hex + "/" + slot); workers
 * read them all and stay within a window ahead.  tier_pos_encode and
 * tier_pos_decode are the note's bytes (decode takes untrusted bytes).
 */
#ifndef FEEDFS_BATCH_TIER_H
#define FEEDFS_BATCH_TIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/job.h"

/* Bumped when the bytes of a tier batch or its key change meaning. */
#define TIER_FORMAT_VERSION 1
#define TIER_KEY_LEN 32
/* Position notes per job. */
#define TIER_SLOTS 64
/* A position note's name: "p/" + 32 hex + "/" + up to 2 digits + NUL. */
#define TIER_NOTE_NAME 40
/* A position note's bytes. */
#define TIER_POS_LEN 48

/* A reader's position: the highest batch opened of a rank view. */
struct tier_pos {
	uint32_t world, rank, epoch;
	uint64_t batch;
	uint64_t time;	/* seconds since the epoch (1970), when published */
	uint64_t mount; /* a random id of the mount that published it */
};

/*
 * The print of job j (a view is a job of its own): SHA-256 as above.
 * 0, or -ENOMEM.  Reads the datasets' lists only (no file).
 */
int tier_job_print(const struct job *j, uint8_t out[TIER_KEY_LEN]);

/*
 * The key of batch b of the rank view (rank, world) of epoch of a job
 * whose print is jp: ids are the batch's planned samples (len of them),
 * w and nw the weights of the epoch's mixture (NULL, 0 for a single
 * dataset).  The samples are stat'ed (ds_sample_stat); one that cannot
 * be is -ENOENT (the caller makes the batch itself).
 */
int tier_batch_key(const struct job *j, const uint8_t jp[TIER_KEY_LEN],
    uint32_t epoch, uint32_t rank, uint32_t world, uint64_t b,
    const uint32_t *ids, uint32_t len, const uint64_t *w, size_t nw,
    uint8_t key[TIER_KEY_LEN]);

/*
 * The bytes of a tier batch of len samples of epoch: *raw the samples'
 * (len x job_geo(epoch)->raw_bytes), *ids the ids' (len x 8).
 */
void tier_layout(const struct job *j, uint32_t epoch, uint32_t len,
    uint64_t *raw, uint64_t *ids);
/*
 * Check the ids of a tier batch (len int64 LE at p) against j: each a
 * sample of the job (0 <= id < plan.n), else -EBADMSG.  Copies them into
 * out (host order) when 0.
 */
int tier_ids_check(
    const struct job *j, const uint8_t *p, uint32_t len, int64_t *out);

/* The name of position note slot of a job whose print is jp. */
void tier_pos_name(
    const uint8_t jp[TIER_KEY_LEN], unsigned slot, char name[TIER_NOTE_NAME]);
void tier_pos_encode(const struct tier_pos *p, uint8_t out[TIER_POS_LEN]);
/*
 * Decode a position note of len bytes: magic, version, exact length,
 * 1 <= world <= 1024, rank < world.  0 and *p, or -EBADMSG.
 */
int tier_pos_decode(const uint8_t *v, size_t len, struct tier_pos *p);

#endif
