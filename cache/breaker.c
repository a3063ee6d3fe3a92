/*
 * breaker.c - cache/ (the store), layer client (under client.c; calls
 * owner.c and wire.c).  What a client makes of a failed request, and its
 * breaker.
 *
 * When a request fails, the lease tells what happened:
 *   - nobody holds the store: -ENOTCONN, the handle may take it over;
 *   - its holder is stopped (state T): the breaker opens;
 *   - its holder runs (a slow owner), or its pid is not visible from here
 *     (another PID namespace): this request is a miss; after
 *     BREAKER_TIMEOUTS deadlines in a row with no reply between them the
 *     breaker opens (said once), and while it keeps being late after the
 *     probe, its open time doubles;
 *   - no new connection can be made to a running holder: the breaker opens.
 * While the breaker is open every request misses at once.  It stays open
 * RPC_TIMEOUT_MS (BREAKER_START_MS for a holder that runs but has no
 * socket yet: it is taking over), doubling up to BREAKER_MAX_MS each time
 * its probe fails; past that time one thread (single flight) probes with
 * a new connection while the others go on missing, and closes the
 * breaker when the probe works.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "cache/client_int.h"

void
client_say(struct client *cl, bool warn, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (cl->say == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cl->say(warn, msg);
}

/* Close the idle connections; lock held. */
void
client_pool_flush_locked(struct client *cl)
{
	while (cl->nidle > 0) {
		close(cl->idle[--cl->nidle]);
		cl->nopen--;
	}
	pthread_cond_broadcast(&cl->freed);
}

/*
 * Open the breaker for at least first_ms; a failed probe (probe) doubles
 * its time, up to BREAKER_MAX_MS.  Other failures while it is open (the
 * requests that were in flight) leave it as it is: they are one failure.
 */
void
client_breaker_open(
    struct client *cl, long pid, bool stopped, bool probe, uint64_t first_ms)
{
	bool tell;

	pthread_mutex_lock(&cl->lock);
	if (cl->open_ms == 0 || probe) {
		uint64_t ms = cl->open_ms * 2;

		if (ms < first_ms)
			ms = first_ms;
		cl->open_ms = ms > BREAKER_MAX_MS ? BREAKER_MAX_MS : ms;
		cl->open_until = wire_now_ns() + cl->open_ms * 1000000u;
	}
	client_pool_flush_locked(cl);
	tell = stopped && !cl->said_stopped;
	if (stopped)
		cl->said_stopped = true;
	pthread_mutex_unlock(&cl->lock);
	if (tell)
		client_say(cl, true,
		    "the owner of %s (pid %ld) is stopped: reads miss the "
		    "cache until it runs again",
		    cl->dir, pid);
}

enum holder_state
client_holder_state(struct client *cl, long *pid)
{
	int r = owner_lease(cl->dir, pid), st;

	if (r < 0)
		return HOLDER_BAD;
	if (r == 0)
		return HOLDER_NONE;
	if (*pid == 0)
		return HOLDER_UNSEEN;
	if ((st = owner_stopped(*pid)) < 0)
		return HOLDER_NONE; /* gone since: its lock with it */
	return st ? HOLDER_STOPPED : HOLDER_RUNNING;
}

/* Whether the holder pid (0: not visible) is stopped: 1, else 0. */
int
client_stopped(long pid)
{
	return pid > 0 && owner_stopped(pid) == 1;
}

/*
 * A request passed its deadline on a holder that runs, or one whose
 * state is not visible: the BREAKER_TIMEOUTS-th in a row opens the
 * breaker (after its probe, the next late one opens it again, its time
 * doubled).
 */
static void
note_late(struct client *cl, long pid)
{
	uint64_t ms = 0;
	bool tell = false;

	pthread_mutex_lock(&cl->lock);
	if (cl->open_ms == 0 &&
	    atomic_fetch_add(&cl->timeouts, 1) + 1 >= BREAKER_TIMEOUTS) {
		ms = cl->slow_ms == 0 ? RPC_TIMEOUT_MS : cl->slow_ms * 2;
		cl->slow_ms = ms > BREAKER_MAX_MS ? BREAKER_MAX_MS : ms;
		ms = cl->slow_ms;
		atomic_store(&cl->timeouts, BREAKER_TIMEOUTS - 1);
		tell = !cl->said_late;
		cl->said_late = true;
	}
	pthread_mutex_unlock(&cl->lock);
	if (ms == 0)
		return;
	client_breaker_open(cl, pid, false, false, ms);
	if (tell)
		client_say(cl, true,
		    "the owner of %s did not answer %d requests in a row "
		    "within %d ms: reads miss the cache for %llu ms, then one "
		    "request at a time probes it",
		    cl->dir, BREAKER_TIMEOUTS, RPC_TIMEOUT_MS,
		    (unsigned long long)ms);
}

/* A reply came: the owner answers, not late. */
void
client_note_answer(struct client *cl)
{
	if (atomic_load(&cl->timeouts) == 0)
		return;
	pthread_mutex_lock(&cl->lock);
	atomic_store(&cl->timeouts, 0);
	cl->slow_ms = 0;
	cl->said_late = false;
	pthread_mutex_unlock(&cl->lock);
}

/* Nobody holds the store: say so once per owner lost, -ENOTCONN. */
int
client_owner_gone(struct client *cl)
{
	long was;
	bool tell;

	pthread_mutex_lock(&cl->lock);
	client_pool_flush_locked(cl);
	was = cl->owner;
	tell = cl->attached && !cl->said_gone;
	cl->said_gone = true;
	pthread_mutex_unlock(&cl->lock);
	if (tell)
		client_say(cl, true,
		    "the owner of %s (pid %ld) went away; reads miss the cache "
		    "until a new owner serves it",
		    cl->dir, was);
	return -ENOTCONN;
}

/* The owner is at its cap of connections: said once, no new ones a while. */
void
client_owner_busy(struct client *cl)
{
	bool tell;

	pthread_mutex_lock(&cl->lock);
	cl->busy_until = wire_now_ns() + (uint64_t)BUSY_WAIT_MS * 1000000u;
	tell = !cl->said_busy;
	cl->said_busy = true;
	pthread_mutex_unlock(&cl->lock);
	if (tell)
		client_say(cl, true,
		    "the owner of %s is at its cap of connections: this mount "
		    "keeps the ones it has, and a request finding none free "
		    "misses",
		    cl->dir);
}

/*
 * What a failed request (e, on an established connection) means: the
 * owner gone (-ENOTCONN), stopped (the breaker), or slow (a miss).
 */
int
client_request_failed(struct client *cl, int e)
{
	long pid;

	switch (client_holder_state(cl, &pid)) {
	case HOLDER_NONE:
		return client_owner_gone(cl);
	case HOLDER_STOPPED:
		client_breaker_open(cl, pid, true, false, RPC_TIMEOUT_MS);
		return -ENOENT;
	case HOLDER_BAD:
		client_breaker_open(cl, pid, false, false, RPC_TIMEOUT_MS);
		return -ENOENT;
	default:
		/* Late: BREAKER_TIMEOUTS of them in a row open the breaker;
		 * one that dropped us: a miss. */
		if (e == -ETIMEDOUT)
			note_late(cl, pid);
		return -ENOENT;
	}
}
