/*
 * cred_imds.c - layer: dataset/remote/ (the HTTP/S3 client; see cred.h): the
 * provider of an EC2 instance's role, last in the chain: the instance
 * metadata service, IMDSv2 (a session token first, then every request carries
 * it):
 *
 *   PUT /latest/api/token X-aws-ec2-metadata-token-ttl-seconds GET
 * /latest/meta-data/iam/security-credentials/       the role's name GET
 * /latest/meta-data/iam/security-credentials/ROLE   its JSON
 *
 * No IMDSv1 fallback (a service that refuses the token's PUT is not
 * asked without one).  AWS_EC2_METADATA_DISABLED=true turns it off;
 * AWS_EC2_METADATA_SERVICE_ENDPOINT (or _ENDPOINT_MODE=IPv6) moves it;
 * AWS_METADATA_SERVICE_TIMEOUT (seconds, default 1) and
 * AWS_METADATA_SERVICE_NUM_ATTEMPTS (default 1) bound each request, as
 * in the SDKs: off EC2 the chain's end costs about a second.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dataset/remote/cred_int.h"

#define TOKEN_TTL "21600"
#define CREDS_PATH "/latest/meta-data/iam/security-credentials/"

struct imds {
	struct cred_provider base;
	char *ca; /* the dataset's ca_file, or NULL */
};

static const char *
env(const char *k)
{
	const char *v = getenv(k);

	return v != NULL && *v != '\0' ? v : NULL;
}

/* One GET or PUT of path: 0 and the body (arena) of a 200, or -errno. */
static int
ask(struct remote_ctx *c, const char *base, const char *method,
    const char *path, const char *hdr, char **body, size_t *bl, char *err,
    size_t errlen)
{
	struct curl_slist *h = hdr ? curl_slist_append(NULL, hdr) : NULL;
	char url[512], why[300];
	struct cred_req q = {"instance metadata", method, url, h, NULL, 0};
	long status = 0;
	int r;

	if (hdr != NULL && h == NULL)
		return -ENOMEM;
	snprintf(url, sizeof(url), "%s%s", base, path);
	r = cred_http(c, &q, &status, body, bl, why, sizeof(why));
	curl_slist_free_all(h);
	if (r != 0) {
		snprintf(err, errlen, "instance metadata at %s: %s", base, why);
		return r;
	}
	if (status != 200) {
		cred_free(*body);
		snprintf(err, errlen,
		    "instance metadata at %s: HTTP %ld to %s %s", base, status,
		    method, path);
		return status == 404 ? -ENOENT : -EIO;
	}
	return 0;
}

static int
imds_get(struct cred_provider *p, struct cred **out, char *err, size_t errlen)
{
	struct imds *m = (struct imds *)p;
	const char *dis = env("AWS_EC2_METADATA_DISABLED"),
		   *base = env("AWS_EC2_METADATA_SERVICE_ENDPOINT"),
		   *mode = env("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"),
		   *to = env("AWS_METADATA_SERVICE_TIMEOUT"),
		   *na = env("AWS_METADATA_SERVICE_NUM_ATTEMPTS");
	char b[256], path[400], src[300], why[400];
	char *tok = NULL, *role = NULL, *doc = NULL, *th = NULL;
	struct remote_ctx *c = NULL;
	struct remote_opts o = {NULL, NULL, -1, m->ca, 1000, 0};
	size_t tl, rl, dl;
	int r;

	if (dis != NULL && strcasecmp(dis, "true") == 0) {
		snprintf(err, errlen,
		    "instance metadata: off (AWS_EC2_METADATA_DISABLED)");
		return -ENOENT;
	}
	if (base == NULL)
		base = mode != NULL && strcasecmp(mode, "IPv6") == 0
			   ? "http://[fd00:ec2::254]"
			   : "http://169.254.169.254";
	snprintf(b, sizeof(b), "%.*s", (int)strcspn(base, "?#"), base);
	for (size_t l = strlen(b); l > 0 && b[l - 1] == '/'; l--)
		b[l - 1] = '\0';
	if (to != NULL && atof(to) > 0)
		o.timeout_ms = (uint64_t)(atof(to) * 1000);
	if (na != NULL && atoi(na) > 1)
		o.retries = (uint32_t)atoi(na) - 1;
	if (remote_ctx_new(&o, false, &c, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	/* The session token: a secret while it lives (6 hours). */
	r = ask(c, b, "PUT", "/latest/api/token",
	    "X-aws-ec2-metadata-token-ttl-seconds: " TOKEN_TTL, &tok, &tl, err,
	    errlen);
	if (r == -EIO)
		r = -ENOENT; /* no such service here (not on EC2): the chain's
				end, as in the SDKs, not a failure */
	if (r != 0)
		goto out;
	while (tl > 0 && (tok[tl - 1] == '\n' || tok[tl - 1] == '\r'))
		tok[--tl] = '\0';
	if (tl == 0 || tl > 512 || strpbrk(tok, "\r\n") != NULL) {
		snprintf(err, errlen,
		    "instance metadata at %s: a session token "
		    "that is not one line",
		    b);
		r = -EIO;
		goto out;
	}
	/* The header that carries it: in the arena too. */
	if ((th = cred_alloc(tl + 32)) == NULL) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		r = -ENOMEM;
		goto out;
	}
	snprintf(th, tl + 32, "X-aws-ec2-metadata-token: %s", tok);
	if ((r = ask(c, b, "GET", CREDS_PATH, th, &role, &rl, err, errlen)) !=
	    0) {
		if (r == -ENOENT)
			snprintf(err, errlen,
			    "instance metadata at %s: the instance has no "
			    "IAM role",
			    b);
		goto out;
	}
	rl = strcspn(role, "\r\n");
	if (rl == 0 || rl > 128 || strcspn(role, "/?#%") < rl) {
		snprintf(
		    err, errlen, "instance metadata at %s: not a role name", b);
		r = -EIO;
		goto out;
	}
	snprintf(path, sizeof(path), CREDS_PATH "%.*s", (int)rl, role);
	if ((r = ask(c, b, "GET", path, th, &doc, &dl, err, errlen)) != 0)
		goto out;
	snprintf(src, sizeof(src), "the instance metadata's role %.*s", (int)rl,
	    role);
	if ((r = cred_imds_parse(doc, dl, src, out, why, sizeof(why))) != 0)
		snprintf(err, errlen, "instance metadata at %s, role %.*s: %s",
		    b, (int)rl, role, why);
out:
	cred_free(th);
	cred_free(tok);
	cred_free(role);
	cred_free(doc);
	remote_ctx_free(c);
	return r;
}

static void
imds_free(struct cred_provider *p)
{
	struct imds *m = (struct imds *)p;

	free(m->ca);
	free(m);
}

static const struct cred_provider_ops imds_ops = {imds_get, imds_free};

struct cred_provider *
cred_imds_new(const struct cred_net *n)
{
	struct imds *m = calloc(1, sizeof(*m));

	if (m == NULL)
		return NULL;
	if (n->ca_file != NULL && (m->ca = strdup(n->ca_file)) == NULL) {
		free(m);
		return NULL;
	}
	m->base.ops = &imds_ops;
	return &m->base;
}
