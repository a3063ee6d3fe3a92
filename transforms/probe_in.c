/*
 * probe_in.c - what the header probes share (see probe_int.h): the
 * cursor they read a file through, in memory or by a reader, never
 * outside it, and the max_pixels rule of every format.  Layer:
 * transforms/ (pixels), the bottom of the probes: it calls none of them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/probe.h"
#include "transforms/probe_int.h"

ssize_t
probe_at(const struct probe_in *in, uint64_t off, size_t n, uint8_t *buf,
    const uint8_t **p)
{
	*p = buf;
	if (off >= in->size)
		return 0;
	if (n > in->size - off)
		n = (size_t)(in->size - off);
	if (in->mem != NULL) {
		*p = in->mem + off;
		return (ssize_t)n;
	}
	if (off + n <= in->hn) {
		*p = in->head + off;
		return (ssize_t)n;
	}
	return in->rd->read(in->rd->arg, off, buf, n);
}

int
probe_tail_has(const struct probe_in *in, uint64_t from, const void *pat,
    size_t plen, bool *found)
{
	uint64_t start =
	    in->size > XF_PROBE_WINDOW ? in->size - XF_PROBE_WINDOW : 0;
	const uint8_t *p;
	uint8_t *buf = NULL;
	ssize_t n;

	if (start < from)
		start = from;
	*found = false;
	if (start >= in->size)
		return 0;
	if (in->mem == NULL && (buf = malloc(XF_PROBE_WINDOW)) == NULL)
		return -ENOMEM;
	n = probe_at(in, start, (size_t)(in->size - start), buf, &p);
	if (n >= 0)
		*found = memmem(p, (size_t)n, pat, plen) != NULL;
	free(buf);
	return n < 0 ? (int)n : 0;
}

enum xf_verdict
probe_unreadable(int e, char *why, size_t whylen)
{
	snprintf(why, whylen, "%s", strerror(-e));
	return XF_PROBE_UNREADABLE;
}

int
xf_pixels_allowed(
    uint32_t w, uint32_t h, uint64_t max_pixels, char *why, size_t whylen)
{
	if (max_pixels == 0 || (uint64_t)w * h <= max_pixels)
		return 0;
	snprintf(why, whylen,
	    "image too large: %ux%u is more than max_pixels (%llu)",
	    (unsigned)w, (unsigned)h, (unsigned long long)max_pixels);
	return -EFBIG;
}
