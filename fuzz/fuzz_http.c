/*
 * fuzz_http - libFuzzer target: the head of an HTTP request as the
 * metrics listener (fs/metrics.c) reads it from any client
 * (util/http_req.c).
 *
 * Besides not crashing or reading past the bytes given: a head it takes
 * lies within them and within the bound, names a method and a path that
 * starts with '/' and has no query, HTTP/1.0 or 1.1; every shorter prefix
 * of a head it takes is "read more" (0); at the bound nothing is "read
 * more"; an answer is a status the listener knows.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/http_req.h"

#define MAX 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_req req;
	char *buf;
	int r;

	/* A copy of exactly size bytes: ASan sees any read past them. */
	if ((buf = malloc(size ? size : 1)) == NULL)
		return 0;
	memcpy(buf, data, size);
	r = http_req_parse(buf, size, MAX, &req);
	if (r > 0) {
		if ((size_t)r > size || r > MAX || req.method[0] == '\0' ||
		    req.path[0] != '/' || strchr(req.path, '?') != NULL ||
		    (req.minor != 0 && req.minor != 1))
			abort();
		for (int k = r - 1; k > r - 4 && k >= 0; k--) {
			struct http_req q;

			if (http_req_parse(buf, (size_t)k, MAX, &q) != 0)
				abort();
		}
	} else if (r == 0) {
		if (size >= MAX)
			abort();
	} else if (r != -400 && r != -414 && r != -431 && r != -505)
		abort();
	free(buf);
	return 0;
}
