/*
 * http_req.h - util/ (includes nothing of ours): the head of one HTTP/1.x
 * request, read from bytes a client sent (the metrics listener's, whose
 * clients are anyone on the node, or beyond it where it is bound so).
 *
 * Untrusted input: every byte is checked as it is read, the head is
 * bounded by the caller's max, and nothing is allocated.  Thread safe.
 */
#ifndef FEEDFS_HTTP_REQ_H
#define FEEDFS_HTTP_REQ_H

#include <stddef.h>

#define HTTP_REQ_PATH_MAX 256

struct http_req {
	char method[8];		      /* "GET", "HEAD", ... */
	char path[HTTP_REQ_PATH_MAX]; /* the target's path, no query */
	int minor;		      /* HTTP/1.<minor>: 0 or 1 */
};

/*
 * The request head in buf[0..len) (request line, header lines, the empty
 * line; CRLF or LF):
 *   > 0  its length: complete, *req set;
 *   0    not complete yet (and still under max bytes): read more;
 *   < 0  minus the status to answer: 400 (malformed), 414 (a target over
 *        HTTP_REQ_PATH_MAX), 431 (no end within max bytes), 505 (not
 *        HTTP/1.0 or 1.1).
 * The method is checked by the caller (405).
 */
int http_req_parse(
    const char *buf, size_t len, size_t max, struct http_req *req);

#endif
