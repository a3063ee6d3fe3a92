/*
 * cred_env.c - layer: dataset/remote/ (the HTTP/S3 client; see cred.h): the
 * provider of the environment's credentials, first in the chain:
 * AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, with AWS_SESSION_TOKEN for
 * temporary ones and AWS_CREDENTIAL_EXPIRATION (ISO 8601) for their end.  The
 * process's environment block holds them as the user gave them: a core dump
 * of the process holds them too (the other sources do not).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset/remote/cred_int.h"

static int
env_get(struct cred_provider *p, struct cred **out, char *err, size_t errlen)
{
	const char *k = getenv("AWS_ACCESS_KEY_ID"),
		   *s = getenv("AWS_SECRET_ACCESS_KEY"),
		   *t = getenv("AWS_SESSION_TOKEN"),
		   *x = getenv("AWS_CREDENTIAL_EXPIRATION");
	time_t exp = 0;

	(void)p;
	if (k == NULL || *k == '\0' || s == NULL || *s == '\0') {
		snprintf(err, errlen,
		    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set");
		return -ENOENT;
	}
	if (x != NULL && *x != '\0' &&
	    cred_time_parse(x, strlen(x), &exp) != 0) {
		snprintf(err, errlen,
		    "AWS_CREDENTIAL_EXPIRATION is not an ISO 8601 time");
		return -EINVAL;
	}
	if (t != NULL && *t == '\0')
		t = NULL;
	*out = cred_new(k, strlen(k), s, strlen(s), t, t ? strlen(t) : 0, exp,
	    "the environment (AWS_ACCESS_KEY_ID)");
	if (*out == NULL) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	return 0;
}

static void
env_free(struct cred_provider *p)
{
	free(p);
}

static const struct cred_provider_ops env_ops = {env_get, env_free};

struct cred_provider *
cred_env_new(void)
{
	struct cred_provider *p = malloc(sizeof(*p));

	if (p != NULL)
		p->ops = &env_ops;
	return p;
}
