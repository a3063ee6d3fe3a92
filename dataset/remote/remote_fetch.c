/*
 * remote_fetch.c - the fetcher's thread (what the readers call is
 * remote_read.c).  Layer: dataset/remote/ (the HTTP/S3 client; see
 * remote.h).  One thread drives a curl multi handle: range GETs of
 * members, each carrying its object's version as a precondition
 * (If-Match, or If-Unmodified-Since) and judged where its headers end
 * (remote_resp_check), over a pool of keep-alive connections (HTTP/2
 * where the server has it, multiplexed).  Requests
 * come from the readers (remote_read: a demand, served first) and from
 * the scheduler's lookahead (remote_prefetch: within the window, bytes
 * fetched and not yet read); requests of one object whose ranges touch
 * or lie within MERGE_GAP of each other go as one GET (an image and the
 * next one of its shard), while the gaps fetched stay within 5 %.
 *
 * Faults: every request has a connect and a total timeout; a 5xx, a 429,
 * a reset, a timeout and a bad response (remote.h: enum remote_bad,
 * counted) are retried after a capped exponential backoff with jitter,
 * c->retries times; then the request fails (-EHOSTDOWN where the source
 * did not answer, else -EIO).  A 412 (the object changed since it was
 * indexed) fails at once, and a 2xx of another version (its ETag, its
 * Last-Modified, its size) too: bytes of two versions are never mixed.
 * A signed request refused (401, 403, a 400 for an expired token) asks
 * its credentials (cred.h) for a re-read and goes once more with them;
 * the thread reads what is due before it signs (unlocked: STS, IMDS).
 * REMOTE_BREAKER_FAILS failures in a row open the breaker: while it is
 * open every read fails at once; when its time is up one request probes,
 * and a success closes it.  A reader waits at most as long as the
 * retries of its request can take, plus a margin.
 *
 * Lock: f->lock guards the table, the queues, held and the breaker; the
 * multi handle is the thread's alone (curl_multi_wakeup is thread-safe).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"
#include "dataset/remote/remote_fetch_int.h"

unsigned
rf_bucket(const struct remote_obj *o, uint64_t off)
{
	uint64_t h = (uint64_t)(uintptr_t)o * 0x9e3779b97f4a7c15ull ^ off;

	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	return (unsigned)(h >> 40) % NBUCKET;
}

struct req *
rf_find(struct remote_fetch *f, const struct remote_obj *o, uint64_t off,
    uint64_t len)
{
	for (struct req *r = f->tab[rf_bucket(o, off)]; r; r = r->hnext)
		if (r->o == o && r->off == off && r->len == len)
			return r;
	return NULL;
}

void
rf_list_del(struct remote_fetch *f, struct req *r)
{
	struct list *l;

	if (r->q < 0)
		return;
	l = &f->q[r->q];
	if (r->qprev)
		r->qprev->qnext = r->qnext;
	else
		l->head = r->qnext;
	if (r->qnext)
		r->qnext->qprev = r->qprev;
	else
		l->tail = r->qprev;
	r->qnext = r->qprev = NULL;
	r->q = -1;
}

void
rf_list_add(struct remote_fetch *f, struct req *r, int q)
{
	struct list *l = &f->q[q];

	rf_list_del(f, r);
	r->q = q;
	r->qprev = l->tail;
	r->qnext = NULL;
	if (l->tail)
		l->tail->qnext = r;
	else
		l->head = r;
	l->tail = r;
}

/* Unlink r from everything and free it. */
void
rf_req_free(struct remote_fetch *f, struct req *r)
{
	struct req **p = &f->tab[rf_bucket(r->o, r->off)];

	while (*p != r)
		p = &(*p)->hnext;
	*p = r->hnext;
	rf_list_del(f, r);
	if (r->counted) {
		f->held -= r->len;
		atomic_store(&f->c->st.held, f->held);
	}
	free(r->buf);
	free(r);
}

struct req *
rf_req_new(struct remote_fetch *f, struct remote_obj *o, uint64_t off,
    uint64_t len, bool demand)
{
	struct req *r = calloc(1, sizeof(*r));
	unsigned b = rf_bucket(o, off);

	if (r == NULL)
		return NULL;
	r->o = o;
	r->off = off;
	r->len = len;
	r->demand = demand;
	r->q = -1;
	r->hnext = f->tab[b];
	f->tab[b] = r;
	rf_list_add(f, r, demand ? 0 : 1);
	return r;
}

/* r is over: done (its bytes in r->buf) or failed.  Locked. */
static void
req_finish(struct remote_fetch *f, struct req *r, int err, const char *msg)
{
	r->state = err ? R_FAILED : R_DONE;
	r->err = err;
	if (msg != NULL)
		snprintf(r->msg, sizeof(r->msg), "%s", msg);
	r->done_ms = remote_now_ms();
	if (r->waiters == 0 && err != 0) {
		rf_req_free(
		    f, r); /* a prefetch that failed: the read asks again */
		return;
	}
	if (r->waiters == 0)
		rf_list_add(f, r, 2);
	pthread_cond_broadcast(&f->cond);
}

/* Is the breaker open now?  Past its time, one probe may go. */
bool
rf_breaker_refuses(struct remote_fetch *f, uint64_t now, bool *probe)
{
	*probe = false;
	if (!f->open)
		return false;
	if (now < f->open_until || f->probing)
		return true;
	*probe = true;
	return false;
}

static void
breaker_result(struct remote_fetch *f, bool ok, bool probe, const char *name)
{
	if (probe)
		f->probing = false;
	if (ok) {
		if (f->open)
			log_info("remote %s: the server answers again", name);
		f->open = false;
		f->fails = 0;
		f->open_ms = 0;
		return;
	}
	if (!f->open && ++f->fails < REMOTE_BREAKER_FAILS)
		return;
	if (f->open && !probe)
		return; /* those in flight when it opened: one failure */
	f->open_ms = f->open_ms == 0 ? REMOTE_BREAKER_MS : f->open_ms * 2;
	if (f->open_ms > REMOTE_BREAKER_MAX_MS)
		f->open_ms = REMOTE_BREAKER_MAX_MS;
	if (!f->open) {
		atomic_fetch_add(&f->c->st.breaker_opens, 1);
		log_warn("remote %s: %u requests in a row failed: reads fail "
			 "at once until it answers again (probed every %" PRIu64
			 " ms at first)",
		    name, f->fails, f->open_ms);
	}
	f->open = true;
	f->open_until = remote_now_ms() + f->open_ms;
}

static CURL *
easy_get(struct remote_fetch *f)
{
	return f->nidle ? f->idle[--f->nidle] : curl_easy_init();
}

/*
 * Start a GET for r and the queued requests of its object that lie close
 * to it.  Locked.
 */
static void
start(struct remote_fetch *f, struct req *r, bool probe)
{
	struct xfer *x = calloc(1, sizeof(*x));
	struct remote_ctx *c = f->c;
	uint64_t want = r->len; /* the bytes asked for: the rest is gaps */
	bool grew = true;

	if (x == NULL || (x->e = easy_get(f)) == NULL) {
		free(x);
		req_finish(f, r, -ENOMEM, "out of memory");
		return;
	}
	x->o = r->o;
	x->a = r->off;
	x->b = r->off + r->len;
	x->reqs[x->nreq++] = r;
	rf_list_del(f, r);
	r->state = R_RUNNING;
	/* Neighbours: grown until none more fits. */
	while (grew && !probe && x->nreq < MERGE_MAX_REQS) {
		uint64_t now = remote_now_ms();

		grew = false;
		for (int q = 0; q < 2 && !grew; q++)
			for (struct req *n = f->q[q].head; n; n = n->qnext) {
				uint64_t a = n->off < x->a ? n->off : x->a,
					 b = n->off + n->len > x->b
						 ? n->off + n->len
						 : x->b;

				if (n->o != x->o || n->not_before > now ||
				    n->off + n->len + MERGE_GAP < x->a ||
				    n->off > x->b + MERGE_GAP ||
				    b - a > MERGE_MAX_BYTES ||
				    (b - a - want - n->len) * MERGE_WASTE >
					want + n->len)
					continue;
				want += n->len;
				x->a = a;
				x->b = b;
				x->reqs[x->nreq++] = n;
				rf_list_del(f, n);
				n->state = R_RUNNING;
				grew = true;
				break;
			}
	}
	x->rx.cap = x->b - x->a;
	x->rx.buf = malloc(x->rx.cap ? x->rx.cap : 1);
	struct remote_want w = {x->a, x->b - 1, false, x->o->v.size, &x->o->v};
	if (x->rx.buf == NULL || remote_easy_setup(c, x->e, x->o->url, &w,
				     c->timeout_ms, &x->rx) != 0) {
		for (unsigned i = 0; i < x->nreq; i++)
			req_finish(f, x->reqs[i], -ENOMEM, "out of memory");
		free(x->rx.buf);
		remote_xfer_done(&x->rx);
		curl_easy_cleanup(x->e);
		free(x);
		return;
	}
	if (probe)
		f->probing = true;
	x->probe = probe;
	x->next = f->xfers;
	if (f->xfers)
		f->xfers->prev = x;
	f->xfers = x;
	curl_easy_setopt(x->e, CURLOPT_PRIVATE, x);
	x->t0 = remote_now_ms();
	curl_multi_add_handle(f->m, x->e);
	f->nxfers++;
	atomic_fetch_add(&c->st.requests, 1);
}

/* Fail what the open breaker refuses, start what may go.  Locked.  The
 * time until a retry is due (ms), for the poll. */
static uint64_t
dispatch(struct remote_fetch *f)
{
	uint64_t now = remote_now_ms(), wait = 1000;
	bool probe;

	for (int q = 0; q < 2; q++) {
		struct req *r = f->q[q].head, *n;

		for (; r && f->nxfers < MAX_XFERS; r = n) {
			n = r->qnext;
			if (r->not_before > now) {
				if (r->not_before - now < wait)
					wait = r->not_before - now;
				continue;
			}
			if (rf_breaker_refuses(f, now, &probe)) {
				if (r->waiters == 0) {
					rf_req_free(f, r);
					continue;
				}
				atomic_fetch_add(&f->c->st.fast_failed, 1);
				char m[320];
				snprintf(m, sizeof(m),
				    "%s: the server does not answer (reads "
				    "fail at once until it does)",
				    r->o->name);
				rf_list_del(f, r);
				req_finish(f, r, -EHOSTDOWN, m);
				continue;
			}
			start(f, r, probe);
			n = f->q[q].head; /* start took some off the list */
		}
	}
	if (f->open && f->open_until > now && f->open_until - now < wait)
		wait = f->open_until - now;
	return wait;
}

/* The object of x changed since it was indexed: said once.  Locked. */
static void
changed(struct remote_fetch *f, const struct xfer *x, char *m, size_t mlen)
{
	atomic_fetch_add(&f->c->st.changed, 1);
	if (!atomic_exchange(&x->o->changed, true)) {
		char *v = remote_version_text(&x->o->v);

		log_warn("remote %s: the object changed since it was indexed "
			 "(it is no longer %.200s%s): its samples fail "
			 "(remount to index it again)",
		    x->o->name, v ? v : "the version indexed",
		    v && strlen(v) > 200 ? "..." : "");
		free(v);
	}
	snprintf(m, mlen,
	    "%s: the object changed since it was indexed "
	    "(remount to index it again)",
	    x->o->name);
}

/* A transfer is over (judged where its headers ended).  Locked. */
static void
complete(struct remote_fetch *f, struct xfer *x, CURLcode cc)
{
	struct remote_ctx *c = f->c;
	const struct remote_resp *rs = &x->rx.resp;
	enum remote_bad bad;
	int j = remote_xfer_end(&x->rx, cc, &bad);
	bool probe = x->probe, retry, denied = false, reauth, said = false;
	char m[320];
	int err;

	f->nxfers--;
	if (x->prev)
		x->prev->next = x->next;
	else
		f->xfers = x->next;
	if (x->next)
		x->next->prev = x->prev;
	if (j == RJ_BAD)
		atomic_fetch_add(&c->st.bad[bad], 1);
	if (j == RJ_OK) {
		uint64_t us = (remote_now_ms() - x->t0) * 1000u,
			 l = atomic_load(&c->st.latency_us);

		atomic_store(&c->st.latency_us, l ? (l * 7 + us) / 8 : us);
		atomic_fetch_add(&c->st.bytes, x->rx.got);
		breaker_result(f, true, probe, x->o->name);
		for (unsigned i = 0; i < x->nreq; i++) {
			struct req *r = x->reqs[i];

			if (x->nreq == 1 && r->off == x->a) {
				r->buf = x->rx.buf; /* transferred */
				x->rx.buf = NULL;
			} else if ((r->buf = malloc(r->len ? r->len : 1)) !=
				   NULL)
				memcpy(r->buf, x->rx.buf + (r->off - x->a),
				    r->len);
			req_finish(f, r, r->buf ? 0 : -ENOMEM,
			    r->buf ? NULL : "out of memory");
		}
		goto out;
	}
	if (j == RJ_CHANGED)
		changed(f, x, m, sizeof(m));
	else if (j == RJ_BAD)
		snprintf(m, sizeof(m),
		    "%s: a bad response (%s) to a range request", x->o->name,
		    remote_bad_name(bad));
	else if (j == RJ_STATUS && c->creds != NULL &&
		 (rs->status == 401 || rs->status == 403)) {
		denied = true;
		snprintf(m, sizeof(m),
		    "%s: access denied: check the credentials (HTTP %ld)",
		    x->o->name, rs->status);
	} else if (j == RJ_STATUS)
		snprintf(m, sizeof(m), "%s: HTTP status %ld", x->o->name,
		    rs->status);
	else
		snprintf(
		    m, sizeof(m), "%s: %s", x->o->name, curl_easy_strerror(cc));
	retry = j == RJ_BAD ||
		(j == RJ_STATUS && remote_retryable(CURLE_OK, rs->status)) ||
		(j < 0 && remote_retryable(cc, 0));
	/* Refused (or a 400: an expired token): once more, with the
	 * credentials read again from their source. */
	reauth = (denied || (c->creds != NULL && j == RJ_STATUS &&
				rs->status == 400)) &&
		 cred_src_denied(c->creds, x->rx.cred_gen);
	/* The source not answering, or refusing the credentials even after
	 * they were read again (remote_read's -EHOSTDOWN: healed when it
	 * answers, or when the credentials are fixed), or the bytes (-EIO). */
	err = j < 0 || (j == RJ_BAD && bad == RB_SHORT) ||
		      (j == RJ_STATUS && remote_retryable(CURLE_OK, rs->status)) ||
		      denied
		  ? -EHOSTDOWN
		  : -EIO;
	/* A probe the server answered for itself (the object changed, a 4xx
	 * that no retry changes) shows it up again: the breaker closes, and
	 * the reads that follow get the server's answer, not "does not
	 * answer". */
	if (probe && (j == RJ_CHANGED || (j == RJ_STATUS &&
					      !remote_retryable(
						  CURLE_OK, rs->status))))
		breaker_result(f, true, probe, x->o->name);
	else if (remote_down(j < 0 ? cc : CURLE_OK,
		     j == RJ_STATUS ? rs->status : 0) ||
		 probe)
		breaker_result(f, false, probe, x->o->name);
	for (unsigned i = 0; i < x->nreq; i++) {
		struct req *r = x->reqs[i];

		if (reauth && !r->reauthed) {
			r->reauthed = true;
			r->state = R_QUEUED;
			r->not_before = 0;
			rf_list_add(f, r, r->demand ? 0 : 1);
			continue;
		}
		if (retry && r->tries < c->retries && !f->open) {
			r->tries++;
			r->state = R_QUEUED;
			r->not_before = remote_now_ms() +
					remote_backoff_ms(r->tries, &f->seed);
			rf_list_add(f, r, r->demand ? 0 : 1);
			atomic_fetch_add(&c->st.retries, 1);
			continue;
		}
		if (retry && !f->open &&
		    !remote_down(
			j < 0 ? cc : CURLE_OK, j == RJ_STATUS ? rs->status : 0))
			breaker_result(f, false, false, x->o->name);
		atomic_fetch_add(&c->st.failed, 1);
		req_finish(f, r, err, m);
		said |= denied;
	}
	if (said) {
		char why[600];

		if (cred_src_describe(c->creds, x->rx.cred_gen, why, sizeof(why)))
			log_warn("remote %s: access denied: check the "
				 "credentials (HTTP %ld with those of %s): its "
				 "reads fail until they are accepted",
			    x->o->name, rs->status, why);
	}
out:
	free(x->rx.buf);
	remote_xfer_done(&x->rx);
	curl_multi_remove_handle(f->m, x->e);
	if (f->nidle < MAX_XFERS)
		f->idle[f->nidle++] = x->e;
	else
		curl_easy_cleanup(x->e);
	free(x);
}

static void *
fetch_thread(void *arg)
{
	struct remote_fetch *f = arg;

	pthread_mutex_lock(&f->lock);
	while (!f->stop) {
		uint64_t wait;
		int running, left;
		CURLMsg *msg;

		if (f->c->creds != NULL && cred_src_due(f->c->creds)) {
			/* Read unlocked: the source may be a server. */
			pthread_mutex_unlock(&f->lock);
			cred_src_refresh(f->c->creds);
			pthread_mutex_lock(&f->lock);
		}
		wait = dispatch(f);

		pthread_mutex_unlock(&f->lock);
		curl_multi_poll(f->m, NULL, 0, (int)wait, NULL);
		curl_multi_perform(f->m, &running);
		pthread_mutex_lock(&f->lock);
		while ((msg = curl_multi_info_read(f->m, &left)) != NULL) {
			struct xfer *x;

			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(
			    msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
			complete(f, x, msg->data.result);
		}
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

/* The fetcher of c, started on first use.  NULL: it cannot start. */
struct remote_fetch *
rf_fetcher(struct remote_ctx *c)
{
	struct remote_fetch *f;

	pthread_mutex_lock(&c->lock);
	if ((f = c->fetch) != NULL || (f = calloc(1, sizeof(*f))) == NULL) {
		pthread_mutex_unlock(&c->lock);
		return f;
	}
	f->c = c;
	f->seed = (uint64_t)getpid() * 2654435761u ^ remote_now_ms();
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	if ((f->m = curl_multi_init()) == NULL) {
		free(f);
		pthread_mutex_unlock(&c->lock);
		return NULL;
	}
	curl_multi_setopt(
	    f->m, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)MAX_XFERS);
	curl_multi_setopt(f->m, CURLMOPT_MAXCONNECTS, (long)MAX_XFERS);
	curl_multi_setopt(f->m, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
	if (pthread_create(&f->th, NULL, fetch_thread, f) != 0) {
		curl_multi_cleanup(f->m);
		free(f);
		pthread_mutex_unlock(&c->lock);
		return NULL;
	}
	c->fetch = f;
	pthread_mutex_unlock(&c->lock);
	return f;
}

void
remote_fetch_free(struct remote_fetch *f)
{
	if (f == NULL)
		return;
	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_mutex_unlock(&f->lock);
	curl_multi_wakeup(f->m);
	pthread_join(f->th, NULL);
	for (unsigned b = 0; b < NBUCKET; b++)
		while (f->tab[b] != NULL) {
			struct req *r = f->tab[b];

			if (r->state == R_RUNNING)
				r->counted = false; /* its xfer goes below */
			rf_req_free(f, r);
		}
	/* Transfers still in flight. */
	while (f->xfers != NULL) {
		struct xfer *x = f->xfers;

		f->xfers = x->next;
		curl_multi_remove_handle(f->m, x->e);
		free(x->rx.buf);
		remote_xfer_done(&x->rx);
		curl_easy_cleanup(x->e);
		free(x);
	}
	while (f->nidle > 0)
		curl_easy_cleanup(f->idle[--f->nidle]);
	curl_multi_cleanup(f->m);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
	free(f);
}
