/*
 * cred_chain.c - layer: dataset/remote/ (the HTTP/S3 client; see cred.h): the
 * default chain of credential providers, in the order of aws-c-auth's default
 * chain (the AWS SDKs' order):
 *
 *   1. the environment (cred_env.c);
 *   2. a profile of the shared credentials and config files, with its
 *      roles (cred_profile.c);
 *   3. the web identity of AWS_ROLE_ARN + AWS_WEB_IDENTITY_TOKEN_FILE
 *      (cred_sts.c);
 *   4. the instance metadata service, IMDSv2 (cred_imds.c);
 *
 * and the cache in front of it (cred.c), attached to a dataset's remote
 * context: what signs its requests.  The only file that names the
 * providers: a new source is a line here and a file of its own.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dataset/remote/cred_int.h"

int
cred_attach(
    struct remote_ctx *c, const struct remote_opts *o, char *err, size_t errlen)
{
	struct cred_net n = {
	    o->ca_file, o->s3_region, c->timeout_ms, c->retries};
	struct cred_provider *v[] = {cred_env_new(), cred_profile_new(&n),
	    cred_web_identity_env_new(&n), cred_imds_new(&n)};
	struct cred_src *s;
	int r;

	r = cred_src_new(
	    cred_chain_new(v, sizeof(v) / sizeof(v[0])), &s, err, errlen);
	if (r != 0)
		return r;
	cred_src_free(c->creds);
	c->creds = s;
	return 0;
}
