/*
 * remote.h - the HTTP/S3 client's interface (issue 30).  Layer:
 * dataset/remote/, under dataset/; includes nothing of ours but util/.
 * Objects in object storage (s3://bucket/key) or on a web server
 * (http://, https://), read by HTTP range requests through libcurl.  Its
 * files, none calling one listed before it but for the credentials'
 * sources (cred_http.c, cred_sts.c, cred_imds.c), which make their own
 * requests with remote_http.c's context and easy handle (remote_http.c
 * reaches them only through cred.c's providers, so no circle):
 *
 *   remote_read.c    what the readers call: a range read, one asked for
 *                    ahead from the scheduler's lookahead (as much as
 *                    covers the measured latency), the window, the end
 *                    of it all (remote_close);
 *   remote_fetch.c   the fetcher: range GETs of members in flight over a
 *                    pool of keep-alive connections (curl multi), with
 *                    retries and a breaker;
 *   remote_stream.c  an object read forward from one GET, resumed where
 *                    it is cut (what a shard's index is walked from);
 *   remote_probe.c   an object's size and version at mount, and that
 *                    its server answers ranges;
 *   remote_http.c    one request: the settings, an easy handle set up
 *                    (TLS, SigV4 by the credentials of cred*.c, timeouts,
 *                    bounded headers, the version's precondition), and
 *                    its response judged where its headers end;
 *   cred*.c          the credentials of s3:// shards (cred.h);
 *   remote_version.c an object's version and the one check of a
 *                    response (no I/O, fuzzed);
 *   remote_parse.c   what comes from the config or the wire, parsed with
 *                    no I/O (fuzz/fuzz_remote.c feeds it): URLs, brace
 *                    ranges, a response's header lines and Content-Range.
 *
 * dataset/ds_remote.c is the dataset's side (a shard indexed and read).
 *
 * Secrets (keys, tokens, the query string of a signed URL) never leave
 * these files: messages, the log, the stats and sample names carry the
 * display form of a URL (remote_url_display): scheme, host and path.
 */
#ifndef FEEDFS_REMOTE_H
#define FEEDFS_REMOTE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A brace pattern expands to at most this many names. */
#define REMOTE_BRACE_MAX 1000000u
/* Response headers beyond this many bytes fail the request; any header
 * within them (an ETag of any length) is taken whole. */
#define REMOTE_HEADER_MAX (64u << 10)

/* ---- parsing (remote_parse.c): no I/O, fuzzed ---- */

/* Does s name a remote object (http://, https://, s3://)? */
bool remote_is_url(const char *s);

enum remote_scheme { RS_HTTP, RS_HTTPS, RS_S3 };

/* A URL as parsed: scheme, host (with :port), path (with query). */
struct remote_url {
	enum remote_scheme scheme;
	char *host; /* s3: the bucket */
	char *path; /* from the '/' on; s3: the key, without the '/' */
};

/*
 * Parse an http, https or s3 URL.  Refused with err: another scheme, no
 * host, user information (credentials never come from the config), a
 * control character or a space, a fragment, an s3 URL without a key.
 * An s3 key is everything after the bucket's '/', percent-decoded (a
 * space is %20, '#' %23, '%' %25; '?' may be written as it is): a '%'
 * without two hex digits after it, or a %00, is refused too.  0 or
 * -EINVAL (-ENOMEM).  remote_url_free frees.
 */
int remote_url_parse(
    const char *s, struct remote_url *u, char *err, size_t errlen);
void remote_url_free(struct remote_url *u);

/* An s3 key as it goes in a request's path: every byte but A-Z a-z 0-9
 * - _ . ~ / percent-encoded (AWS's UriEncode).  malloc'd. */
char *remote_key_escape(const char *key);

/*
 * What names url in messages, the log, samples.tsv and a kept index's
 * file: an http(s) URL up to its query string; an s3 URL as
 * s3://BUCKET/ + its key escaped (remote_key_escape), so that two keys
 * never share it.  malloc'd (NULL: out of memory).
 */
char *remote_url_display(const char *url);

/*
 * Expand WebDataset's brace ranges in pat ("shard-{000000..000999}.tar",
 * "{a,b}"; ranges keep the width of their first bound when it has a
 * leading zero): at most max names, else -E2BIG with err.  A '{' without
 * its '}' or a range whose ends are not numbers is -EINVAL.  *out and *n
 * (each name and the array malloc'd) on success.
 */
int remote_brace_expand(const char *pat, size_t max, char ***out, size_t *n,
    char *err, size_t errlen);

/* What a response's header lines said. */
struct remote_resp {
	long status;
	bool has_range, has_length;
	uint64_t range_first, range_last, range_total; /* UINT64_MAX: '*' */
	uint64_t length;
	char *etag; /* as sent (quotes, W/ kept), malloc'd; NULL: none */
	bool has_last_modified;
	int64_t last_modified;	 /* seconds since 1970 */
	char location_host[256]; /* of a redirect's Location */
	size_t header_bytes;
	bool header_overflow; /* more than REMOTE_HEADER_MAX */
	bool bad_header;      /* a Content-Range, Length, ETag or date that is
				 garbage, or one of them twice */
};

/*
 * Parse "bytes FIRST-LAST/TOTAL" (TOTAL may be '*'): 0 or -EINVAL.
 * FIRST <= LAST < TOTAL is checked.
 */
int remote_content_range(
    const char *s, size_t n, uint64_t *first, uint64_t *last, uint64_t *total);

/* Take one header line (as curl gives it: with its CRLF) into r (zeroed
 * first).  A status line starts a new response (after a 100 Continue).
 * Whether the line is the blank one that ends a response's headers. */
bool remote_resp_line(struct remote_resp *r, const char *line, size_t n);
/* What r holds (its ETag), freed; the rest of r is kept. */
void remote_resp_free(struct remote_resp *r);

/* Why a bad response is bad (counted per kind in the stats). */
enum remote_bad {
	RB_NONE,
	RB_SHORT,    /* fewer bytes than asked */
	RB_LONG,     /* more bytes than asked */
	RB_NOT206,   /* a 200 (or another 2xx) for a range request */
	RB_RANGE,    /* a Content-Range for another range, or none */
	RB_REDIRECT, /* a 3xx */
	RB_HEADERS,  /* too many header bytes, or a garbage header */
	RB_NKINDS
};
const char *remote_bad_name(unsigned kind);

/* ---- a remote object's version (remote_version.c): no I/O, fuzzed ---- */

/*
 * What a remote object is, at one time: what its kept index is keyed by,
 * what every request asks for (a precondition), what every response is
 * compared with.  A strong ETag (sent in If-Match, compared byte for
 * byte), else Last-Modified and the size (sent as If-Unmodified-Since,
 * compared), with a weak ETag beside them compared weakly (W/ aside),
 * never sent in If-Match (RFC 9110 compares it strongly there).
 */
enum remote_vkind { RV_ETAG = 1, RV_DATE = 2 };
struct remote_version {
	enum remote_vkind kind;
	char *etag; /* RV_ETAG: the strong tag; RV_DATE: a weak tag or NULL */
	int64_t last_modified; /* RV_DATE: seconds since 1970 */
	uint64_t size;
};

/*
 * The version of an object of size bytes from the response of its probe:
 * 0, or -EPROTO with why in err (no ETag and no Last-Modified; only a weak
 * ETag, which cannot be a precondition, and no Last-Modified); -ENOMEM.
 * remote_version_free frees.
 */
int remote_version_of(const struct remote_resp *r, uint64_t size,
    struct remote_version *v, char *err, size_t errlen);
void remote_version_free(struct remote_version *v);

/* Whether what r says of its object (its ETag, its Last-Modified; its
 * size is the Content-Range's, remote_resp_check) is version v. */
bool remote_version_same(
    const struct remote_version *v, const struct remote_resp *r);

/* The request header that asks for v: "If-Match: ETAG" or
 * "If-Unmodified-Since: IMF-fixdate".  malloc'd (NULL: out of memory). */
char *remote_version_header(const struct remote_version *v);

/* v in words for the kept index's key and the log: "etag ..." or
 * "last-modified SECONDS size N [weak ...]".  malloc'd. */
char *remote_version_text(const struct remote_version *v);

/* What a request asks of its response: the range [first, last] (open:
 * "bytes=FIRST-", to the object's end), the object's size (UINT64_MAX:
 * not known yet, the probe's) and version (NULL: the probe's). */
struct remote_want {
	uint64_t first, last;
	bool open;
	uint64_t size;
	const struct remote_version *v;
};

/* What a response is, judged where its headers end (remote_resp_check):
 * the one that was asked for; a bad one (*bad says how; tried again); of
 * another version of the object (a 412, or other validators); or an
 * HTTP status for the caller (a 4xx, a 5xx, a 416). */
enum remote_judge { RJ_OK, RJ_BAD, RJ_CHANGED, RJ_STATUS };

/*
 * The one check of a response, at the end of its headers, before any of
 * its body is used: a 206 with the Content-Range of the range asked (its
 * size the object's, known), a Content-Length, if any, of that range,
 * and the object's version.  A redirect, a 200 for a range, garbage or
 * too many header bytes are RJ_BAD.  Every consumer goes through it: the
 * probe, the index's stream and its resumes, the range reads.
 */
enum remote_judge remote_resp_check(const struct remote_resp *r,
    const struct remote_want *w, enum remote_bad *bad);

/* ---- settings (the [dataset] keys) ---- */

struct remote_opts {
	const char *s3_endpoint; /* NULL: https://s3.REGION.amazonaws.com */
	const char *s3_region;	 /* NULL: AWS_REGION, else us-east-1 */
	int s3_path_style;	 /* -1: yes with an endpoint, else no */
	const char *ca_file;	 /* a CA added to the system's */
	uint64_t timeout_ms;	 /* of one request (0: 30 s) */
	uint32_t retries;	 /* after the first try (UINT32_MAX: 4) */
};

/* The counters of a dataset's remote reads (.feedfs/stats). */
struct remote_stats {
	atomic_uint_fast64_t requests, bytes, retries, failed, fast_failed,
	    changed, breaker_opens, prefetched, prefetch_hits, dropped;
	atomic_uint_fast64_t bad[RB_NKINDS];
	atomic_uint_fast64_t index_bytes;
	atomic_uint_fast64_t held; /* fetched bytes waiting for a reader */
	atomic_uint_fast64_t latency_us;   /* smoothed time to the last byte */
	atomic_uint_fast64_t ahead_target; /* bytes worth fetching ahead */
};

#endif
