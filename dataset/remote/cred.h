/*
 * cred.h - layer: dataset/remote/ (the HTTP/S3 client): the AWS credentials
 * of s3:// shards, as the AWS SDKs find them (aws-c-auth's design: a chain of
 * small providers, each with one get, the chain trying them in order, a cache
 * in front that keeps what the chain gave until shortly before it expires).
 *
 *   cred_secret.c  the arena that holds every secret: mmap'd pages
 *                  marked MADV_DONTDUMP, wiped on free; libcurl's and
 *                  jansson's memory wiped when freed;
 *   cred.c         a set of credentials, the chain, the cache (refresh
 *                  before expiry, a re-read after a refusal);
 *   cred_sigv4.c   AWS Signature Version 4 over the arena's secret;
 *   cred_parse.c   what comes from a file or a server, parsed with no
 *                  I/O (fuzz/fuzz_cred.c feeds it): profile files, STS's
 *                  XML, IMDS's JSON, ISO 8601 times;
 *   cred_http.c    one request of a credential source (remote_easy_setup,
 *                  its response bounded and kept in the arena);
 *   cred_env.c     the environment's keys;
 *   cred_profile.c the shared credentials and config files' profile:
 *                  static keys, role_arn with source_profile or
 *                  credential_source, web_identity_token_file;
 *   cred_sts.c     STS AssumeRole and AssumeRoleWithWebIdentity, and the
 *                  web identity of AWS_ROLE_ARN + AWS_WEB_IDENTITY_TOKEN_FILE;
 *   cred_imds.c    the instance metadata service, IMDSv2;
 *   cred_chain.c   the default chain, in the SDKs' order, attached to a
 *                  dataset's remote context.
 *
 * A secret (a secret access key, a session token, a web identity token,
 * the text of a file or a response that holds one) lives only in the
 * arena: never in a message, the log, the stats or a served file.
 */
#ifndef FEEDFS_CRED_H
#define FEEDFS_CRED_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct curl_slist;
struct remote_ctx;
struct remote_opts;

/* Credentials are read again this long before they expire (the SDKs
 * use 5 to 15 minutes), or after half their life when that is shorter. */
#define CRED_REFRESH_MARGIN_S 300
/* After a refusal (403), the source is read again at most this often. */
#define CRED_REREAD_MIN_MS 2000u
/* A failed refresh is tried again after this long. */
#define CRED_RETRY_MS 5000u
/* A file or a response of a credential source: at most this many bytes. */
#define CRED_FILE_MAX (1u << 20)
#define CRED_RESP_MAX (64u << 10)

/* ---- the arena (cred_secret.c) ---- */

/*
 * Memory for secrets: in pages excluded from core dumps (MADV_DONTDUMP),
 * zeroed when freed.  NULL when the arena is full (CRED_ARENA_BYTES) or
 * cannot be made.  Thread-safe.
 */
#define CRED_ARENA_BYTES (8u << 20)
void *cred_alloc(size_t n);
void cred_free(void *p);
char *cred_strndup(const char *s, size_t n);
/* Whether p lies in the arena. */
bool cred_in_arena(const void *p);
/* Bytes handed out and not freed (a test's leak check). */
size_t cred_arena_used(void);
/* The arena's bounds (for a test that checks /proc/self/smaps). */
void cred_arena_range(uintptr_t *lo, uintptr_t *hi);
/* jansson's allocations of the calling thread go to the arena while on. */
void cred_json_secret(bool on);
/*
 * curl_global_init, with libcurl's memory zeroed when freed (a request
 * or a response that held a secret leaves none behind).  Call once,
 * before any thread.  0 or -EIO.
 */
int cred_curl_global_init(void);

/* ---- a set of credentials (cred.c) ---- */

struct cred {
	atomic_uint refs;
	char *key_id; /* in the arena, as the rest of the struct */
	char *secret;
	char *token;	  /* NULL: none */
	time_t expires;	  /* 0: never (static keys) */
	char source[160]; /* where they came from, for messages */
};

/* A new set (refs 1) of copies of the given bytes; token may be NULL.
 * NULL: out of memory. */
struct cred *cred_new(const char *key_id, size_t kl, const char *secret,
    size_t sl, const char *token, size_t tl, time_t expires,
    const char *source);
struct cred *cred_ref(struct cred *c);
void cred_unref(struct cred *c);

/* ---- providers ---- */

struct cred_provider;
struct cred_provider_ops {
	/*
	 * 0 and *out (a reference); -ENOENT: this source is not configured
	 * here (err says why in a few words; the chain goes on); another
	 * -errno: it is configured and failed (err; the chain stops there,
	 * as the SDKs do, rather than take another identity).
	 */
	int (*get)(struct cred_provider *p, struct cred **out, char *err,
	    size_t errlen);
	void (*free)(struct cred_provider *p);
};
struct cred_provider {
	const struct cred_provider_ops *ops;
};

static inline int
cred_provider_get(
    struct cred_provider *p, struct cred **out, char *err, size_t errlen)
{
	return p->ops->get(p, out, err, errlen);
}
void cred_provider_free(struct cred_provider *p);

/* A chain of n providers (transferred, even on failure), tried in order.
 * NULL: out of memory. */
struct cred_provider *cred_chain_new(struct cred_provider **v, size_t n);

/* The providers (each NULL when out of memory). */
struct cred_provider *cred_env_new(void);
/* Settings of the requests to STS and IMDS. */
struct cred_net {
	const char *ca_file; /* added to the system's CAs, may be NULL */
	const char *region;  /* STS's, when nothing else names one */
	uint64_t timeout_ms; /* of one STS request */
	uint32_t retries;    /* of STS requests */
};
struct cred_provider *cred_profile_new(const struct cred_net *n);
struct cred_provider *cred_web_identity_env_new(const struct cred_net *n);
struct cred_provider *cred_imds_new(const struct cred_net *n);

/* ---- the cache (cred.c) ---- */

struct cred_src;

/*
 * A cache in front of chain (transferred, even on failure), which is
 * asked once now: 0, or its error (the mount stops with err).
 */
int cred_src_new(struct cred_provider *chain, struct cred_src **out, char *err,
    size_t errlen);
void cred_src_free(struct cred_src *s);

/*
 * The credentials to sign with now (*out, a reference) and their
 * generation.  Reads the source first when it must: there are none, they
 * expired, or cred_src_denied asked (a read ahead of the expiry is
 * cred_src_refresh's, which the fetcher's thread calls unlocked); a read
 * that fails keeps the ones there are (a request then says why it is
 * refused).  May block for a read of a server.  0, or -ENOMEM.
 */
int cred_src_get(struct cred_src *s, struct cred **out, uint64_t *gen);
/* Whether the source is to be read now: it must be, or the credentials
 * expire within the margin. */
bool cred_src_due(struct cred_src *s);
/* Read the source now if it is due (the fetcher's thread, unlocked,
 * before it signs requests under its lock). */
void cred_src_refresh(struct cred_src *s);
/*
 * A request signed with generation gen was refused (401, 403, a 400 for
 * an expired token).  Asks for a re-read, at most once a
 * CRED_REREAD_MIN_MS (measured between such re-reads: the first is at
 * once): true when the next request will be signed with credentials
 * read after gen (a retry is worth it).
 */
bool cred_src_denied(struct cred_src *s, uint64_t gen);
/* Where the credentials of gen came from, and why the last read failed
 * (if it did), for a message; true the first time for gen (log it). */
bool cred_src_describe(struct cred_src *s, uint64_t gen, char *buf, size_t len);

/*
 * Sign an S3 request (GET or HEAD of url, no body) with s's credentials:
 * appends x-amz-content-sha256, Host, X-Amz-Date, the session token and
 * Authorization to *hdrs; *gen: the generation signed with.  0 or -ENOMEM.
 */
int cred_src_sign_s3(struct cred_src *s, const char *region, const char *method,
    const char *url, struct curl_slist **hdrs, uint64_t *gen);

/* ---- SigV4 (cred_sigv4.c) ---- */

struct cred_sig {
	const char *method; /* "GET", "HEAD", "POST" */
	const char *url;    /* scheme://host[:port]/path, no query */
	const char *region, *service;
	const char *payload_sha256; /* hex of the body's SHA-256 */
	/* headers the caller sends and wants signed, "name:value" with a
	 * lowercase name and no space around the ':' */
	const char *const *hdrs;
	size_t nhdrs;
	time_t now;
};

/*
 * The headers of a SigV4 signature of q with c: Host, X-Amz-Date,
 * X-Amz-Security-Token (with a token) and Authorization, appended to
 * *out.  0, -EINVAL (a URL with a query or without a host), -ENOMEM.
 */
int cred_sign(
    const struct cred *c, const struct cred_sig *q, struct curl_slist **out);
/* hex of SHA-256(p, n) into out[65]. */
void cred_sha256_hex(const void *p, size_t n, char out[65]);

/* ---- parsing (cred_parse.c): no I/O, fuzzed ---- */

/* Which file a profile is looked up in: the credentials file names a
 * profile [NAME]; the config file [profile NAME] (and [default]). */
enum cred_ini_kind { CRED_INI_CREDENTIALS, CRED_INI_CONFIG };

/*
 * The value of key in profile's sections of an INI text of n bytes
 * ('#' and ';' comments, "key = value", indented sub-keys ignored; a
 * later value wins): *v and *vl point into text.  0 or -ENOENT.
 * *found (may be NULL): set when the profile has a section at all.
 */
int cred_ini_get(const char *text, size_t n, enum cred_ini_kind kind,
    const char *profile, const char *key, const char **v, size_t *vl,
    bool *found);

/*
 * The text of element name inside the first element parent of an XML
 * document of n bytes (STS's responses: no attributes in the path
 * elements looked for, no CDATA), entities decoded, into out (cap
 * bytes, NUL-terminated): 0, -ENOENT, -EINVAL (malformed, too long).
 * *ol: its length.
 */
int cred_xml_text(const char *doc, size_t n, const char *parent,
    const char *name, char *out, size_t cap, size_t *ol);

/* "2026-11-28T16:59:39Z", with fractions or "+00:00": 0 and *t, or
 * -EINVAL. */
int cred_time_parse(const char *s, size_t n, time_t *t);

/*
 * The credentials of an STS response (AssumeRole or
 * AssumeRoleWithWebIdentity: Credentials with AccessKeyId,
 * SecretAccessKey, SessionToken, Expiration).  0 and *out; -EINVAL with
 * err (an error response: its Code and Message, never a secret).
 */
int cred_sts_parse(const char *doc, size_t n, const char *source,
    struct cred **out, char *err, size_t errlen);
/*
 * The credentials of an IMDS role document (JSON: Code "Success",
 * AccessKeyId, SecretAccessKey, Token, Expiration).  0, -EINVAL with
 * err (never a byte of the document), -ENOMEM.
 */
int cred_imds_parse(const char *doc, size_t n, const char *source,
    struct cred **out, char *err, size_t errlen);

/* ---- the default chain (cred_chain.c) ---- */

/*
 * The credentials of c's s3:// shards: the chain environment, profile,
 * web identity (AWS_ROLE_ARN), instance metadata, asked once now and
 * cached in c->creds.  0, or -ENOENT / -EACCES / -EIO with err saying
 * what each source lacked or why it failed.
 */
int cred_attach(struct remote_ctx *c, const struct remote_opts *o, char *err,
    size_t errlen);

#endif
