/*
 * test_cache_format.c - cache_format (cache/format.h): parsing and names,
 * each format's round trip on a photo-like image (raw and lossless
 * byte-exact; jpeg within the stated error), damaged bytes refused, the
 * format carried by the value header, and the pixels a job serves of an
 * image (cache_fmt_encode_served: a jpeg's round trip).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/codec.h"
#include "cache/format.h"
#include "tests/testlib.h"

/* jpeg(90), 4:4:4: the mean and max absolute error per channel allowed. */
#define JPEG90_MEAN 3.0
#define JPEG90_MAX 32

/* Smooth gradients, edges and a little noise, as a resized photo has. */
static uint8_t *
photo(uint32_t w, uint32_t h)
{
	uint8_t *p = malloc((size_t)w * h * 3);
	uint32_t s = 12345;

	for (uint32_t y = 0; y < h; y++)
		for (uint32_t x = 0; x < w; x++)
			for (int c = 0; c < 3; c++) {
				double v = 128 + 60 * sin((x + 7 * c) / 23.0) +
					   40 * cos(y / 17.0 + c);

				s = s * 1103515245u + 12345u;
				v += (double)(s >> 16 & 7) - 3.5;
				if ((x / 40 + y / 40) % 2)
					v = 255 - v;
				p[((size_t)y * w + x) * 3 + c] =
				    (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
			}
	return p;
}

static void
test_parse(void)
{
	uint32_t e;
	char b[64];

	CHECK(cache_fmt_parse("raw", &e) == 0 && e == 0);
	CHECK(cache_fmt_parse("lossless", &e) == 0 &&
	      CACHE_FMT_OF(e) == CACHE_FMT_LOSSLESS);
	CHECK(cache_fmt_parse("JPEG(90)", &e) == 0 &&
	      CACHE_FMT_OF(e) == CACHE_FMT_JPEG && CACHE_FMT_Q(e) == 90);
	CHECK(cache_fmt_parse("jpeg(1)", &e) == 0 && CACHE_FMT_Q(e) == 1);
	CHECK(cache_fmt_parse("jpeg(100)", &e) == 0 && CACHE_FMT_Q(e) == 100);
	CHECK(cache_fmt_parse("jpeg(0)", &e) == -EINVAL);
	CHECK(cache_fmt_parse("jpeg(101)", &e) == -EINVAL);
	CHECK(cache_fmt_parse("jpeg(90", &e) == -EINVAL);
	CHECK(cache_fmt_parse("jpeg()", &e) == -EINVAL);
	CHECK(cache_fmt_parse("jpeg(-5)", &e) == -EINVAL);
	CHECK(cache_fmt_parse("zstd", &e) == -EINVAL);
	cache_fmt_parse("jpeg(85)", &e);
	cache_fmt_name(e, b, sizeof(b));
	CHECK_EQ_STR(b, "jpeg(85)");
	cache_fmt_suffix(e, b, sizeof(b));
	CHECK_EQ_STR(b, "|format=jpeg(85)");
	cache_fmt_suffix(0, b, sizeof(b));
	CHECK_EQ_STR(b, ""); /* raw keys are those of before formats */
	cache_fmt_parse("lossless", &e);
	cache_fmt_suffix(e, b, sizeof(b));
	CHECK_EQ_STR(b, "|format=lossless");
}

static void
round_trip(const char *fmt, uint32_t w, uint32_t h)
{
	uint8_t *px = photo(w, h), *enc = NULL, *dec = NULL;
	size_t n = (size_t)w * h * 3, len = 0;
	double sum = 0;
	int max = 0;
	uint32_t e;

	CHECK(cache_fmt_parse(fmt, &e) == 0);
	CHECK(cache_fmt_encode(e, w, h, px, &enc, &len) == 0);
	CHECK(cache_fmt_decode(e, w, h, enc, len, &dec) == 0);
	if (dec == NULL)
		goto out;
	for (size_t i = 0; i < n; i++) {
		int d = abs((int)dec[i] - (int)px[i]);

		sum += d;
		max = d > max ? d : max;
	}
	fprintf(stderr, "%-10s %ux%u: %zu bytes (%.2f of raw), error mean %.3f "
		"max %d\n",
	    fmt, w, h, len, (double)len / n, sum / n, max);
	if (CACHE_FMT_OF(e) != CACHE_FMT_JPEG) {
		CHECK(memcmp(dec, px, n) == 0);
	} else if (CACHE_FMT_Q(e) == 90) {
		CHECK(sum / n <= JPEG90_MEAN);
		CHECK(max <= JPEG90_MAX);
	}
	if (CACHE_FMT_OF(e) == CACHE_FMT_LOSSLESS && n >= 4096)
		CHECK(len < n);
	if (CACHE_FMT_OF(e) == CACHE_FMT_JPEG && n >= 4096)
		CHECK(len < n / 4);
	free(dec);
	dec = NULL;
	/* Another size, or damaged bytes, are refused (a miss). */
	CHECK(cache_fmt_decode(e, w + 1, h, enc, len, &dec) == -EINVAL);
	CHECK(cache_fmt_decode(e, w, h, enc, len / 2, &dec) == -EINVAL);
out:
	free(px);
	free(enc);
	free(dec);
}

/* The envelope carries the format; a raw float value has its dtype. */
static void
test_header(void)
{
	static const uint8_t key[CACHE_KEY_LEN] = {9};
	uint8_t buf[CODEC_ENV_HDR + 16] = {0}, data[16] = {1, 2, 3, 4};
	struct cache_val v = {.w = 2, .h = 2, .c = 1, .data = data, .len = 4},
			 out;

	v.enc = CACHE_FMT_ENC(CACHE_FMT_JPEG, 77);
	codec_env_seal(buf, key, &v);
	memcpy(buf + CODEC_ENV_HDR, data, 4);
	CHECK(codec_env_open(buf, CODEC_ENV_HDR + 4, key, &out, NULL) == 0);
	CHECK(out.enc == v.enc && out.dtype == 0 && out.w == 2);
	v.enc = 0;
	v.dtype = 2;
	v.len = 16;
	codec_env_seal(buf, key, &v);
	memcpy(buf + CODEC_ENV_HDR, data, 16);
	CHECK(codec_env_open(buf, sizeof(buf), key, &out, NULL) == 0);
	CHECK(out.enc == 0 && out.dtype == 2);
	CHECK(codec_get_le32(buf + 20) == 2);
	/* Formats the build does not know are refused. */
	v.enc = CACHE_FMT_ENC(CACHE_FMT_JPEG, 0);
	v.dtype = 0;
	v.len = 4;
	codec_env_seal(buf, key, &v);
	CHECK(codec_env_open(buf, CODEC_ENV_HDR + 4, key, &out, NULL) != 0);
	v.enc = 7;
	codec_env_seal(buf, key, &v);
	CHECK(codec_env_open(buf, CODEC_ENV_HDR + 4, key, &out, NULL) != 0);
}

/*
 * What a job serves of a prefix image (issue 25): the pixels every decode
 * of the stored bytes gives, once from cache_fmt_encode_served; for jpeg
 * not the image it was given (the round trip), for raw and lossless the
 * image itself (served NULL).  Decoding the stored bytes again gives the
 * served pixels, byte for byte.
 */
static void
served(const char *fmt, uint32_t w, uint32_t h)
{
	uint8_t *px = photo(w, h), *enc = NULL, *srv = NULL, *dec = NULL;
	size_t n = (size_t)w * h * 3, len = 0;
	uint32_t e;

	CHECK(cache_fmt_parse(fmt, &e) == 0);
	CHECK(cache_fmt_encode_served(e, w, h, px, &enc, &len, &srv) == 0);
	CHECK(cache_fmt_decode(e, w, h, enc, len, &dec) == 0);
	if (dec == NULL)
		goto out;
	CHECK(cache_fmt_lossy(e) == (CACHE_FMT_OF(e) == CACHE_FMT_JPEG));
	if (cache_fmt_lossy(e)) {
		CHECK(srv != NULL && memcmp(srv, dec, n) == 0);
		CHECK(srv != NULL && memcmp(srv, px, n) != 0);
	} else {
		CHECK(srv == NULL && memcmp(dec, px, n) == 0);
	}
	/* Bad sizes: an error, nothing allocated. */
	free(enc);
	free(srv);
	enc = srv = NULL;
	CHECK(cache_fmt_encode_served(e, 0, h, px, &enc, &len, &srv) ==
	      -EINVAL);
	CHECK(enc == NULL && srv == NULL);
out:
	free(px);
	free(enc);
	free(srv);
	free(dec);
}

int
main(void)
{
	test_parse();
	round_trip("raw", 257, 191);
	round_trip("lossless", 257, 191);
	round_trip("lossless", 1, 1);
	round_trip("jpeg(90)", 257, 191);
	round_trip("jpeg(50)", 64, 48);
	round_trip("jpeg(100)", 3, 5);
	test_header();
	served("raw", 64, 48);
	served("lossless", 64, 48);
	served("jpeg(90)", 64, 48);
	served("jpeg(20)", 17, 13);
	return TEST_SUMMARY();
}
