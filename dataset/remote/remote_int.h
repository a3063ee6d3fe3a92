/*
 * remote_int.h - what the files of the remote reader share (remote.h says
 * which does what).  Not for use outside dataset/remote/remote*.c, dataset/ds_remote.c,
 * dataset/ds_tar.c, the tests and fuzz/.
 */
#ifndef FEEDFS_REMOTE_INT_H
#define FEEDFS_REMOTE_INT_H

#include <curl/curl.h>
#include <pthread.h>

#include "dataset/remote/cred.h"
#include "dataset/remote/remote.h"

/* Backoff before retry k (1, 2, ...): 100 ms doubling to this cap. */
#define REMOTE_BACKOFF_MS 100u
#define REMOTE_BACKOFF_MAX_MS 5000u
/* Failed requests in a row (their retries spent, or the server down)
 * that open the breaker; it stays open this long at first, doubling up
 * to the cap while its probes fail. */
#define REMOTE_BREAKER_FAILS 5u
#define REMOTE_BREAKER_MS 1000u
#define REMOTE_BREAKER_MAX_MS 30000u
/* Bytes fetched ahead: this many latencies' worth of the readers' rate,
 * and at least this much (remote_room). */
#define REMOTE_AHEAD_LATENCIES 4u
#define REMOTE_AHEAD_MIN (8u << 20)

/* The settings and credentials of one dataset's remote shards, shared by
 * the index and the fetcher (immutable after remote_ctx_new, but st). */
struct remote_ctx {
	char *endpoint;	 /* s3: scheme://host[:port] of the endpoint */
	char *region;	 /* s3 */
	bool path_style; /* s3 */
	char *ca_file;	 /* NULL: the system's CAs only */
	char *sigv4;	 /* "aws:amz:REGION:s3", NULL: not S3 */
	struct cred_src *creds; /* cred.h: what signs, NULL: not signed */
	uint64_t timeout_ms, connect_ms;
	uint32_t retries;
	atomic_uint_fast64_t window; /* remote_set_window */
	/* the readers' rate (remote_read): bytes a second, smoothed */
	atomic_uint_fast64_t rate_bps, rate_t0, rate_bytes;
	struct remote_stats st;
	struct remote_fetch *fetch; /* remote_fetch.c, started on first use */
	pthread_mutex_t lock;	    /* fetch's start */
};

/*
 * A context for o; with s3 (some shard is s3://), the S3 endpoint and
 * region; cred_attach (cred.h) gives it the credentials that sign.
 * remote_ctx_free frees (the fetcher and the credentials too).
 */
int remote_ctx_new(const struct remote_opts *o, bool s3,
    struct remote_ctx **out, char *err, size_t errlen);
void remote_ctx_free(struct remote_ctx *c);

/* The URL to request for spec (an s3:// URL mapped to the endpoint);
 * malloc'd, or NULL (out of memory or a bad URL, said in err). */
char *remote_request_url(
    const struct remote_ctx *c, const char *spec, char *err, size_t errlen);

/* One transfer's response and body (the body into buf, at most cap). */
struct remote_xfer {
	struct remote_resp resp;
	uint8_t *buf;
	uint64_t cap, got;
	uint64_t dropped; /* bytes of an error page, dropped (bounded) */
	bool overflow;	  /* the body went past cap, or said it would */
	/* or a sink for the body (the index's stream): then buf unused */
	size_t (*sink)(void *arg, const char *p, size_t n);
	void *sink_arg;
	struct curl_slist *hdrs;
	uint64_t cred_gen; /* the credentials' generation it was signed with */
};

/*
 * Set e up for url: TLS verified (ca_file added), no redirect followed,
 * connect and total timeouts (total_ms 0: none, a stall limit instead),
 * headers bounded, SigV4 when configured, If-Match: etag (NULL: none),
 * Range: range (NULL: none), HEAD with head.  x collects the response.
 * 0 or -ENOMEM.  remote_xfer_done frees what it made.
 */
int remote_easy_setup(const struct remote_ctx *c, CURL *e, const char *url,
    const char *etag, const char *range, bool head, uint64_t total_ms,
    struct remote_xfer *x);
void remote_xfer_done(struct remote_xfer *x);

/* Whether a curl result or an HTTP status may go away on a retry (5xx,
 * 429, a reset, a timeout, a refused connection). */
bool remote_retryable(CURLcode cc, long status);
/* Whether it says the server is down (the breaker counts these). */
bool remote_down(CURLcode cc, long status);
/* The wait before retry k (1, 2, ...), with jitter: ms. */
uint64_t remote_backoff_ms(unsigned k, uint64_t *seed);
uint64_t remote_now_ms(void);

/*
 * The size and ETag of url (quotes kept; "" when the server gives none),
 * from a HEAD, else (a URL signed for GET only: 403; a server without
 * HEAD; no length) from a GET of its first byte; retried as a range read
 * is.  0, -ENOENT (404), -EACCES (401, 403), -EIO with err naming name
 * (a server that does not answer ranges, among others).
 */
int remote_head(struct remote_ctx *c, CURL *e, const char *url,
    const char *name, uint64_t *size, char *etag, size_t etaglen, char *err,
    size_t errlen);

/* ---- the fetcher (remote_fetch.c) ---- */

struct remote_fetch;

/* A shard as the fetcher reads it. */
struct remote_obj {
	char *url;  /* to request */
	char *name; /* display */
	char etag[128];
	uint64_t size;
	bool probed;	     /* size and etag known */
	atomic_bool changed; /* a 412 was logged */
};

/*
 * Read [off, off + len) of o: a prefetched copy, or a request now.  *out
 * (malloc'd).  With err: -EHOSTDOWN when the source did not answer (its
 * retries spent on timeouts, resets, bodies cut short, 5xx or 429; the
 * breaker open; no answer in the retries' time): that may go away when
 * it answers again; -EIO for what will not (the object changed, another
 * 4xx, a bad response); -ENOMEM.  Never waits past the retries' time.
 * Thread-safe; starts the fetcher on first use.
 */
int remote_read(struct remote_ctx *c, struct remote_obj *o, uint64_t off,
    uint64_t len, uint8_t **out, char *err, size_t errlen);

/* Ask for [off, off + len) of o ahead of its read: a hint, dropped when
 * the window (remote_window) is full or the breaker open. */
void remote_prefetch(
    struct remote_ctx *c, struct remote_obj *o, uint64_t off, uint64_t len);

/* Drop what was fetched (or asked for) ahead for [off, off + len) of o
 * and that no reader waits for. */
void remote_forget(
    struct remote_ctx *c, struct remote_obj *o, uint64_t off, uint64_t len);

/* Bytes worth asking for ahead now: what covers the measured latency at
 * the readers' rate (at most the window), less what is held. */
uint64_t remote_room(struct remote_ctx *c);

/* The fetcher's bound on bytes fetched ahead and not yet read. */
void remote_set_window(struct remote_ctx *c, uint64_t bytes);
uint64_t remote_window(const struct remote_ctx *c);

void remote_fetch_free(struct remote_fetch *f);

#endif
