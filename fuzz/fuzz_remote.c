/*
 * fuzz_remote - libFuzzer target: what remote shards parse
 * (dataset/remote/remote_parse.c): the first byte picks
 *
 *   0  a brace pattern (remote_brace_expand, at most 1000 names): every
 *      name braceless, no more names than allowed;
 *   1  a URL (remote_url_parse, remote_url_display): a host without '@',
 *      a display form without '?' (an s3 key's is escaped) that parses
 *      again to the same key;
 *   2  a response's header lines, one a line (remote_resp_line, then
 *      remote_resp_check, remote_content_range of each line, and the
 *      version: remote_version_of, _same, _header, _text): the header
 *      count bounded, RJ_OK only for a 206 with that very range, a
 *      version refused only for want of a strong ETag or a date, the same
 *      as the response it was made of, its precondition one header line.
 *
 * (The credentials' files and responses: fuzz/fuzz_cred.c.)
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dataset/remote/remote.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
braces(const char *s)
{
	char err[256], **v;
	size_t n;
	int r = remote_brace_expand(s, 1000, &v, &n, err, sizeof(err));

	if (r == 0) {
		if (n > 1000)
			abort();
		for (size_t i = 0; i < n; i++) {
			if (strpbrk(v[i], "{}") != NULL)
				abort();
			free(v[i]);
		}
		free(v);
	} else if (r != -EINVAL && r != -E2BIG && r != -ENOMEM)
		abort();
}

static void
url(const char *s)
{
	struct remote_url u;
	char err[256], *d;

	if (remote_url_parse(s, &u, err, sizeof(err)) == 0) {
		if (u.host[0] == '\0' || strchr(u.host, '@') != NULL)
			abort();
		remote_url_free(&u);
	}
	if ((d = remote_url_display(s)) != NULL) {
		if (strchr(d, '?') != NULL)
			abort();
		if (strncmp(s, "s3://", 5) == 0 &&
		    remote_url_parse(s, &u, err, sizeof(err)) == 0) {
			struct remote_url w;

			/* the display names the very key */
			if (remote_url_parse(d, &w, err, sizeof(err)) != 0 ||
			    strcmp(w.path, u.path) != 0)
				abort();
			remote_url_free(&w);
			remote_url_free(&u);
		}
		free(d);
	}
}

static void
version(const struct remote_resp *r)
{
	struct remote_version v;
	char err[512], *h, *t;
	int rc = remote_version_of(r, 100, &v, err, sizeof(err));

	if (rc == -EPROTO) {
		/* refused only where there is no strong tag and no date */
		if (r->has_last_modified ||
		    (r->etag != NULL &&
			!(r->etag[0] == 'W' && r->etag[1] == '/')))
			abort();
		return;
	}
	if (rc != 0) {
		if (rc != -ENOMEM)
			abort();
		return;
	}
	if (!remote_version_same(&v, r))
		abort();
	h = remote_version_header(&v);
	t = remote_version_text(&v);
	if (h != NULL && (strpbrk(h, "\r\n") != NULL ||
			     (v.kind == RV_DATE && strncmp(h,
						       "If-Unmodified-"
						       "Since: ",
						       21) != 0)))
		abort();
	free(h);
	free(t);
	remote_version_free(&v);
}

static void
headers(const char *s, size_t n)
{
	struct remote_resp r;
	const char *p = s, *end = s + n;
	uint64_t a, b, t;

	memset(&r, 0, sizeof(r));
	while (p < end) {
		const char *e = memchr(p, '\n', (size_t)(end - p));
		size_t l = e ? (size_t)(e - p) + 1 : (size_t)(end - p);

		remote_resp_line(&r, p, l);
		if (remote_content_range(p, l, &a, &b, &t) == 0 &&
		    (a > b || (t != UINT64_MAX && b >= t)))
			abort();
		p += l;
	}
	for (uint64_t off = 0; off < 3; off++)
		for (uint64_t len = 1; len < 4; len++) {
			struct remote_want w = {
			    off, off + len - 1, false, 100, NULL};
			enum remote_bad bad;

			if (remote_resp_check(&r, &w, &bad) == RJ_OK &&
			    (r.status != 206 || !r.has_range ||
				r.range_first != off ||
				r.range_last != off + len - 1 ||
				r.range_total != 100))
				abort();
		}
	if (r.header_bytes > n)
		abort();
	version(&r);
	remote_resp_free(&r);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;

	if (size < 1 || size > (1u << 16))
		return 0;
	if ((s = malloc(size)) == NULL)
		abort();
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	switch (data[0] % 3) {
	case 0:
		if (size < 512)
			braces(s);
		break;
	case 1:
		url(s);
		break;
	default:
		headers(s, size - 1);
		break;
	}
	free(s);
	return 0;
}
