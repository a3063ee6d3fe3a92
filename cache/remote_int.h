/*
 * remote_int.h - what the files of the shared cache share (remote.c: a
 * mount's handle, the client side and failover; remote_srv.c: the owner's
 * server and its mounts table; remote_wire.c: the frames both ends send).
 * Not for use outside cache/remote*.c.
 *
 * Frames (native byte order: both ends are on one machine):
 *
 *	request	struct req_hdr (op, body length, the client's hit and miss
 *		counts) + body
 *	reply	struct rep_hdr (0 or -errno, body length) + body
 *
 *	HELLO		label			-> u32 owner pid
 *	GET		key[32]			-> struct wire_val + payload
 *						   (-ENOENT: a miss; -EIO: a
 *						   miss, the store is off)
 *	PUT		key[32] wire_val prefix payload	-> no reply
 *	GET_DIGEST	wire_stat path		-> digest[32]
 *	PUT_DIGEST	wire_stat digest[32] path	-> no reply
 *	STATS		(empty)			-> struct wire_stats +
 *						   cache_error's text
 *	MOUNTS		(empty)			-> text, a line a mount
 *
 * Lock order: remote.takeover, then remote.lock; srv.lock is a leaf.
 */
#ifndef FEEDFS_REMOTE_INT_H
#define FEEDFS_REMOTE_INT_H

#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache_int.h"

#define DATA_NAME "data.sock"
#define OPEN_LOCK "open.lock"
#define POOL_MAX 8	     /* idle connections a client keeps */
#define RPC_TIMEOUT_MS 5000  /* an owner that does not answer is gone */
#define FRAME_MAX (1u << 30) /* no value or path comes near */
#define SOCK_BUF (1 << 20)
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 1000

enum {
	OP_HELLO = 1,
	OP_GET,
	OP_PUT,
	OP_GET_DIGEST,
	OP_PUT_DIGEST,
	OP_STATS,
	OP_MOUNTS,
};

struct req_hdr {
	uint32_t op, len;
	uint64_t hits, misses; /* the client's own, for the mounts table */
};
struct rep_hdr {
	int32_t status;
	uint32_t len;
};
struct wire_val {
	uint32_t w, h, c, dtype;
	uint32_t prefix_len, enc; /* enc: cache_val's (format.h) */
	uint64_t len;
};
struct wire_stat {
	uint64_t size, mtime_sec, mtime_nsec, ctime_sec, ctime_nsec, ino, dev;
};
struct wire_stats {
	uint64_t hits, misses, bytes_read, bytes_written, insert_failures;
	uint64_t disk_bytes;
	uint32_t disabled, pad;
};

struct cache_srv; /* remote_srv.c: the owner's server */

/* A mount's shared handle (c->remote of a cache_open_shared handle). */
struct cache_remote {
	char dir[4096];
	char label[256];
	uint64_t size_bound, mem_bound;
	cache_log_fn say;

	/* Set once, when this process owns the store; never unset. */
	_Atomic(struct cache *) local;
	struct cache_srv *srv; /* under takeover; stopped by close */
	struct cache_ctl *ctl;

	pthread_mutex_t takeover; /* one attempt at a time */
	pthread_mutex_t lock;	  /* protects idle, nidle, retry_at, backoff */
	int idle[POOL_MAX];
	int nidle;
	uint64_t retry_at; /* CLOCK_MONOTONIC ns: no connect before */
	uint32_t backoff_ms;
	atomic_bool lost;  /* the owner went away; said once per loss */
	atomic_long owner; /* pid of the owner we talk to, 0 unknown */

	atomic_uint_least64_t hits, misses, bytes_read, bytes_written;
	atomic_uint_least64_t insert_failures;

	/* The owner's cache_error, once it said its store is off. */
	atomic_bool failed;
	char err[256]; /* written once, under lock, before failed is set */
};

/* ---- remote_wire.c ---------------------------------------------------- */

/* dir/data.sock into *sa: 0, or -ENAMETOOLONG. */
int remote_data_addr(const char *dir, struct sockaddr_un *sa);

/* Read exactly len bytes: 0, or -errno (-ECONNRESET at end of file). */
int remote_read_full(int fd, void *buf, size_t len);

/* Send every iovec (modified); never raises SIGPIPE.  0 or -errno. */
int remote_send_iov(int fd, struct iovec *iov, int n);

/* Room for a whole value in fd's socket buffers (best effort). */
void remote_set_bufs(int fd);

/* A stat's fields that the digest memos check, to and from the wire. */
void remote_stat_from_wire(const struct wire_stat *w, struct stat *st);
void remote_stat_to_wire(const struct stat *st, struct wire_stat *w);

/*
 * Send a request: op, r's hit and miss counts, and the first (at most 4)
 * of nbody iovecs (modified) as its body.  0 or -errno.
 */
int remote_send(
    struct cache_remote *r, int fd, uint32_t op, struct iovec *body, int nbody);

/* ---- remote_srv.c ----------------------------------------------------- */

/*
 * Listen on dir/data.sock for c, a store this process holds, one thread
 * per connection; self's counters and label head the mounts table.  0
 * with *out set, or -errno with a message in err.
 */
int remote_srv_start(struct cache *c, struct cache_remote *self,
    const char *dir, struct cache_srv **out, char *err, size_t errlen);

/*
 * Stop s (NULL: nothing) and every connection's thread, remove the
 * socket, free s.  Not concurrently with remote_srv_start of s.
 */
void remote_srv_stop(struct cache_srv *s);

#endif
