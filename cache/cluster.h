/*
 * cluster.h - the cluster cache tier: preprocessed values in memcached.
 *
 * The same 32-byte keys as the local cache (cache_key) name values in a set
 * of memcached servers shared by many nodes.  All distribution is
 * libmemcached's: consistent hashing (ketama) over the servers, dead
 * servers ejected from the ring after a few failures and retried after a
 * few seconds, binary protocol, TCP_NODELAY, short connect and poll
 * timeouts.
 *
 * Layout in memcached: a value lives under "ffc1:" + the key in hex (the
 * head item).  The head holds a 32-byte header (magic, version, total
 * length, chunk count, chunk size, XXH3-64 of the whole value) and, when
 * it fits in one item, the value itself.  A larger value goes to chunk
 * items "ffc1:HEX#1".."#N", stored before the head and placed on the same
 * server as the head (libmemcached's by-key calls with the head key as the
 * master key), so that losing a server loses whole values, and a get
 * fetches the chunks with one multi-get.  A get checks the length and the
 * checksum; a value that fails either, or misses a chunk (evicted by the
 * server's LRU), is a miss.
 *
 * Faults: a server that is down at cluster_open, dies, times out or comes
 * back is never an error for the reader: cluster_get misses and
 * cluster_put drops the value; both count it (cluster_get_stats) and keep
 * its text for the log (cluster_error_once, cluster_last_error).
 *
 * Security: with an auth file, connections authenticate with SASL PLAIN
 * (binary protocol).  Values and the SASL exchange are plaintext on the
 * wire: the servers belong on a private network.
 *
 * Thread safety: cluster_get, cluster_put, cluster_get_stats,
 * cluster_error_once and cluster_last_error may be called from any number
 * of threads at once.  Each call takes a memcached_st out of a
 * libmemcachedutil pool (memcached_pool_fetch; up to CLUSTER_POOL_MAX
 * connections sets, one per concurrent caller; a caller waits up to a
 * second for one) and gives it back; libmemcached's dead-server state is
 * therefore kept per pooled handle.  cluster_open and cluster_close are
 * not concurrent with anything on the same cluster.
 */
#ifndef FEEDFS_CLUSTER_H
#define FEEDFS_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CLUSTER_KEY_LEN 32
/* Values over this are not stored (counted in skipped_large). */
#define CLUSTER_MAX_VALUE (64u * 1024 * 1024)
/* At most this many servers in a list, and pooled handles. */
#define CLUSTER_MAX_SERVERS 64
#define CLUSTER_POOL_MAX 64
/* A dead server is retried after this many seconds. */
#define CLUSTER_RETRY_S 2

struct cluster;

/*
 * hits and misses: cluster_get returning 0 and anything else; errors: the
 * misses that were a server failing (down, timed out, refused);
 * bad_checksum: the misses on a damaged value (header, length or
 * checksum); missing_chunks: the misses on a head whose chunk was gone.
 * puts: values stored; put_errors: puts a server failed; skipped_large:
 * puts over CLUSTER_MAX_VALUE.  bytes_in and bytes_out: value bytes of
 * hits and of stored puts.
 */
struct cluster_stats {
	uint64_t hits, misses, errors, bad_checksum, missing_chunks;
	uint64_t puts, put_errors, skipped_large;
	uint64_t bytes_in, bytes_out;
};

/*
 * Check a server list "HOST:PORT[,HOST:PORT...]" without connecting: 0, or
 * -EINVAL with why in err ("server 2 ("x:"): no port").  HOST is a name,
 * an IPv4 address or a bracketed IPv6 address ("[::1]:11211"); PORT is
 * 1..65535 and required; blanks around commas are allowed; no empty
 * entries, no duplicates, at most CLUSTER_MAX_SERVERS.  For the config
 * layer, which prefixes err with FILE:LINE.
 */
int cluster_check_servers(const char *servers, char *err, size_t errlen);

/*
 * Open a client for servers (see cluster_check_servers).  auth_file, when
 * not NULL, holds a user name and a password, separated by blanks on one
 * line or on two lines; it must be a regular file that neither group nor
 * others can read (else -EPERM and why).  No server needs to be up: one
 * that is down is a miss later.  The item size is read from the servers
 * that answer ("stats settings" item_size_max, the smallest), else taken
 * to be memcached's default of 1 MiB.  On failure returns -errno with why
 * in err and leaves *out alone.
 */
int cluster_open(const char *servers, const char *auth_file,
    struct cluster **out, char *err, size_t errlen);
/* Close the connections and free c.  NULL is fine. */
void cluster_close(struct cluster *c);

/*
 * Look key up.  0 on a hit, with *data a malloc'd copy of the value (the
 * caller frees it) and *len its length.  Otherwise a miss, and *data and
 * *len are left alone: -ENOENT when the cluster does not have it (or has
 * lost a chunk of it), -EBADMSG when the stored value is damaged, -EIO
 * when a server failed (down, timed out, refused), -ENOMEM.  Callers
 * treat every nonzero return as a miss.
 */
int cluster_get(struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN],
    uint8_t **data, size_t *len);

/*
 * Store len bytes of data under key (data is not taken).  0 when stored;
 * -EFBIG for a value over CLUSTER_MAX_VALUE (not stored, counted in
 * skipped_large); -EIO when a server failed (counted in put_errors).
 * Callers may ignore the return: a failed put is only a later miss.
 */
int cluster_put(struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN],
    const void *data, size_t len);

/* A snapshot of the counters (each read atomically, not all at once). */
void cluster_get_stats(struct cluster *c, struct cluster_stats *st);

/*
 * For logging a failure once: true the first time it is called after the
 * first server failure (of a get or a put) of c, with that failure's text
 * in buf (libmemcached's message, naming the server); false before and
 * ever after.  Later failures are only counted (and the latest one's text
 * kept for cluster_last_error).
 */
bool cluster_error_once(struct cluster *c, char *buf, size_t len);

/*
 * The text of the latest server failure, copied to buf ("" when none);
 * returns the number of failures so far (errors + put_errors).
 */
uint64_t cluster_last_error(struct cluster *c, char *buf, size_t len);

/* The largest value bytes per memcached item this client uses. */
size_t cluster_chunk_size(struct cluster *c);

#endif
