/*
 * remote_http.c - layer: dataset index, remote shards (see remote.h):
 * one request.  The settings of a dataset, an easy handle set up for a
 * URL (TLS verified, SigV4 by its credentials (cred.h), timeouts, bounded
 * headers, no redirect followed), what a failure means (retry, breaker),
 * and the index's HEAD.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dataset/remote/remote_int.h"

uint64_t
remote_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t
remote_backoff_ms(unsigned k, uint64_t *seed)
{
	uint64_t d = REMOTE_BACKOFF_MS;

	for (unsigned i = 1; i < k && d < REMOTE_BACKOFF_MAX_MS; i++)
		d *= 2;
	if (d > REMOTE_BACKOFF_MAX_MS)
		d = REMOTE_BACKOFF_MAX_MS;
	/* Full jitter on the upper half: [d/2, d). */
	*seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
	return d / 2 + (*seed >> 33) % (d / 2 + 1);
}

bool
remote_down(CURLcode cc, long status)
{
	return cc == CURLE_COULDNT_CONNECT ||
	       cc == CURLE_COULDNT_RESOLVE_HOST ||
	       cc == CURLE_OPERATION_TIMEDOUT ||
	       (cc == CURLE_OK &&
		   (status == 502 || status == 503 || status == 504));
}

bool
remote_retryable(CURLcode cc, long status)
{
	switch (cc) {
	case CURLE_OK:
		return status >= 500 || status == 429;
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_SSL_CONNECT_ERROR:
		return true;
	default:
		return false;
	}
}

int
remote_ctx_new(const struct remote_opts *o, bool s3, struct remote_ctx **out,
    char *err, size_t errlen)
{
	struct remote_ctx *c = calloc(1, sizeof(*c));
	const char *region = o->s3_region;
	int r = -ENOMEM;

	if (c == NULL)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	c->timeout_ms = o->timeout_ms ? o->timeout_ms : 30000;
	c->connect_ms = c->timeout_ms < 5000 ? c->timeout_ms : 5000;
	c->retries = o->retries == UINT32_MAX ? 4 : o->retries;
	c->window = 64u << 20;
	if (o->ca_file != NULL && (c->ca_file = strdup(o->ca_file)) == NULL)
		goto fail;
	if (!s3) {
		*out = c;
		return 0;
	}
	if (region == NULL)
		region = getenv("AWS_REGION");
	if (region == NULL || *region == '\0')
		region = getenv("AWS_DEFAULT_REGION");
	if (region == NULL || *region == '\0')
		region = "us-east-1";
	if ((c->region = strdup(region)) == NULL)
		goto fail;
	c->path_style = o->s3_path_style < 0 ? o->s3_endpoint != NULL
					     : o->s3_path_style != 0;
	if (o->s3_endpoint != NULL) {
		size_t l = strlen(o->s3_endpoint);

		while (l > 0 && o->s3_endpoint[l - 1] == '/')
			l--;
		c->endpoint = strndup(o->s3_endpoint, l);
	} else if (asprintf(&c->endpoint, "https://s3.%s.amazonaws.com",
		       c->region) < 0)
		c->endpoint = NULL;
	if (c->endpoint == NULL ||
	    asprintf(&c->sigv4, "aws:amz:%s:s3", c->region) < 0) {
		c->sigv4 = NULL;
		goto fail;
	}
	*out = c;
	return 0;
fail:
	snprintf(err, errlen, "%s", strerror(ENOMEM));
	remote_ctx_free(c);
	return r;
}

void
remote_ctx_free(struct remote_ctx *c)
{
	if (c == NULL)
		return;
	remote_fetch_free(c->fetch);
	cred_src_free(c->creds);
	free(c->endpoint);
	free(c->region);
	free(c->ca_file);
	free(c->sigv4);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* Percent-encode an S3 key for the request line ('/' kept). */
static char *
key_escape(const char *k)
{
	static const char hex[] = "0123456789ABCDEF";
	char *o = malloc(strlen(k) * 3 + 1), *p = o;

	if (o == NULL)
		return NULL;
	for (; *k; k++) {
		unsigned char ch = (unsigned char)*k;

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' ||
		    ch == '.' || ch == '~' || ch == '/')
			*p++ = (char)ch;
		else {
			*p++ = '%';
			*p++ = hex[ch >> 4];
			*p++ = hex[ch & 15];
		}
	}
	*p = '\0';
	return o;
}

char *
remote_request_url(
    const struct remote_ctx *c, const char *spec, char *err, size_t errlen)
{
	struct remote_url u;
	char *out = NULL, *key;
	const char *host;

	if (remote_url_parse(spec, &u, err, errlen) != 0)
		return NULL;
	if (u.scheme != RS_S3) {
		remote_url_free(&u);
		return strdup(spec);
	}
	if (c->endpoint == NULL || (key = key_escape(u.path)) == NULL) {
		remote_url_free(&u);
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return NULL;
	}
	host = strstr(c->endpoint, "://");
	host = host ? host + 3 : c->endpoint;
	if (c->path_style) {
		if (asprintf(&out, "%s/%s/%s", c->endpoint, u.host, key) < 0)
			out = NULL;
	} else if (asprintf(&out, "%.*s%s.%s/%s", (int)(host - c->endpoint),
		       c->endpoint, u.host, host, key) < 0)
		out = NULL;
	free(key);
	remote_url_free(&u);
	return out;
}

static size_t
on_header(char *p, size_t sz, size_t n, void *arg)
{
	struct remote_xfer *x = arg;
	const struct remote_resp *r = &x->resp;

	remote_resp_line(&x->resp, p, sz * n);
	if (r->header_overflow)
		return 0; /* abort */
	/* The end of the headers: a body longer than asked is refused
	 * before any of it comes (a gigantic Content-Length). */
	if (sz * n <= 2 && x->sink == NULL && r->status >= 200 &&
	    r->status < 300 && r->has_length && r->length > x->cap) {
		x->overflow = true;
		return 0;
	}
	return sz * n;
}

static size_t
on_body(char *p, size_t sz, size_t n, void *arg)
{
	struct remote_xfer *x = arg;
	size_t k = sz * n;

	if (x->resp.status != 0 &&
	    (x->resp.status < 200 || x->resp.status >= 300)) {
		/* An error page: dropped, up to a bound. */
		x->dropped += k;
		return x->dropped > REMOTE_HEADER_MAX ? 0 : k;
	}
	if (x->sink != NULL)
		return x->sink(x->sink_arg, p, k);
	if (x->got + k > x->cap) {
		/* More than asked: refused, never buffered. */
		x->overflow = true;
		x->got += k;
		return 0;
	}
	memcpy(x->buf + x->got, p, k);
	x->got += k;
	return k;
}

int
remote_easy_setup(const struct remote_ctx *c, CURL *e, const char *url,
    const char *etag, const char *range, bool head, uint64_t total_ms,
    struct remote_xfer *x)
{
	char h[200];

	curl_easy_reset(e);
	x->hdrs = NULL;
	memset(&x->resp, 0, sizeof(x->resp));
	x->got = x->dropped = 0;
	x->overflow = false;
	if (etag != NULL && *etag != '\0') {
		snprintf(h, sizeof(h), "If-Match: %s", etag);
		if ((x->hdrs = curl_slist_append(x->hdrs, h)) == NULL)
			return -ENOMEM;
	}
	if (c->creds != NULL &&
	    cred_src_sign_s3(c->creds, c->region, head ? "HEAD" : "GET", url,
		&x->hdrs, &x->cred_gen) != 0) {
		curl_slist_free_all(x->hdrs);
		x->hdrs = NULL;
		return -ENOMEM;
	}
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
	if (c->ca_file != NULL) {
		/* Added to the system's CAs, which CAPATH keeps. */
		curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_file);
		curl_easy_setopt(e, CURLOPT_CAPATH, "/etc/ssl/certs");
	}
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)c->connect_ms);
	if (total_ms > 0)
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)total_ms);
	else {
		/* A stream: no total, but a stall fails it. */
		curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME,
		    (long)((c->timeout_ms + 999) / 1000));
	}
	curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
	if (range != NULL)
		curl_easy_setopt(e, CURLOPT_RANGE, range);
	if (head)
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	return 0;
}

void
remote_xfer_done(struct remote_xfer *x)
{
	curl_slist_free_all(x->hdrs);
	x->hdrs = NULL;
}

/*
 * One way of asking url's size and ETag, retried: a HEAD, or a GET of its
 * first byte.  0; 1: a HEAD that said nothing useful (refused, no
 * length), for the caller to ask with a GET; or -errno with err.
 */
static int
probe(struct remote_ctx *c, CURL *e, const char *url, const char *name,
    bool head, uint64_t *size, char *etag, size_t etaglen, char *err,
    size_t errlen)
{
	uint64_t seed = (uint64_t)getpid() ^ remote_now_ms();
	uint8_t one;

	for (unsigned k = 0;; k++) {
		struct remote_xfer x = {0};
		CURLcode cc;
		int r;

		x.buf = &one;
		x.cap = head ? UINT64_MAX : 1; /* a HEAD has no body */
		if ((r = remote_easy_setup(c, e, url, NULL, head ? NULL : "0-0",
			 head, c->timeout_ms, &x)) != 0)
			return r;
		cc = curl_easy_perform(e);
		remote_xfer_done(&x);
		atomic_fetch_add(&c->st.requests, 1);
		if (head && cc == CURLE_OK && x.resp.status == 200)
			goto head_ok;
		if (head && cc == CURLE_OK &&
		    (x.resp.status == 403 || x.resp.status == 405 ||
			x.resp.status == 501))
			return 1; /* a URL signed for GET, a server without HEAD
				   */
		if (!head && cc == CURLE_OK && x.resp.status == 206 &&
		    x.resp.has_range && x.resp.range_first == 0 &&
		    x.resp.range_last == 0 &&
		    x.resp.range_total != UINT64_MAX) {
			*size = x.resp.range_total;
			snprintf(etag, etaglen, "%s", x.resp.etag);
			return 0;
		}
		if (!head && (x.resp.status == 200 ||
				 (x.resp.status == 206 && !x.resp.has_range))) {
			snprintf(err, errlen,
			    "%s: the server does not answer range requests "
			    "(HTTP %ld to Range: bytes=0-0)",
			    name, x.resp.status);
			return -EIO;
		}
		if (cc == CURLE_OK && x.resp.status == 416) {
			snprintf(err, errlen, "%s: an empty object", name);
			return -EIO;
		}
		if (cc == CURLE_OK && x.resp.status == 404) {
			snprintf(err, errlen, "%s: no such object (404)", name);
			return -ENOENT;
		}
		if (cc == CURLE_OK &&
		    (x.resp.status == 401 || x.resp.status == 403)) {
			snprintf(err, errlen, "%s: access denied%s (HTTP %ld)",
			    name,
			    c->creds ? ": check the credentials, s3_region "
				       "and s3_endpoint"
				     : "",
			    x.resp.status);
			return -EACCES;
		}
		if (k < c->retries && remote_retryable(cc, x.resp.status)) {
			atomic_fetch_add(&c->st.retries, 1);
			usleep((useconds_t)remote_backoff_ms(k + 1, &seed) *
			       1000u);
			continue;
		}
		if (cc != CURLE_OK)
			snprintf(err, errlen, "%s: %s", name,
			    curl_easy_strerror(cc));
		else if (x.resp.status >= 300 && x.resp.status < 400)
			snprintf(err, errlen,
			    "%s: a redirect (%ld%s%s) is not followed", name,
			    x.resp.status,
			    x.resp.location_host[0] ? " to " : "",
			    x.resp.location_host);
		else
			snprintf(err, errlen, "%s: HTTP status %ld", name,
			    x.resp.status);
		return -EIO;
	head_ok:
		if (!x.resp.has_length || x.resp.length == 0)
			return 1; /* said nothing: ask with a GET */
		*size = x.resp.length;
		snprintf(etag, etaglen, "%s", x.resp.etag);
		return 0;
	}
}

int
remote_head(struct remote_ctx *c, CURL *e, const char *url, const char *name,
    uint64_t *size, char *etag, size_t etaglen, char *err, size_t errlen)
{
	int r;

	/*
	 * A HEAD, or where it says nothing (a URL signed for GET only, a
	 * server or proxy without it, no length), a GET of the first byte,
	 * whose Content-Range holds the size.
	 */
	r = probe(c, e, url, name, true, size, etag, etaglen, err, errlen);
	if (r == 1)
		r = probe(
		    c, e, url, name, false, size, etag, etaglen, err, errlen);
	return r;
}
