/*
 * format-peer - a feedfs of the next cache format on a cache_dir, for
 * tests/test_cache_format_newer.py: this file and a copy of cache/ built
 * with CACHE_FORMAT_TEST_NEXT (cache.h), so CACHE_FORMAT_VERSION is one
 * more than the mount's.  Values are 8x8x3 bytes under keys of "peer i".
 *
 *   format-peer DIR make N   a store of N values, closed (no owner)
 *   format-peer DIR own N    the owner of DIR (cache_open_shared) with N
 *                            values; prints "ready" and waits for stdin's
 *                            end, then its figures
 *   format-peer DIR use N    cache_open_shared in whatever role: asks for
 *                            the N values and puts them; prints its role,
 *                            cache_error, its figures
 *   format-peer DIR count N  opens DIR as its owner: how many of the N hit
 *
 * Figures: one line "format F role R hits H misses M inserts I disabled D
 * dir_format V", and "error TEXT" when cache_error says something.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"

static void
key_of(int i, uint8_t key[CACHE_KEY_LEN])
{
	uint8_t digest[32];
	char text[32];

	snprintf(text, sizeof(text), "peer %d", i);
	cache_sha256(text, strlen(text), digest);
	cache_key(digest, "peer prefix", key);
}

static void
val_of(int i, uint8_t px[8 * 8 * 3], struct cache_val *v)
{
	for (int k = 0; k < 8 * 8 * 3; k++)
		px[k] = (uint8_t)(i * 7 + k);
	*v = (struct cache_val){.w = 8,
	    .h = 8,
	    .c = 3,
	    .data = px,
	    .len = 8 * 8 * 3,
	    .prefix = "peer prefix"};
}

static void
put_all(struct cache *c, int n)
{
	uint8_t key[CACHE_KEY_LEN], px[8 * 8 * 3];
	struct cache_val v;

	for (int i = 0; i < n; i++) {
		key_of(i, key);
		val_of(i, px, &v);
		cache_put(c, key, &v);
	}
}

/* How many of the n values hit, with their bytes. */
static int
get_all(struct cache *c, int n)
{
	uint8_t key[CACHE_KEY_LEN], px[8 * 8 * 3];
	struct cache_val v, got;
	int hits = 0;

	for (int i = 0; i < n; i++) {
		key_of(i, key);
		val_of(i, px, &v);
		if (cache_get(c, key, &got) != 0)
			continue;
		hits += got.len == v.len && memcmp(got.data, px, v.len) == 0;
		free(got.data);
	}
	return hits;
}

static void
figures(struct cache *c)
{
	struct cache_stats st;

	cache_get_stats(c, &st);
	printf("format %d role %s hits %llu misses %llu inserts %llu disabled "
	       "%d dir_format %u\n",
	    CACHE_FORMAT_VERSION, cache_is_owner(c) ? "owner" : "client",
	    (unsigned long long)st.hits, (unsigned long long)st.misses,
	    (unsigned long long)st.inserts, st.disabled, st.dir_format);
	if (cache_error(c) != NULL)
		printf("error %s\n", cache_error(c));
	fflush(stdout);
}

static void
say(bool warn, const char *msg)
{
	fprintf(stderr, "format-peer: %s%s\n", warn ? "warning: " : "", msg);
}

int
main(int argc, char **argv)
{
	struct cache_opts o = {.size_bound = 64u << 20,
	    .mem_bound = 16u << 20,
	    .stale = CACHE_STALE_DEFAULT,
	    .label = "format-peer",
	    .say = say};
	struct cache *c;
	char err[1024], buf[64];
	int n;

	if (argc != 4 || (n = atoi(argv[3])) < 0) {
		fprintf(
		    stderr, "usage: format-peer DIR make|own|use|count N\n");
		return 2;
	}
	if (strcmp(argv[2], "make") == 0 || strcmp(argv[2], "count") == 0) {
		if (cache_open_opts(argv[1], &o, &c, err, sizeof(err)) != 0) {
			fprintf(stderr, "format-peer: %s\n", err);
			return 1;
		}
		if (argv[2][0] == 'm')
			put_all(c, n);
		else
			printf("hits %d\n", get_all(c, n));
		cache_close(c);
		return 0;
	}
	if (cache_open_shared(argv[1], &o, &c, err, sizeof(err)) != 0) {
		fprintf(stderr, "format-peer: %s\n", err);
		return 1;
	}
	if (strcmp(argv[2], "own") == 0) {
		if (!cache_is_owner(c)) {
			fprintf(stderr, "format-peer: not the owner\n");
			cache_close(c);
			return 1;
		}
		put_all(c, n);
		printf("ready\n");
		fflush(stdout);
		while (fgets(buf, sizeof(buf), stdin) != NULL)
			;
	} else {
		printf("got %d\n", get_all(c, n));
		put_all(c, n);
	}
	figures(c);
	cache_close(c);
	return 0;
}
