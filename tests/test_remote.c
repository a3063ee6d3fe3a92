/*
 * test_remote.c - the parsers of remote shards (dataset/remote/remote_parse.c):
 * WebDataset brace ranges (widths, lists, the bound on the expansion,
 * malformed braces), URLs (schemes, user information refused, the display
 * form that drops a signed URL's query, s3 keys percent-decoded and
 * displayed whole), Content-Range and the one check of a response
 * (remote_resp_check: each enum remote_bad, a changed version, an HTTP
 * status), response header lines (bounded, a status line after 100
 * Continue, an ETag of any length within the bound, Last-Modified), an
 * object's version (strong, dated, weak, none; its precondition and its
 * comparisons; dataset/remote/remote_version.c), and the S3 URL mapping
 * of remote_request_url (path style and virtual hosts, keys escaped and
 * percent-decoded).  The credentials: test_cred.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset/remote/remote_int.h"
#include "tests/testlib.h"

static void
free_names(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void
test_braces(void)
{
	char err[256], **v;
	size_t n;

	CHECK_EQ_INT(remote_brace_expand("s3://b/shard-{000000..000999}.tar",
			 REMOTE_BRACE_MAX, &v, &n, err, sizeof(err)),
	    0);
	CHECK_EQ_INT(n, 1000);
	if (n == 1000) {
		CHECK_EQ_STR(v[0], "s3://b/shard-000000.tar");
		CHECK_EQ_STR(v[999], "s3://b/shard-000999.tar");
		CHECK_EQ_STR(v[42], "s3://b/shard-000042.tar");
	}
	free_names(v, n);
	/* two braces, the last varying fastest; a list; no leading zero */
	CHECK_EQ_INT(remote_brace_expand("http://h/{a,bb}/x{8..10}.tar", 100,
			 &v, &n, err, sizeof(err)),
	    0);
	CHECK_EQ_INT(n, 6);
	if (n == 6) {
		CHECK_EQ_STR(v[0], "http://h/a/x8.tar");
		CHECK_EQ_STR(v[2], "http://h/a/x10.tar");
		CHECK_EQ_STR(v[3], "http://h/bb/x8.tar");
	}
	free_names(v, n);
	/* no brace: the name itself */
	CHECK_EQ_INT(
	    remote_brace_expand("http://h/x.tar", 10, &v, &n, err, sizeof(err)),
	    0);
	CHECK_EQ_INT(n, 1);
	free_names(v, n);
	/* the bound: on the product, before anything is made */
	CHECK_EQ_INT(remote_brace_expand("h/{0..999}{0..999}{0..999}", 1000000,
			 &v, &n, err, sizeof(err)),
	    -E2BIG);
	CHECK(strstr(err, "more than 1000000") != NULL);
	CHECK_EQ_INT(remote_brace_expand("h/{0..99999999999999999}",
			 REMOTE_BRACE_MAX, &v, &n, err, sizeof(err)),
	    -E2BIG);
	CHECK_EQ_INT(
	    remote_brace_expand("h/{0..1000}", 1000, &v, &n, err, sizeof(err)),
	    -E2BIG);
	/* malformed */
	static const char *const bad[] = {"h/{0..9", "h/0..9}", "h/{a..b}",
	    "h/{9..1}", "h/{{0..1}}", "h/{1..}", "h/{..2}",
	    "h/{0..1234567890123456789}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = remote_brace_expand(
		    bad[i], REMOTE_BRACE_MAX, &v, &n, err, sizeof(err));

		if (r != -EINVAL)
			fprintf(stderr, "%s: %d\n", bad[i], r);
		CHECK_EQ_INT(r, -EINVAL);
	}
}

static void
test_urls(void)
{
	struct remote_url u;
	char err[256], *d;

	CHECK_EQ_INT(
	    remote_url_parse("s3://bucket/a/b c", &u, err, sizeof(err)),
	    -EINVAL);
	CHECK_EQ_INT(
	    remote_url_parse("s3://bucket/a/b.tar", &u, err, sizeof(err)), 0);
	CHECK_EQ_INT(u.scheme, RS_S3);
	CHECK_EQ_STR(u.host, "bucket");
	CHECK_EQ_STR(u.path, "a/b.tar");
	remote_url_free(&u);
	CHECK_EQ_INT(
	    remote_url_parse("https://h:8443/p/x.tar?X-Amz-Signature=abc", &u,
		err, sizeof(err)),
	    0);
	CHECK_EQ_INT(u.scheme, RS_HTTPS);
	CHECK_EQ_STR(u.host, "h:8443");
	CHECK_EQ_STR(u.path, "/p/x.tar?X-Amz-Signature=abc");
	remote_url_free(&u);
	CHECK_EQ_INT(remote_url_parse("http://h?q", &u, err, sizeof(err)), 0);
	CHECK_EQ_STR(u.path, "/?q");
	remote_url_free(&u);
	/* refused */
	CHECK_EQ_INT(remote_url_parse(
			 "https://key:secret@h/x.tar", &u, err, sizeof(err)),
	    -EINVAL);
	CHECK(strstr(err, "user information") != NULL);
	CHECK(strstr(err, "secret") == NULL);
	CHECK_EQ_INT(
	    remote_url_parse("ftp://h/x", &u, err, sizeof(err)), -EINVAL);
	CHECK_EQ_INT(
	    remote_url_parse("http:///x", &u, err, sizeof(err)), -EINVAL);
	CHECK_EQ_INT(
	    remote_url_parse("s3://bucket", &u, err, sizeof(err)), -EINVAL);
	CHECK_EQ_INT(
	    remote_url_parse("s3://bucket/", &u, err, sizeof(err)), -EINVAL);
	CHECK_EQ_INT(
	    remote_url_parse("http://h/x#f", &u, err, sizeof(err)), -EINVAL);
	CHECK_EQ_INT(
	    remote_url_parse("http://h/\x01", &u, err, sizeof(err)), -EINVAL);
	/* the display form: no query */
	d = remote_url_display("https://h/p/x.tar?X-Amz-Signature=abc&k=v");
	CHECK_EQ_STR(d, "https://h/p/x.tar");
	free(d);
	/* s3 keys: percent-decoded; '?' is the key's; displayed whole, in
	 * one spelling, so that two keys never share a name */
	CHECK_EQ_INT(
	    remote_url_parse("s3://b/d/a%20b%231%3F.tar", &u, err, sizeof(err)),
	    0);
	CHECK_EQ_STR(u.path, "d/a b#1?.tar");
	remote_url_free(&u);
	CHECK_EQ_INT(
	    remote_url_parse("s3://b/x?a.tar", &u, err, sizeof(err)), 0);
	CHECK_EQ_STR(u.path, "x?a.tar");
	remote_url_free(&u);
	CHECK_EQ_INT(
	    remote_url_parse("s3://b/?a.tar", &u, err, sizeof(err)), 0);
	CHECK_EQ_STR(u.path, "?a.tar");
	remote_url_free(&u);
	d = remote_url_display("s3://b/x?a.tar");
	CHECK_EQ_STR(d, "s3://b/x%3Fa.tar");
	free(d);
	d = remote_url_display("s3://b/x?b.tar");
	CHECK_EQ_STR(d, "s3://b/x%3Fb.tar");
	free(d);
	d = remote_url_display("s3://b/d/a%20b%231%3f.tar");
	CHECK_EQ_STR(d, "s3://b/d/a%20b%231%3F.tar");
	free(d);
	static const char *const badkeys[] = {"s3://b/a%2", "s3://b/a%zz",
	    "s3://b/a%00b", "s3://b/100%.tar", "s3://b/a b", "s3://b/a#b"};
	for (size_t i = 0; i < sizeof(badkeys) / sizeof(badkeys[0]); i++) {
		CHECK_EQ_INT(remote_url_parse(badkeys[i], &u, err, sizeof(err)),
		    -EINVAL);
		CHECK(strstr(err, "%") != NULL); /* says how to write it */
	}
	CHECK(remote_is_url("s3://b/k") && remote_is_url("http://h/") &&
	      remote_is_url("https://h/") && !remote_is_url("/data/x.tar") &&
	      !remote_is_url("file:///x"));
}

static void
lines(struct remote_resp *r, const char *const *v)
{
	remote_resp_free(r);
	memset(r, 0, sizeof(*r));
	for (; *v; v++)
		remote_resp_line(r, *v, strlen(*v));
}

/* The check of a response to [first, last] of an object of size. */
static enum remote_judge
judge(const struct remote_resp *r, uint64_t first, uint64_t last, uint64_t size,
    const struct remote_version *v, enum remote_bad *bad)
{
	struct remote_want w = {first, last, false, size, v};

	return remote_resp_check(r, &w, bad);
}

static void
test_responses(void)
{
	uint64_t a, b, t;
	struct remote_resp r = {0};
	struct remote_version v = {RV_ETAG, (char *)"\"abc\"", 0, 1000};
	enum remote_bad bad;

	CHECK_EQ_INT(
	    remote_content_range("bytes 0-99/1234", 15, &a, &b, &t), 0);
	CHECK(a == 0 && b == 99 && t == 1234);
	CHECK_EQ_INT(
	    remote_content_range(" bytes 5-5/*\r\n", 14, &a, &b, &t), 0);
	CHECK(a == 5 && b == 5 && t == UINT64_MAX);
	static const char *const bad_cr[] = {"bytes 9-1/100", "bytes 0-100/100",
	    "bytes -1/100", "bytes 0-1", "items 0-1/2", "bytes 0-1/2x",
	    "bytes 99999999999999999999-1/2", "bytes */100", ""};
	for (size_t i = 0; i < sizeof(bad_cr) / sizeof(bad_cr[0]); i++)
		CHECK_EQ_INT(remote_content_range(
				 bad_cr[i], strlen(bad_cr[i]), &a, &b, &t),
		    -EINVAL);

	/* the blank line that ends the headers is said */
	CHECK(!remote_resp_line(&r, "HTTP/1.1 206 x\r\n", 16));
	CHECK(remote_resp_line(&r, "\r\n", 2));
	static const char *const ok[] = {"HTTP/1.1 100 Continue\r\n", "\r\n",
	    "HTTP/1.1 206 Partial Content\r\n", "ETag: \"abc\"\r\n",
	    "content-range: bytes 100-199/1000\r\n", "Content-Length: 100\r\n",
	    "Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n", "\r\n", NULL};
	lines(&r, ok);
	CHECK_EQ_INT(r.status, 206);
	CHECK_EQ_STR(r.etag, "\"abc\"");
	CHECK(r.has_last_modified && r.last_modified == 784111777);
	CHECK_EQ_INT(judge(&r, 100, 199, 1000, &v, &bad), RJ_OK);
	CHECK_EQ_INT(judge(&r, 100, 199, 1000, NULL, &bad), RJ_OK);
	CHECK_EQ_INT(judge(&r, 101, 199, 1000, &v, &bad), RJ_BAD);
	CHECK_EQ_INT(bad, RB_RANGE);
	CHECK_EQ_INT(judge(&r, 100, 198, 1000, NULL, &bad), RJ_BAD);
	CHECK_EQ_INT(bad, RB_RANGE);
	CHECK_EQ_INT(judge(&r, 100, 199, 2000, NULL, &bad), RJ_BAD);
	CHECK_EQ_INT(bad, RB_RANGE);
	/* another size or ETag than the version's: the object changed */
	v.size = 2000;
	CHECK_EQ_INT(judge(&r, 100, 199, 2000, &v, &bad), RJ_CHANGED);
	v.size = 1000;
	v.etag = (char *)"\"abd\"";
	CHECK_EQ_INT(judge(&r, 100, 199, 1000, &v, &bad), RJ_CHANGED);
	v.etag = (char *)"\"abc\"";
	/* an open range: to the object's end */
	struct remote_want open = {100, 0, true, 200, NULL};
	static const char *const tail[] = {"HTTP/2 206\r\n",
	    "content-range: bytes 100-199/200\r\n", "\r\n", NULL};
	lines(&r, tail);
	CHECK_EQ_INT(remote_resp_check(&r, &open, &bad), RJ_OK);
	open.first = 0;
	CHECK_EQ_INT(remote_resp_check(&r, &open, &bad), RJ_BAD);
	CHECK_EQ_INT(bad, RB_RANGE);
	/* the Content-Length says the body is longer, or shorter */
	static const char *const longer[] = {"HTTP/1.1 206 x\r\n",
	    "Content-Range: bytes 0-9/100\r\n", "Content-Length: 11\r\n", NULL};
	lines(&r, longer);
	CHECK_EQ_INT(judge(&r, 0, 9, 100, NULL, &bad), RJ_BAD);
	CHECK_EQ_INT(bad, RB_LONG);
	static const char *const full[] = {
	    "HTTP/1.1 200 OK\r\n", "Content-Length: 1000\r\n", NULL};
	lines(&r, full);
	CHECK_EQ_INT(judge(&r, 100, 199, 1000, &v, &bad), RJ_BAD);
	CHECK_EQ_INT(bad, RB_NOT206);
	static const char *const pre[] = {"HTTP/1.1 412 x\r\n", NULL};
	lines(&r, pre);
	CHECK_EQ_INT(judge(&r, 0, 0, 1000, &v, &bad), RJ_CHANGED);
	CHECK_EQ_INT(judge(&r, 0, 0, UINT64_MAX, NULL, &bad), RJ_STATUS);
	static const char *const unav[] = {"HTTP/1.1 503 x\r\n", NULL};
	lines(&r, unav);
	CHECK_EQ_INT(judge(&r, 0, 0, 1000, &v, &bad), RJ_STATUS);
	static const char *const redir[] = {"HTTP/1.1 307 Temporary\r\n",
	    "Location: http://evil.example:81/x?sig=1\r\n", NULL};
	lines(&r, redir);
	CHECK_EQ_INT(judge(&r, 0, 0, 1, NULL, &bad), RJ_BAD);
	CHECK_EQ_INT(bad, RB_REDIRECT);
	CHECK_EQ_STR(r.location_host, "evil.example:81");
	static const char *const garbage[] = {
	    "HTTP/1.1 206 x\r\n", "Content-Length: 12abc\r\n", NULL};
	lines(&r, garbage);
	CHECK_EQ_INT(judge(&r, 0, 11, 100, NULL, &bad), RJ_BAD);
	CHECK_EQ_INT(bad, RB_HEADERS);
	/* two ETags, or two dates: which one is the object's? */
	static const char *const twice[] = {
	    "HTTP/1.1 206 x\r\n", "ETag: \"a\"\r\n", "ETag: \"b\"\r\n", NULL};
	lines(&r, twice);
	CHECK(r.bad_header);
	/* an ETag goes back out in If-Match: no control character in it */
	static const char *const ctl[] = {
	    "HTTP/1.1 206 x\r\n", "ETag: \"a\rIf-Match: b\"\r\n", NULL};
	lines(&r, ctl);
	CHECK(r.bad_header);
	static const char *const baddate[] = {
	    "HTTP/1.1 206 x\r\n", "Last-Modified: yesterday\r\n", NULL};
	lines(&r, baddate);
	CHECK(r.bad_header);
	static const char *const huge[] = {"HTTP/1.1 206 x\r\n",
	    "Content-Range: bytes 0-999999999999999/1000000000000000\r\n",
	    "Content-Length: 1000000000000000\r\n", NULL};
	lines(&r, huge);
	CHECK_EQ_INT(judge(&r, 0, 9, 100, NULL, &bad), RJ_BAD);
	CHECK_EQ_INT(bad, RB_RANGE);
	/* the probe: the size comes from the Content-Range, so '*' is not
	 * enough */
	static const char *const star[] = {
	    "HTTP/1.1 206 x\r\n", "Content-Range: bytes 0-0/*\r\n", NULL};
	lines(&r, star);
	CHECK_EQ_INT(judge(&r, 0, 0, UINT64_MAX, NULL, &bad), RJ_BAD);
	/* endless headers: bounded */
	remote_resp_free(&r);
	memset(&r, 0, sizeof(r));
	remote_resp_line(&r, "HTTP/1.1 200 OK\r\n", 17);
	for (int i = 0; i < 10000 && !r.header_overflow; i++)
		remote_resp_line(
		    &r, "X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaa\r\n", 34);
	CHECK(r.header_overflow);
	CHECK(r.header_bytes <= REMOTE_HEADER_MAX + 64);
	CHECK_EQ_INT(judge(&r, 0, 0, 1, NULL, &bad), RJ_BAD);
	CHECK_EQ_INT(bad, RB_HEADERS);
	remote_resp_free(&r);
}

/* An ETag of len bytes: a quote, len - 2 hex digits, a quote. */
static char *
long_tag(size_t len)
{
	char *t = malloc(len + 1);

	for (size_t i = 0; i < len; i++)
		t[i] = "0123456789abcdef"[i % 16];
	t[0] = t[len - 1] = '"';
	t[len] = '\0';
	return t;
}

static void
test_versions(void)
{
	struct remote_resp r = {0};
	struct remote_version v;
	char err[512], *h, *line;
	enum remote_bad bad;

	/* a strong ETag of any length the headers hold: a quoted SHA-512
	 * hex digest is 130 bytes; 60000 still fit in 64 KiB */
	for (size_t len = 130; len <= 60000; len = len * 20 + 2) {
		char *tag = long_tag(len);

		CHECK(asprintf(&line, "ETag: %s\r\n", tag) > 0);
		const char *const resp[] = {"HTTP/1.1 206 x\r\n",
		    "Content-Range: bytes 0-0/512\r\n", line, "\r\n", NULL};
		lines(&r, resp);
		CHECK(!r.bad_header);
		CHECK_EQ_INT(judge(&r, 0, 0, UINT64_MAX, NULL, &bad), RJ_OK);
		CHECK_EQ_INT(
		    remote_version_of(&r, 512, &v, err, sizeof(err)), 0);
		CHECK_EQ_INT(v.kind, RV_ETAG);
		CHECK_EQ_STR(v.etag, tag);
		h = remote_version_header(&v);
		CHECK(h != NULL && strncmp(h, "If-Match: \"", 11) == 0 &&
		      strlen(h) == 10 + len);
		free(h);
		CHECK(remote_version_same(&v, &r));
		CHECK_EQ_INT(judge(&r, 0, 0, 512, &v, &bad), RJ_OK);
		remote_version_free(&v);
		free(line);
		free(tag);
	}
	/* no ETag: Last-Modified and the size, sent as If-Unmodified-Since */
	static const char *const dated[] = {"HTTP/1.1 206 x\r\n",
	    "Content-Range: bytes 0-0/512\r\n",
	    "Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n", NULL};
	lines(&r, dated);
	CHECK_EQ_INT(remote_version_of(&r, 512, &v, err, sizeof(err)), 0);
	CHECK_EQ_INT(v.kind, RV_DATE);
	CHECK(v.etag == NULL && v.last_modified == 784111777 && v.size == 512);
	h = remote_version_header(&v);
	CHECK_EQ_STR(h, "If-Unmodified-Since: Sun, 06 Nov 1994 08:49:37 GMT");
	free(h);
	h = remote_version_text(&v);
	CHECK_EQ_STR(h, "last-modified 784111777 size 512");
	free(h);
	CHECK(remote_version_same(&v, &r));
	/* a later Last-Modified, or another size: changed */
	static const char *const later[] = {"HTTP/1.1 206 x\r\n",
	    "Content-Range: bytes 0-0/512\r\n",
	    "Last-Modified: Sun, 06 Nov 1994 08:49:38 GMT\r\n", NULL};
	lines(&r, later);
	CHECK(!remote_version_same(&v, &r));
	CHECK_EQ_INT(judge(&r, 0, 0, 512, &v, &bad), RJ_CHANGED);
	static const char *const bigger[] = {"HTTP/1.1 206 x\r\n",
	    "Content-Range: bytes 0-0/513\r\n",
	    "Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n", NULL};
	lines(&r, bigger);
	CHECK_EQ_INT(judge(&r, 0, 0, 512, &v, &bad), RJ_CHANGED);
	remote_version_free(&v);
	/* a weak ETag: beside Last-Modified, compared weakly, never sent */
	static const char *const weak[] = {"HTTP/1.1 206 x\r\n",
	    "Content-Range: bytes 0-0/512\r\n", "ETag: W/\"200-5f\"\r\n",
	    "Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n", NULL};
	lines(&r, weak);
	CHECK_EQ_INT(remote_version_of(&r, 512, &v, err, sizeof(err)), 0);
	CHECK_EQ_INT(v.kind, RV_DATE);
	CHECK_EQ_STR(v.etag, "W/\"200-5f\"");
	h = remote_version_header(&v);
	CHECK(strncmp(h, "If-Unmodified-Since: ", 21) == 0);
	free(h);
	static const char *const weak2[] = {"HTTP/1.1 206 x\r\n",
	    "ETag: \"200-5f\"\r\n",
	    "Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n", NULL};
	lines(&r, weak2);
	CHECK(remote_version_same(&v, &r)); /* weakly the same */
	static const char *const weak3[] = {
	    "HTTP/1.1 206 x\r\n", "ETag: W/\"200-60\"\r\n", NULL};
	lines(&r, weak3);
	CHECK(!remote_version_same(&v, &r));
	remote_version_free(&v);
	/* a strong version: a weak tag in a response is not it */
	static const char *const strong[] = {
	    "HTTP/1.1 206 x\r\n", "ETag: \"200-5f\"\r\n", NULL};
	lines(&r, strong);
	CHECK_EQ_INT(remote_version_of(&r, 512, &v, err, sizeof(err)), 0);
	lines(&r, weak3);
	CHECK(!remote_version_same(&v, &r));
	lines(&r, weak2);
	CHECK(remote_version_same(&v, &r));
	remote_version_free(&v);
	/* nothing that could be a version: refused, saying why */
	static const char *const onlyweak[] = {
	    "HTTP/1.1 206 x\r\n", "ETag: W/\"1\"\r\n", NULL};
	lines(&r, onlyweak);
	CHECK_EQ_INT(remote_version_of(&r, 512, &v, err, sizeof(err)), -EPROTO);
	CHECK(strstr(err, "weak ETag") && strstr(err, "Last-Modified"));
	static const char *const none[] = {"HTTP/1.1 206 x\r\n", NULL};
	lines(&r, none);
	CHECK_EQ_INT(remote_version_of(&r, 512, &v, err, sizeof(err)), -EPROTO);
	CHECK(strstr(err, "no ETag") && strstr(err, "Last-Modified"));
	remote_resp_free(&r);
}

static void
test_s3_urls(void)
{
	struct remote_opts o = {
	    "http://127.0.0.1:9000/", "eu-west-1", -1, NULL, 0, UINT32_MAX};
	struct remote_ctx *c;
	char err[512], *u;

	/* path style with an endpoint (the credentials: test_cred.c) */
	CHECK_EQ_INT(remote_ctx_new(&o, true, &c, err, sizeof(err)), 0);
	if (c != NULL) {
		CHECK_EQ_STR(c->sigv4, "aws:amz:eu-west-1:s3");
		CHECK(c->path_style && c->creds == NULL);
		u = remote_request_url(
		    c, "s3://bkt/a=b/x+1.tar", err, sizeof(err));
		CHECK_EQ_STR(u, "http://127.0.0.1:9000/bkt/a%3Db/x%2B1.tar");
		free(u);
		u = remote_request_url(
		    c, "s3://bkt/a%20b/x#?.tar", err, sizeof(err));
		CHECK(u == NULL); /* a raw '#': write it %23 */
		u = remote_request_url(
		    c, "s3://bkt/a%20b/x%23?.tar", err, sizeof(err));
		CHECK_EQ_STR(u, "http://127.0.0.1:9000/bkt/a%20b/x%23%3F.tar");
		free(u);
		remote_ctx_free(c);
	}
	/* virtual-host style by default on AWS */
	o.s3_endpoint = NULL;
	CHECK_EQ_INT(remote_ctx_new(&o, true, &c, err, sizeof(err)), 0);
	if (c != NULL) {
		u = remote_request_url(c, "s3://bkt/k/x.tar", err, sizeof(err));
		CHECK_EQ_STR(
		    u, "https://bkt.s3.eu-west-1.amazonaws.com/k/x.tar");
		free(u);
		remote_ctx_free(c);
	}
	/* http(s) URLs as they are, no credentials needed */
	CHECK_EQ_INT(remote_ctx_new(&o, false, &c, err, sizeof(err)), 0);
	if (c != NULL) {
		CHECK(c->creds == NULL && c->sigv4 == NULL);
		u = remote_request_url(
		    c, "https://h/x.tar?a=b", err, sizeof(err));
		CHECK_EQ_STR(u, "https://h/x.tar?a=b");
		free(u);
		remote_ctx_free(c);
	}
}

int
main(void)
{
	test_braces();
	test_urls();
	test_responses();
	test_versions();
	test_s3_urls();
	return TEST_SUMMARY();
}
