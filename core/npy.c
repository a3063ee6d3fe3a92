/*
 * npy.c - NumPy .npy version 1.0 headers (see npy.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/npy.h"

size_t
npy_header(char *buf, const char *descr, const uint64_t *shape, int ndim)
{
	char dict[NPY_MAX_HEADER];
	size_t n, total;
	int i;

	n = (size_t)snprintf(dict, sizeof(dict),
	    "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
	for (i = 0; i < ndim; i++)
		n += (size_t)snprintf(dict + n, sizeof(dict) - n,
		    i ? ", %" PRIu64 : "%" PRIu64, shape[i]);
	n += (size_t)snprintf(dict + n, sizeof(dict) - n, "%s), }",
	    ndim == 1 ? "," : "");
	/* magic(6) version(2) length(2) dict padding '\n' */
	total = (10 + n + 1 + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
	memcpy(buf, "\x93NUMPY\x01\x00", 8);
	buf[8] = (char)((total - 10) & 0xff);
	buf[9] = (char)((total - 10) >> 8);
	memcpy(buf + 10, dict, n);
	memset(buf + 10 + n, ' ', total - 10 - n - 1);
	buf[total - 1] = '\n';
	return total;
}
