/*
 * test_npy - .npy v1.0 headers: exact text, alignment, length field.
 */
#include <string.h>

#include "core/npy.h"
#include "tests/testlib.h"

static void
check(const char *descr, const uint64_t *shape, int ndim, const char *dict)
{
	char buf[NPY_MAX_HEADER];
	size_t len = npy_header(buf, descr, shape, ndim);
	size_t hl = (unsigned char)buf[8] | (unsigned char)buf[9] << 8;

	CHECK_EQ_INT(len % 64, 0);
	CHECK_EQ_INT(npy_header_len(descr, shape, ndim), len);
	CHECK_EQ_INT(hl, len - 10);
	CHECK(memcmp(buf, "\x93NUMPY\x01\x00", 8) == 0);
	CHECK(strncmp(buf + 10, dict, strlen(dict)) == 0);
	for (size_t i = 10 + strlen(dict); i < len - 1; i++)
		CHECK(buf[i] == ' ');
	CHECK(buf[len - 1] == '\n');
}

int
main(void)
{
	uint64_t s4[] = { 256, 3, 224, 224 }, s1[] = { 7 };

	/* The dicts numpy.save writes for the same arrays. */
	check("<f4", s4, 4,
	    "{'descr': '<f4', 'fortran_order': False, "
	    "'shape': (256, 3, 224, 224), }");
	check("<i8", s1, 1,
	    "{'descr': '<i8', 'fortran_order': False, 'shape': (7,), }");
	check("|u1", s4, 4,
	    "{'descr': '|u1', 'fortran_order': False, "
	    "'shape': (256, 3, 224, 224), }");
	/* The computed length agrees with the written one at every width. */
	for (uint64_t v = 1; v < UINT64_MAX / 10; v = v * 10 + 3) {
		uint64_t s[4] = { v, 3, v + 1, 9 };
		char buf[NPY_MAX_HEADER];

		for (int nd = 1; nd <= 4; nd++)
			CHECK_EQ_INT(npy_header_len("<f4", s, nd),
			    npy_header(buf, "<f4", s, nd));
	}
	return TEST_SUMMARY();
}
