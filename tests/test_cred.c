/*
 * test_cred.c - the credentials of s3:// shards (dataset/remote/cred*.c)
 * without a server: the parsers (profile files of both kinds, STS's XML
 * with entities and errors, IMDS's JSON, ISO 8601 times), the arena
 * (zeroed on free, MADV_DONTDUMP in /proc/self/smaps, blocks merged, no
 * block left behind by a parse), SigV4 (signatures botocore computes for
 * the same request), the cache (refresh before expiry, one re-read after
 * a refusal and not more often than CRED_REREAD_MIN_MS, a failed re-read
 * keeps what there is), and the chain as a mount builds it from the
 * environment and from real files (cred_attach): which source wins, and
 * what the message says when none has credentials.  The sources that ask
 * a server (STS, IMDS) are tested against real ones by
 * tests/test_remote_cred_*.py.  IMDS is off here
 * (AWS_EC2_METADATA_DISABLED): nothing leaves the machine.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset/remote/cred.h"
#include "dataset/remote/remote_int.h"
#include "tests/testlib.h"

static char *
val(const char *text, enum cred_ini_kind k, const char *p, const char *key)
{
	static char buf[256];
	const char *v;
	size_t vl;

	if (cred_ini_get(text, strlen(text), k, p, key, &v, &vl, NULL) != 0)
		return NULL;
	snprintf(buf, sizeof(buf), "%.*s", (int)vl, v);
	return buf;
}

static void
test_ini(void)
{
	static const char t[] = "# a comment\n"
				"[default]\n"
				"aws_access_key_id = AKIDDEFAULT\n"
				"aws_secret_access_key=secret default \r\n"
				"s3 =\n"
				"  aws_access_key_id = NESTED\n"
				"[profile other]\n"
				"  aws_access_key_id =AKIDOTHER  \n"
				"; another comment\n"
				"aws_session_token = TOKEN\n"
				"[other]\n"
				"region = eu-west-1\n"
				"[default]\n"
				"aws_access_key_id = AKIDLATER\n"
				"[broken\n"
				"aws_access_key_id = AKIDBROKEN\n";
	const char *v;
	size_t vl;
	bool found = false;

	/* a later value wins; a nested sub-key is not the profile's */
	CHECK_EQ_STR(
	    val(t, CRED_INI_CREDENTIALS, "default", "aws_access_key_id"),
	    "AKIDLATER");
	CHECK_EQ_STR(
	    val(t, CRED_INI_CREDENTIALS, "default", "aws_secret_access_key"),
	    "secret default");
	/* the credentials file: [NAME] (and [profile NAME], leniently) */
	CHECK_EQ_STR(val(t, CRED_INI_CREDENTIALS, "other", "aws_access_key_id"),
	    "AKIDOTHER");
	CHECK_EQ_STR(
	    val(t, CRED_INI_CREDENTIALS, "other", "region"), "eu-west-1");
	/* the config file: [profile NAME] only, and [default] */
	CHECK_EQ_STR(
	    val(t, CRED_INI_CONFIG, "other", "aws_session_token"), "TOKEN");
	CHECK(val(t, CRED_INI_CONFIG, "other", "region") == NULL);
	CHECK_EQ_STR(val(t, CRED_INI_CONFIG, "default", "aws_access_key_id"),
	    "AKIDLATER");
	CHECK(val(t, CRED_INI_CREDENTIALS, "broken", "aws_access_key_id") ==
	      NULL);
	CHECK_EQ_INT(cred_ini_get(t, strlen(t), CRED_INI_CREDENTIALS, "none",
			 "x", &v, &vl, &found),
	    -ENOENT);
	CHECK(!found);
	CHECK_EQ_INT(cred_ini_get(t, strlen(t), CRED_INI_CREDENTIALS, "other",
			 "x", &v, &vl, &found),
	    -ENOENT);
	CHECK(found);
	/* only n bytes are read */
	CHECK_EQ_INT(cred_ini_get(t, 40, CRED_INI_CREDENTIALS, "default",
			 "aws_access_key_id", &v, &vl, NULL),
	    -ENOENT);
}

static const char sts_ok[] =
    "<AssumeRoleResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\n"
    " <AssumeRoleResult>\n"
    "  <AssumedRoleUser><Arn>arn:aws:sts::1:assumed-role/r/s</Arn>"
    "</AssumedRoleUser>\n"
    "  <Credentials>\n"
    "   <AccessKeyId>ASIAEXAMPLE</AccessKeyId>\n"
    "   <SecretAccessKey>wJalr&amp;XUtn&#x2F;&#43;</SecretAccessKey>\n"
    "   <SessionToken>FQoG&lt;t&gt;</SessionToken>\n"
    "   <Expiration>2026-11-28T17:59:39.123Z</Expiration>\n"
    "  </Credentials>\n"
    " </AssumeRoleResult>\n"
    "</AssumeRoleResponse>\n";

static void
test_sts_xml(void)
{
	static const char err_doc[] =
	    "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied"
	    "</Code><Message>User is not\nauthorized &amp; so on</Message>"
	    "</Error></ErrorResponse>";
	size_t used = cred_arena_used(), ol;
	struct cred *c = NULL;
	char err[512], out[16];
	time_t t;

	CHECK_EQ_INT(
	    cred_sts_parse(sts_ok, strlen(sts_ok), "src", &c, err, sizeof(err)),
	    0);
	if (c != NULL) {
		CHECK_EQ_STR(c->key_id, "ASIAEXAMPLE");
		CHECK_EQ_STR(c->secret, "wJalr&XUtn/+");
		CHECK_EQ_STR(c->token, "FQoG<t>");
		CHECK(cred_time_parse("2026-11-28T17:59:39Z", 20, &t) == 0 &&
		      c->expires == t);
		CHECK(cred_in_arena(c->secret) && cred_in_arena(c->token));
		CHECK_EQ_STR(c->source, "src");
		cred_unref(c);
	}
	CHECK_EQ_INT(cred_sts_parse(
			 err_doc, strlen(err_doc), "src", &c, err, sizeof(err)),
	    -EACCES);
	CHECK_EQ_STR(err, "AccessDenied: User is not authorized & so on");
	CHECK_EQ_INT(
	    cred_sts_parse("<x/>", 4, "src", &c, err, sizeof(err)), -EINVAL);
	/* leaves, bounds, malformed */
	CHECK_EQ_INT(cred_xml_text(sts_ok, strlen(sts_ok), "Credentials",
			 "AccessKeyId", out, sizeof(out), &ol),
	    0);
	CHECK_EQ_INT(ol, 11);
	CHECK_EQ_INT(cred_xml_text(sts_ok, strlen(sts_ok), "Credentials",
			 "SessionToken", out, 5, &ol),
	    -EINVAL);
	CHECK_EQ_INT(cred_xml_text(sts_ok, strlen(sts_ok), "AssumeRoleResult",
			 "Credentials", out, sizeof(out), &ol),
	    -EINVAL); /* not a leaf */
	CHECK_EQ_INT(cred_xml_text("<a><b>x&bogus;</b></a>", 22, "a", "b", out,
			 sizeof(out), &ol),
	    -EINVAL);
	CHECK_EQ_INT(cred_xml_text("<a><b>unclosed</a>", 18, "a", "b", out,
			 sizeof(out), &ol),
	    -EINVAL);
	CHECK_EQ_INT(cred_xml_text("<a><bb>x</bb><b/></a>", 21, "a", "b", out,
			 sizeof(out), &ol),
	    0);
	CHECK_EQ_INT(ol, 0);
	CHECK_EQ_INT(cred_arena_used(), used);
}

static void
test_times(void)
{
	time_t t;

	CHECK_EQ_INT(cred_time_parse("1970-01-01T00:01:00Z", 20, &t), 0);
	CHECK_EQ_INT(t, 60);
	CHECK_EQ_INT(
	    cred_time_parse("1970-01-01T02:00:00.123456+02:00", 32, &t), 0);
	CHECK_EQ_INT(t, 0);
	CHECK_EQ_INT(cred_time_parse("2026-11-28T16:59:39", 19, &t), -EINVAL);
	CHECK_EQ_INT(cred_time_parse("2026-13-28T16:59:39Z", 20, &t), -EINVAL);
	CHECK_EQ_INT(cred_time_parse("2026-11-28T16:59:39Zx", 21, &t), -EINVAL);
	CHECK_EQ_INT(cred_time_parse("2026-11-28T16:59:39.Z", 21, &t), -EINVAL);
}

static void
test_imds_json(void)
{
	static const char ok[] =
	    "{\"Code\":\"Success\",\"LastUpdated\":\"2026-11-28T16:00:00Z\","
	    "\"Type\":\"AWS-HMAC\",\"AccessKeyId\":\"ASIAIMDS\","
	    "\"SecretAccessKey\":\"imds\\/secret\",\"Token\":\"tok\","
	    "\"Expiration\":\"2026-11-28T22:00:00Z\"}";
	static const char secret_in_garbage[] =
	    "{\"SecretAccessKey\": \"TOPSECRET\" garbage";
	size_t used = cred_arena_used();
	struct cred *c = NULL;
	char err[512];

	CHECK_EQ_INT(
	    cred_imds_parse(ok, strlen(ok), "imds", &c, err, sizeof(err)), 0);
	if (c != NULL) {
		CHECK_EQ_STR(c->key_id, "ASIAIMDS");
		CHECK_EQ_STR(c->secret, "imds/secret");
		CHECK_EQ_STR(c->token, "tok");
		CHECK(c->expires > 0);
		cred_unref(c);
	}
	CHECK_EQ_INT(cred_imds_parse("{\"Code\":\"Failure\"}", 18, "imds", &c,
			 err, sizeof(err)),
	    -EINVAL);
	CHECK_EQ_INT(
	    cred_imds_parse(secret_in_garbage, strlen(secret_in_garbage),
		"imds", &c, err, sizeof(err)),
	    -EINVAL);
	CHECK(strstr(err, "TOPSECRET") == NULL);
	CHECK_EQ_INT(cred_imds_parse("{\"AccessKeyId\":\"A\"}", 19, "imds", &c,
			 err, sizeof(err)),
	    -EINVAL);
	/* jansson's allocations of the parse went to the arena, and back */
	CHECK_EQ_INT(cred_arena_used(), used);
}

/* Whether /proc/self/smaps marks the mapping at lo "dd" (not dumped). */
static bool
not_dumped(uintptr_t lo)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[512];
	bool in = false, dd = false;

	if (f == NULL)
		return false;
	while (fgets(line, sizeof(line), f) != NULL) {
		unsigned long a, b;

		if (sscanf(line, "%lx-%lx ", &a, &b) == 2) {
			in = a <= lo && lo < b;
			continue;
		}
		if (in && strncmp(line, "VmFlags:", 8) == 0) {
			dd = strstr(line, " dd") != NULL;
			break;
		}
	}
	fclose(f);
	return dd;
}

static void
test_arena(void)
{
	uintptr_t lo, hi;
	size_t used = cred_arena_used();
	char *a, *b, *big;

	cred_arena_range(&lo, &hi);
	CHECK(lo != 0 && hi - lo == CRED_ARENA_BYTES);
	CHECK(not_dumped(lo));
	a = cred_strndup("SECRETSECRET", 12);
	b = cred_alloc(100);
	CHECK(a != NULL && b != NULL && cred_in_arena(a));
	CHECK_EQ_STR(a, "SECRETSECRET");
	CHECK(!cred_in_arena(&used));
	cred_free(a);
	/* zeroed when freed (the arena's own pages: no sanitizer poison) */
	CHECK(memcmp(a, "SECRET", 6) != 0 && a[0] == '\0');
	cred_free(b);
	CHECK_EQ_INT(cred_arena_used(), used);
	/* freed blocks merge: most of the arena fits in one block again */
	big = cred_alloc(CRED_ARENA_BYTES / 2);
	CHECK(big != NULL);
	CHECK(cred_alloc(CRED_ARENA_BYTES) == NULL);
	cred_free(big);
	CHECK_EQ_INT(cred_arena_used(), used);
}

static void
test_sigv4(void)
{
	/* Expected: botocore's SigV4Auth (S3SigV4Auth for S3, whose path
	 * is not encoded twice) over the same requests. */
	struct cred *c = cred_new("AKIDEXAMPLE", 11,
	    "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", 40, NULL, 0, 0, "t");
	struct cred *ct = cred_new("AKIDEXAMPLE", 11,
	    "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", 40, "TOK", 3, 0, "t");
	static const char *const s3h[] = {
	    "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b"
	    "934ca495991b7852b855"};
	struct cred_sig q = {"GET", "https://example.amazon.com/", "us-east-1",
	    "service",
	    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	    NULL, 0, 1440938160 /* 2015-08-30T12:36:00Z */};
	struct curl_slist *l = NULL;
	const char *auth = NULL;

	CHECK(c != NULL && ct != NULL);
	if (c == NULL || ct == NULL)
		return;
	CHECK_EQ_INT(cred_sign(c, &q, &l), 0);
	for (struct curl_slist *h = l; h; h = h->next)
		if (strncmp(h->data, "Authorization: ", 15) == 0)
			auth = h->data + 15;
	CHECK_EQ_STR(auth,
	    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/"
	    "service/aws4_request, SignedHeaders=host;x-amz-date, "
	    "Signature=7ab4567ae243ee168f6bf18206b2b40b61ce08277323168138fa113"
	    "ed23c538e");
	CHECK(l != NULL && strcmp(l->data, "Host: example.amazon.com") == 0);
	curl_slist_free_all(l);
	/* S3's: a port, an escaped key, HEAD, a session token */
	l = NULL;
	q.method = "HEAD";
	q.url = "http://127.0.0.1:9000/bkt/a%3Db/x%2B1.tar";
	q.region = "eu-west-1";
	q.service = "s3";
	q.hdrs = s3h;
	q.nhdrs = 1;
	CHECK_EQ_INT(cred_sign(ct, &q, &l), 0);
	auth = NULL;
	bool tok = false;
	for (struct curl_slist *h = l; h; h = h->next) {
		if (strncmp(h->data, "Authorization: ", 15) == 0)
			auth = h->data + 15;
		tok |= strcmp(h->data, "X-Amz-Security-Token: TOK") == 0;
	}
	CHECK(tok);
	CHECK_EQ_STR(auth,
	    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/eu-west-1/s3/"
	    "aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date;"
	    "x-amz-security-token, Signature=c74f2ecc07f40ce3e9807d0b6b22a9c1f"
	    "ccd6337212acb2484595bf9e45b52f2");
	curl_slist_free_all(l);
	l = NULL;
	q.url = "http://h/k?x=1";
	CHECK_EQ_INT(cred_sign(c, &q, &l), -EINVAL);
	curl_slist_free_all(l);
	cred_unref(c);
	cred_unref(ct);
}

/* A provider of the test: hands out "K<n>" expiring in life seconds,
 * or fails while fail is set. */
struct counting {
	struct cred_provider base;
	int n;
	time_t life;
	bool fail;
};

static int
counting_get(
    struct cred_provider *p, struct cred **out, char *err, size_t errlen)
{
	struct counting *k = (struct counting *)p;
	char id[16];

	if (k->fail) {
		snprintf(err, errlen, "the test's source fails");
		return -EIO;
	}
	snprintf(id, sizeof(id), "K%d", ++k->n);
	*out = cred_new(id, strlen(id), "S", 1, NULL, 0,
	    k->life ? time(NULL) + k->life : 0, "the test");
	return *out ? 0 : -ENOMEM;
}

static void
counting_free(struct cred_provider *p)
{
	(void)p;
}

static const struct cred_provider_ops counting_ops = {
    counting_get, counting_free};

static void
test_cache(void)
{
	struct counting k = {{&counting_ops}, 0, 0, false};
	struct cred_src *s = NULL;
	struct cred *c;
	uint64_t g1, g2;
	char err[256], why[600];

	CHECK_EQ_INT(cred_src_new(&k.base, &s, err, sizeof(err)), 0);
	if (s == NULL)
		return;
	CHECK_EQ_INT(k.n, 1);
	/* static keys: kept, never due */
	CHECK(!cred_src_due(s));
	CHECK_EQ_INT(cred_src_get(s, &c, &g1), 0);
	CHECK_EQ_STR(c->key_id, "K1");
	cred_unref(c);
	/* refused, however soon after the read: one re-read, the next get
	 * has new ones (a key rotated just after the mount read it) */
	CHECK(cred_src_denied(s, g1));
	CHECK(cred_src_due(s));
	/* another request in flight with them, refused before the re-read:
	 * it is sent again too */
	CHECK(cred_src_denied(s, g1));
	CHECK_EQ_INT(cred_src_get(s, &c, &g2), 0);
	CHECK_EQ_STR(c->key_id, "K2");
	CHECK(g2 == g1 + 1);
	cred_unref(c);
	/* those refused too, at once: no second re-read yet */
	CHECK(!cred_src_denied(s, g2));
	CHECK(!cred_src_due(s));
	/* a refusal of an older generation: retry with the new ones */
	CHECK(cred_src_denied(s, g1));
	CHECK_EQ_INT(k.n, 2);
	/* once the first refusal is said, the next is not */
	CHECK(cred_src_describe(s, g2, why, sizeof(why)));
	CHECK(!cred_src_describe(s, g2, why, sizeof(why)));
	CHECK(strstr(why, "the test") != NULL);
	/* K3, for 10 minutes: not due */
	k.life = 2 * CRED_REFRESH_MARGIN_S;
	sleep(CRED_REREAD_MIN_MS / 1000 + 1);
	CHECK(cred_src_denied(s, g2));
	CHECK_EQ_INT(cred_src_get(s, &c, &g1), 0);
	CHECK_EQ_STR(c->key_id, "K3");
	cred_unref(c);
	CHECK(!cred_src_due(s));
	/* K4, for 10 s: due after 5 (half its life, under the margin); read
	 * ahead by cred_src_refresh, never by a get, which signs under the
	 * fetcher's lock and reads only what it must */
	k.life = 10;
	sleep(CRED_REREAD_MIN_MS / 1000 + 1);
	CHECK(cred_src_denied(s, g1));
	CHECK_EQ_INT(cred_src_get(s, &c, &g1), 0);
	CHECK_EQ_STR(c->key_id, "K4");
	cred_unref(c);
	sleep(6);
	CHECK(cred_src_due(s));
	CHECK_EQ_INT(cred_src_get(s, &c, &g2), 0);
	CHECK_EQ_STR(c->key_id, "K4");
	cred_unref(c);
	cred_src_refresh(s);
	CHECK_EQ_INT(k.n, 5);
	/* K5 expired: the next get must read */
	sleep(11);
	CHECK_EQ_INT(cred_src_get(s, &c, &g2), 0);
	CHECK_EQ_STR(c->key_id, "K6");
	cred_unref(c);
	sleep(11);
	/* a source that fails: the ones there are, the reason said */
	k.fail = true;
	CHECK_EQ_INT(cred_src_get(s, &c, &g1), 0);
	CHECK_EQ_STR(c->key_id, "K6");
	cred_unref(c);
	CHECK(!cred_src_due(s)); /* not again before CRED_RETRY_MS */
	cred_src_describe(s, g1, why, sizeof(why));
	CHECK(strstr(why, "the test's source fails") != NULL);
	cred_src_free(s);
}

/* Write text to path. */
static void
put(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	CHECK(f != NULL);
	if (f != NULL) {
		fputs(text, f);
		fclose(f);
	}
}

/* cred_attach on a fresh context: 0 and the key id into id, or -errno
 * and the message into err. */
static int
attach(char *id, size_t idlen, char *err, size_t errlen)
{
	struct remote_opts o = {
	    "http://127.0.0.1:1/", "eu-west-1", -1, NULL, 1000, 0};
	struct remote_ctx *c;
	struct cred *cr;
	uint64_t g;
	int r;

	if (remote_ctx_new(&o, true, &c, err, errlen) != 0)
		return -ENOMEM;
	if ((r = cred_attach(c, &o, err, errlen)) == 0 &&
	    cred_src_get(c->creds, &cr, &g) == 0) {
		snprintf(id, idlen, "%s", cr->key_id);
		cred_unref(cr);
	}
	remote_ctx_free(c);
	return r;
}

static void
test_chain(void)
{
	char dir[] = "/tmp/feedfs-cred.XXXXXX", cf[600], kf[600];
	char id[64], err[2048];

	if (mkdtemp(dir) == NULL) {
		CHECK(false);
		return;
	}
	snprintf(cf, sizeof(cf), "%s/credentials", dir);
	snprintf(kf, sizeof(kf), "%s/config", dir);
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("AWS_SESSION_TOKEN");
	unsetenv("AWS_PROFILE");
	unsetenv("AWS_DEFAULT_PROFILE");
	unsetenv("AWS_ROLE_ARN");
	unsetenv("AWS_WEB_IDENTITY_TOKEN_FILE");
	setenv("AWS_SHARED_CREDENTIALS_FILE", cf, 1);
	setenv("AWS_CONFIG_FILE", kf, 1);
	/* none anywhere: every source says what it lacked */
	CHECK_EQ_INT(attach(id, sizeof(id), err, sizeof(err)), -ENOENT);
	CHECK(strstr(err, "no S3 credentials") != NULL);
	CHECK(strstr(err, "AWS_ACCESS_KEY_ID") != NULL);
	CHECK(strstr(err, cf) != NULL);
	CHECK(strstr(err, "AWS_ROLE_ARN") != NULL);
	CHECK(strstr(err, "AWS_EC2_METADATA_DISABLED") != NULL);
	/* an instance metadata service that does not answer (a closed port
	 * of this host) is the chain's end too, not its failure */
	unsetenv("AWS_EC2_METADATA_DISABLED");
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:1", 1);
	CHECK_EQ_INT(attach(id, sizeof(id), err, sizeof(err)), -ENOENT);
	CHECK(strstr(err, "no S3 credentials") != NULL);
	CHECK(strstr(err, "instance metadata at http://127.0.0.1:1") != NULL);
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	unsetenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	/* the credentials file's profile */
	put(cf, "[p]\naws_access_key_id = AKFILE\n"
		"aws_secret_access_key = SKFILE\n");
	setenv("AWS_PROFILE", "p", 1);
	CHECK_EQ_INT(attach(id, sizeof(id), err, sizeof(err)), 0);
	CHECK_EQ_STR(id, "AKFILE");
	/* the config file's [profile p], when the credentials file lacks it */
	put(cf, "[q]\naws_access_key_id = AKQ\naws_secret_access_key = S\n");
	put(kf, "[profile p]\naws_access_key_id = AKCONF\n"
		"aws_secret_access_key = SKCONF\n");
	CHECK_EQ_INT(attach(id, sizeof(id), err, sizeof(err)), 0);
	CHECK_EQ_STR(id, "AKCONF");
	/* a missing profile is named */
	setenv("AWS_PROFILE", "missing", 1);
	CHECK_EQ_INT(attach(id, sizeof(id), err, sizeof(err)), -ENOENT);
	CHECK(strstr(err, "[missing]") != NULL);
	/* what feedfs does not do stops the chain with a message */
	put(kf, "[profile p]\ncredential_process = /bin/true\n"
		"[profile r]\nrole_arn = arn:aws:iam::1:role/r\n");
	setenv("AWS_PROFILE", "p", 1);
	CHECK_EQ_INT(attach(id, sizeof(id), err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "credential_process") != NULL);
	setenv("AWS_PROFILE", "r", 1);
	CHECK_EQ_INT(attach(id, sizeof(id), err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "source_profile") != NULL);
	/* a source_profile loop */
	put(kf, "[profile a]\nrole_arn = arn:aws:iam::1:role/a\n"
		"source_profile = b\n"
		"[profile b]\nrole_arn = arn:aws:iam::1:role/b\n"
		"source_profile = a\n");
	setenv("AWS_PROFILE", "a", 1);
	CHECK_EQ_INT(attach(id, sizeof(id), err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "loop") != NULL);
	/* the environment wins over the files */
	setenv("AWS_PROFILE", "q", 1);
	setenv("AWS_ACCESS_KEY_ID", "AKENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "SKENV", 1);
	CHECK_EQ_INT(attach(id, sizeof(id), err, sizeof(err)), 0);
	CHECK_EQ_STR(id, "AKENV");
	unsetenv("AWS_ACCESS_KEY_ID");
	CHECK_EQ_INT(attach(id, sizeof(id), err, sizeof(err)), 0);
	CHECK_EQ_STR(id, "AKQ");
	unlink(cf);
	unlink(kf);
	rmdir(dir);
}

int
main(void)
{
	size_t used;

	if (cred_curl_global_init() != 0)
		return 99;
	used = cred_arena_used();
	test_ini();
	test_sts_xml();
	test_times();
	test_imds_json();
	test_arena();
	test_sigv4();
	test_cache();
	test_chain();
	CHECK_EQ_INT(cred_arena_used(), used);
	curl_global_cleanup();
	return TEST_SUMMARY();
}
