/*
 * remote_int.h - layer: dataset/remote/ (the HTTP/S3 client).  What its
 * files share (remote.h says which does what), and what dataset/ calls
 * of them.  Not for use outside dataset/remote/remote*.c,
 * dataset/ds_remote.c, dataset/ds_tar.c, dataset/ds_common.c, the tests
 * and fuzz/.
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
 * remote_ctx_free frees it and its credentials, its fetcher having never
 * started; remote_close (remote_read.c) stops the fetcher first.
 */
int remote_ctx_new(const struct remote_opts *o, bool s3,
    struct remote_ctx **out, char *err, size_t errlen);
void remote_ctx_free(struct remote_ctx *c);

/* The URL to request for spec (an s3:// URL mapped to the endpoint);
 * malloc'd, or NULL (out of memory or a bad URL, said in err). */
char *remote_request_url(
    const struct remote_ctx *c, const char *spec, char *err, size_t errlen);

/* The index's stream fails below this many bytes a second, sustained for
 * remote_timeout (a server that trickles), and says how far it got every
 * REMOTE_PROGRESS_MS while it runs. */
#define REMOTE_STREAM_MIN_BPS (64u << 10)
#define REMOTE_PROGRESS_MS 5000u

/* One transfer: what was asked, the response, and its body (into buf, at
 * most cap bytes, or into a sink).  Zeroed before its first setup. */
struct remote_xfer {
	struct remote_want want;
	struct remote_resp resp;
	bool judged;		 /* the headers ended: judge, bad */
	enum remote_judge judge; /* remote_resp_check's */
	enum remote_bad bad;
	uint8_t *buf;
	uint64_t cap, got;
	uint64_t dropped; /* bytes of an error page, dropped (bounded) */
	bool overflow;	  /* the body went past cap */
	/* or a sink for the body (the index's stream): then buf unused */
	size_t (*sink)(void *arg, const char *p, size_t n);
	void *sink_arg;
	struct curl_slist *hdrs;
	uint64_t cred_gen; /* the credentials' generation it was signed with */
	bool plain;	   /* no object's range (remote_easy_setup: w NULL) */
};

/*
 * Set e up for url and what w asks (its Range, and the precondition of
 * its version, if known): TLS verified (ca_file added), no redirect
 * followed, connect and total timeouts (total_ms 0: none, a minimum rate
 * instead, REMOTE_STREAM_MIN_BPS over remote_timeout), headers bounded,
 * SigV4 when configured.  x collects the response, judged by
 * remote_resp_check where its headers end: no byte of a body that is not
 * the one asked for reaches buf or the sink, and a bad one is cut there.
 * w NULL: a request that is no object's range (a credential source's,
 * cred_http.c): no Range, no version; its headers are collected (bounded)
 * but not judged, its status is the caller's.  0 or -ENOMEM.
 * remote_xfer_done frees what it made (x->resp keeps its status).
 */
int remote_easy_setup(const struct remote_ctx *c, CURL *e, const char *url,
    const struct remote_want *w, uint64_t total_ms, struct remote_xfer *x);
void remote_xfer_done(struct remote_xfer *x);

/*
 * What a transfer came to, once curl is done with it (cc): RJ_OK with
 * all of the body asked for (a sink's: all that came); RJ_BAD with *bad
 * (its headers, or its body: shorter, longer than asked); RJ_CHANGED;
 * RJ_STATUS (x->resp.status says which); or -1: no whole response (cc
 * says why: a timeout, a reset, a body cut short of a sink).
 */
int remote_xfer_end(
    const struct remote_xfer *x, CURLcode cc, enum remote_bad *bad);

/* Whether a curl result or an HTTP status may go away on a retry (5xx,
 * 429, a reset, a timeout, a refused connection). */
bool remote_retryable(CURLcode cc, long status);
/* Whether it says the server is down (the breaker counts these). */
bool remote_down(CURLcode cc, long status);
/* The wait before retry k (1, 2, ...), with jitter: ms. */
uint64_t remote_backoff_ms(unsigned k, uint64_t *seed);
uint64_t remote_now_ms(void);

/* A remote object (a shard) as the probe, the stream and the fetcher
 * read it. */
struct remote_obj {
	char *url;		 /* to request */
	char *name;		 /* display (remote_url_display) */
	struct remote_version v; /* v.size: its size */
	bool probed;		 /* v known */
	atomic_bool changed;	 /* a change was logged */
};

/* ---- the probe (remote_probe.c) ---- */

/*
 * The probes of objs[0..n): a GET of each one's first byte (Range:
 * bytes=0-0), many at a time over one multi handle (no thread: a mount
 * has none yet), whose answer, judged as every response is, gives its
 * size (the Content-Range's), its version, and shows that the server
 * answers ranges.  Those answered set probed; the others are left for
 * remote_probe, which says why.
 */
void remote_probe_all(struct remote_ctx *c, struct remote_obj *objs, size_t n);

/*
 * The probe of o, retried as a range read is.  0 (o->probed), -ENOENT
 * (404), -EACCES (401, 403), -EPROTO (no version: remote_version_of),
 * -EIO with err naming o (a server that does not answer ranges, a bad
 * answer), -EHOSTDOWN (its retries spent on a server that does not
 * answer: timeouts, resets, 5xx, 429, bad responses).
 */
int remote_probe(
    struct remote_ctx *c, struct remote_obj *o, char *err, size_t errlen);

/* ---- the index's stream (remote_stream.c) ---- */

struct remote_stream;

/*
 * A stream of o's bytes (probed) from one GET, read forward: resumed with
 * Range: bytes=N- where it is cut (each resume judged as every response
 * is: a 200, a 206 from another offset or of another version is never
 * spliced in), failed below REMOTE_STREAM_MIN_BPS sustained for
 * remote_timeout, its progress logged every REMOTE_PROGRESS_MS.
 */
int remote_stream_open(struct remote_ctx *c, const struct remote_obj *o,
    struct remote_stream **out);
/* All of n bytes at off (never before the last read's off) into buf: 0,
 * or -EIO with remote_stream_error saying why. */
int remote_stream_pread(void *s, void *buf, size_t n, uint64_t off);
const char *remote_stream_error(const struct remote_stream *s);
void remote_stream_close(struct remote_stream *s);

/* ---- the fetcher (remote_fetch.c) ---- */

struct remote_fetch;

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

/* What o holds (its URL, name, version), freed; o itself is the
 * caller's. */
void remote_obj_free(struct remote_obj *o);

/*
 * Stop c's fetcher (which reads objs), then free the n objects, objs and
 * c.  remote_read.c: the readers' side ends it all; c, objs may be NULL.
 */
void remote_close(struct remote_ctx *c, struct remote_obj *objs, size_t n);

#endif
