/*
 * sample.h - the model (core/): one sample, from source file to output
 * bytes (sample.c; its prefix through the caches: sample_cache.c).
 *
 * The prefix result comes from the local cache when it can (a hit reads
 * nothing from the source), else from the cluster tier (j->cluster, when
 * set; a hit there is kept locally too), else the source is read,
 * digested, decoded and the result stored in both.  Both tiers hold the
 * job's cache_format, under one key; every read serves what they hold: a
 * miss serves the decode of the bytes it stores (for jpeg(Q) their round
 * trip, computed once), and so does a read without any cache, so the
 * bytes of a sample never depend on where its prefix came from.  The
 * suffix (random ops, output conversion) always runs.
 * Thread safe: any number of workers make samples of one job at once.
 */
#ifndef FEEDFS_SAMPLE_H
#define FEEDFS_SAMPLE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache.h"
#include "core/job.h"
#include "transforms/xf.h"

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
 * the sample used (after a failure, the planned one).  With log set,
 * failures are listed in errors.tsv and logged: a substitution once per
 * sample when it is made, a source that does not answer once a minute.
 * A failure is -EIO (the sample's bytes: tried again only by a remount)
 * or, when the source's availability caused it, as sample_unavailable
 * says: another read may succeed once the source answers.
 */
int sample_make_slot(struct job *j, struct cache *c, uint32_t epoch,
    const uint32_t *order, uint64_t pos, bool raw, void *dst,
    uint32_t *id_out, bool log, char *err, size_t errlen);

/*
 * Whether a failure of sample_make or sample_make_slot came from the
 * source's availability, not from the sample's bytes: a remote shard's
 * server did not answer (-EHOSTDOWN), the dataset's root is gone
 * (-ENODEV), the process is out of descriptors or memory (-EAGAIN).  A
 * batch that failed so is made again at its next read (engine/pin.c).
 */
static inline bool
sample_unavailable(int r)
{
	return r == -EHOSTDOWN || r == -ENODEV || r == -EAGAIN;
}

/*
 * The remembered digest of the source named name (ds_sample_name) with
 * stat st (ds_sample_stat), and the kind of source it is (a PNG's is kept
 * under "png:" + name, a WebP's under "webp:" + name): true on a memo,
 * else false.
 */
bool sample_memo_get(struct cache *c, const char *name, const struct stat *st,
    uint8_t digest[32], enum xf_src *kind);
/*
 * What the index of sample id's shard says of its bytes (a remote shard's
 * stream saw them: dataset.h's ds_sample_digest): its digest and the kind
 * of source it is, so that its key is known without reading it.  Whether
 * there is such a digest.
 */
bool sample_index_digest(
    const struct job *j, uint32_t id, uint8_t digest[32], enum xf_src *kind);
/*
 * The cache key of a source of kind kind with digest under the key text
 * text (a job's key_text): a PNG's or WebP's text names its decoder too
 * (xf_src_decoder_id).
 */
void sample_cache_key(const uint8_t digest[32], const char *text,
    enum xf_src kind, uint8_t key[CACHE_KEY_LEN]);


/*
 * feedfs-fill's step: make sure the cluster tier (j->cluster, required)
 * holds the prefix of sample id, under the key the mount looks up and in
 * the job's cache_format (what a mount's miss stores there).  1 when
 * it was already there (whole; nothing decoded), 0 when decoded and
 * stored.  Else err says why: -EIO the file cannot be read or decoded,
 * -EHOSTDOWN a remote source did not answer (it may, later), -EFBIG the
 * value is over CLUSTER_MAX_VALUE, -ECOMM a server did not take it,
 * -EINVAL the job caches nothing, -ENOMEM.  Thread safe.
 */
int sample_fill(struct job *j, uint32_t id, char *err, size_t errlen);

/*
 * The one pass's step (engine/prefill.c, issue 38): the prefix of a
 * source's bytes src (len bytes whose SHA-256 is sha256, as its shard's
 * index stream passed them) for job j (job_init_prefix's is enough), made
 * and stored in the local cache c (may be NULL) and the cluster tier
 * (j->cluster, may be NULL) under the key a mount looks up, in the job's
 * cache_format, unless it is there (the tier's copied into c, as a cold
 * epoch's lookup does): 1 there already (nothing decoded), 0
 * made and stored (a cache may still refuse it: its counters say), -EIO
 * the bytes do not decode (the epoch that reads the sample says why),
 * -EAGAIN out of memory.  *stored_bytes (may be NULL): the value's bytes,
 * where one was stored.  Thread safe.
 */
int sample_fill_bytes(struct job *j, struct cache *c, const uint8_t *src,
    size_t len, const uint8_t sha256[32], size_t *stored_bytes);

/*
 * Sources are read ahead this many samples per worker before the one a
 * worker takes: by the mount's scheduler (sched.c) and feedfs-fill.  A
 * cold epoch's reads then find the file in the page cache: on the bench
 * machine, with the dataset out of the page cache and the cache's writes
 * going to the same disk, the workers waited on reads for a quarter of
 * the cold epoch (1.5 of 2 cores busy); with the files cached, 2.
 */
#define SAMPLE_PREFETCH_PER_WORKER 8

/*
 * Start reading sample id's source into the page cache
 * (ds_sample_prefetch), if the job's last sample read its source
 * (job.reads_source): the scheduler calls it for a slot some way ahead
 * of the one a worker takes, so that a cold epoch's reads do not wait on
 * the disk; a warm epoch, which reads no source, reads nothing ahead.
 */
void sample_prefetch(struct job *j, uint32_t id);

/*
 * The same, whatever the last sample read: for feedfs-fill, whose every
 * sample reads its source (sample_fill's key is the source's digest).
 * Counted in the job's st.prefetched, as sample_prefetch's are.
 */
void sample_prefetch_source(struct job *j, uint32_t id);

/*
 * For remote shards (dataset/remote/remote.h): sample_prefetch, but not for a
 * sample that the local cache c (NULL: none) holds already (its digest
 * remembered, its value there), whose bytes a warm read never fetches,
 * and only while sample_ahead_worth.  Whether it was asked for.
 */
bool sample_prefetch_remote(struct job *j, struct cache *c, uint32_t id);

/*
 * Whether j's remote samples are worth asking for ahead now: a job
 * without a cluster tier always is (sample_prefetch_remote tells a local
 * hit per sample, a warm stretch or the mount's first sample included);
 * with one, only while its last sample read its source (job.reads_source:
 * a local miss may be the tier's hit, which fetches nothing).  The
 * scheduler moves its lookahead's marks only past samples it asked for
 * while this held, so that none is passed over (sched.c, relaxed.c).
 */
bool sample_ahead_worth(struct job *j);

/*
 * feedfs-fill's look ahead: whether sample id's source is worth reading
 * ahead of sample_fill.  One whose shard's index names its digest is
 * looked up in the tier first (sample_fill reads it only on a miss): it
 * is, only while the last sample filled read its source (the tier lacks
 * a stretch of them); any other is.
 */
bool sample_fill_ahead_worth(struct job *j, uint32_t id);

#endif
