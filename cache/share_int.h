/*
 * share_int.h - cache/ (the store), the layers of the shared cache: what
 * their files share; not for use outside cache/.  Layers, each calling
 * only the ones before it:
 *
 *	store	room.c err.c memo.c index.c store.c stats.c digest.c
 *		options.c open.c admin.c (one RocksDB store; cache_int.h)
 *	owner	owner.c: the directory's checks in every role, the lease
 *		(open.lock, and RocksDB's lock on dir/LOCK, asked of the
 *		kernel by F_OFD_GETLK) and its token (dir/owner.id), the
 *		sockets, the checks of every peer
 *	wire	wire.c: the frames (wire.h)
 *	server	putq.c srv.c (srv_int.h): the owner's data socket
 *	client	breaker.c client.c (client_int.h): a client's
 *		connections to the owner
 *	handle	handle.c: cache_open_shared's handle, local or remote,
 *		and the takeover
 *
 * Lock order: handle.takeover, then client.lock; srv.lock and srv.qlock
 * are leaves.
 */
#ifndef FEEDFS_SHARE_INT_H
#define FEEDFS_SHARE_INT_H

#include <sys/types.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/cache_int.h"
#include "cache/wire.h"

#define DATA_NAME "data.sock"
#define OPEN_LOCK "open.lock"

/* Client side. */
#define POOL_DEFAULT 8	     /* connections, when cache_opts has no workers */
#define POOL_EXTRA 2	     /* connections past the workers (stats, fill) */
#define BUSY_WAIT_MS 1000    /* an owner at its cap: no new connection */
#define RPC_TIMEOUT_MS 1000  /* a request's deadline: past it, a miss */
#define HELLO_TIMEOUT_MS 200 /* connect + HELLO of a new connection */
/* The breaker's open time: RPC_TIMEOUT_MS (BREAKER_START_MS for an owner
 * taking over), doubling to BREAKER_MAX_MS. */
#define BREAKER_START_MS 50
#define BREAKER_MAX_MS 30000
/* Deadlines passed in a row (no answer between them): the breaker opens,
 * for RPC_TIMEOUT_MS, doubling while the next request after it is late. */
#define BREAKER_TIMEOUTS CACHE_BREAKER_TIMEOUTS
#define OPEN_LOCK_WAIT_MS 3000 /* at start, for another feedfs's open */
/* Owner side. */
#define SRV_HELLO_MS 1000  /* for a new connection's HELLO */
#define SRV_IDLE_MS 120000 /* an idle connection is closed after */
#define SRV_REQ_MS 2000	   /* for a whole request once it began */
#define SRV_QUEUE_MAX 256  /* puts waiting for the put thread */

/* A mount's own label and lookups, for the owner's mounts table. */
struct share_self {
	char label[256];
	atomic_uint_least64_t hits, misses;
};

/* ---- owner.c ---------------------------------------------------------- */

/*
 * The checks of dir in every role (cache_private_dir: made 0700 if new,
 * owned by this user, writable by nobody else): 0, or -EACCES (-errno)
 * and why.
 */
int owner_check_dir(const char *dir, char *err, size_t errlen);
/*
 * dir/open.lock, flock'ed, waiting at most wait_ms: the fd (close it to
 * let go), -ETIMEDOUT, or -errno.
 */
int owner_open_lock(const char *dir, int wait_ms);
/*
 * Whether a process holds the store in dir (its lease): 1 held, 0 not,
 * or -errno.  *pid: the holder's pid in this process's PID namespace, 0
 * where it is not visible (another namespace, an OFD lock): held all the
 * same.  Keeps a descriptor of dir/LOCK open for the life of the process
 * (owner.c says why).
 */
int owner_lease(const char *dir, long *pid);
/* Whether /proc's pids are this process's PID namespace's. */
bool owner_proc_is_ours(void);
/*
 * The lease token (see owner.c): written by the process that took the
 * lease, before it serves (0 or -errno), and read by a client to check
 * the HELLO of the process it reached (0, or -errno: none, not a file of
 * ours, malformed).
 */
#define OWNER_ID "owner.id"
#define OWNER_TOKEN_LEN WIRE_TOKEN_LEN
int owner_write_token(const char *dir, uint8_t tok[OWNER_TOKEN_LEN]);
int owner_read_token(const char *dir, uint8_t tok[OWNER_TOKEN_LEN]);
/* Whether process pid is stopped (state T or t): 1, 0 running (or not
 * known: /proc is another namespace's), -ESRCH. */
int owner_stopped(long pid);
/*
 * Listen on dir/name (a stale socket there is replaced: call with the
 * lease held): the fd, or -errno and why.
 */
int owner_listen(const char *dir, const char *name, char *err, size_t errlen);
/*
 * Connect to dir/name by deadline and check the peer (owner_peer_ok with
 * pid, the lease's: 0 when not visible): the fd, or -errno (-EPERM: a
 * peer we must not trust; -EBUSY never: that is a HELLO's answer).
 */
int owner_connect(
    const char *dir, const char *name, long pid, uint64_t deadline);
/*
 * Whether fd's peer is a process of this user and, pid > 0 and /proc's
 * pids ours, is process pid: 0, -EPERM, or -errno.  *peer (may be NULL)
 * gets its pid as this process sees it (0: another PID namespace's).
 */
int owner_peer_ok(int fd, long pid, long *peer);

/* ---- srv.c ------------------------------------------------------------ */

struct cache_srv;
struct srv_opts {
	unsigned conns;	    /* connections at once (0: the default) */
	uint64_t share_mem; /* queued puts and bodies read (0: default) */
	uint8_t token[OWNER_TOKEN_LEN]; /* the lease's, said in HELLO */
};
/*
 * Serve c (a store this process holds) on dir/data.sock: request threads
 * (at most o->conns), a put thread and the maintenance thread, which
 * alone evicts and compacts from then on.  self heads the mounts table.
 * 0 and *out, or -errno and why.
 */
int srv_start(struct cache *c, const struct share_self *self, const char *dir,
    const struct srv_opts *o, struct cache_srv **out, char *err, size_t errlen);
/* Stop s (NULL: nothing): its threads, the socket; queued puts are done. */
void srv_stop(struct cache_srv *s);
/* Puts dropped because the queue or share_mem was full (s NULL: 0). */
uint64_t srv_dropped(struct cache_srv *s);
/* The most bytes of share_mem held at once (s NULL: 0). */
uint64_t srv_mem_peak(struct cache_srv *s);

/* ---- client.c --------------------------------------------------------- */

struct client;
struct client_stats {
	uint64_t bytes_read, bytes_written, insert_failures;
	uint64_t invalid; /* replies that failed their check: misses */
	uint64_t dropped; /* puts over the owner's limit, not sent */
};
/*
 * A client of the owner of dir, with at most conns connections (0:
 * POOL_DEFAULT).  say (may be NULL) is told of changes of owner, of a
 * stopped, late or busy owner, and of one it cannot verify, once each.
 */
int client_new(const char *dir, struct share_self *self, cache_log_fn say,
    unsigned conns, struct client **out);
void client_free(struct client *cl);
/*
 * The requests.  0: done (get: a hit, v filled, v->data malloc'd);
 * -ENOENT: a miss (the owner answered, or is slow or stopped: the
 * breaker), -ENOTCONN: nobody holds the store (the caller may take it
 * over).
 */
int client_get(
    struct client *cl, const uint8_t key[CACHE_KEY_LEN], struct cache_val *v);
int client_put(struct client *cl, const uint8_t key[CACHE_KEY_LEN],
    const struct cache_val *v);
int client_get_digest(struct client *cl, const char *path,
    const struct stat *st, uint8_t digest[32]);
int client_put_digest(struct client *cl, const char *path,
    const struct stat *st, const uint8_t digest[32]);
int client_owner_stats(struct client *cl, struct wire_stats *ws);
/* Try to attach now (at open): 0, or what a request would return. */
int client_attach(struct client *cl);
/* The owner's cache_error as last heard (NULL: none, or a new owner). */
const char *client_error(struct client *cl);
void client_counts(struct client *cl, struct client_stats *st);
/* The size bound the owner announced (0: none heard yet). */
uint64_t client_owner_bound(struct client *cl);
/* The format of dir/format when not this build's (the owner is not
 * used), else 0. */
uint32_t client_dir_format(struct client *cl);

#endif
