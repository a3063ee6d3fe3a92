/*
 * testlib.h - the few macros the C unit tests share.
 *
 * A failed CHECK prints FILE:LINE and the expression and counts; the test
 * goes on so that one run shows every failure.  TEST_SUMMARY() prints the
 * counts and gives the exit status automake's test driver reads (0 pass,
 * 1 fail, 77 skip is left to the test itself).  And two steps many tests
 * take: JPEGs made by tests/gen-jpegs, and the temporary directory removed.
 */
#ifndef FEEDFS_TESTLIB_H
#define FEEDFS_TESTLIB_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_checks, test_failures;

#define CHECK(cond)                                                           \
	do {                                                                  \
		test_checks++;                                                \
		if (!(cond)) {                                                \
			test_failures++;                                      \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n",          \
			    __FILE__, __LINE__, #cond);                       \
		}                                                             \
	} while (0)

#define CHECK_EQ_INT(a, b)                                                    \
	do {                                                                  \
		long long a_ = (long long)(a), b_ = (long long)(b);           \
		test_checks++;                                                \
		if (a_ != b_) {                                               \
			test_failures++;                                      \
			fprintf(stderr, "%s:%d: %s == %lld, expected %s == "  \
			    "%lld\n", __FILE__, __LINE__, #a, a_, #b, b_);    \
		}                                                             \
	} while (0)

#define CHECK_EQ_STR(a, b)                                                    \
	do {                                                                  \
		const char *a_ = (a), *b_ = (b);                              \
		test_checks++;                                                \
		if (!a_ || !b_ || strcmp(a_, b_) != 0) {                      \
			test_failures++;                                      \
			fprintf(stderr, "%s:%d: %s is \"%s\", expected "      \
			    "\"%s\"\n", __FILE__, __LINE__, #a,               \
			    a_ ? a_ : "(null)", b_ ? b_ : "(null)");          \
		}                                                             \
	} while (0)

#define TEST_SUMMARY()                                                        \
	(fprintf(stderr, "%d checks, %d failed\n", test_checks,               \
	     test_failures),                                                  \
	    test_failures ? 1 : 0)

/* n JPEGs in classes class directories under dir/data, by the build's
 * tests/gen-jpegs (FF_BUILDDIR); 0, or -1 with a line on stderr. */
static inline int
test_gen_jpegs(const char *dir, int n, int classes, int seed)
{
	const char *bd = getenv("FF_BUILDDIR");
	char cmd[4200];

	snprintf(cmd, sizeof(cmd),
	    "%s/tests/gen-jpegs %s/data --n %d --classes %d --seed %d "
	    ">/dev/null",
	    bd ? bd : ".", dir, n, classes, seed);
	if (system(cmd) != 0) {
		fprintf(stderr, "gen-jpegs failed\n");
		return -1;
	}
	return 0;
}

/* A test's temporary directory dir, and all below it, removed. */
static inline void
test_rmtree(const char *dir)
{
	char cmd[4200];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

#endif
