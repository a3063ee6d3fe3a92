/*
 * cluster.h - cache/ (the store), the cluster cache tier: preprocessed
 * values in memcached.
 *
 * The same 32-byte keys as the local cache (cache_key) name values in a set
 * of memcached servers shared by many nodes.  All distribution is
 * libmemcached's: consistent hashing (ketama) over the servers, dead
 * servers ejected from the ring after a few failures and retried after a
 * few seconds, binary protocol, TCP_NODELAY, short connect and poll
 * timeouts.
 *
 * What is stored is the cache's one value envelope (codec.h: key, shape,
 * format and length under one checksum), so a value is checked by
 * codec_env_open against the key that was asked for, as everywhere else.
 *
 * Layout in memcached (items of version 2, named by the client's
 * namespace + the key in hex: "ffc2:" without a secret, "ffc2:kID:" with
 * one, ID derived from the secret by HMAC-SHA256 (cluster_int.h), so
 * that clients of different secrets never see, overwrite or evict each
 * other's values; "ffc1:" items of earlier builds are never read, nor
 * the "ffc2:HEX" items of a secret's clients before the namespaces,
 * which are computed again): the head item holds a
 * 16-byte item header (magic, version, flags, chunk count, chunk size), a
 * 32-byte MAC field, the envelope's 80-byte header and, when it fits in
 * one item, the payload.  A larger payload goes to chunk items
 * "NSHEX#1".."#N" of exactly the chunk size (the last one shorter),
 * stored before the head and placed on the same server as the head
 * (libmemcached's by-key calls with the head key as the master key), so
 * that losing a server loses whole values, and a get fetches the chunks
 * with one multi-get.  The chunk size is fixed: CLUSTER_CHUNK for every
 * client (cluster_opts.chunk only for tests), never read from a server, and
 * a head naming another size, a chunk count that does not fit the length,
 * or a length over CLUSTER_MAX_VALUE is a damaged value: a miss, counted,
 * with nothing allocated for it (the value buffer is allocated when its
 * first chunk arrives).  Servers need an item size of at least 1 MiB
 * (memcached's default, -I).
 *
 * Faults: a server that is down at cluster_open, dies, times out or comes
 * back is never an error for the reader: cluster_get misses and
 * cluster_put drops the value; both count it (cluster_get_stats) and keep
 * its text for the log (cluster_error_once, cluster_last_error).
 *
 * Security: with an auth file, connections authenticate with SASL PLAIN
 * (binary protocol).  cluster_opts.probe asks every server once at open
 * whether it takes this client's credentials (a wrong password, none
 * where the server wants some, some where it takes none): those that
 * refuse are named by cluster_problem, and when every server that
 * answered refused, the tier is off (cluster_stats' off: every get a
 * miss, every put dropped, no server asked).  Values and the SASL
 * exchange are plaintext on the wire: the servers belong on a private
 * network.  With a secret file, every value carries an HMAC-SHA256
 * (OpenSSL) under that secret over its item header, its envelope header
 * (which names the key) and its payload, in the namespace of that
 * secret; a client with a secret takes only values whose MAC it verifies
 * (others are misses, counted in bad_mac), so nobody without the secret
 * can plant a value, nor replay one under another key, and a client of
 * another secret neither reads nor overwrites them.  A client without a
 * secret ignores the MAC field (the envelope's checksum still holds).
 *
 * Thread safety: cluster_get, cluster_put, cluster_get_stats,
 * cluster_error_once and cluster_last_error may be called from any number
 * of threads at once.  Each call takes a memcached_st out of a
 * libmemcachedutil pool (memcached_pool_fetch; cluster_opts.pool handles,
 * created as needed: size it to the number of threads that call, so that
 * none waits; a caller waits up to cluster_opts.pool_wait_ms for one, and
 * a wait that runs out is a miss counted in pool_waits, not a server
 * error) and gives it back; libmemcached's dead-server state is therefore
 * kept per pooled handle.  cluster_open and cluster_close are not
 * concurrent with anything on the same cluster.
 */
#ifndef FEEDFS_CLUSTER_H
#define FEEDFS_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache.h"

#define CLUSTER_KEY_LEN CACHE_KEY_LEN
/* Payloads over this are not stored (counted in skipped_large). */
#define CLUSTER_MAX_VALUE (64u * 1024 * 1024)
/* At most this many servers in a list. */
#define CLUSTER_MAX_SERVERS 64
/* Pooled handles: the default, and the most (the most threads a mount has). */
#define CLUSTER_POOL_DEFAULT 64
#define CLUSTER_POOL_MAX 1024
/*
 * The payload bytes per chunk item of every client: memcached's default
 * item size (1 MiB) less room for its item header, the key and the CAS.
 */
#define CLUSTER_CHUNK (1024u * 1024 - 1024)
/* The bounds of cluster_opts.chunk (tests use small chunks). */
#define CLUSTER_CHUNK_MIN 1024u
/* A secret file's size: at least 16 bytes, at most 4096. */
#define CLUSTER_SECRET_MIN 16
#define CLUSTER_SECRET_MAX 4096
/* A dead server is retried after this many seconds. */
#define CLUSTER_RETRY_S 2

struct cluster;

/*
 * hits and misses: cluster_get returning 0 and anything else; errors: the
 * misses that were a server failing (down, timed out, refused);
 * bad_checksum: the misses on a damaged or foreign value (item header,
 * chunk size or count, length, envelope, checksum, or the value of another
 * key); bad_mac: with a secret, the misses on a value without a MAC or
 * with a wrong one; missing_chunks: the misses on a head whose chunk was
 * gone; pool_waits: gets and puts that found no free handle in the pool
 * within the wait (misses and dropped puts, no server contacted).  puts:
 * values stored; put_errors: puts a server failed; skipped_large: puts over
 * CLUSTER_MAX_VALUE.  bytes_in and bytes_out: payload bytes of hits and of
 * stored puts.
 */
struct cluster_stats {
	uint64_t hits, misses, errors, bad_checksum, bad_mac, missing_chunks;
	uint64_t pool_waits;
	uint64_t puts, put_errors, skipped_large;
	uint64_t bytes_in, bytes_out;
	/* The probe at open: servers that refused us; off: all that did. */
	unsigned refused;
	bool off;
};

/* What cluster_open takes besides the servers (all zero: the defaults). */
struct cluster_opts {
	/*
	 * Files: a user name and a password for SASL (blanks on one line or
	 * two lines), and the MAC's secret (its bytes less one trailing
	 * newline, CLUSTER_SECRET_MIN..MAX).  Each must be a regular file (no
	 * symlink, no FIFO), owned by the effective uid or root, that neither
	 * group nor others can read or write.  NULL: none.
	 */
	const char *auth_file;
	const char *secret_file;
	/* Handles in the pool: 0 = CLUSTER_POOL_DEFAULT, at most _MAX. */
	unsigned pool;
	/* How long a call waits for a free handle: 0 = 1000 ms. */
	unsigned pool_wait_ms;
	/*
	 * Payload bytes per chunk item: 0 = CLUSTER_CHUNK, the size every
	 * client of a tier must share (tests set a small one).
	 */
	size_t chunk;
	/*
	 * Ask every server once at open (a delete of a key nobody stores,
	 * within the connect and poll timeouts: under a second a server)
	 * whether it takes this client's credentials: cluster_problem.
	 */
	bool probe;
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
 * Open a client for servers (see cluster_check_servers) with o (NULL: the
 * defaults).  The files of o are read now: a file that is missing, not
 * regular, a symlink, owned by another user or open to group or others is
 * refused (-ENOENT, -EINVAL, -ELOOP, -EPERM) with why in err, naming the
 * file; so is a secret of a bad size.  No server needs to be up: one that
 * is down is a miss later.  On failure returns -errno with why in err and
 * leaves *out alone.
 */
int cluster_open(const char *servers, const struct cluster_opts *o,
    struct cluster **out, char *err, size_t errlen);
/* Close the connections and free c.  NULL is fine. */
void cluster_close(struct cluster *c);

/*
 * Look key up.  0 on a hit, with v's shape, format and len those of the
 * value's envelope (checked by codec_env_open against key) and v->data a
 * malloc'd copy of its payload (the caller frees it; v->prefix NULL).
 * Otherwise a miss, and v is left alone: -ENOENT when the cluster does not
 * have it (or has lost a chunk of it), -EBADMSG when the stored value is
 * damaged or another key's, -EACCES when it lacks a valid MAC (with a
 * secret) or the tier is off (cluster_problem), -EIO when a server failed
 * (down, timed out, refused), -EBUSY when no pooled handle was free in
 * time, -ENOMEM.  Callers treat every nonzero return as a miss.
 */
int cluster_get(
    struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN], struct cache_val *v);

/*
 * Store v under key, sealed in the envelope (and MAC'd with a secret);
 * v->data is not taken, v->prefix is not used.  0 when stored; -EFBIG for
 * a payload over CLUSTER_MAX_VALUE (not stored, counted in skipped_large);
 * -EIO when a server failed (counted in put_errors); -EBUSY when no pooled
 * handle was free in time (counted in pool_waits); -EACCES when the tier
 * is off (cluster_problem; not counted).  Callers may ignore the
 * return: a failed put is only a later miss.
 */
int cluster_put(struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN],
    const struct cache_val *v);

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

/* The payload bytes per chunk item this client uses (CLUSTER_CHUNK). */
size_t cluster_chunk_size(struct cluster *c);

/*
 * What cluster_opts.probe found, for the log and the stats: NULL when
 * every server that answered took this client's credentials (or when
 * there was no probe); else the servers that refused and why, and what
 * follows ("serving without the cluster tier" when every one that
 * answered refused: cluster_stats' off).  Valid until cluster_close.
 */
const char *cluster_problem(struct cluster *c);

#endif
