/*
 * cred_profile.c - layer: dataset/remote/ (the HTTP/S3 client; see cred.h):
 * the provider of a profile of the AWS shared credentials and config files,
 * read again at every refresh (a rotated key is seen without a remount).
 *
 * The profile: AWS_PROFILE, else AWS_DEFAULT_PROFILE, else "default".
 * The files: AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials), sections
 * [NAME]; AWS_CONFIG_FILE (~/.aws/config), sections [profile NAME] and
 * [default]; a key in the credentials file wins over the config file's.
 * A profile gives, as the SDKs resolve it:
 *
 *   role_arn + web_identity_token_file  STS AssumeRoleWithWebIdentity;
 *   role_arn + source_profile           STS AssumeRole, signed with the
 *                                       source profile's credentials
 *                                       (itself resolved so, 4 deep at
 *                                       most; naming itself: its keys);
 *   role_arn + credential_source        the same, signed with the
 *                                       Environment's or the
 *                                       Ec2InstanceMetadata's;
 *   aws_access_key_id, aws_secret_access_key (+ aws_session_token).
 *
 * with role_session_name, external_id, duration_seconds and region.  A
 * profile of credential_process or SSO is refused with a message (feedfs
 * runs no process and has no browser login), as is a role without a
 * source: the chain stops there rather than take another identity.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset/remote/cred_int.h"

#define DEPTH_MAX 4

struct profile {
	struct cred_provider base;
	struct cred_sts sts;
	struct cred_net net; /* for a credential_source's IMDS */
	char *ca;
};

/* The two files' texts (in the arena) and paths. */
struct files {
	char *text[2];
	size_t n[2];
	char path[2][1024];
};

static const char *
env(const char *k)
{
	const char *v = getenv(k);

	return v != NULL && *v != '\0' ? v : NULL;
}

/* path from the environment's key, else ~/.aws/dflt; "~/" expanded. */
static void
file_path(char *out, size_t len, const char *key, const char *dflt)
{
	const char *v = env(key), *home = env("HOME");

	if (home == NULL)
		home = "/root";
	if (v == NULL)
		snprintf(out, len, "%s/.aws/%s", home, dflt);
	else if (v[0] == '~' && v[1] == '/')
		snprintf(out, len, "%s%s", home, v + 1);
	else
		snprintf(out, len, "%s", v);
}

/*
 * key of profile p: *v, *vl (into a file's text), and which file (0:
 * credentials, 1: config).  0 or -ENOENT.
 */
static int
lookup(const struct files *f, const char *p, const char *key, const char **v,
    size_t *vl, int *which)
{
	for (int i = 0; i < 2; i++)
		if (f->text[i] != NULL &&
		    cred_ini_get(f->text[i], f->n[i],
			i ? CRED_INI_CONFIG : CRED_INI_CREDENTIALS, p, key, v,
			vl, NULL) == 0) {
			if (which != NULL)
				*which = i;
			return 0;
		}
	return -ENOENT;
}

/* A value that is not a secret, into buf (NUL-terminated), or NULL. */
static const char *
value(const struct files *f, const char *p, const char *key, char *buf,
    size_t len)
{
	const char *v;
	size_t vl;

	if (lookup(f, p, key, &v, &vl, NULL) != 0 || vl >= len)
		return NULL;
	memcpy(buf, v, vl);
	buf[vl] = '\0';
	return buf;
}

/* The static keys of p, or -ENOENT. */
static int
static_keys(const struct files *f, const char *p, struct cred **out, char *err,
    size_t errlen)
{
	const char *k, *s, *t = NULL;
	size_t kl, sl, tl = 0;
	int which;
	char src[160];

	if (lookup(f, p, "aws_access_key_id", &k, &kl, &which) != 0 ||
	    lookup(f, p, "aws_secret_access_key", &s, &sl, NULL) != 0)
		return -ENOENT;
	if (lookup(f, p, "aws_session_token", &t, &tl, NULL) != 0)
		t = NULL;
	snprintf(src, sizeof(src), "the profile %s of %s", p, f->path[which]);
	if ((*out = cred_new(k, kl, s, sl, t, tl, 0, src)) == NULL) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	return 0;
}

static int resolve(struct profile *pr, const struct files *f, const char *p,
    unsigned depth, struct cred **out, char *err, size_t errlen);

/* The credentials a role of p is assumed with. */
static int
role_base(struct profile *pr, const struct files *f, const char *p,
    unsigned depth, struct cred **base, char *err, size_t errlen)
{
	char sp[256], cs[64];
	struct cred_provider *src = NULL;
	int r;

	if (value(f, p, "source_profile", sp, sizeof(sp)) != NULL) {
		if (strcmp(sp, p) == 0) {
			r = static_keys(f, p, base, err, errlen);
			if (r == -ENOENT)
				snprintf(err, errlen,
				    "profile %s: its source_profile is itself, "
				    "and it has no aws_access_key_id and "
				    "aws_secret_access_key",
				    p);
			return r == -ENOENT ? -EINVAL : r;
		}
		if (depth >= DEPTH_MAX) {
			snprintf(err, errlen,
			    "profile %s: source_profile more than %d deep (a "
			    "loop?)",
			    p, DEPTH_MAX);
			return -EINVAL;
		}
		r = resolve(pr, f, sp, depth + 1, base, err, errlen);
		if (r == -ENOENT) {
			char why[300];

			snprintf(why, sizeof(why), "%.*s", (int)sizeof(why) - 1,
			    err);
			snprintf(err, errlen,
			    "profile %s: its source_profile: %s", p, why);
			return -EINVAL;
		}
		return r;
	}
	if (value(f, p, "credential_source", cs, sizeof(cs)) != NULL) {
		if (strcmp(cs, "Environment") == 0)
			src = cred_env_new();
		else if (strcmp(cs, "Ec2InstanceMetadata") == 0)
			src = cred_imds_new(&pr->net);
		else {
			snprintf(err, errlen,
			    "profile %s: credential_source %s: feedfs reads "
			    "Environment and Ec2InstanceMetadata",
			    p, cs);
			return -EINVAL;
		}
		if (src == NULL) {
			snprintf(err, errlen, "%s", strerror(ENOMEM));
			return -ENOMEM;
		}
		r = cred_provider_get(src, base, err, errlen);
		cred_provider_free(src);
		return r == -ENOENT ? -EINVAL : r;
	}
	snprintf(err, errlen,
	    "profile %s: role_arn without source_profile, credential_source or "
	    "web_identity_token_file",
	    p);
	return -EINVAL;
}

static int
resolve(struct profile *pr, const struct files *f, const char *p,
    unsigned depth, struct cred **out, char *err, size_t errlen)
{
	char arn[2048], sess[128], ext[1300], dur[16], reg[64];
	char src[300], why[600];
	struct cred_role role;
	struct cred *base;
	bool found = false;
	int r;

	for (int i = 0; i < 2; i++) {
		const char *v;
		size_t vl;

		if (f->text[i] != NULL)
			cred_ini_get(f->text[i], f->n[i],
			    i ? CRED_INI_CONFIG : CRED_INI_CREDENTIALS, p, "",
			    &v, &vl, &found);
	}
	if (!found) {
		snprintf(err, errlen, "no profile [%s] in %s or %s", p,
		    f->path[0], f->path[1]);
		return -ENOENT;
	}
	snprintf(src, sizeof(src), "profile %s", p);
	role = (struct cred_role){value(f, p, "role_arn", arn, sizeof(arn)),
	    value(f, p, "role_session_name", sess, sizeof(sess)),
	    value(f, p, "external_id", ext, sizeof(ext)),
	    value(f, p, "duration_seconds", dur, sizeof(dur)),
	    value(f, p, "region", reg, sizeof(reg)), src};
	if (role.arn != NULL) {
		char wif[1024];

		if (value(f, p, "web_identity_token_file", wif, sizeof(wif)))
			return cred_sts_web_identity(
			    &pr->sts, &role, wif, out, err, errlen);
		if ((r = role_base(pr, f, p, depth, &base, why, sizeof(why))) !=
		    0) {
			snprintf(err, errlen, "%s", why);
			return r;
		}
		r = cred_sts_assume(&pr->sts, &role, base, out, err, errlen);
		cred_unref(base);
		return r;
	}
	if ((r = static_keys(f, p, out, err, errlen)) != -ENOENT)
		return r;
	if (value(f, p, "credential_process", why, sizeof(why)) != NULL ||
	    value(f, p, "sso_session", why, sizeof(why)) != NULL ||
	    value(f, p, "sso_start_url", why, sizeof(why)) != NULL) {
		snprintf(err, errlen,
		    "profile %s: credential_process and SSO are not read by "
		    "feedfs (give it keys, a role or a web identity)",
		    p);
		return -EINVAL;
	}
	snprintf(err, errlen,
	    "profile %s: no aws_access_key_id and aws_secret_access_key, no "
	    "role_arn",
	    p);
	return -ENOENT;
}

static int
profile_get(
    struct cred_provider *b, struct cred **out, char *err, size_t errlen)
{
	struct profile *pr = (struct profile *)b;
	const char *p = env("AWS_PROFILE");
	struct files f;
	char why[2][600];
	int r, missing = 0;

	if (p == NULL && (p = env("AWS_DEFAULT_PROFILE")) == NULL)
		p = "default";
	memset(&f, 0, sizeof(f));
	file_path(f.path[0], sizeof(f.path[0]), "AWS_SHARED_CREDENTIALS_FILE",
	    "credentials");
	file_path(f.path[1], sizeof(f.path[1]), "AWS_CONFIG_FILE", "config");
	for (int i = 0; i < 2; i++) {
		r = cred_read_file(
		    f.path[i], &f.text[i], &f.n[i], why[i], sizeof(why[i]));
		if (r == -ENOENT || r == -ENOTDIR)
			missing++;
		else if (r != 0) {
			snprintf(err, errlen, "profile %s: %s", p, why[i]);
			goto out;
		}
	}
	if (missing == 2) {
		snprintf(err, errlen, "profile %s: %s; %s", p, why[0], why[1]);
		r = -ENOENT;
		goto out;
	}
	r = resolve(pr, &f, p, 0, out, err, errlen);
out:
	cred_free(f.text[0]);
	cred_free(f.text[1]);
	return r;
}

static void
profile_free(struct cred_provider *b)
{
	struct profile *pr = (struct profile *)b;

	cred_sts_fini(&pr->sts);
	free(pr->ca);
	free(pr);
}

static const struct cred_provider_ops profile_ops = {profile_get, profile_free};

struct cred_provider *
cred_profile_new(const struct cred_net *n)
{
	struct profile *pr = calloc(1, sizeof(*pr));

	if (pr == NULL)
		return NULL;
	pr->net = *n;
	if ((n->ca_file != NULL && (pr->ca = strdup(n->ca_file)) == NULL) ||
	    cred_sts_init(&pr->sts, n) != 0) {
		free(pr->ca);
		free(pr);
		return NULL;
	}
	pr->net.ca_file = pr->ca;
	pr->net.region = NULL; /* borrowed: not kept */
	pr->base.ops = &profile_ops;
	return &pr->base;
}
