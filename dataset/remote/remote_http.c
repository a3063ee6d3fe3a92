/*
 * remote_http.c - one request.  Layer: dataset/remote/ (the HTTP/S3
 * client; see remote.h).  The settings of a dataset, an easy handle set
 * up for a URL and what it asks (TLS verified, SigV4 by its credentials
 * (cred.h), timeouts, bounded headers, no redirect followed, the Range
 * and the object's version as a precondition), its response judged where
 * its headers end, for every consumer (on_header: remote_resp_check), and
 * what a transfer came to (remote_xfer_end); what a failure means
 * (retry, breaker).
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
#include "util/clock.h"

uint64_t
remote_now_ms(void)
{
	return ff_mono_ms();
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
	cred_src_free(c->creds);
	free(c->endpoint);
	free(c->region);
	free(c->ca_file);
	free(c->sigv4);
	pthread_mutex_destroy(&c->lock);
	free(c);
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
	if (c->endpoint == NULL || (key = remote_key_escape(u.path)) == NULL) {
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

/*
 * A header line.  Where the headers of the final response end, the
 * response is judged, once, for every consumer (remote_resp_check): one
 * that is bad, or a 2xx of another version, is cut there, before a byte
 * of its body is taken.
 */
static size_t
on_header(char *p, size_t sz, size_t n, void *arg)
{
	struct remote_xfer *x = arg;
	struct remote_resp *r = &x->resp;
	bool end = remote_resp_line(r, p, sz * n);

	if (r->header_overflow) {
		x->judged = true;
		x->judge = RJ_BAD;
		x->bad = RB_HEADERS;
		return 0; /* abort */
	}
	if (!end || x->plain)
		return sz * n;
	if (r->status >= 100 && r->status < 200)
		return sz * n; /* a 1xx: the final response follows */
	x->judged = true;
	x->judge = remote_resp_check(r, &x->want, &x->bad);
	if (x->judge == RJ_BAD ||
	    (x->judge == RJ_CHANGED && r->status >= 200 && r->status < 300))
		return 0;
	return sz * n;
}

static size_t
on_body(char *p, size_t sz, size_t n, void *arg)
{
	struct remote_xfer *x = arg;
	size_t k = sz * n;

	if (x->plain ? x->resp.status != 0 &&
			   (x->resp.status < 200 || x->resp.status >= 300)
		     : !x->judged || x->judge != RJ_OK) {
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
remote_xfer_end(const struct remote_xfer *x, CURLcode cc, enum remote_bad *bad)
{
	*bad = RB_NONE;
	if (x->judged && x->judge != RJ_OK) {
		*bad = x->bad;
		return (int)x->judge;
	}
	if (!x->judged)
		return -1; /* no response (cc says why) */
	if (x->overflow)
		*bad = RB_LONG;
	else if (x->sink != NULL)
		return cc == CURLE_OK ? RJ_OK : -1;
	else if (cc == CURLE_PARTIAL_FILE ||
		 (cc == CURLE_OK && x->got < x->cap))
		*bad = RB_SHORT;
	else if (cc != CURLE_OK)
		return -1;
	return *bad == RB_NONE ? RJ_OK : RJ_BAD;
}

int
remote_easy_setup(const struct remote_ctx *c, CURL *e, const char *url,
    const struct remote_want *w, uint64_t total_ms, struct remote_xfer *x)
{
	char range[64];

	curl_easy_reset(e);
	x->hdrs = NULL;
	remote_resp_free(&x->resp);
	memset(&x->resp, 0, sizeof(x->resp));
	x->plain = w == NULL;
	if (w != NULL)
		x->want = *w;
	x->judged = false;
	x->judge = RJ_OK;
	x->bad = RB_NONE;
	x->got = x->dropped = 0;
	x->overflow = false;
	if (w != NULL && w->v != NULL) {
		/* The version asked for: If-Match, or If-Unmodified-Since. */
		char *pre = remote_version_header(w->v);

		if (pre == NULL)
			return -ENOMEM;
		x->hdrs = curl_slist_append(x->hdrs, pre);
		free(pre);
		if (x->hdrs == NULL)
			return -ENOMEM;
	}
	if (c->creds != NULL && cred_src_sign_s3(c->creds, c->region, "GET",
				    url, &x->hdrs, &x->cred_gen) != 0) {
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
		/* A stream: no total, but a minimum rate over the timeout. */
		curl_easy_setopt(
		    e, CURLOPT_LOW_SPEED_LIMIT, (long)REMOTE_STREAM_MIN_BPS);
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
	if (w == NULL)
		return 0;
	if (w->open)
		snprintf(range, sizeof(range), "%" PRIu64 "-", w->first);
	else
		snprintf(range, sizeof(range), "%" PRIu64 "-%" PRIu64, w->first,
		    w->last);
	curl_easy_setopt(e, CURLOPT_RANGE, range);
	return 0;
}

void
remote_xfer_done(struct remote_xfer *x)
{
	curl_slist_free_all(x->hdrs);
	x->hdrs = NULL;
	remote_resp_free(&x->resp);
}
