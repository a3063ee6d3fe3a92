/*
 * remote_parse.c - what comes from the config or the wire, parsed with no
 * I/O.  Layer: dataset/remote/ (the HTTP/S3 client; see remote.h): URLs
 * (an s3 key percent-decoded, and displayed whole), WebDataset brace
 * ranges, response header lines (an ETag of any length within the
 * headers' bound, Last-Modified) and Content-Range (the credentials'
 * files and responses: cred_parse.c).  Every byte is looked at through a
 * bound that was checked first; fuzz/fuzz_remote.c feeds all of it.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "dataset/remote/remote.h"

bool
remote_is_url(const char *s)
{
	return strncmp(s, "http://", 7) == 0 ||
	       strncmp(s, "https://", 8) == 0 || strncmp(s, "s3://", 5) == 0;
}

void
remote_url_free(struct remote_url *u)
{
	free(u->host);
	free(u->path);
	u->host = u->path = NULL;
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* u->path = the s3 key at k, percent-decoded (see remote.h).  u->host is
 * set; on an error u is freed. */
static int
key_decode(const char *k, struct remote_url *u, char *err, size_t errlen)
{
	size_t n = strlen(k), o = 0;

	if ((u->path = malloc(n + 1)) == NULL) {
		remote_url_free(u);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		int hi, lo;

		if (k[i] != '%') {
			u->path[o++] = k[i];
			continue;
		}
		hi = i + 2 < n ? hexval(k[i + 1]) : -1;
		lo = i + 2 < n ? hexval(k[i + 2]) : -1;
		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
			snprintf(err, errlen,
			    "an s3 key with a '%%' at offset %zu that is not "
			    "%%XX (two hex digits, not %%00; a '%%' is %%25)",
			    i);
			remote_url_free(u);
			return -EINVAL;
		}
		u->path[o++] = (char)(hi << 4 | lo);
		i += 2;
	}
	u->path[o] = '\0';
	return 0;
}

int
remote_url_parse(const char *s, struct remote_url *u, char *err, size_t errlen)
{
	const char *p, *h, *he;
	size_t sl;

	memset(u, 0, sizeof(*u));
	if (strncmp(s, "http://", 7) == 0) {
		u->scheme = RS_HTTP;
		h = s + 7;
	} else if (strncmp(s, "https://", 8) == 0) {
		u->scheme = RS_HTTPS;
		h = s + 8;
	} else if (strncmp(s, "s3://", 5) == 0) {
		u->scheme = RS_S3;
		h = s + 5;
	} else {
		snprintf(err, errlen, "not an http, https or s3 URL");
		return -EINVAL;
	}
	for (p = s; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f) {
			snprintf(err, errlen,
			    "a URL with a space or a control character%s",
			    u->scheme == RS_S3 ? " (in an s3 key, write a "
						 "space as %20)"
					       : "");
			return -EINVAL;
		}
	if (strchr(s, '#') != NULL) {
		snprintf(err, errlen, "a URL with a fragment ('#')%s",
		    u->scheme == RS_S3 ? " (in an s3 key, write '#' as %23)"
				       : "");
		return -EINVAL;
	}
	he = h + strcspn(h, "/?");
	if (memchr(h, '@', (size_t)(he - h)) != NULL) {
		snprintf(err, errlen,
		    "a URL with user information: credentials come from the "
		    "environment or the credentials file, never the config");
		return -EINVAL;
	}
	if (he == h) {
		snprintf(err, errlen, "a URL without a host");
		return -EINVAL;
	}
	if ((u->host = strndup(h, (size_t)(he - h))) == NULL)
		return -ENOMEM;
	if (u->scheme == RS_S3) {
		if (*he != '/' || he[1] == '\0') {
			remote_url_free(u);
			snprintf(err, errlen, "an s3 URL without a key");
			return -EINVAL;
		}
		return key_decode(he + 1, u, err, errlen);
	}
	sl = strlen(he);
	if ((u->path = malloc(sl + 2)) == NULL) {
		remote_url_free(u);
		return -ENOMEM;
	}
	if (u->scheme != RS_S3 && *he != '/')
		snprintf(u->path, sl + 2, "/%s", he);
	else
		memcpy(u->path, he, sl + 1);
	return 0;
}

char *
remote_key_escape(const char *k)
{
	static const char hex[] = "0123456789ABCDEF";
	char *o = malloc(strlen(k) * 3 + 1), *p = o;

	if (o == NULL)
		return NULL;
	for (; *k; k++) {
		unsigned char ch = (unsigned char)*k;

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' ||
		    ch == '.' || ch == '~' || ch == '/')
			*p++ = (char)ch;
		else {
			*p++ = '%';
			*p++ = hex[ch >> 4];
			*p++ = hex[ch & 15];
		}
	}
	*p = '\0';
	return o;
}

char *
remote_url_display(const char *url)
{
	struct remote_url u;
	char err[128], *key, *out = NULL;

	/* s3: the whole key, in one spelling; else up to the query. */
	if (strncmp(url, "s3://", 5) != 0 ||
	    remote_url_parse(url, &u, err, sizeof(err)) != 0)
		return strndup(url, strcspn(url, "?#"));
	if ((key = remote_key_escape(u.path)) != NULL &&
	    asprintf(&out, "s3://%s/%s", u.host, key) < 0)
		out = NULL;
	free(key);
	remote_url_free(&u);
	return out;
}

/* ---- brace ranges ---- */

/* One {...} of a pattern: its alternatives. */
struct brace {
	const char *at, *end; /* the '{' and past the '}' */
	bool range;
	unsigned long long lo, hi;
	int width;
	size_t count;
};

static int
parse_num(const char *s, size_t n, unsigned long long *v)
{
	unsigned long long x = 0;

	if (n == 0 || n > 18)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -EINVAL;
		x = x * 10 + (unsigned)(s[i] - '0');
	}
	*v = x;
	return 0;
}

static int
parse_brace(const char *at, struct brace *b)
{
	const char *e = at + 1, *dots;
	size_t n;

	while (*e && *e != '}' && *e != '{')
		e++;
	if (*e != '}')
		return -EINVAL;
	b->at = at;
	b->end = e + 1;
	n = (size_t)(e - at - 1);
	dots = NULL;
	for (const char *q = at + 1; q + 1 < e; q++)
		if (q[0] == '.' && q[1] == '.') {
			dots = q;
			break;
		}
	if (dots != NULL) {
		size_t la = (size_t)(dots - at - 1),
		       lb = (size_t)(e - dots - 2);

		b->range = true;
		if (parse_num(at + 1, la, &b->lo) != 0 ||
		    parse_num(dots + 2, lb, &b->hi) != 0 || b->hi < b->lo)
			return -EINVAL;
		b->width = (at[1] == '0' && la > 1) || la == lb ? (int)la : 0;
		b->count = (size_t)(b->hi - b->lo) + 1;
		if (b->hi - b->lo >= REMOTE_BRACE_MAX)
			b->count = (size_t)REMOTE_BRACE_MAX + 1;
		return 0;
	}
	b->range = false;
	b->count = 1;
	for (size_t i = 0; i < n; i++)
		b->count += at[1 + i] == ',';
	return 0;
}

/*
 * Alternative k of b: *s and its length, whole (a list's, in the
 * pattern; a range's, formatted into num: at most 18 digits, padded to
 * a width of at most 18).
 */
static size_t
brace_alt(const struct brace *b, size_t k, char num[24], const char **s)
{
	const char *p = b->at + 1;

	if (b->range) {
		*s = num;
		return (size_t)snprintf(num, 24, "%0*llu", b->width, b->lo + k);
	}
	for (size_t i = 0; i < k; i++)
		p = strchr(p, ',') + 1;
	*s = p;
	return strcspn(p, ",}");
}

int
remote_brace_expand(const char *pat, size_t max, char ***out, size_t *n,
    char *err, size_t errlen)
{
	struct brace *bv = NULL, *nb;
	size_t nb_ = 0, total = 1, plen = strlen(pat);
	char **v = NULL;
	const char *p = pat;
	int r = 0;

	while ((p = strpbrk(p, "{}")) != NULL) {
		struct brace b;

		if (*p == '}' || parse_brace(p, &b) != 0) {
			snprintf(err, errlen,
			    "a brace at offset %zu: expected {A..B} with "
			    "numbers or {x,y}",
			    (size_t)(p - pat));
			free(bv);
			return -EINVAL;
		}
		if ((nb = realloc(bv, (nb_ + 1) * sizeof(*bv))) == NULL) {
			free(bv);
			return -ENOMEM;
		}
		bv = nb;
		bv[nb_++] = b;
		if (b.count > max || total > max / b.count) {
			snprintf(err, errlen,
			    "the braces expand to more than %zu names", max);
			free(bv);
			return -E2BIG;
		}
		total *= b.count;
		p = b.end;
	}
	if ((v = calloc(total, sizeof(*v))) == NULL) {
		free(bv);
		return -ENOMEM;
	}
	for (size_t i = 0; i < total; i++) {
		size_t rest = i, cap = plen + nb_ * 24 + 1, o = 0;
		size_t k[64];
		const char *q = pat;

		/* Digits of i, the last brace varying fastest. */
		for (size_t b = nb_; b-- > 0;) {
			if (b < 64)
				k[b] = rest % bv[b].count;
			rest /= bv[b].count;
		}
		if (nb_ > 64 || (v[i] = malloc(cap)) == NULL) {
			r = nb_ > 64 ? -EINVAL : -ENOMEM;
			if (r == -EINVAL)
				snprintf(err, errlen, "more than 64 braces");
			break;
		}
		for (size_t b = 0; b < nb_; b++) {
			size_t lit = (size_t)(bv[b].at - q), al;
			const char *alt;
			char num[24];

			memcpy(v[i] + o, q, lit);
			o += lit;
			al = brace_alt(&bv[b], k[b], num, &alt);
			if (o + al + 1 > cap) {
				char *g =
				    realloc(v[i], cap = o + al + plen + 1);
				if (g == NULL) {
					r = -ENOMEM;
					break;
				}
				v[i] = g;
			}
			memcpy(v[i] + o, alt, al);
			o += al;
			q = bv[b].end;
		}
		if (r != 0)
			break;
		size_t tail = strlen(q);
		if (o + tail + 1 > cap) {
			char *g = realloc(v[i], o + tail + 1);
			if (g == NULL) {
				r = -ENOMEM;
				break;
			}
			v[i] = g;
		}
		memcpy(v[i] + o, q, tail + 1);
	}
	free(bv);
	if (r != 0) {
		for (size_t i = 0; i < total; i++)
			free(v[i]);
		free(v);
		return r;
	}
	*out = v;
	*n = total;
	return 0;
}

/* ---- responses ---- */

static const char *
skip_sp(const char *s, const char *e)
{
	while (s < e && (*s == ' ' || *s == '\t'))
		s++;
	return s;
}

/* Digits at *s (advanced), at most 19: 0 or -EINVAL. */
static int
num(const char **s, const char *e, uint64_t *v)
{
	uint64_t x = 0;
	int d = 0;

	while (*s < e && isdigit((unsigned char)**s) && d < 19) {
		x = x * 10 + (uint64_t)(**s - '0');
		(*s)++;
		d++;
	}
	if (d == 0 || (*s < e && isdigit((unsigned char)**s)))
		return -EINVAL;
	*v = x;
	return 0;
}

int
remote_content_range(
    const char *s, size_t n, uint64_t *first, uint64_t *last, uint64_t *total)
{
	const char *e = s + n;
	uint64_t a, b, t = UINT64_MAX;

	while (e > s && isspace((unsigned char)e[-1]))
		e--;
	s = skip_sp(s, e);
	if ((size_t)(e - s) < 6 || strncasecmp(s, "bytes", 5) != 0)
		return -EINVAL;
	s = skip_sp(s + 5, e);
	if (num(&s, e, &a) != 0 || s >= e || *s++ != '-' ||
	    num(&s, e, &b) != 0 || s >= e || *s++ != '/')
		return -EINVAL;
	if (s < e && *s == '*')
		s++;
	else if (num(&s, e, &t) != 0)
		return -EINVAL;
	if (s != e || a > b || (t != UINT64_MAX && b >= t))
		return -EINVAL;
	*first = a;
	*last = b;
	*total = t;
	return 0;
}

/* Is line a header named name?  *v: its value. */
static bool
header_is(const char *line, const char *e, const char *name, const char **v)
{
	size_t nl = strlen(name);

	if ((size_t)(e - line) <= nl || strncasecmp(line, name, nl) != 0 ||
	    line[nl] != ':')
		return false;
	*v = skip_sp(line + nl + 1, e);
	return true;
}

void
remote_resp_free(struct remote_resp *r)
{
	free(r->etag);
	r->etag = NULL;
}

/* Whether v..e holds a control character. */
static bool
has_ctl(const char *v, const char *e)
{
	for (; v < e; v++)
		if ((unsigned char)*v < 0x20 || *v == 0x7f)
			return true;
	return false;
}

/* An HTTP-date (IMF-fixdate, or the two obsolete forms) at v..e: seconds
 * since 1970, or -1. */
static int64_t
http_date(const char *v, const char *e)
{
	char buf[64];
	time_t t;

	if ((size_t)(e - v) >= sizeof(buf) || memchr(v, '\0', (size_t)(e - v)))
		return -1;
	memcpy(buf, v, (size_t)(e - v));
	buf[e - v] = '\0';
	t = curl_getdate(buf, NULL);
	return t < 0 ? -1 : (int64_t)t;
}

bool
remote_resp_line(struct remote_resp *r, const char *line, size_t n)
{
	const char *e = line + n, *v;
	uint64_t x;

	r->header_bytes += n;
	if (r->header_bytes > REMOTE_HEADER_MAX)
		r->header_overflow = true;
	while (e > line && (e[-1] == '\r' || e[-1] == '\n'))
		e--;
	if (e == line)
		return n > 0; /* the blank line: the headers end */
	if (e - line >= 5 && memcmp(line, "HTTP/", 5) == 0) {
		/* A new response (after a 1xx): forget the last's. */
		size_t hb = r->header_bytes;
		bool ov = r->header_overflow;
		const char *p = line + 5;

		remote_resp_free(r);
		memset(r, 0, sizeof(*r));
		r->header_bytes = hb;
		r->header_overflow = ov;
		while (p < e && *p != ' ')
			p++;
		p = skip_sp(p, e);
		if (num(&p, e, &x) == 0 && x < 1000)
			r->status = (long)x;
		else
			r->bad_header = true;
		return false;
	}
	if (header_is(line, e, "content-range", &v)) {
		if (!r->has_range &&
		    remote_content_range(v, (size_t)(e - v), &r->range_first,
			&r->range_last, &r->range_total) == 0)
			r->has_range = true;
		else
			r->bad_header = true; /* garbage, or a second one */
	} else if (header_is(line, e, "content-length", &v)) {
		if (num(&v, e, &x) == 0 && skip_sp(v, e) == e) {
			r->has_length = true;
			r->length = x;
		} else
			r->bad_header = true;
	} else if (header_is(line, e, "etag", &v)) {
		/* Taken whole, whatever its length (the headers' bound holds
		 * it); empty, with a control character (it goes back out in
		 * If-Match) or a second one: garbage. */
		while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if (r->etag != NULL || e == v || has_ctl(v, e))
			r->bad_header = true;
		else if ((r->etag = strndup(v, (size_t)(e - v))) == NULL)
			r->bad_header = true; /* out of memory: not used */
	} else if (header_is(line, e, "last-modified", &v)) {
		while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if (r->has_last_modified ||
		    (r->last_modified = http_date(v, e)) < 0)
			r->bad_header = true;
		else
			r->has_last_modified = true;
	} else if (header_is(line, e, "location", &v)) {
		const char *h = v, *he;

		r->location_host[0] = '\0';
		for (const char *q = v; q + 2 < e; q++)
			if (q[0] == ':' && q[1] == '/' && q[2] == '/') {
				h = q + 3;
				break;
			}
		if (h == v)
			return false; /* relative: the same host */
		he = h;
		while (he < e && *he != '/' && *he != '?')
			he++;
		snprintf(r->location_host, sizeof(r->location_host), "%.*s",
		    (int)(he - h), h);
	}
	return false;
}

static const char *const bad_names[RB_NKINDS] = {
    "none", "short", "long", "not_206", "content_range", "redirect", "headers"};

const char *
remote_bad_name(unsigned kind)
{
	return kind < RB_NKINDS ? bad_names[kind] : "?";
}
