/*
 * cred_sigv4.c - layer: dataset/remote/ (the HTTP/S3 client; see cred.h): AWS
 * Signature Version 4 of a request, computed here rather than by libcurl's
 * CURLOPT_AWS_SIGV4, which needs the secret as a user password: libcurl keeps
 * its own copies of it (the option's string, "AWS4" + the secret for the
 * first HMAC) in memory it never wipes, where a core dump finds them.  Here
 * the secret and every key derived from it stay in the arena; OpenSSL's HMAC
 * cleanses its own copy of a key when it is done.
 *
 * Signed: host, x-amz-date, the session token, and the headers the caller
 * names (S3: x-amz-content-sha256; STS: content-type).  A URL with a query
 * string is refused: the requests signed here have none.
 */
#include <curl/curl.h>
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset/remote/cred.h"

#define NHDR_MAX 8

void
cred_sha256_hex(const void *p, size_t n, char out[65])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[32];
	unsigned int ml = 0;

	EVP_Digest(p, n, md, &ml, EVP_sha256(), NULL);
	for (unsigned i = 0; i < 32; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[64] = '\0';
}

/* Length of a header entry's name ("name:value"). */
static size_t
name_len(const char *h)
{
	return strcspn(h, ":");
}

static int
name_cmp(const char *a, const char *b)
{
	size_t la = name_len(a), lb = name_len(b);
	int c = memcmp(a, b, la < lb ? la : lb);

	return c ? c : (la > lb) - (la < lb);
}

/* HMAC-SHA256 of (d, n) with key (k, kl) into out[32]. */
static void
hmac(const void *k, size_t kl, const void *d, size_t n, unsigned char *out)
{
	unsigned int ol = 32;

	HMAC(EVP_sha256(), k, (int)kl, d, n, out, &ol);
}

static int
append(struct curl_slist **l, const char *s)
{
	struct curl_slist *n = curl_slist_append(*l, s);

	if (n == NULL)
		return -ENOMEM;
	*l = n;
	return 0;
}

int
cred_sign(
    const struct cred *c, const struct cred_sig *q, struct curl_slist **out)
{
	const char *h = strstr(q->url, "://"), *he, *path;
	const char *hv[NHDR_MAX + 3];
	char amz[20], scope[160], hostent[300], datent[48], sh[256];
	char creq_hash[65], sig[65], line[700];
	size_t nh = 0, o = 0, cap;
	struct tm tm;
	char *creq, *tokhdr = NULL;
	unsigned char *k;
	int r = -ENOMEM;

	if (h == NULL || q->nhdrs > NHDR_MAX || strchr(q->url, '?') != NULL)
		return -EINVAL;
	h += 3;
	he = h + strcspn(h, "/");
	path = *he ? he : "/";
	if (he == h || (size_t)(he - h) > 256)
		return -EINVAL;
	gmtime_r(&q->now, &tm);
	strftime(amz, sizeof(amz), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(scope, sizeof(scope), "%.8s/%s/%s/aws4_request", amz,
	    q->region, q->service);
	snprintf(hostent, sizeof(hostent), "host:%.*s", (int)(he - h), h);
	snprintf(datent, sizeof(datent), "x-amz-date:%s", amz);
	/* The canonical headers, sorted by name. */
	hv[nh++] = hostent;
	hv[nh++] = datent;
	for (size_t i = 0; i < q->nhdrs; i++)
		hv[nh++] = q->hdrs[i];
	if (c->token != NULL) {
		size_t tl = strlen(c->token) + 32;

		if ((tokhdr = cred_alloc(tl)) == NULL)
			return -ENOMEM;
		snprintf(tokhdr, tl, "x-amz-security-token:%s", c->token);
		hv[nh++] = tokhdr;
	}
	for (size_t i = 1; i < nh; i++)
		for (size_t j = i; j > 0 && name_cmp(hv[j - 1], hv[j]) > 0;
		     j--) {
			const char *t = hv[j];

			hv[j] = hv[j - 1];
			hv[j - 1] = t;
		}
	sh[0] = '\0';
	cap = strlen(q->method) + strlen(path) + 200;
	for (size_t i = 0; i < nh; i++) {
		cap += strlen(hv[i]) + 2;
		snprintf(sh + strlen(sh), sizeof(sh) - strlen(sh), "%s%.*s",
		    i ? ";" : "", (int)name_len(hv[i]), hv[i]);
	}
	/* In the arena: it holds the session token. */
	if ((creq = cred_alloc(cap)) == NULL)
		goto out;
	o = (size_t)snprintf(creq, cap, "%s\n%s\n\n", q->method, path);
	for (size_t i = 0; i < nh; i++)
		o += (size_t)snprintf(creq + o, cap - o, "%s\n", hv[i]);
	o += (size_t)snprintf(creq + o, cap - o, "\n%s\n%s", sh,
	    q->payload_sha256 ? q->payload_sha256 : "");
	cred_sha256_hex(creq, o, creq_hash);
	cred_free(creq);
	snprintf(line, sizeof(line), "AWS4-HMAC-SHA256\n%s\n%s\n%s", amz, scope,
	    creq_hash);
	/* The signing key: "AWS4" + secret, then date, region, service. */
	size_t sl = strlen(c->secret);
	if ((k = cred_alloc(sl + 4 + 32 * 2)) == NULL)
		goto out;
	memcpy(k, "AWS4", 4);
	memcpy(k + 4, c->secret, sl);
	unsigned char *d = k + 4 + sl, *e = d + 32;
	hmac(k, sl + 4, amz, 8, d);
	hmac(d, 32, q->region, strlen(q->region), e);
	hmac(e, 32, q->service, strlen(q->service), d);
	hmac(d, 32, "aws4_request", 12, e);
	hmac(e, 32, line, strlen(line), d);
	for (unsigned i = 0; i < 32; i++)
		snprintf(sig + 2 * i, 3, "%02x", d[i]);
	cred_free(k); /* zeroed */
	/* The headers sent: Host as signed, the date, the token. */
	snprintf(line, sizeof(line), "Host: %.*s", (int)(he - h), h);
	if (append(out, line) != 0)
		goto out;
	snprintf(line, sizeof(line), "X-Amz-Date: %s", amz);
	if (append(out, line) != 0)
		goto out;
	if (tokhdr != NULL) {
		/* "X-Amz-Security-Token: " over "x-amz-security-token:" */
		size_t tl = strlen(tokhdr) + 2;
		char *t = cred_alloc(tl);

		if (t == NULL)
			goto out;
		snprintf(t, tl, "X-Amz-Security-Token: %s", c->token);
		r = append(out, t);
		cred_free(t);
		if (r != 0)
			goto out;
		r = -ENOMEM;
	}
	snprintf(line, sizeof(line),
	    "Authorization: AWS4-HMAC-SHA256 Credential=%s/%s, "
	    "SignedHeaders=%s, Signature=%s",
	    c->key_id, scope, sh, sig);
	if (append(out, line) != 0)
		goto out;
	r = 0;
out:
	cred_free(tokhdr);
	return r;
}
