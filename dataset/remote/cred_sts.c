/*
 * cred_sts.c - layer: dataset/remote/ (the HTTP/S3 client; see cred.h): the
 * AWS Security Token Service's two calls that give a role's temporary
 * credentials (the Query API, a form POSTed, XML back):
 *
 *   AssumeRole                 signed (SigV4, service "sts") with the
 *                              credentials of a source profile;
 *   AssumeRoleWithWebIdentity  unsigned, with an OIDC token read from a
 *                              file (Kubernetes' IRSA rotates that file:
 *                              it is read again for every call).
 *
 * The endpoint: AWS_ENDPOINT_URL_STS, else https://sts.REGION.amazonaws.com
 * of the first of AWS_REGION, AWS_DEFAULT_REGION, the profile's region,
 * the dataset's s3_region, us-east-1.  The request's body (the token) and
 * the response (the secret) live in the arena.
 *
 * Also the provider of the web identity the environment names
 * (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_SESSION_NAME), as
 * EKS sets it for a pod's service account.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset/remote/cred_int.h"

#define FORM_TYPE "application/x-www-form-urlencoded; charset=utf-8"

int
cred_sts_init(struct cred_sts *s, const struct cred_net *n)
{
	struct remote_opts o = {
	    NULL, NULL, -1, n->ca_file, n->timeout_ms, n->retries};
	char err[256];

	memset(s, 0, sizeof(*s));
	if (n->region != NULL && (s->region = strdup(n->region)) == NULL)
		return -ENOMEM;
	if (remote_ctx_new(&o, false, &s->http, err, sizeof(err)) != 0) {
		free(s->region);
		return -ENOMEM;
	}
	return 0;
}

void
cred_sts_fini(struct cred_sts *s)
{
	remote_ctx_free(s->http);
	free(s->region);
}

static const char *
env(const char *k)
{
	const char *v = getenv(k);

	return v != NULL && *v != '\0' ? v : NULL;
}

/* The region and the endpoint (malloc'd, no trailing '/') of a call. */
static char *
endpoint(
    const struct cred_sts *s, const struct cred_role *r, const char **region)
{
	const char *e = env("AWS_ENDPOINT_URL_STS");
	char *out;
	size_t l;

	if ((*region = env("AWS_REGION")) == NULL &&
	    (*region = env("AWS_DEFAULT_REGION")) == NULL &&
	    (*region = r->region) == NULL && (*region = s->region) == NULL)
		*region = "us-east-1";
	if (e == NULL) {
		if (asprintf(&out, "https://sts.%s.amazonaws.com", *region) < 0)
			return NULL;
		return out;
	}
	l = strlen(e);
	while (l > 0 && e[l - 1] == '/')
		l--;
	return strndup(e, l);
}

/* Append "&name=ESCAPED(v)" to the form f (arena), or fail. */
static int
form_add(char **f, size_t *len, size_t cap, const char *name, const char *v)
{
	char *e;
	int n;

	if (v == NULL)
		return 0;
	if ((e = cred_form_escape(v, strlen(v))) == NULL)
		return -ENOMEM;
	n = snprintf(*f + *len, cap - *len, "&%s=%s", name, e);
	cred_free(e);
	if (n < 0 || (size_t)n >= cap - *len)
		return -E2BIG;
	*len += (size_t)n;
	return 0;
}

/*
 * One call: action with r and, for a web identity, token; signed with
 * base when base is not NULL.
 */
static int
call(struct cred_sts *s, const char *action, const struct cred_role *r,
    const char *token, const struct cred *base, struct cred **out, char *err,
    size_t errlen)
{
	static const char *const sh[] = {"content-type:" FORM_TYPE};
	const char *region;
	char *url = NULL, *ep = endpoint(s, r, &region), *resp = NULL;
	char session[64], hash[65], why[400];
	size_t cap = 4096 + (token ? strlen(token) * 3 : 0), len;
	char *form = cred_alloc(cap);
	struct curl_slist *h = NULL, *l;
	long status = 0;
	size_t rl;
	int q = -ENOMEM;

	if (ep == NULL || form == NULL || asprintf(&url, "%s/", ep) < 0) {
		url = NULL;
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		goto out;
	}
	snprintf(
	    session, sizeof(session), "feedfs-%lld", (long long)time(NULL));
	len =
	    (size_t)snprintf(form, cap, "Action=%s&Version=2011-06-15", action);
	if ((q = form_add(&form, &len, cap, "RoleArn", r->arn)) != 0 ||
	    (q = form_add(&form, &len, cap, "RoleSessionName",
		 r->session ? r->session : session)) != 0 ||
	    (q = form_add(&form, &len, cap, "ExternalId", r->external_id)) !=
		0 ||
	    (q = form_add(&form, &len, cap, "DurationSeconds", r->duration)) !=
		0 ||
	    (q = form_add(&form, &len, cap, "WebIdentityToken", token)) != 0) {
		snprintf(err, errlen, "%s: %s", r->source, strerror(-q));
		goto out;
	}
	q = -ENOMEM;
	/* No "Expect: 100-continue": a token makes the body large. */
	if ((h = curl_slist_append(NULL, "Content-Type: " FORM_TYPE)) == NULL ||
	    (l = curl_slist_append(h, "Expect:")) == NULL) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		goto out;
	}
	if (base != NULL) {
		struct cred_sig sg = {
		    "POST", url, region, "sts", hash, sh, 1, time(NULL)};

		cred_sha256_hex(form, len, hash);
		if ((q = cred_sign(base, &sg, &h)) != 0) {
			snprintf(err, errlen, "%s: STS at %s: cannot sign (%s)",
			    r->source, ep, strerror(-q));
			goto out;
		}
	}
	struct cred_req rq = {"STS", "POST", url, h, form, len};
	if ((q = cred_http(
		 s->http, &rq, &status, &resp, &rl, why, sizeof(why))) != 0) {
		snprintf(err, errlen, "%s: %s %s at %s: %s", r->source, action,
		    r->arn, ep, why);
		goto out;
	}
	char src[160];
	snprintf(src, sizeof(src), "%s (%s %s)", r->source, action, r->arn);
	q = cred_sts_parse(resp, rl, src, out, why, sizeof(why));
	if (q == 0 && status != 200) {
		cred_unref(*out);
		q = -EIO;
		snprintf(why, sizeof(why), "credentials in an error response");
	}
	if (q != 0)
		snprintf(err, errlen, "%s: %s %s at %s: HTTP %ld: %s",
		    r->source, action, r->arn, ep, status,
		    q == -EACCES || status == 200 ? why : "no STS response");
	if (q == -EINVAL && status != 200)
		q = status == 403 || status == 401 ? -EACCES : -EIO;
out:
	cred_free(resp);
	cred_free(form);
	curl_slist_free_all(h);
	free(url);
	free(ep);
	return q;
}

int
cred_sts_assume(struct cred_sts *s, const struct cred_role *r,
    const struct cred *base, struct cred **out, char *err, size_t errlen)
{
	return call(s, "AssumeRole", r, NULL, base, out, err, errlen);
}

int
cred_sts_web_identity(struct cred_sts *s, const struct cred_role *r,
    const char *token_file, struct cred **out, char *err, size_t errlen)
{
	char why[400], *tok;
	size_t n;
	int q;

	if ((q = cred_read_file(token_file, &tok, &n, why, sizeof(why))) != 0) {
		snprintf(err, errlen, "%s: the web identity token %s",
		    r->source, why);
		return q;
	}
	while (n > 0 &&
	       (tok[n - 1] == '\n' || tok[n - 1] == '\r' || tok[n - 1] == ' '))
		tok[--n] = '\0';
	if (n == 0) {
		snprintf(err, errlen,
		    "%s: the web identity token file %s is "
		    "empty",
		    r->source, token_file);
		cred_free(tok);
		return -EINVAL;
	}
	q = call(
	    s, "AssumeRoleWithWebIdentity", r, tok, NULL, out, err, errlen);
	cred_free(tok);
	return q;
}

/* ---- the environment's web identity ---- */

struct wi_env {
	struct cred_provider base;
	struct cred_sts sts;
};

static int
wi_get(struct cred_provider *p, struct cred **out, char *err, size_t errlen)
{
	struct wi_env *w = (struct wi_env *)p;
	const char *arn = env("AWS_ROLE_ARN"),
		   *file = env("AWS_WEB_IDENTITY_TOKEN_FILE");
	struct cred_role r = {arn, env("AWS_ROLE_SESSION_NAME"), NULL, NULL,
	    NULL, "web identity (AWS_ROLE_ARN)"};

	if (arn == NULL || file == NULL) {
		snprintf(err, errlen,
		    "web identity: AWS_ROLE_ARN and "
		    "AWS_WEB_IDENTITY_TOKEN_FILE are not set");
		return -ENOENT;
	}
	return cred_sts_web_identity(&w->sts, &r, file, out, err, errlen);
}

static void
wi_free(struct cred_provider *p)
{
	struct wi_env *w = (struct wi_env *)p;

	cred_sts_fini(&w->sts);
	free(w);
}

static const struct cred_provider_ops wi_ops = {wi_get, wi_free};

struct cred_provider *
cred_web_identity_env_new(const struct cred_net *n)
{
	struct wi_env *w = calloc(1, sizeof(*w));

	if (w == NULL)
		return NULL;
	if (cred_sts_init(&w->sts, n) != 0) {
		free(w);
		return NULL;
	}
	w->base.ops = &wi_ops;
	return &w->base;
}
