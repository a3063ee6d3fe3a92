/*
 * test_log - the log's ring (.feedfs/log, issue 26): lines come back whole,
 * newest last, stamped and levelled; past LOG_RING_BYTES the oldest go,
 * never a part of a line; a short copy keeps the newest whole lines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "tests/testlib.h"

/* Every line of text (len bytes) is "STAMP LEVEL: msg N" with N rising by
 * one; returns the first N, -1 if a line is not whole or out of order. */
static long
check_lines(const char *text, size_t len, long *last)
{
	long first = -1, prev = -1;
	const char *p = text, *end = text + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *at;
		long n;

		if (nl == NULL)
			return -1;
		if ((at = strstr(p, " info: line ")) == NULL || at > nl ||
		    at - p != 20 || p[4] != '-' || p[19] != 'Z')
			return -1;
		n = strtol(at + 12, NULL, 10);
		if (prev >= 0 && n != prev + 1)
			return -1;
		if (first < 0)
			first = n;
		prev = n;
		p = nl + 1;
	}
	*last = prev;
	return first;
}

int
main(void)
{
	char *buf = malloc(LOG_RING_BYTES), small[1000];
	long first, last = -1;
	size_t n;

	CHECK(buf != NULL);
	log_init("test_log", false, false);
	CHECK_EQ_INT(log_ring_len(), 0);
	for (long i = 0; i < 10; i++)
		log_info("line %ld", i);
	n = log_ring_copy(buf, LOG_RING_BYTES);
	CHECK_EQ_INT(n, log_ring_len());
	CHECK_EQ_INT(check_lines(buf, n, &last), 0);
	CHECK_EQ_INT(last, 9);
	/* Debug lines are not kept unless debug is on. */
	log_debug("not kept");
	CHECK_EQ_INT(log_ring_len(), n);

	/* Far past the bound: the oldest lines go, whole. */
	for (long i = 10; i < 20000; i++)
		log_info("line %ld %s", i, i % 7 ? "" : "with some more words");
	n = log_ring_copy(buf, LOG_RING_BYTES);
	CHECK(n <= LOG_RING_BYTES && n > LOG_RING_BYTES - 200);
	first = check_lines(buf, n, &last);
	CHECK(first > 10);
	CHECK_EQ_INT(last, 19999);

	/* A short copy: the newest whole lines that fit. */
	n = log_ring_copy(small, sizeof(small));
	CHECK(n > 0 && n <= sizeof(small));
	first = check_lines(small, n, &last);
	CHECK(first > 19950);
	CHECK_EQ_INT(last, 19999);
	free(buf);
	return TEST_SUMMARY();
}
