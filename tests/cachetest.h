/*
 * cachetest.h - what the tests of the cache (test_cache, test_cache_remote,
 * test_cache_trust) make their keys and values with.  Include after
 * tests/testlib.h.  The functions are static inline: a test uses some.
 */
#ifndef FEEDFS_CACHETEST_H
#define FEEDFS_CACHETEST_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"

/* The key of "source i" under the prefix "decode resize(256)". */
static inline void
key_of(int i, uint8_t key[CACHE_KEY_LEN])
{
	uint8_t d[32];
	char s[32];

	snprintf(s, sizeof(s), "source %d", i);
	cache_sha256(s, strlen(s), d);
	cache_key(d, "decode resize(256)", key);
}

/* A value of shape w x h x c, dtype, len bytes (malloc'd) that depend on
 * i; no prefix. */
static inline struct cache_val
val_shaped(
    int i, uint32_t w, uint32_t h, uint32_t c, uint32_t dtype, size_t len)
{
	struct cache_val v = {
	    .w = w, .h = h, .c = c, .dtype = dtype, .len = len};
	uint8_t *p = malloc(len ? len : 1);

	for (size_t k = 0; k < len; k++)
		p[k] = (uint8_t)(k * 31 + (size_t)i * 7 + (k >> 8));
	v.data = p;
	return v;
}

/* A raw 352 x 256 x 3 value of len bytes whose bytes depend on i, under
 * the prefix "decode resize(256)". */
static inline struct cache_val
val_of(int i, size_t len)
{
	struct cache_val v = val_shaped(i, 352, 256, 3, 0, len);

	v.prefix = "decode resize(256)";
	return v;
}

/*
 * The owner queues puts and answers gets first: wait (5 s at most) until
 * its store has done n inserts.
 */
static inline void
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

/* A thread that puts v under the keys base .. base+39 (key_of) into c. */
struct putter {
	struct cache *c;
	const struct cache_val *v;
	int base;
	pthread_t t;
};

static inline void *
putter(void *arg)
{
	struct putter *p = arg;
	uint8_t key[CACHE_KEY_LEN];

	for (int i = 0; i < 40; i++) {
		key_of(p->base + i, key);
		cache_put(p->c, key, p->v);
	}
	return NULL;
}

#endif
