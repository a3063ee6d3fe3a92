/*
 * test_blur - gaussian_blur and random_erasing (transforms/blur.c) and the
 * order rules of pipelines (transforms/pipeline.c):
 *  - parsing and the refusals, each with its message: probabilities
 *    outside 0..1 (flip and random_erasing), bad kernel sizes and sigmas,
 *    normalize before a pixel op, random_erasing before normalize or
 *    before an op that changes the image, random ops before cache, and
 *    xf_check_output's random_erasing with uint8 and no normalize;
 *  - the blur's AVX2 path equals the scalar one (FEEDFS_XF_SCALAR=1) byte
 *    for byte, on sizes from 1x1, 1xN, Nx1 and 1x4000 to 301x217 and
 *    kernels up to 1023 on images smaller than half of it (repeated
 *    reflection), and both are within 1 of a float64 sum of the same
 *    kernel, differing only where that sum is within 1e-3 of a half;
 *  - a constant image stays constant; sigma draws stay in range;
 *  - xf_erase zeroes exactly the box in every dtype and layout;
 *  - erasing boxes lie inside, have the area and ratio asked for, and
 *    p = 0 never erases;
 *  - adding random_erasing (or a blur) after the other ops changes none of
 *    their draws: the output equals the one without it outside the box.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testlib.h"
#include "transforms/rng.h"
#include "transforms/xf.h"
#include "tests/xftest.h"

#define HEAD "decode resize(40) cache "

static void
test_parse(void)
{
	struct xf_pipeline *pl;
	char err[512];

	pl = parse_ok(HEAD "random_resized_crop(32) flip(0.5) "
			   "gaussian_blur(23, 0.1, 2.0) normalize(imagenet) "
			   "random_erasing(0.25)");
	if (pl != NULL) {
		CHECK_EQ_INT(pl->nops, 8);
		CHECK_EQ_INT(pl->ops[5].kind, XF_OP_GAUSSIAN_BLUR);
		CHECK_EQ_INT(pl->ops[5].ksize, 23);
		CHECK(pl->ops[5].sigma[0] == 0.1 && pl->ops[5].sigma[1] == 2.0);
		CHECK_EQ_INT(pl->ops[7].kind, XF_OP_RANDOM_ERASING);
		CHECK(pl->ops[7].p == 0.25);
		/* torchvision's defaults */
		CHECK(
		    pl->ops[7].scale[0] == 0.02 && pl->ops[7].scale[1] == 0.33);
		CHECK(pl->ops[7].ratio[0] == 0.3 && pl->ops[7].ratio[1] == 3.3);
		CHECK_EQ_INT(pl->out_w, 32);
		CHECK(xf_check_output(pl, XF_FLOAT16, err, sizeof(err)) == 0);
		CHECK(xf_op_random(XF_OP_GAUSSIAN_BLUR));
		CHECK(xf_op_random(XF_OP_RANDOM_ERASING));
		CHECK(!xf_op_random(XF_OP_NORMALIZE));
		xf_pipeline_free(pl);
	}
	pl =
	    parse_ok(HEAD "center_crop(32) random_erasing(1, 0.1, 0.2, 0.5, 2) "
			  "random_erasing(0)");
	if (pl != NULL) {
		CHECK(pl->ops[4].scale[0] == 0.1 && pl->ops[4].ratio[1] == 2);
		/* float output without normalize: erases to black, allowed */
		CHECK(xf_check_output(pl, XF_FLOAT32, err, sizeof(err)) == 0);
		/* uint8: refused, saying what it would mean */
		CHECK_EQ_INT(
		    xf_check_output(pl, XF_UINT8, err, sizeof(err)), -EINVAL);
		CHECK(strstr(err, "black in uint8 pixel space") != NULL);
		CHECK(strstr(err, "write normalize") != NULL);
		xf_pipeline_free(pl);
	}
	/* Geometric ops may still follow normalize (it commutes with them). */
	xf_pipeline_free(parse_ok(HEAD "normalize(imagenet) center_crop(32)"));
	xf_pipeline_free(parse_ok(HEAD "gaussian_blur(1, 0.5, 0.5) "
				       "center_crop(32) gaussian_blur(1023, "
				       "3, 1e6)"));

	/* Probabilities, for every op that takes one. */
	parse_bad(HEAD "center_crop(32) flip(1.5)",
	    "flip: probability 1.5 not in 0..1");
	parse_bad(HEAD "center_crop(32) flip(-0.1)", "not in 0..1");
	parse_bad(HEAD "center_crop(32) random_erasing(1.01)",
	    "random_erasing: probability 1.01 not in 0..1");
	parse_bad(HEAD "center_crop(32) random_erasing(-1)", "not in 0..1");
	parse_bad(HEAD "center_crop(32) random_erasing(nan)", "not a number");
	/* Arguments. */
	parse_bad(
	    HEAD "center_crop(32) random_erasing()", "expected 1, 3 or 5");
	parse_bad(HEAD "center_crop(32) random_erasing(0.5, 0.3, 0.2)",
	    "scale must satisfy");
	parse_bad(HEAD "center_crop(32) random_erasing(0.5, 0.1, 1.2)",
	    "scale must satisfy");
	parse_bad(HEAD "center_crop(32) random_erasing(0.5, 0.1, 0.2, 0, 1)",
	    "ratio must satisfy");
	parse_bad(HEAD "center_crop(32) random_erasing(0.5, 0.1, 0.2, 3, 1)",
	    "ratio must satisfy");
	parse_bad(HEAD "center_crop(32) gaussian_blur(4, 0.1, 2)",
	    "kernel size \"4\" is not an odd number");
	parse_bad(HEAD "center_crop(32) gaussian_blur(0, 0.1, 2)", "odd");
	parse_bad(HEAD "center_crop(32) gaussian_blur(1025, 0.1, 2)", "odd");
	parse_bad(HEAD "center_crop(32) gaussian_blur(3.0, 0.1, 2)", "odd");
	parse_bad(HEAD "center_crop(32) gaussian_blur(3, 0, 2)",
	    "sigma must satisfy");
	parse_bad(HEAD "center_crop(32) gaussian_blur(3, 2, 1)",
	    "sigma must satisfy");
	parse_bad(HEAD "center_crop(32) gaussian_blur(3, 1)", "expected 3");
	/* Order. */
	parse_bad(HEAD "center_crop(32) normalize(imagenet) "
		       "gaussian_blur(3, 1, 2)",
	    "gaussian_blur after normalize: normalize must come after every "
	    "pixel op");
	parse_bad(HEAD "center_crop(32) random_erasing(0.5) "
		       "normalize(imagenet)",
	    "normalize after random_erasing: random_erasing must come after "
	    "normalize");
	parse_bad(HEAD "random_erasing(0.5) center_crop(32)",
	    "center_crop after random_erasing: random_erasing erases a box "
	    "of the output");
	parse_bad(HEAD "center_crop(32) random_erasing(0.5) flip(0.5)",
	    "flip after random_erasing");
	parse_bad(HEAD "center_crop(32) random_erasing(0.5) "
		       "gaussian_blur(3, 1, 2)",
	    "gaussian_blur after random_erasing");
	parse_bad("decode center_crop(32) gaussian_blur(3, 1, 2) cache",
	    "random op gaussian_blur before cache");
	parse_bad("decode center_crop(32) random_erasing(0.5) cache",
	    "random op random_erasing before cache");
	/* The size comes from crops and resizes only. */
	parse_bad("decode resize(40) cache gaussian_blur(3, 1, 2)",
	    "output size not fixed");
}

/* An image of w x h with pixels from a seed. */
static void
fill(struct xf_image *im, uint32_t w, uint32_t h, uint64_t seed, bool smooth)
{
	im->w = w;
	im->h = h;
	im->px = xf_alloc((size_t)w * h * 3);
	for (size_t i = 0; i < (size_t)w * h * 3; i++) {
		size_t x = (i / 3) % w, y = (i / 3) / w;

		im->px[i] =
		    smooth
			? (uint8_t)(128 +
				    100 * sin((double)x / 7 + (double)(i % 3)) *
					cos((double)y / 5))
			: (uint8_t)rng_u64(seed, i);
	}
}

/* reflect as blur.c's, written another way: mirror until inside. */
static int64_t
mirror(int64_t i, int64_t n)
{
	if (n == 1)
		return 0;
	while (i < 0 || i >= n)
		i = i < 0 ? -i : 2 * (n - 1) - i;
	return i;
}

/*
 * Blur in place with both paths and compare with a float64 2-D sum of
 * the same float32 kernel: within 1, and where not equal to its rounding,
 * the sum lies within 1e-3 of a half.  Returns the pixels that differ.
 */
static size_t
check_blur(uint32_t w, uint32_t h, uint32_t k, float sigma, bool smooth)
{
	struct xf_image a, b;
	float *kw = malloc(k * sizeof(*kw));
	size_t n = (size_t)w * h * 3, off = 0;
	int64_t r = (int64_t)(k - 1) / 2;
	bool same = true;

	fill(&a, w, h, (uint64_t)w * 131 + h * 7 + k, smooth);
	fill(&b, w, h, (uint64_t)w * 131 + h * 7 + k, smooth);
	xf_gauss_kernel(k, sigma, kw);
	/* exact reference from the original pixels: keep a copy */
	uint8_t *orig = malloc(n);
	memcpy(orig, a.px, n);
	unsetenv("FEEDFS_XF_SCALAR");
	CHECK_EQ_INT(xf_gaussian_blur(&a, k, sigma), 0);
	setenv("FEEDFS_XF_SCALAR", "1", 1);
	CHECK_EQ_INT(xf_gaussian_blur(&b, k, sigma), 0);
	unsetenv("FEEDFS_XF_SCALAR");
	same = memcmp(a.px, b.px, n) == 0;
	if (!same)
		fprintf(stderr, "blur %ux%u k %u sigma %g: AVX2 != scalar\n", w,
		    h, k, (double)sigma);
	CHECK(same);
	/* The float64 sum is O(w h k^2): only on the small cases. */
	if ((uint64_t)w * h * k * k <= 40000000u)
		for (uint32_t y = 0; y < h; y++)
			for (uint32_t x = 0; x < w; x++)
				for (int c = 0; c < 3; c++) {
					double s = 0;
					uint8_t got =
					    a.px[((size_t)y * w + x) * 3 + c];

					for (int64_t i = -r; i <= r; i++)
						for (int64_t j = -r; j <= r;
						     j++)
							s +=
							    (double)kw[i + r] *
							    kw[j + r] *
							    orig[((size_t)mirror(
								      y + i,
								      h) *
									 w +
								     (size_t)mirror(
									 x + j,
									 w)) *
								     3 +
								 c];
					double want = nearbyint(s);

					want = want < 0	    ? 0
					       : want > 255 ? 255
							    : want;
					if (got == want)
						continue;
					off++;
					if (fabs(got - s) > 1 ||
					    fabs(fabs(s - floor(s)) - 0.5) >
						1e-3) {
						fprintf(stderr,
						    "blur %ux%u k %u: "
						    "(%u,%u,%d)"
						    " %u, sum %.9f\n",
						    w, h, k, x, y, c, got, s);
						CHECK(0);
					}
				}
	xf_free(a.px);
	xf_free(b.px);
	free(orig);
	free(kw);
	return off;
}

static void
test_blur(void)
{
	static const uint32_t sizes[][2] = {{1, 1}, {1, 7}, {7, 1}, {2, 2},
	    {1, 300}, {300, 1}, {2, 41}, {5, 3}, {8, 8}, {9, 13}, {31, 17},
	    {64, 64}, {301, 217}, {4000, 1}, {1, 4000}, {3, 2000}};
	static const uint32_t ks[] = {1, 3, 5, 7, 23, 51};
	size_t off = 0;
	struct xf_image im;

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		for (size_t k = 0; k < sizeof(ks) / sizeof(ks[0]); k++)
			for (int smooth = 0; smooth < 2; smooth++)
				off += check_blur(sizes[s][0], sizes[s][1],
				    ks[k], 0.1f + 0.7f * (float)k, smooth);
	/* Tiny sigma: taps of weight 0 are left out; k = 1023 on 3x2000. */
	off += check_blur(40, 30, 23, 0.1f, false);
	check_blur(3, 2000, 1023, 300.0f, false);
	check_blur(2000, 3, 1023, 2.0f, true);
	fprintf(stderr,
	    "blur: %zu values differ from the rounded float64 "
	    "sum (each within 1e-3 of a half)\n",
	    off);

	/* A constant image stays constant. */
	im.w = 50;
	im.h = 20;
	im.px = xf_alloc(50 * 20 * 3);
	for (int v = 0; v < 256; v += 51) {
		bool flat = true;

		memset(im.px, v, 50 * 20 * 3);
		CHECK_EQ_INT(xf_gaussian_blur(&im, 23, 1.7f), 0);
		for (size_t i = 0; i < 50 * 20 * 3; i++)
			flat &= im.px[i] == v;
		CHECK(flat);
	}
	xf_free(im.px);
	/* Refused sizes: even, 0 (the parser never makes them). */
	im.w = im.h = 4;
	im.px = xf_alloc(48);
	CHECK_EQ_INT(xf_gaussian_blur(&im, 4, 1.0f), -EINVAL);
	CHECK_EQ_INT(xf_gaussian_blur(&im, 0, 1.0f), -EINVAL);
	xf_free(im.px);
	/* The kernel: symmetric, sums to 1, torchvision's for k 3, sigma 1. */
	{
		float kw[3];

		xf_gauss_kernel(3, 1.0f, kw);
		CHECK(kw[0] == kw[2]);
		CHECK(fabs(kw[1] - 0.45186276) < 1e-7);
		CHECK(fabs(kw[0] - 0.27406862) < 1e-7);
	}
	/* Sigma draws: in range, and a function of key and counter. */
	{
		struct xf_pipeline *pl =
		    parse_ok(HEAD "center_crop(32) gaussian_blur(5, 0.1, 2)");
		double lo = 10, hi = 0;

		for (uint64_t key = 0; pl != NULL && key < 10000; key++) {
			float s = xf_blur_sigma(&pl->ops[4], key, 4ULL << 32);

			lo = s < lo ? s : lo;
			hi = s > hi ? s : hi;
			CHECK(s == xf_blur_sigma(&pl->ops[4], key, 4ULL << 32));
		}
		CHECK(lo >= 0.1f && lo < 0.11 && hi <= 2.0f && hi > 1.99);
		xf_pipeline_free(pl);
	}
}

static void
test_erase(void)
{
	static const enum xf_dtype dts[] = {XF_UINT8, XF_FLOAT16, XF_FLOAT32};
	struct xf_pipeline *pl;
	struct xf_op op = {0};
	uint32_t w = 13, h = 7;

	/* Exactly the box, in each dtype and layout. */
	for (int d = 0; d < 3; d++)
		for (int l = 0; l < 2; l++) {
			size_t e = dts[d] == XF_UINT8	  ? 1
				   : dts[d] == XF_FLOAT16 ? 2
							  : 4;
			uint8_t *buf = malloc(w * h * 3 * e);
			bool ok = true;

			memset(buf, 0xab, w * h * 3 * e);
			xf_erase(
			    buf, dts[d], l ? XF_CHW : XF_HWC, w, h, 2, 3, 4, 5);
			for (uint32_t c = 0; c < 3; c++)
				for (uint32_t y = 0; y < h; y++)
					for (uint32_t x = 0; x < w; x++) {
						size_t i =
						    l ? (c * h + y) * w + x
						      : (y * w + x) * 3 + c;
						bool in = y >= 2 && y < 6 &&
							  x >= 3 && x < 8;

						for (size_t b = 0; b < e; b++)
							ok &= buf[i * e + b] ==
							      (in ? 0 : 0xab);
					}
			CHECK(ok);
			free(buf);
		}

	/* Boxes: inside, area and ratio as asked; p = 0 never erases. */
	op.kind = XF_OP_RANDOM_ERASING;
	op.p = 1;
	op.scale[0] = 0.02;
	op.scale[1] = 0.33;
	op.ratio[0] = 0.3;
	op.ratio[1] = 3.3;
	{
		unsigned erased = 0;
		bool ok = true;

		for (uint64_t key = 0; key < 20000; key++) {
			uint32_t t, l, eh, ew;

			if (!xf_erasing_params(&op, 224, 224, key, 7ULL << 32,
				&t, &l, &eh, &ew))
				continue;
			erased++;
			ok &= eh < 224 && ew < 224 && t + eh <= 224 &&
			      l + ew <= 224;
			/* rounding: the area within a side's rounding of it */
			ok &= (eh + 1.0) * (ew + 1.0) >= 0.02 * 224 * 224 &&
			      (eh - 1.0) * (ew - 1.0) <= 0.33 * 224 * 224;
			ok &= (eh + 0.5) / (ew - 0.5 > 0 ? ew - 0.5 : 0.5) >=
				  0.3 &&
			      (eh - 0.5) / (ew + 0.5) <= 3.3;
		}
		CHECK(ok);
		/* 10 attempts of boxes that fit most of the time */
		CHECK(erased > 19900);
		op.p = 0;
		erased = 0;
		for (uint64_t key = 0; key < 2000; key++) {
			uint32_t t, l, eh, ew;

			erased += xf_erasing_params(
			    &op, 224, 224, key, 0, &t, &l, &eh, &ew);
		}
		CHECK_EQ_INT(erased, 0);
		/*
		 * A 1x1 output: only empty boxes fit (h < 1), which
		 * torchvision erases as well, to no effect.
		 */
		op.p = 1;
		for (uint64_t key = 0; key < 100; key++) {
			uint32_t t, l, eh, ew;

			if (xf_erasing_params(
				&op, 1, 1, key, 0, &t, &l, &eh, &ew))
				erased += eh != 0 && ew != 0;
		}
		CHECK_EQ_INT(erased, 0);
	}

	/*
	 * Adding ops after the others changes none of their draws: with
	 * random_erasing the output is the one without it outside the box
	 * (xf_erasing_params on the same key and counter), 0 inside.
	 */
	{
		struct xf_pipeline *base = parse_ok(
		    "decode center_crop(48) cache random_resized_crop(24) "
		    "flip(0.5) gaussian_blur(5, 0.1, 2) normalize(imagenet)");
		float *x = malloc(24 * 24 * 3 * 4),
		      *y = malloc(24 * 24 * 3 * 4);
		unsigned boxes = 0;
		bool ok = true;

		pl = parse_ok("decode center_crop(48) cache "
			      "random_resized_crop(24) flip(0.5) "
			      "gaussian_blur(5, 0.1, 2) normalize(imagenet) "
			      "random_erasing(0.7)");
		for (uint64_t key = 0; base && pl && key < 200; key++) {
			struct xf_image a, b;
			uint32_t t = 0, l = 0, eh = 0, ew = 0;
			bool er;

			fill(&a, 48, 48, 5, false);
			fill(&b, 48, 48, 5, false);
			CHECK_EQ_INT(
			    xf_run_suffix(base, &a, key, XF_FLOAT32, XF_CHW, x),
			    0);
			CHECK_EQ_INT(
			    xf_run_suffix(pl, &b, key, XF_FLOAT32, XF_CHW, y),
			    0);
			er = xf_erasing_params(&pl->ops[7], 24, 24, key,
			    7ULL << 32, &t, &l, &eh, &ew);
			boxes += er;
			for (uint32_t c = 0; c < 3; c++)
				for (uint32_t yy = 0; yy < 24; yy++)
					for (uint32_t xx = 0; xx < 24; xx++) {
						size_t i =
						    (c * 24 + yy) * 24 + xx;
						bool in = er && yy >= t &&
							  yy < t + eh &&
							  xx >= l &&
							  xx < l + ew;
						uint32_t bits;

						memcpy(&bits, &y[i], 4);
						ok &= in ? bits == 0
							 : memcmp(&x[i], &y[i],
							       4) == 0;
					}
		}
		CHECK(ok);
		CHECK(boxes > 100 && boxes < 180); /* about 0.7 of 200 */
		free(x);
		free(y);
		xf_pipeline_free(base);
		xf_pipeline_free(pl);
	}
}

int
main(void)
{
	test_parse();
	test_blur();
	test_erase();
	return TEST_SUMMARY();
}
