/*
 * npy.c - the model (core/): NumPy .npy version 1.0 headers (see npy.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/npy.h"

#define DICT_HEAD "{'descr': '"
#define DICT_MID "', 'fortran_order': False, 'shape': ("

/* The whole header for a dict of n bytes: magic(6) version(2) length(2)
 * dict padding '\n', rounded up to NPY_ALIGN. */
static size_t
total_len(size_t n)
{
	return (10 + n + 1 + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
}

static size_t
digits(uint64_t v)
{
	size_t n = 1;

	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

size_t
npy_header_len(const char *descr, const uint64_t *shape, int ndim)
{
	size_t n = strlen(DICT_HEAD) + strlen(descr) + strlen(DICT_MID);

	for (int i = 0; i < ndim; i++)
		n += (i ? 2 : 0) + digits(shape[i]);
	n += (ndim == 1 ? 1 : 0) + strlen("), }");
	return total_len(n);
}

size_t
npy_header(char *buf, const char *descr, const uint64_t *shape, int ndim)
{
	char dict[NPY_MAX_HEADER];
	size_t n, total;
	int i;

	n = (size_t)snprintf(
	    dict, sizeof(dict), DICT_HEAD "%s" DICT_MID, descr);
	for (i = 0; i < ndim; i++)
		n += (size_t)snprintf(dict + n, sizeof(dict) - n,
		    i ? ", %" PRIu64 : "%" PRIu64, shape[i]);
	n += (size_t)snprintf(
	    dict + n, sizeof(dict) - n, "%s), }", ndim == 1 ? "," : "");
	total = total_len(n);
	memcpy(buf, "\x93NUMPY\x01\x00", 8);
	buf[8] = (char)((total - 10) & 0xff);
	buf[9] = (char)((total - 10) >> 8);
	memcpy(buf + 10, dict, n);
	memset(buf + 10 + n, ' ', total - 10 - n - 1);
	buf[total - 1] = '\n';
	return total;
}
