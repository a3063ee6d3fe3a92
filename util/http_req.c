/*
 * http_req.c - util/ (includes nothing of ours): the head of one HTTP/1.x
 * request (http_req.h), read with one cursor that checks every byte.
 */
#include <stdbool.h>
#include <string.h>

#include "util/http_req.h"

/* RFC 9110's tchar: what a method or a header's name is made of. */
static int
tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
	       (c >= 'A' && c <= 'Z') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/*
 * The end of the line at buf[i] (the index of its LF), or -1 when no LF
 * is in buf[i..len).  A CR is only allowed right before the LF.
 */
static long
line_end(const char *buf, size_t i, size_t len, int *bad)
{
	for (size_t j = i; j < len; j++) {
		unsigned char c = (unsigned char)buf[j];

		if (c == '\n')
			return (long)j;
		if (c == '\r' && j + 1 < len && buf[j + 1] != '\n')
			*bad = 1;
		if (c == '\0')
			*bad = 1;
	}
	return -1;
}

/* The request line buf[0..e) (e: its LF, a CR before it dropped). */
static int
request_line(const char *buf, size_t e, struct http_req *req)
{
	size_t i = 0, n;
	bool query = false;

	if (e > 0 && buf[e - 1] == '\r')
		e--;
	for (n = 0; i < e && tchar((unsigned char)buf[i]); i++, n++)
		if (n + 1 >= sizeof(req->method))
			return -400;
	if (n == 0 || i >= e || buf[i] != ' ')
		return -400;
	memcpy(req->method, buf, n);
	req->method[n] = '\0';
	i++;
	if (i >= e || buf[i] != '/')
		return -400;
	for (n = 0; i < e && buf[i] != ' '; i++) {
		unsigned char c = (unsigned char)buf[i];

		if (c <= 0x20 || c >= 0x7f)
			return -400;
		if (c == '?' || c == '#')
			query = true; /* kept out of path */
		if (query)
			continue;
		if (n + 1 >= sizeof(req->path))
			return -414;
		req->path[n++] = (char)c;
	}
	req->path[n] = '\0';
	if (i >= e || buf[i] != ' ')
		return -400;
	i++;
	if (e - i != 8 || memcmp(buf + i, "HTTP/1.", 7) != 0)
		return e - i >= 5 && memcmp(buf + i, "HTTP/", 5) == 0 ? -505
								      : -400;
	if (buf[i + 7] != '0' && buf[i + 7] != '1')
		return -505;
	req->minor = buf[i + 7] - '0';
	return 0;
}

/* One header line buf[s..e): NAME ":" VALUE, the name a token. */
static int
header_line(const char *buf, size_t s, size_t e)
{
	size_t i = s;

	if (e > s && buf[e - 1] == '\r')
		e--;
	while (i < e && tchar((unsigned char)buf[i]))
		i++;
	if (i == s || i >= e || buf[i] != ':')
		return -400; /* no name, obs-fold, or no colon */
	for (i++; i < e; i++) {
		unsigned char c = (unsigned char)buf[i];

		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return -400;
	}
	return 0;
}

int
http_req_parse(const char *buf, size_t len, size_t max, struct http_req *req)
{
	struct http_req r = {0};
	size_t s;
	long e;
	int bad = 0, rc;

	if (len > max)
		len = max;
	if ((e = line_end(buf, 0, len, &bad)) < 0)
		return bad ? -400 : len >= max ? -431 : 0;
	if (bad || (rc = request_line(buf, (size_t)e, &r)) != 0)
		return bad ? -400 : rc;
	for (s = (size_t)e + 1;; s = (size_t)e + 1) {
		if ((e = line_end(buf, s, len, &bad)) < 0)
			return bad ? -400 : len >= max ? -431 : 0;
		if (bad)
			return -400;
		if ((size_t)e == s || ((size_t)e == s + 1 && buf[s] == '\r'))
			break; /* the empty line: the head's end */
		if ((rc = header_line(buf, s, (size_t)e)) != 0)
			return rc;
	}
	*req = r;
	return (int)(e + 1);
}
