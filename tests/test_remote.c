/*
 * test_remote.c - the parsers of remote shards (dataset/remote/remote_parse.c):
 * WebDataset brace ranges (widths, lists, the bound on the expansion,
 * malformed braces), URLs (schemes, user information refused, the display
 * form that drops a signed URL's query), Content-Range and the checks of
 * a range response (each enum remote_bad), response header lines
 * (bounded, a status line after 100 Continue), and the S3 URL mapping of
 * remote_request_url (path style and virtual hosts, keys escaped).  The
 * credentials: test_cred.c.
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
	CHECK(remote_is_url("s3://b/k") && remote_is_url("http://h/") &&
	      remote_is_url("https://h/") && !remote_is_url("/data/x.tar") &&
	      !remote_is_url("file:///x"));
}

static void
lines(struct remote_resp *r, const char *const *v)
{
	memset(r, 0, sizeof(*r));
	for (; *v; v++)
		remote_resp_line(r, *v, strlen(*v));
}

static void
test_responses(void)
{
	uint64_t a, b, t;
	struct remote_resp r;

	CHECK_EQ_INT(
	    remote_content_range("bytes 0-99/1234", 15, &a, &b, &t), 0);
	CHECK(a == 0 && b == 99 && t == 1234);
	CHECK_EQ_INT(
	    remote_content_range(" bytes 5-5/*\r\n", 14, &a, &b, &t), 0);
	CHECK(a == 5 && b == 5 && t == UINT64_MAX);
	static const char *const bad[] = {"bytes 9-1/100", "bytes 0-100/100",
	    "bytes -1/100", "bytes 0-1", "items 0-1/2", "bytes 0-1/2x",
	    "bytes 99999999999999999999-1/2", "bytes */100", ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_EQ_INT(
		    remote_content_range(bad[i], strlen(bad[i]), &a, &b, &t),
		    -EINVAL);

	static const char *const ok[] = {"HTTP/1.1 100 Continue\r\n", "\r\n",
	    "HTTP/1.1 206 Partial Content\r\n", "ETag: \"abc\"\r\n",
	    "content-range: bytes 100-199/1000\r\n", "Content-Length: 100\r\n",
	    "\r\n", NULL};
	lines(&r, ok);
	CHECK_EQ_INT(r.status, 206);
	CHECK_EQ_STR(r.etag, "\"abc\"");
	CHECK_EQ_INT(remote_range_check(&r, 100, 100, 1000, 100), RB_NONE);
	CHECK_EQ_INT(remote_range_check(&r, 100, 100, 1000, 99), RB_SHORT);
	CHECK_EQ_INT(remote_range_check(&r, 100, 100, 1000, 101), RB_LONG);
	CHECK_EQ_INT(remote_range_check(&r, 101, 99, 1000, 99), RB_RANGE);
	CHECK_EQ_INT(remote_range_check(&r, 100, 100, 2000, 100), RB_RANGE);
	static const char *const full[] = {
	    "HTTP/1.1 200 OK\r\n", "Content-Length: 1000\r\n", NULL};
	lines(&r, full);
	CHECK_EQ_INT(remote_range_check(&r, 100, 100, 1000, 100), RB_NOT206);
	static const char *const redir[] = {"HTTP/1.1 307 Temporary\r\n",
	    "Location: http://evil.example:81/x?sig=1\r\n", NULL};
	lines(&r, redir);
	CHECK_EQ_INT(remote_range_check(&r, 0, 1, 1, 0), RB_REDIRECT);
	CHECK_EQ_STR(r.location_host, "evil.example:81");
	static const char *const garbage[] = {
	    "HTTP/1.1 206 x\r\n", "Content-Length: 12abc\r\n", NULL};
	lines(&r, garbage);
	CHECK_EQ_INT(remote_range_check(&r, 0, 12, 100, 12), RB_HEADERS);
	static const char *const huge[] = {"HTTP/1.1 206 x\r\n",
	    "Content-Range: bytes 0-999999999999999/1000000000000000\r\n",
	    "Content-Length: 1000000000000000\r\n", NULL};
	lines(&r, huge);
	CHECK_EQ_INT(remote_range_check(&r, 0, 10, 100, 10), RB_RANGE);
	/* endless headers: bounded */
	memset(&r, 0, sizeof(r));
	remote_resp_line(&r, "HTTP/1.1 200 OK\r\n", 17);
	for (int i = 0; i < 10000 && !r.header_overflow; i++)
		remote_resp_line(
		    &r, "X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaa\r\n", 34);
	CHECK(r.header_overflow);
	CHECK(r.header_bytes <= REMOTE_HEADER_MAX + 64);
	CHECK_EQ_INT(remote_range_check(&r, 0, 1, 1, 1), RB_HEADERS);
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
	test_s3_urls();
	return TEST_SUMMARY();
}
