/*
 * resize.c - antialiased bilinear resize, bit-exact with Pillow 9.4's
 * Image.resize(size, Image.BILINEAR) on RGB images (src/libImaging/
 * Resample.c): a triangle filter widened by the scale when shrinking,
 * coefficients normalized in double and rounded to 22-bit fixed point,
 * a horizontal pass into an 8-bit temporary, then a vertical pass.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/xf.h"

#define PRECISION_BITS (32 - 8 - 2)
#define ROUND_BIAS (1 << (PRECISION_BITS - 1))

/* The coefficients of one pass: output i reads k[i*ksize..] from in[lo]. */
struct coeffs {
	int ksize;
	int *bounds; /* lo, n per output */
	int32_t *k;
};

static double
bilinear_filter(double x)
{
	if (x < 0.0)
		x = -x;
	if (x < 1.0)
		return 1.0 - x;
	return 0.0;
}

static void
coeffs_free(struct coeffs *c)
{
	free(c->bounds);
	free(c->k);
}

/* Pillow's precompute_coeffs + normalize_coeffs_8bpc for box (0, insize). */
static int
coeffs_make(uint32_t insize, uint32_t outsize, struct coeffs *c)
{
	float in0 = 0.0f, in1 = (float)insize;
	double support, scale, filterscale;
	double *kk = NULL;
	int ksize;

	filterscale = scale = (double)(in1 - in0) / outsize;
	if (filterscale < 1.0)
		filterscale = 1.0;
	support = 1.0 * filterscale;
	ksize = (int)ceil(support) * 2 + 1;

	c->ksize = ksize;
	c->bounds = malloc(sizeof(*c->bounds) * 2 * outsize);
	c->k = malloc(sizeof(*c->k) * (size_t)ksize * outsize);
	kk = malloc(sizeof(*kk) * (size_t)ksize);
	if (c->bounds == NULL || c->k == NULL || kk == NULL) {
		coeffs_free(c);
		free(kk);
		return -ENOMEM;
	}
	for (uint32_t xx = 0; xx < outsize; xx++) {
		double center = in0 + (xx + 0.5) * scale;
		double ww = 0.0, ss = 1.0 / filterscale;
		int xmin, xmax, x;
		int32_t *k = c->k + (size_t)xx * ksize;

		xmin = (int)(center - support + 0.5);
		if (xmin < 0)
			xmin = 0;
		xmax = (int)(center + support + 0.5);
		if (xmax > (int)insize)
			xmax = (int)insize;
		xmax -= xmin;
		for (x = 0; x < xmax; x++) {
			double w =
			    bilinear_filter((x + xmin - center + 0.5) * ss);

			kk[x] = w;
			ww += w;
		}
		for (x = 0; x < xmax; x++)
			if (ww != 0.0)
				kk[x] /= ww;
		for (x = 0; x < xmax; x++) {
			if (kk[x] < 0)
				k[x] = (int32_t)(-0.5 +
						 kk[x] * (1 << PRECISION_BITS));
			else
				k[x] = (int32_t)(0.5 +
						 kk[x] * (1 << PRECISION_BITS));
		}
		for (; x < ksize; x++)
			k[x] = 0;
		c->bounds[xx * 2] = xmin;
		c->bounds[xx * 2 + 1] = xmax;
	}
	free(kk);
	return 0;
}

static inline uint8_t
clip8(int32_t v)
{
	if (v >= (1 << PRECISION_BITS << 8))
		return 255;
	if (v <= 0)
		return 0;
	return (uint8_t)(v >> PRECISION_BITS);
}

/* rows rows of width inw from src to width outw in dst. */
static void
pass_horizontal(const uint8_t *src, uint32_t inw, uint8_t *dst, uint32_t outw,
    uint32_t rows, const struct coeffs *c)
{
	for (uint32_t y = 0; y < rows; y++) {
		const uint8_t *s = src + (size_t)y * inw * 3;
		uint8_t *d = dst + (size_t)y * outw * 3;

		for (uint32_t xx = 0; xx < outw; xx++) {
			const int32_t *k = c->k + (size_t)xx * c->ksize;
			const uint8_t *p = s + (size_t)c->bounds[xx * 2] * 3;
			int n = c->bounds[xx * 2 + 1];
			int32_t s0 = ROUND_BIAS, s1 = ROUND_BIAS,
				s2 = ROUND_BIAS;

			for (int x = 0; x < n; x++, p += 3) {
				s0 += p[0] * k[x];
				s1 += p[1] * k[x];
				s2 += p[2] * k[x];
			}
			d[xx * 3] = clip8(s0);
			d[xx * 3 + 1] = clip8(s1);
			d[xx * 3 + 2] = clip8(s2);
		}
	}
}

/* Rows of src (row 0 = first row any output reads) to outh rows in dst. */
static void
pass_vertical(const uint8_t *src, uint32_t w, uint8_t *dst, uint32_t outh,
    int first, const struct coeffs *c, int32_t *acc)
{
	size_t n = (size_t)w * 3;

	for (uint32_t yy = 0; yy < outh; yy++) {
		const int32_t *k = c->k + (size_t)yy * c->ksize;
		int lo = c->bounds[yy * 2] - first, cnt = c->bounds[yy * 2 + 1];
		uint8_t *d = dst + yy * n;

		for (size_t i = 0; i < n; i++)
			acc[i] = ROUND_BIAS;
		for (int y = 0; y < cnt; y++) {
			const uint8_t *s = src + (size_t)(lo + y) * n;
			int32_t ky = k[y];

			for (size_t i = 0; i < n; i++)
				acc[i] += s[i] * ky;
		}
		for (size_t i = 0; i < n; i++)
			d[i] = clip8(acc[i]);
	}
}

int
xf_resize(
    const struct xf_image *in, uint32_t w, uint32_t h, struct xf_image *out)
{
	struct coeffs ch = {0}, cv = {0};
	uint8_t *px = NULL, *tmp = NULL;
	const uint8_t *src;
	int32_t *acc = NULL;
	int first, last, r;

	if (w == 0 || h == 0 || in->w == 0 || in->h == 0)
		return -EINVAL;
	if ((px = malloc((size_t)w * h * 3)) == NULL)
		return -ENOMEM;
	if (w == in->w && h == in->h) {
		memcpy(px, in->px, (size_t)w * h * 3);
		goto done;
	}
	if ((r = coeffs_make(in->h, h, &cv)) != 0)
		goto fail;
	/* Only the rows the vertical pass reads, as Pillow does. */
	first = cv.bounds[0];
	last = cv.bounds[(h - 1) * 2] + cv.bounds[(h - 1) * 2 + 1];
	src = in->px + (size_t)first * in->w * 3;
	if (w != in->w) {
		if ((r = coeffs_make(in->w, w, &ch)) != 0)
			goto fail;
		r = -ENOMEM;
		if ((tmp = malloc((size_t)w * (last - first) * 3)) == NULL)
			goto fail;
		pass_horizontal(
		    src, in->w, tmp, w, (uint32_t)(last - first), &ch);
		src = tmp;
	}
	if (h != in->h) {
		r = -ENOMEM;
		if ((acc = malloc(sizeof(*acc) * (size_t)w * 3)) == NULL)
			goto fail;
		pass_vertical(src, w, px, h, first, &cv, acc);
	} else
		memcpy(px, src, (size_t)w * h * 3);
	coeffs_free(&ch);
	coeffs_free(&cv);
	free(tmp);
	free(acc);
done:
	out->w = w;
	out->h = h;
	out->px = px;
	return 0;
fail:
	coeffs_free(&ch);
	coeffs_free(&cv);
	free(tmp);
	free(acc);
	free(px);
	return r;
}
