/*
 * xftest.h - the pipeline parsing checks the transforms' unit tests share
 * (test_transforms, test_blur).  Include after tests/testlib.h.
 */
#ifndef FEEDFS_XFTEST_H
#define FEEDFS_XFTEST_H

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "transforms/xf.h"

/* Parsed, else the message is printed and the check fails. */
static inline struct xf_pipeline *
parse_ok(const char *text)
{
	struct xf_pipeline *pl = NULL;
	char err[512] = "";
	int r = xf_pipeline_parse(text, &pl, err, sizeof(err));

	if (r != 0)
		fprintf(stderr, "parse \"%s\": %s\n", text, err);
	CHECK_EQ_INT(r, 0);
	return pl;
}

/* Refused, with a message containing want. */
static inline void
parse_bad(const char *text, const char *want)
{
	struct xf_pipeline *pl = NULL;
	char err[512] = "";
	int r = xf_pipeline_parse(text, &pl, err, sizeof(err));

	CHECK_EQ_INT(r, -EINVAL);
	CHECK(pl == NULL);
	if (strstr(err, want) == NULL) {
		fprintf(stderr, "parse \"%s\": message \"%s\" lacks \"%s\"\n",
		    text, err, want);
		CHECK(strstr(err, want) != NULL);
	}
}

#endif
