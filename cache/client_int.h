/*
 * client_int.h - cache/ (the store), layer client.  What a client's two
 * files share, and nothing else includes: client.c (connections, requests)
 * and breaker.c (what a failed request means, the breaker).
 */
#ifndef FEEDFS_CLIENT_INT_H
#define FEEDFS_CLIENT_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cache/share_int.h"

struct client {
	char dir[4096];
	struct share_self *self;
	cache_log_fn say;

	pthread_mutex_t lock; /* protects the rest but the atomics */
	pthread_cond_t freed; /* a connection went idle or closed */
	int *idle;	      /* pool_max */
	int nidle, nopen, pool_max;
	long owner; /* the pid of the last HELLO's owner (for the log) */
	/* The lease token of the last HELLO: who the owner is. */
	uint8_t token[OWNER_TOKEN_LEN];
	bool attached;		      /* token is set */
	uint64_t open_until, open_ms; /* the breaker: closed when open_ms 0 */
	uint64_t busy_until;	      /* the owner said busy: no new conns */
	uint64_t slow_ms;	      /* the late owner's breaker time */
	atomic_uint timeouts;	      /* deadlines passed in a row */
	bool probing, said_stopped, said_gone, said_dir, said_busy;
	bool said_late, said_unverified;

	atomic_uint_least64_t put_limit, size_bound;
	atomic_uint_least64_t bytes_read, bytes_written, insert_failures;
	atomic_uint_least64_t invalid, dropped;

	/*
	 * The owner's cache_error, once it said its store is off, or the
	 * format of dir/format when it is not this build's (dir_format, 0
	 * otherwise): that owner is not used.
	 */
	atomic_bool failed;
	atomic_uint dir_format;
	char err[256]; /* written under lock, before failed is set */
};

/*
 * The lease: who holds the store now, and in what state.  UNSEEN: held
 * by a process whose pid /proc does not show (another PID namespace):
 * whether it runs is not known here, only what it answers.
 */
enum holder_state {
	HOLDER_NONE,
	HOLDER_RUNNING,
	HOLDER_UNSEEN,
	HOLDER_STOPPED,
	HOLDER_BAD
};

/* breaker.c */
/* Tell the mount's log (cl->say), if it has one. */
void client_say(struct client *cl, bool warn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Close the idle connections; lock held. */
void client_pool_flush_locked(struct client *cl);
/*
 * Open the breaker for at least first_ms; a failed probe (probe) doubles
 * its time, up to BREAKER_MAX_MS.  stopped: the holder pid is stopped
 * (said once).
 */
void client_breaker_open(
    struct client *cl, long pid, bool stopped, bool probe, uint64_t first_ms);
/* The lease's holder now, its pid in *pid. */
enum holder_state client_holder_state(struct client *cl, long *pid);
/* Whether the holder pid (0: not visible) is stopped: 1, else 0. */
int client_stopped(long pid);
/* A reply came: the owner answers, not late. */
void client_note_answer(struct client *cl);
/* Nobody holds the store: say so once per owner lost, -ENOTCONN. */
int client_owner_gone(struct client *cl);
/* The owner is at its cap of connections: said once, no new ones a while. */
void client_owner_busy(struct client *cl);
/*
 * What a failed request (e, on an established connection) means: the
 * owner gone (-ENOTCONN), stopped (the breaker), or slow (a miss).
 */
int client_request_failed(struct client *cl, int e);

#endif
