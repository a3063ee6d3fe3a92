/*
 * test_sample_format - what sample_make serves of a job with a
 * cache_format (issue 25, class 5), in process with a real RocksDB store:
 *
 *   - jpeg(90): a miss (stored), a hit and a read without a cache give the
 *     same bytes, and they are not raw's (the JPEG's round trip);
 *   - a value under the job's key that is not an image of the job's
 *     format (a raw value under a lossless job's key) is a miss, and the
 *     sample is made again with the right bytes;
 *   - a value whose shape is over the job's max_pixels (a few KB of zstd
 *     that would decode to 12 MB: what a forged cluster value could be) is
 *     a miss, refused before it is decoded;
 *   - issue 36: a prefix that shrink made keeps its frame (the source's
 *     size, in whose pixels random_resized_crop draws) through the cache
 *     in every cache_format: a miss, a hit and a read without a cache give
 *     the same bytes; a frame over max_pixels is a miss.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "cache/format.h"
#include "core/config.h"
#include "core/dsopen.h"
#include "dataset/dataset.h"
#include "core/job.h"
#include "core/sample.h"
#include "tests/testlib.h"

static char dir[] = "/tmp/test_sample_format.XXXXXX";

struct setup {
	struct cfg *cfg;
	struct dataset *ds;
	struct job j;
};

/* Job "j" of pipeline pl, cache_format fmt and max_pixels over dir/data. */
static int
setup_pl(
    struct setup *s, const char *pl, const char *fmt, const char *max_pixels)
{
	char path[512], err[2048];
	FILE *fp;

	memset(s, 0, sizeof(*s));
	snprintf(path, sizeof(path), "%s/feedfs.conf", dir);
	if ((fp = fopen(path, "w")) == NULL)
		return -1;
	fprintf(fp,
	    "[mount]\ncache_dir = %s/cache\n[dataset d]\nroot = %s/data\n"
	    "[job j]\nbatch_size = 2\ndtype = uint8\nlayout = HWC\n"
	    "pipeline = %s\n"
	    "cache_format = %s\nmax_pixels = %s\n",
	    dir, dir, pl, fmt, max_pixels);
	fclose(fp);
	if (cfg_load(path, &s->cfg, err, sizeof(err)) != 0 ||
	    ds_open_cfg(&s->cfg->datasets[0], -1, NULL, NULL, &s->ds, err,
		sizeof(err)) != 0 ||
	    job_init_all(&s->j, s->cfg, &s->cfg->jobs[0],
		(const struct dataset *const *)&s->ds, err, sizeof(err)) != 0) {
		fprintf(stderr, "setup: %s\n", err);
		return -1;
	}
	return 0;
}

static int
setup(struct setup *s, const char *fmt, const char *max_pixels)
{
	return setup_pl(
	    s, "decode resize(40) cache center_crop(32)", fmt, max_pixels);
}

static void
teardown(struct setup *s)
{
	job_fini(&s->j);
	ds_free(s->ds);
	cfg_free(s->cfg);
}

/* The cache key of sample id of s's job (as sample.c makes it). */
static void
key_of(struct setup *s, uint32_t id, uint8_t key[CACHE_KEY_LEN])
{
	char path[4096];
	uint8_t digest[32], *buf;
	FILE *fp;
	long n;

	snprintf(path, sizeof(path), "%s/%s", s->ds->root,
	    s->ds->samples[id].path);
	fp = fopen(path, "rb");
	CHECK(fp != NULL);
	if (fp == NULL)
		return;
	fseek(fp, 0, SEEK_END);
	n = ftell(fp);
	rewind(fp);
	buf = malloc((size_t)n);
	CHECK(fread(buf, 1, (size_t)n, fp) == (size_t)n);
	fclose(fp);
	cache_sha256(buf, (size_t)n, digest);
	sample_cache_key(digest, s->j.key_text, XF_SRC_JPEG, key);
	free(buf);
}

static struct cache *
open_cache(void)
{
	char path[512], err[1024];
	struct cache *c = NULL;

	snprintf(path, sizeof(path), "%s/cache", dir);
	if (cache_open(path, 256u << 20, 16u << 20, &c, err, sizeof(err)) != 0)
		fprintf(stderr, "cache_open: %s\n", err);
	CHECK(c != NULL);
	return c;
}

/* sample id of s's job for epoch 0 into a malloc'd buffer (c may be NULL). */
static uint8_t *
make(struct setup *s, struct cache *c, uint32_t id)
{
	uint8_t *out = malloc(s->j.sample_bytes);
	char err[1024];
	int r = sample_make(&s->j, c, 0, id, false, out, err, sizeof(err));

	if (r != 0)
		fprintf(stderr, "sample_make: %s\n", err);
	CHECK_EQ_INT(r, 0);
	return out;
}

static void
test_jpeg(void)
{
	struct setup s, raw;
	struct cache *c;
	uint8_t *none, *miss, *hit, *r;
	size_t n;

	if (setup(&s, "jpeg(90)", "100000000") != 0 ||
	    setup(&raw, "raw", "100000000") != 0) {
		CHECK(0);
		return;
	}
	n = s.j.sample_bytes;
	c = open_cache();
	none = make(&s, NULL, 1);
	miss = make(&s, c, 1);
	CHECK(atomic_load(&s.j.st.cache_misses) == 1);
	hit = make(&s, c, 1);
	CHECK(atomic_load(&s.j.st.cache_hits) == 1);
	r = make(&raw, NULL, 1);
	CHECK(memcmp(miss, hit, n) == 0); /* the miss serves what it stores */
	CHECK(memcmp(none, hit, n) == 0); /* and so does no cache at all */
	CHECK(memcmp(r, hit, n) != 0);	  /* the JPEG's round trip */
	free(none);
	free(miss);
	free(hit);
	free(r);
	cache_close(c);
	teardown(&raw);
	teardown(&s);
}

/* Put v under sample 2's key, read it twice: misses with the right bytes. */
static void
forged(const char *fmt, const char *max_pixels, struct cache_val *v)
{
	uint8_t key[CACHE_KEY_LEN], *want, *got;
	struct setup s;
	struct cache *c;

	if (setup(&s, fmt, max_pixels) != 0) {
		CHECK(0);
		return;
	}
	want = make(&s, NULL, 2);
	c = open_cache();
	key_of(&s, 2, key);
	v->prefix = s.j.cache_text;
	cache_put(c, key, v);
	got = make(&s, c, 2);
	CHECK(atomic_load(&s.j.st.cache_hits) == 0);
	CHECK(atomic_load(&s.j.st.cache_misses) == 1);
	CHECK(memcmp(want, got, s.j.sample_bytes) == 0);
	free(got);
	/* The store keeps the first value of a key: a miss again. */
	got = make(&s, c, 2);
	CHECK(atomic_load(&s.j.st.cache_hits) == 0);
	CHECK(memcmp(want, got, s.j.sample_bytes) == 0);
	free(got);
	free(want);
	cache_close(c);
	teardown(&s);
}

static void
test_other_format(void)
{
	/* 40 x 40 raw pixels under a lossless job's key: not its format. */
	uint8_t *px = calloc(40 * 40 * 3, 1);
	struct cache_val v = {.w = 40, .h = 40, .c = 3, .dtype = 0,
	    .data = px, .len = 40 * 40 * 3, .enc = 0};

	forged("lossless", "100000000", &v);
	free(px);
}

/*
 * shrink(24) shrinks every image of gen-jpegs (short sides from 40): each
 * crop's box is drawn in the source's pixels, so a hit that lost the
 * frame would draw it in the smaller image's and serve other bytes.
 */
#define SHRINK_PL "decode shrink(24) cache random_resized_crop(16) flip(0.5)"

static void
test_frame(void)
{
	static const char *const fmts[] = {"raw", "lossless", "jpeg(90)"};
	char rmcmd[600];

	for (size_t f = 0; f < sizeof(fmts) / sizeof(fmts[0]); f++) {
		struct setup s;
		struct cache *c;

		if (setup_pl(&s, SHRINK_PL, fmts[f], "100000000") != 0) {
			CHECK(0);
			return;
		}
		snprintf(rmcmd, sizeof(rmcmd), "rm -rf %s/cache", dir);
		CHECK(system(rmcmd) == 0);
		c = open_cache();
		for (uint32_t id = 0; id < 4; id++) {
			uint8_t *none = make(&s, NULL, id);
			uint8_t *miss = make(&s, c, id);
			uint8_t *hit = make(&s, c, id);

			CHECK(memcmp(miss, hit, s.j.sample_bytes) == 0);
			CHECK(memcmp(none, hit, s.j.sample_bytes) == 0);
			free(none);
			free(miss);
			free(hit);
		}
		CHECK(atomic_load(&s.j.st.cache_hits) == 4);
		CHECK(atomic_load(&s.j.st.cache_misses) == 4);
		cache_close(c);
		teardown(&s);
	}
}

/* A frame over max_pixels: no source of the job was that large. */
static void
test_frame_over_max_pixels(void)
{
	uint8_t *px = calloc(24 * 24 * 3, 1);
	struct cache_val v = {.w = 24,
	    .h = 24,
	    .c = 3,
	    .dtype = 0,
	    .data = px,
	    .len = 24 * 24 * 3,
	    .enc = 0,
	    .src_w = 2000,
	    .src_h = 2000};
	struct setup s;
	uint8_t key[CACHE_KEY_LEN], *got;
	struct cache *c;
	char rmcmd[600];

	snprintf(rmcmd, sizeof(rmcmd), "rm -rf %s/cache", dir);
	CHECK(system(rmcmd) == 0);
	if (setup_pl(&s, SHRINK_PL, "raw", "1000000") != 0) {
		CHECK(0);
		free(px);
		return;
	}
	c = open_cache();
	key_of(&s, 2, key);
	v.prefix = s.j.cache_text;
	cache_put(c, key, &v);
	got = make(&s, c, 2);
	CHECK(atomic_load(&s.j.st.cache_hits) == 0);
	CHECK(atomic_load(&s.j.st.cache_misses) == 1);
	free(got);
	cache_close(c);
	teardown(&s);
	free(px);
}

static void
test_over_max_pixels(void)
{
	/* 2000 x 2000 zeros: 12 MB from a few KB of zstd, over 1M pixels. */
	uint32_t enc;
	size_t n = 2000u * 2000 * 3, len = 0;
	uint8_t *px = calloc(n, 1), *bytes = NULL;
	struct cache_val v = {.w = 2000, .h = 2000, .c = 3, .dtype = 0};

	CHECK(cache_fmt_parse("lossless", &enc) == 0);
	CHECK(cache_fmt_encode(enc, 2000, 2000, px, &bytes, &len) == 0);
	CHECK(len < 64 * 1024);
	v.data = bytes;
	v.len = len;
	v.enc = enc;
	forged("lossless", "1000000", &v);
	free(bytes);
	free(px);
}

int
main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 99;
	}
	if (test_gen_jpegs(dir, 4, 1, 5) != 0)
		return 99;
	test_jpeg();
	test_other_format();
	test_over_max_pixels();
	test_frame();
	test_frame_over_max_pixels();
	test_rmtree(dir);
	return TEST_SUMMARY();
}
