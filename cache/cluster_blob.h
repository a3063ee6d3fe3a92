/*
 * cluster_blob.h - cache/ (the store), the cluster tier's finished
 * batches: large values ("blobs"), claims and notes in the same
 * memcached servers as the prefixes (cluster.h), through the same
 * client, pool, secret and breaker (issue 37).  The engine and the batch
 * workers (feedfs-fill --batches) use it; what a blob holds is theirs.
 *
 * Blobs.  A value of any length up to CLUSTER_BLOB_MAX under a 32-byte
 * key, cut into chunk items of the client's chunk size (cluster.h:
 * memcached's default item size) stored before a head item that makes
 * them reachable, all on the head's server (by-key calls), so that a
 * reader sees a whole value or none, and losing a server loses whole
 * values.  Items: "ffb1:HEX" (the head) and "ffb1:HEX#1".."#N"; HEX the
 * key in hex.  The head (cluster_blob_int.h) names the key, the length,
 * the chunking and carries a tag over itself and every payload byte:
 * with a secret, GMAC (AES-256-GCM) under a key derived from the secret
 * (HMAC-SHA256 of a label) and a random nonce per value, so that nobody
 * without the secret can plant a blob, nor replay one under another key;
 * without one, XXH3-128, which finds damage.  A client with a secret
 * takes only blobs with a MAC it verifies; one without takes only blobs
 * without a MAC (it cannot check the others).  Anything that does not
 * check out is refused (-EBADMSG, -EACCES), never half served: the
 * payload lands in the caller's buffers, which are then undefined.
 *
 * Claims.  "ffb1:HEX:c", memcached's add with an expiry: the first one
 * to add it holds it (who: a short text naming the holder, for the log);
 * a holder renews it while it works, and it expires by itself when the
 * holder dies.
 *
 * Notes.  Small values (at most CLUSTER_NOTE_MAX bytes) under a name of
 * the caller's ("ffb1:n:" + name): the readers' positions that workers
 * follow.  Untrusted: their reader decodes them with care.
 *
 * Faults: as for the prefixes, a server down, slow or refusing is an
 * error for the call (-EIO, or -EBUSY when no pooled handle was free in
 * time), never a hang past the client's timeouts; callers make the batch
 * locally.  The text of a failure is kept for cluster_last_error.
 *
 * Thread safety: every function may be called from any number of
 * threads at once (each takes a handle of the pool for the call).
 */
#ifndef FEEDFS_CLUSTER_BLOB_H
#define FEEDFS_CLUSTER_BLOB_H

#include <sys/uio.h>

#include <stddef.h>
#include <stdint.h>

#include "cache/cluster.h"

/* The largest blob: a batch of 1024 uint8 samples of 1024 x 682. */
#define CLUSTER_BLOB_MAX (2048ull * 1024 * 1024)
/* The longest note, and the longest note name. */
#define CLUSTER_NOTE_MAX 1024
#define CLUSTER_NOTE_NAME_MAX 160
/* The longest holder text of a claim. */
#define CLUSTER_WHO_MAX 128

/*
 * Fetch the blob under key into dst[0..n) (their lengths' sum must be
 * the blob's length).  0 when it was there whole and its tag checks out;
 * -ENOENT absent (or a chunk of it evicted), -EBADMSG damaged, of another
 * key or of another length than asked, -EACCES without a valid MAC (with
 * a secret) or with a MAC (without), -EIO a server failed, -EBUSY no
 * pooled handle, -ENOMEM.  dst's bytes are undefined unless 0.
 */
int cluster_blob_get(struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN],
    const struct iovec *dst, int n);

/*
 * Store src[0..n) (their concatenation, at most CLUSTER_BLOB_MAX) under
 * key, expiring after ttl seconds (0: never).  0 stored; -EFBIG too
 * large; -EIO; -EBUSY; -ENOMEM.
 */
int cluster_blob_put(struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN],
    const struct iovec *src, int n, unsigned ttl);

/*
 * Whether a blob's head is under key (no payload fetched, nothing
 * checked): 1 yes, 0 no, or -EIO / -EBUSY.
 */
int cluster_blob_has(struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN]);

/*
 * Claims of key for ttl seconds (1..3600) by who (a text of at most
 * CLUSTER_WHO_MAX bytes).  cluster_claim: 0 when this call took it,
 * -EEXIST when someone holds it; cluster_claim_renew: set it again
 * (ours, or taken back); cluster_claim_drop: delete it (0 also when it
 * was gone); cluster_claim_held: 1 held (its holder's text in who, which
 * holds CLUSTER_WHO_MAX + 1 bytes, NUL-terminated, when who is not NULL),
 * 0 not.  Each may also return -EIO or -EBUSY.
 */
int cluster_claim(struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN],
    const char *who, unsigned ttl);
int cluster_claim_renew(struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN],
    const char *who, unsigned ttl);
int cluster_claim_drop(struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN]);
int cluster_claim_held(
    struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN], char *who);

/*
 * Notes.  name: 1..CLUSTER_NOTE_NAME_MAX bytes of [A-Za-z0-9._:/-], else
 * -EINVAL.  cluster_note_set stores len (<= CLUSTER_NOTE_MAX) bytes for
 * ttl seconds; cluster_note_add only if the name is free (-EEXIST if
 * not).  cluster_note_get fetches names[0..n) at once (one round trip per
 * server): for each found, found(arg, i, value, len) with len <=
 * CLUSTER_NOTE_MAX (longer values are skipped); returns the number
 * found, or -EIO / -EBUSY / -EINVAL / -ENOMEM.
 */
int cluster_note_set(struct cluster *c, const char *name, const void *v,
    size_t len, unsigned ttl);
int cluster_note_add(struct cluster *c, const char *name, const void *v,
    size_t len, unsigned ttl);
typedef void (*cluster_note_fn)(
    void *arg, size_t i, const uint8_t *v, size_t len);
int cluster_note_get(struct cluster *c, const char *const *names, size_t n,
    cluster_note_fn found, void *arg);

#endif
