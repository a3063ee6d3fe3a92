/*
 * remote.h - layer: dataset index, remote shards (issue 30).  Tar shards
 * in object storage (s3://bucket/key) or on a web server (http://,
 * https://), read by HTTP range requests through libcurl.
 *
 *   remote_parse.c  what comes from the config or the wire, parsed with
 *                   no I/O (fuzz/fuzz_remote.c feeds it): URLs, brace
 *                   ranges, a response's header lines and Content-Range;
 *   remote_http.c   one request: an easy handle set up (TLS, SigV4,
 *                   timeouts, bounded headers) and its response checked;
 *                   the synchronous requests of the index (HEAD, the
 *                   streaming GET);
 *   cred*.c         the credentials of s3:// shards (cred.h);
 *   remote_fetch.c  the fetcher: range GETs of members in flight over a
 *                   pool of keep-alive connections (curl multi), with
 *                   retries and a breaker;
 *   remote_read.c   what the readers call of it: a range read, one asked
 *                   for ahead from the scheduler's lookahead (as much as
 *                   covers the measured latency), the window;
 *   ds_remote.c     the dataset's side: the shards of a spec, each
 *                   indexed from one streaming GET, members read.
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
/* Response headers beyond this many bytes fail the request. */
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
 * 0 or -EINVAL (-ENOMEM).  remote_url_free frees.
 */
int remote_url_parse(
    const char *s, struct remote_url *u, char *err, size_t errlen);
void remote_url_free(struct remote_url *u);

/* What names url in messages: up to the query string.  malloc'd. */
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
	char etag[128];
	char location_host[256]; /* of a redirect's Location */
	size_t header_bytes;
	bool header_overflow; /* more than REMOTE_HEADER_MAX */
	bool bad_header;      /* a Content-Range or Length that is garbage */
};

/*
 * Parse "bytes FIRST-LAST/TOTAL" (TOTAL may be '*'): 0 or -EINVAL.
 * FIRST <= LAST < TOTAL is checked.
 */
int remote_content_range(
    const char *s, size_t n, uint64_t *first, uint64_t *last, uint64_t *total);

/* Take one header line (as curl gives it: with its CRLF) into r.  A
 * status line starts a new response (after a 100 Continue). */
void remote_resp_line(struct remote_resp *r, const char *line, size_t n);

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

/*
 * Check the response of a range request for [off, off + len) of an
 * object of size total (UINT64_MAX: unknown): RB_NONE when it is a 206
 * with that very Content-Range (and Length, if given).  got: the body's
 * bytes (what arrived; more than len is RB_LONG).
 */
enum remote_bad remote_range_check(const struct remote_resp *r, uint64_t off,
    uint64_t len, uint64_t total, uint64_t got);

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
