/*
 * remote_fetch_int.h - layer: dataset/remote/ (the HTTP/S3 client).
 * What the fetcher's two files share: remote_fetch.c
 * (its thread: the requests started, completed, retried; the breaker)
 * and remote_read.c (what the readers call: remote_read, remote_prefetch,
 * remote_forget, the window).  Not for use outside them.
 */
#ifndef FEEDFS_REMOTE_FETCH_INT_H
#define FEEDFS_REMOTE_FETCH_INT_H

#include "dataset/remote/remote_int.h"

#define NBUCKET 4096u
#define MAX_XFERS 64u
#define MERGE_GAP (16u << 10)
#define MERGE_MAX_BYTES (8u << 20)
#define MERGE_MAX_REQS 16u
/* A merge is made only while its gaps stay below 1/MERGE_WASTE of the
 * bytes asked for: what a request saves is worth a few KB, never more
 * than 5 % of the bytes. */
#define MERGE_WASTE 20u
/* A prefetched range not read this long after it came is dropped. */
#define STALE_MS 60000u
/* A range read this recently is not fetched ahead again: the next
 * epoch's read of it is a cache hit (RECENT slots remember them). */
#define RECENT_MS 10000u
#define RECENT 16384u
#define RECENT_WAYS 4u

enum { R_QUEUED, R_RUNNING, R_DONE, R_FAILED };

struct req {
	struct remote_obj *o;
	uint64_t off, len;
	uint8_t *buf;
	int state, err;
	char msg[320];
	unsigned tries;
	uint64_t not_before, done_ms;
	bool demand, counted; /* counted: in held */
	bool reauthed;	      /* asked again after a refusal (a 403) */
	unsigned waiters;
	struct req *hnext, *qnext, *qprev;
	int q; /* which list it is on: -1 none, 0 demand, 1 ahead, 2 done */
};

struct xfer {
	CURL *e;
	struct remote_xfer rx;
	struct remote_obj *o;
	uint64_t a, b, t0;
	struct req *reqs[MERGE_MAX_REQS];
	unsigned nreq;
	bool probe;
	struct xfer *next, *prev; /* the fetcher's in flight */
};

struct list {
	struct req *head, *tail;
};

struct remote_fetch {
	struct remote_ctx *c;
	CURLM *m;
	pthread_t th;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	struct req *tab[NBUCKET];
	struct list q[3]; /* demand, ahead, done */
	uint64_t held;
	unsigned nxfers;
	struct xfer *xfers; /* in flight */
	CURL *idle[MAX_XFERS];
	unsigned nidle;
	struct {
		const struct remote_obj *o;
		uint64_t off, ms;
	} recent[RECENT]; /* ranges read, by bucket */
	/* the breaker */
	unsigned fails;
	uint64_t open_until, open_ms;
	bool open, probing;
	uint64_t seed;
};

/* A request's bucket in the table. */
unsigned rf_bucket(const struct remote_obj *o, uint64_t off);
/* The request for exactly [off, off + len) of o, or NULL.  Locked. */
struct req *rf_find(struct remote_fetch *f, const struct remote_obj *o,
    uint64_t off, uint64_t len);
/* Onto list q (0 demand, 1 ahead, 2 done), off its list.  Locked. */
void rf_list_add(struct remote_fetch *f, struct req *r, int q);
void rf_list_del(struct remote_fetch *f, struct req *r);
/* A new request, queued (demand: first); r unlinked and freed.  Locked. */
struct req *rf_req_new(struct remote_fetch *f, struct remote_obj *o,
    uint64_t off, uint64_t len, bool demand);
void rf_req_free(struct remote_fetch *f, struct req *r);
/* Whether the breaker refuses a request now; *probe: it may go as the
 * probe.  Locked. */
bool rf_breaker_refuses(struct remote_fetch *f, uint64_t now, bool *probe);
/* The fetcher of c, its thread started on first use; NULL: it cannot. */
struct remote_fetch *rf_fetcher(struct remote_ctx *c);

#endif
