/*
 * remote_read.c - what the readers call of the fetcher (remote_fetch.c
 * runs its thread).  Layer: dataset/remote/ (the HTTP/S3 client; see
 * remote.h):
 * remote_read (a range, fetched ahead or asked for now, waited for within
 * the retries' bound), remote_prefetch (within what is worth fetching
 * ahead: the measured latency at the readers' rate, the window at most;
 * not a range read in the last RECENT_MS, which the next epoch serves
 * from the cache), remote_forget, the window, and remote_close, the end
 * of a dataset's reader (the fetcher stopped, then the objects and the
 * context freed).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dataset/remote/remote_fetch_int.h"

void
remote_set_window(struct remote_ctx *c, uint64_t bytes)
{
	atomic_store(&c->window, bytes);
}

uint64_t
remote_window(const struct remote_ctx *c)
{
	return atomic_load(&c->window);
}

/*
 * What is worth fetching ahead now: the bytes the readers take in
 * REMOTE_AHEAD_LATENCIES times the requests' measured latency (the
 * smoothed time to a response's last byte), at least REMOTE_AHEAD_MIN,
 * at most the window.
 */
static uint64_t
ahead_target(struct remote_ctx *c)
{
	uint64_t w = atomic_load(&c->window),
		 lat = atomic_load(&c->st.latency_us),
		 rate = atomic_load(&c->rate_bps), t;

	t = rate / 1000u * (lat / 1000u) * REMOTE_AHEAD_LATENCIES;
	if (t < REMOTE_AHEAD_MIN)
		t = REMOTE_AHEAD_MIN;
	return t < w ? t : w;
}

uint64_t
remote_room(struct remote_ctx *c)
{
	uint64_t w = ahead_target(c), h = atomic_load(&c->st.held);

	atomic_store(&c->st.ahead_target, w);
	return h < w ? w - h : 0;
}

/* The readers took n bytes: their rate, smoothed over 200 ms steps. */
static void
rate_add(struct remote_ctx *c, uint64_t n)
{
	uint64_t now = remote_now_ms(), t0 = atomic_load(&c->rate_t0),
		 b = atomic_fetch_add(&c->rate_bytes, n) + n;

	if (t0 == 0) {
		atomic_store(&c->rate_t0, now);
		return;
	}
	/* (t0 may be a later now than ours, stored since we read the clock) */
	if (now < t0 + 200 ||
	    !atomic_compare_exchange_strong(&c->rate_t0, &t0, now))
		return;
	atomic_fetch_sub(&c->rate_bytes, b);
	uint64_t r = b * 1000u / (now - t0), old = atomic_load(&c->rate_bps);
	atomic_store(&c->rate_bps, old ? (old * 3 + r) / 4 : r);
}

/*
 * Drop prefetched ranges nobody read for STALE_MS.  Locked, and now read
 * under the lock: a range finished after an earlier now would be done in
 * the future, and now - done_ms would wrap to "stale" (it dropped fresh
 * ranges, fetched again by their reads, on a loaded machine).
 */
static void
drop_stale(struct remote_fetch *f, uint64_t now)
{
	while (f->q[2].head && f->q[2].head->done_ms + STALE_MS < now) {
		atomic_fetch_add(&f->c->st.dropped, 1);
		rf_req_free(f, f->q[2].head);
	}
}

/*
 * Was [off, ...) of o read in the last RECENT_MS?  With note: remember
 * that it is read now (in the oldest of its RECENT_WAYS slots).  Locked.
 */
static bool
recent(struct remote_fetch *f, const struct remote_obj *o, uint64_t off,
    uint64_t now, bool note)
{
	uint64_t h = (uint64_t)(uintptr_t)o * 0x9e3779b97f4a7c15ull ^
		     (off * 0xbf58476d1ce4e5b9ull);
	unsigned at = (unsigned)(h >> 20) % RECENT, old = at;

	for (unsigned w = 0; w < RECENT_WAYS; w++) {
		unsigned k = (at + w) % RECENT;

		if (f->recent[k].o == o && f->recent[k].off == off) {
			if (note)
				f->recent[k].ms = now;
			return now < f->recent[k].ms + RECENT_MS;
		}
		if (f->recent[k].ms < f->recent[old].ms)
			old = k;
	}
	if (note) {
		f->recent[old].o = o;
		f->recent[old].off = off;
		f->recent[old].ms = now;
	}
	return false;
}

void
remote_prefetch(
    struct remote_ctx *c, struct remote_obj *o, uint64_t off, uint64_t len)
{
	struct remote_fetch *f = rf_fetcher(c);
	struct req *r;
	uint64_t now;
	bool probe;

	if (f == NULL)
		return;
	pthread_mutex_lock(&f->lock);
	now = remote_now_ms(); /* after any req_finish's done_ms */
	drop_stale(f, now);
	if (recent(f, o, off, now, false) || rf_find(f, o, off, len) != NULL ||
	    f->held + len > atomic_load(&c->window) ||
	    rf_breaker_refuses(f, now, &probe) || probe) {
		pthread_mutex_unlock(&f->lock);
		return;
	}
	if ((r = rf_req_new(f, o, off, len, false)) != NULL) {
		r->counted = true;
		f->held += len;
		atomic_store(&c->st.held, f->held);
		atomic_fetch_add(&c->st.prefetched, 1);
	}
	pthread_mutex_unlock(&f->lock);
	curl_multi_wakeup(f->m);
}

int
remote_read(struct remote_ctx *c, struct remote_obj *o, uint64_t off,
    uint64_t len, uint8_t **out, char *err, size_t errlen)
{
	struct remote_fetch *f = rf_fetcher(c);
	struct req *r;
	struct timespec dl;
	uint64_t bound, now = remote_now_ms();
	bool probe;
	int rc;

	if (f == NULL) {
		snprintf(err, errlen, "%s: the fetcher cannot start", o->name);
		return -ENOMEM;
	}
	/* The longest the retries can take, and a margin. */
	bound = (uint64_t)(c->retries + 1) * (c->timeout_ms + 1000) +
		(uint64_t)c->retries * REMOTE_BACKOFF_MAX_MS + 5000;
	/* A refused request's one more try, after a read of the credentials'
	 * source (STS, IMDS: a request and its retries). */
	if (c->creds != NULL)
		bound += (uint64_t)(c->retries + 2) * (c->timeout_ms + 1000);
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += (time_t)(bound / 1000);
	pthread_mutex_lock(&f->lock);
	if ((r = rf_find(f, o, off, len)) != NULL) {
		if (r->state == R_DONE)
			atomic_fetch_add(&c->st.prefetch_hits, 1);
		if (r->q == 1)
			rf_list_add(f, r, 0); /* now a demand */
		if (r->q == 2)
			rf_list_del(f, r);
		r->demand = true;
	} else if (rf_breaker_refuses(f, now, &probe)) {
		atomic_fetch_add(&c->st.fast_failed, 1);
		pthread_mutex_unlock(&f->lock);
		snprintf(err, errlen,
		    "%s: the server does not answer (reads fail at once "
		    "until it does)",
		    o->name);
		return -EHOSTDOWN;
	} else if ((r = rf_req_new(f, o, off, len, true)) == NULL) {
		pthread_mutex_unlock(&f->lock);
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	r->waiters++;
	curl_multi_wakeup(f->m);
	while (r->state != R_DONE && r->state != R_FAILED)
		if (pthread_cond_timedwait(&f->cond, &f->lock, &dl) ==
		    ETIMEDOUT)
			break;
	r->waiters--;
	if (r->state == R_DONE) {
		recent(f, o, off, remote_now_ms(), true);
		rate_add(c, len);
		if (r->waiters == 0) {
			*out = r->buf; /* transferred */
			r->buf = NULL;
			rf_req_free(f, r);
		} else if ((*out = malloc(len ? len : 1)) != NULL)
			memcpy(*out, r->buf, len);
		rc = *out ? 0 : -ENOMEM;
		if (rc != 0)
			snprintf(err, errlen, "%s", strerror(ENOMEM));
	} else if (r->state == R_FAILED) {
		snprintf(err, errlen, "%s", r->msg);
		rc = r->err;
		if (r->waiters == 0)
			rf_req_free(f, r);
	} else {
		snprintf(err, errlen, "%s: no answer in %" PRIu64 " s", o->name,
		    bound / 1000);
		rc = -EHOSTDOWN;
		if (r->waiters == 0 && r->state == R_QUEUED)
			rf_req_free(f, r);
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

void
remote_forget(
    struct remote_ctx *c, struct remote_obj *o, uint64_t off, uint64_t len)
{
	struct remote_fetch *f;
	struct req *r;

	pthread_mutex_lock(&c->lock);
	f = c->fetch;
	pthread_mutex_unlock(&c->lock);
	if (f == NULL)
		return;
	pthread_mutex_lock(&f->lock);
	if ((r = rf_find(f, o, off, len)) != NULL && r->waiters == 0 &&
	    (r->state == R_DONE || r->state == R_QUEUED)) {
		atomic_fetch_add(&c->st.dropped, 1);
		rf_req_free(f, r);
	}
	pthread_mutex_unlock(&f->lock);
}

void
remote_obj_free(struct remote_obj *o)
{
	free(o->url);
	free(o->name);
	o->url = o->name = NULL;
	remote_version_free(&o->v);
}

void
remote_close(struct remote_ctx *c, struct remote_obj *objs, size_t n)
{
	if (c != NULL) {
		remote_fetch_free(c->fetch); /* first: it reads objs */
		c->fetch = NULL;
		remote_ctx_free(c);
	}
	for (size_t i = 0; objs != NULL && i < n; i++)
		remote_obj_free(&objs[i]);
	free(objs);
}
