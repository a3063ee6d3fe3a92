/*
 * cred_int.h - what the credential providers share (cred.h says which
 * file does what): a request of a source, a file read into the arena,
 * the STS calls the profile and the web identity providers make, and
 * the environment and IMDS as a role's source.  Not for use outside
 * dataset/remote/cred*.c and the tests.
 */
#ifndef FEEDFS_CRED_INT_H
#define FEEDFS_CRED_INT_H

#include "dataset/remote/cred.h"
#include "dataset/remote/remote_int.h"

/* One request of a credential source. */
struct cred_req {
	const char *what;   /* for messages: "STS", "instance metadata" */
	const char *method; /* "GET", "PUT", "POST" */
	const char *url;
	struct curl_slist *hdrs; /* added to the request's (borrowed) */
	const char *body;	 /* POST: the body (borrowed), else NULL */
	size_t body_len;
};

/*
 * Make q over c's settings: 0 with *status and *body (the response's
 * bytes, NUL-terminated, at most CRED_RESP_MAX, in the arena: cred_free);
 * -EIO with err (no answer, a response too long) or -ENOMEM.
 */
int cred_http(struct remote_ctx *c, const struct cred_req *q, long *status,
    char **body, size_t *blen, char *err, size_t errlen);

/*
 * The bytes of the regular file path (at most CRED_FILE_MAX) into the
 * arena, NUL-terminated: 0, -ENOENT (no such file), another -errno; err
 * names the file and why.
 */
int cred_read_file(
    const char *path, char **text, size_t *n, char *err, size_t errlen);

/* Percent-encoding of (s, n) for a form body, into the arena. */
char *cred_form_escape(const char *s, size_t n);

/* The settings of requests to STS (copied from struct cred_net). */
struct cred_sts {
	struct remote_ctx *http; /* timeouts, CA, retries */
	char *region;		 /* NULL: AWS_REGION, ..., us-east-1 */
};
int cred_sts_init(struct cred_sts *s, const struct cred_net *n);
void cred_sts_fini(struct cred_sts *s);

/* A role of STS: what AssumeRole and AssumeRoleWithWebIdentity take. */
struct cred_role {
	const char *arn;
	const char *session;	 /* NULL: feedfs-TIME */
	const char *external_id; /* AssumeRole, may be NULL */
	const char *duration;	 /* seconds, may be NULL */
	const char *region;	 /* the profile's, may be NULL */
	const char *source;	 /* for messages: "profile X" */
};

/* STS AssumeRole of r, signed with base: 0 and *out, or -errno with err. */
int cred_sts_assume(struct cred_sts *s, const struct cred_role *r,
    const struct cred *base, struct cred **out, char *err, size_t errlen);
/* STS AssumeRoleWithWebIdentity of r with the token in the file
 * token_file (read each time: it is rotated). */
int cred_sts_web_identity(struct cred_sts *s, const struct cred_role *r,
    const char *token_file, struct cred **out, char *err, size_t errlen);

#endif
