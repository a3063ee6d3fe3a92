/*
 * cachetest.h - what the tests of the shared cache (test_cache_remote,
 * test_cache_trust) make their keys and values with.  Include after
 * tests/testlib.h.
 */
#ifndef FEEDFS_CACHETEST_H
#define FEEDFS_CACHETEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"

/* The key of "source i" under the prefix "decode resize(256)". */
static void
key_of(int i, uint8_t key[CACHE_KEY_LEN])
{
	uint8_t d[32];
	char s[32];

	snprintf(s, sizeof(s), "source %d", i);
	cache_sha256(s, strlen(s), d);
	cache_key(d, "decode resize(256)", key);
}

/* A raw 352 x 256 x 3 value of len bytes whose bytes depend on i. */
static struct cache_val
val_of(int i, size_t len)
{
	struct cache_val v = {
	    352, 256, 3, 0, NULL, len, "decode resize(256)", 0};
	uint8_t *p = malloc(len ? len : 1);

	for (size_t k = 0; k < len; k++)
		p[k] = (uint8_t)(k * 31 + (size_t)i * 7 + (k >> 8));
	v.data = p;
	return v;
}

/*
 * The owner queues puts and answers gets first: wait (5 s at most) until
 * its store has done n inserts.
 */
static void
wait_inserts(struct cache *own, uint64_t n)
{
	struct cache_stats st;

	for (int i = 0; i < 500; i++) {
		cache_get_stats(own, &st);
		if (st.inserts >= n)
			return;
		usleep(10000);
	}
	CHECK(st.inserts >= n);
}

#endif
