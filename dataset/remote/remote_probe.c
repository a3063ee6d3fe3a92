/*
 * remote_probe.c - the probe of a remote object at mount.  Layer:
 * dataset/remote/ (the HTTP/S3 client).
 *
 * An object is probed by a GET of its first byte (Range: bytes=0-0),
 * judged where its headers end as every response is (remote_resp_check):
 * the 206's Content-Range gives its size, its validators its version
 * (remote_version_of: a strong ETag, else Last-Modified and the size,
 * else refused), and the 206 itself shows that the server answers
 * ranges.  A server that answers such a request with a 200 (python3 -m
 * http.server, some CDNs) is refused here, with a message that names
 * Range, rather than failing every read after the mount.  Probes go many
 * at a time at first (remote_probe_all); those that did not answer are
 * asked again one by one, with retries (remote_probe).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset/remote/remote_int.h"

/* The probes in flight at once. */
#define PROBE_PARALLEL 32

static const struct remote_want probe_want = {0, 0, false, UINT64_MAX, NULL};

/*
 * What the probe x of o (curl done with it: cc) says: 0 (o probed), 1
 * (worth another try), or -errno; err says why but for 0.
 */
static int
probe_result(struct remote_ctx *c, struct remote_obj *o,
    const struct remote_xfer *x, CURLcode cc, char *err, size_t errlen)
{
	const struct remote_resp *r = &x->resp;
	enum remote_bad bad;
	int j = remote_xfer_end(x, cc, &bad);

	if (j == RJ_OK) {
		struct remote_version v;
		char why[400];
		int rc;

		if ((rc = remote_version_of(
			 r, r->range_total, &v, why, sizeof(why))) != 0) {
			snprintf(err, errlen, "%s: %s", o->name,
			    rc == -ENOMEM ? strerror(ENOMEM) : why);
			return rc;
		}
		remote_version_free(&o->v);
		o->v = v; /* transferred */
		o->probed = true;
		return 0;
	}
	if (j == RJ_BAD) {
		atomic_fetch_add(&c->st.bad[bad], 1);
		if (bad == RB_NOT206) {
			snprintf(err, errlen,
			    "%s: the server does not answer range requests "
			    "(HTTP %ld to Range: bytes=0-0): feedfs reads a "
			    "shard's members by Range; serve the shards from "
			    "a server that honours it (nginx, S3, ...)",
			    o->name, r->status);
			return -EIO;
		}
		if (bad == RB_REDIRECT) {
			snprintf(err, errlen,
			    "%s: a redirect (%ld%s%s) is not followed", o->name,
			    r->status, r->location_host[0] ? " to " : "",
			    r->location_host);
			return -EIO;
		}
		snprintf(err, errlen,
		    "%s: a bad response (%s) to Range: bytes=0-0", o->name,
		    remote_bad_name(bad));
		return 1;
	}
	if (j == RJ_STATUS) {
		switch (r->status) {
		case 416:
			snprintf(err, errlen, "%s: an empty object", o->name);
			return -EIO;
		case 404:
			snprintf(
			    err, errlen, "%s: no such object (404)", o->name);
			return -ENOENT;
		case 401:
		case 403:
			snprintf(err, errlen, "%s: access denied%s (HTTP %ld)",
			    o->name,
			    c->creds ? ": check the credentials, s3_region "
				       "and s3_endpoint"
				     : "",
			    r->status);
			return -EACCES;
		default:
			snprintf(err, errlen, "%s: HTTP status %ld", o->name,
			    r->status);
			return remote_retryable(CURLE_OK, r->status) ? 1 : -EIO;
		}
	}
	snprintf(err, errlen, "%s: %s", o->name, curl_easy_strerror(cc));
	return remote_retryable(cc, 0) ? 1 : -EIO;
}

int
remote_probe(
    struct remote_ctx *c, struct remote_obj *o, char *err, size_t errlen)
{
	uint64_t seed = (uint64_t)getpid() ^ remote_now_ms();
	CURL *e = curl_easy_init();
	struct remote_xfer x;
	uint8_t one;
	int r = -ENOMEM;

	if (e == NULL) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	memset(&x, 0, sizeof(x));
	for (unsigned k = 0;; k++) {
		CURLcode cc;

		x.buf = &one;
		x.cap = 1;
		if (remote_easy_setup(
			c, e, o->url, &probe_want, c->timeout_ms, &x) != 0) {
			snprintf(err, errlen, "%s", strerror(ENOMEM));
			break;
		}
		cc = curl_easy_perform(e);
		atomic_fetch_add(&c->st.requests, 1);
		r = probe_result(c, o, &x, cc, err, errlen);
		remote_xfer_done(&x);
		if (r != 1)
			break;
		if (k >= c->retries) {
			r = -EHOSTDOWN; /* every try was worth another */
			break;
		}
		atomic_fetch_add(&c->st.retries, 1);
		usleep((useconds_t)remote_backoff_ms(k + 1, &seed) * 1000u);
	}
	curl_easy_cleanup(e);
	return r;
}

/* One probe of remote_probe_all in flight. */
struct probe {
	CURL *e;
	struct remote_xfer x;
	struct remote_obj *o;
	uint8_t one;
};

void
remote_probe_all(struct remote_ctx *c, struct remote_obj *objs, size_t n)
{
	struct probe pv[PROBE_PARALLEL];
	CURLM *m = curl_multi_init();
	size_t next = 0, busy = 0;
	char err[512];

	if (m == NULL)
		return;
	memset(pv, 0, sizeof(pv));
	for (;;) {
		int running, left;
		CURLMsg *msg;

		for (size_t k = 0; k < PROBE_PARALLEL && next < n; k++) {
			struct probe *p = &pv[k];

			if (p->o != NULL)
				continue;
			if (p->e == NULL && (p->e = curl_easy_init()) == NULL)
				break;
			p->x.buf = &p->one;
			p->x.cap = 1;
			if (remote_easy_setup(c, p->e, objs[next].url,
				&probe_want, c->timeout_ms, &p->x) != 0)
				break;
			p->o = &objs[next++];
			curl_easy_setopt(p->e, CURLOPT_PRIVATE, p);
			curl_multi_add_handle(m, p->e);
			atomic_fetch_add(&c->st.requests, 1);
			busy++;
		}
		if (busy == 0)
			break;
		curl_multi_perform(m, &running);
		while ((msg = curl_multi_info_read(m, &left)) != NULL) {
			struct probe *p;

			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(
			    msg->easy_handle, CURLINFO_PRIVATE, (char **)&p);
			/* Not answered: remote_probe asks again, and says. */
			(void)probe_result(
			    c, p->o, &p->x, msg->data.result, err, sizeof(err));
			curl_multi_remove_handle(m, p->e);
			remote_xfer_done(&p->x);
			p->o = NULL;
			busy--;
		}
		if (running > 0)
			curl_multi_poll(m, NULL, 0, 1000, NULL);
	}
	for (size_t k = 0; k < PROBE_PARALLEL; k++)
		if (pv[k].e != NULL) {
			if (pv[k].o != NULL) {
				curl_multi_remove_handle(m, pv[k].e);
				remote_xfer_done(&pv[k].x);
			}
			curl_easy_cleanup(pv[k].e);
		}
	curl_multi_cleanup(m);
}
