/*
 * resize.c - layer: transforms (calls resize_avx2.c's kernels where the
 * CPU has AVX2).  Antialiased resize, bit-exact with Pillow 9.4's
 * Image.resize(size, Image.BILINEAR) on RGB images (src/libImaging/
 * Resample.c): a triangle filter widened by the scale when shrinking,
 * coefficients normalized in double and rounded to 22-bit fixed point,
 * a horizontal pass into an 8-bit temporary, then a vertical pass.  The
 * same with Pillow's Lanczos filter (support 3, negative lobes: its
 * coefficients are rounded away from zero on both sides, as Pillow's
 * normalize_coeffs_8bpc does) for Image.LANCZOS, which shrink uses.
 *
 * Every sum is Pillow's exact int32 sum of pixel * coefficient products
 * (plus the rounding bias), so any order of summation gives Pillow's
 * bytes.  That leaves room for SIMD: on x86-64 CPUs with AVX2 (checked at
 * run time) both passes run in vector kernels that compute the same
 * integers; elsewhere, or with FEEDFS_XF_SCALAR=1 in the environment (the
 * tests compare both), the portable loops do.
 *
 * The kernels (resize_avx2.c):
 * - horizontal, AVX2: the 22-bit coefficient k is split as
 *   k = kh * 2048 + kl (both fit int16), so that pmaddwd can multiply two
 *   taps of 8-bit pixels at once without losing a bit:
 *   sum(p * k) = (sum(p * kh) << 11) + sum(p * kl), all below 2^31.
 *   Four outputs per step, two taps per multiply, channels in the lanes;
 *   each output's pixels come in one 16-byte load per four or five taps,
 *   which pshufb spreads into the pairs (the loads, inserts and shuffles,
 *   not the multiplies, were most of the cost of two taps at a time).
 * - vertical, AVX2: contiguous rows, 32 bytes at a time in int32 lanes,
 *   the rest of a row 8 at a time, the last step ending at the row's end
 *   (it recomputes bytes already written, to the same values).
 */
#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/xf.h"
#include "transforms/resize_int.h"

static double
bilinear_filter(double x)
{
	if (x < 0.0)
		x = -x;
	if (x < 1.0)
		return 1.0 - x;
	return 0.0;
}

static double
sinc_filter(double x)
{
	if (x == 0.0)
		return 1.0;
	x = x * M_PI;
	return sin(x) / x;
}

/* Pillow's lanczos_filter: sinc windowed by sinc(x / 3) on [-3, 3). */
static double
lanczos_filter(double x)
{
	if (-3.0 <= x && x < 3.0)
		return sinc_filter(x) * sinc_filter(x / 3);
	return 0.0;
}

/* Pillow's struct filter: the function and its support at scale 1. */
static const struct filter {
	double (*fn)(double);
	double support;
} filters[] = {
    [XF_BILINEAR] = {bilinear_filter, 1.0},
    [XF_LANCZOS] = {lanczos_filter, 3.0},
};

static void
coeffs_free(struct coeffs *c)
{
	xf_free(c->bounds);
	xf_free(c->k);
}

/*
 * Pillow's precompute_coeffs + normalize_coeffs_8bpc for the box (in0,
 * in1) of an input of insize pixels ((0, insize) for a plain resize),
 * with filter f.
 */
static int
coeffs_make(uint32_t insize, float in0, float in1, uint32_t outsize,
    const struct filter *f, struct coeffs *c)
{
	double support, scale, filterscale;
	double *kk = NULL;
	int ksize;

	filterscale = scale = (double)(in1 - in0) / outsize;
	if (filterscale < 1.0)
		filterscale = 1.0;
	support = f->support * filterscale;
	ksize = (int)ceil(support) * 2 + 1;

	c->ksize = ksize;
	c->nmax = 0;
	c->bounds = xf_alloc(sizeof(*c->bounds) * 2 * outsize);
	c->k = xf_alloc(sizeof(*c->k) * (size_t)ksize * outsize);
	kk = xf_alloc(sizeof(*kk) * (size_t)ksize);
	if (c->bounds == NULL || c->k == NULL || kk == NULL) {
		coeffs_free(c);
		xf_free(kk);
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
			double v = (x + xmin - center + 0.5) * ss;
			/* bilinear, every crop's, inlined */
			double w = f->fn == bilinear_filter ? bilinear_filter(v)
							    : f->fn(v);

			kk[x] = w;
			ww += w;
		}
		/*
		 * Pillow divides by ww (unless 0), then rounds away from
		 * zero (the triangle is never negative; Lanczos's lobes
		 * are).
		 */
		if (ww == 0.0)
			ww = 1.0;
		for (x = 0; x < xmax; x++) {
			double v = kk[x] / ww;

			k[x] = v < 0
				   ? (int32_t)(-0.5 + v * (1 << PRECISION_BITS))
				   : (int32_t)(0.5 + v * (1 << PRECISION_BITS));
		}
		c->bounds[xx * 2] = xmin;
		c->bounds[xx * 2 + 1] = xmax;
		if (xmax > c->nmax)
			c->nmax = xmax;
	}
	xf_free(kk);
	return 0;
}

/* rows rows (stride bytes apart) of width inw to width outw in dst. */
static void
pass_horizontal(const uint8_t *src, size_t stride, uint8_t *dst, uint32_t outw,
    uint32_t rows, const struct coeffs *c)
{
	for (uint32_t y = 0; y < rows; y++) {
		const uint8_t *s = src + (size_t)y * stride;
		uint8_t *d = dst + (size_t)y * outw * 3;

		for (uint32_t xx = 0; xx < outw; xx++)
			h_one(s, d, xx, c);
	}
}

/*
 * Output row yy of a vertical pass, elements [i0, n) (portable): rows
 * stride bytes apart, row 0 of src being the first any output reads.
 */
static void
v_row(const uint8_t *src, size_t stride, size_t i0, size_t n, uint8_t *d,
    uint32_t yy, int first, const struct coeffs *c)
{
	const int32_t *k = c->k + (size_t)yy * c->ksize;
	int lo = c->bounds[yy * 2] - first, cnt = c->bounds[yy * 2 + 1];
	int32_t acc[64];

	/* In blocks that stay in registers or L1. */
	for (size_t b = i0; b < n; b += 64) {
		size_t m = n - b < 64 ? n - b : 64;

		for (size_t i = 0; i < m; i++)
			acc[i] = ROUND_BIAS;
		for (int y = 0; y < cnt; y++) {
			const uint8_t *s = src + (size_t)(lo + y) * stride + b;
			int32_t ky = k[y];

			for (size_t i = 0; i < m; i++)
				acc[i] += s[i] * ky;
		}
		for (size_t i = 0; i < m; i++)
			d[b + i] = clip8(acc[i]);
	}
}

static void
pass_vertical(const uint8_t *src, size_t stride, uint32_t w, uint8_t *dst,
    uint32_t outh, int first, const struct coeffs *c)
{
	size_t n = (size_t)w * 3;

	for (uint32_t yy = 0; yy < outh; yy++)
		v_row(src, stride, 0, n, dst + yy * n, yy, first, c);
}

/*
 * The box fb (x0, y0, x1, y1; NULL: the whole image) of the inw x inh
 * image at src (rows stride bytes apart; end: the end of the buffer src
 * lies in, which the vector kernels must not read past) to w x h at dst,
 * as Pillow's resize(size, filter f, box=fb).
 */
static int
resize_rect(const uint8_t *src, size_t stride, const uint8_t *end, uint32_t inw,
    uint32_t inh, const float *fb, uint32_t w, uint32_t h,
    const struct filter *f, uint8_t *dst)
{
	float bx0 = fb ? fb[0] : 0.0f, by0 = fb ? fb[1] : 0.0f;
	float bx1 = fb ? fb[2] : (float)inw, by1 = fb ? fb[3] : (float)inh;
	bool need_h = w != inw || bx0 != 0.0f || bx1 != (float)inw;
	bool need_v = h != inh || by0 != 0.0f || by1 != (float)inh;
	struct coeffs ch = {0}, cv = {0};
	const struct coeffs *hc = &ch;
	uint8_t *tmp = NULL;
	size_t tstride;
	int first, last, r;
	bool simd = false;
#ifdef HAVE_AVX2_KERNELS
	struct hvec hv = {0};

	simd = resize_use_avx2();
#endif

	if (!need_h && !need_v) {
		for (uint32_t y = 0; y < h; y++)
			memcpy(dst + (size_t)y * w * 3,
			    src + (size_t)y * stride, (size_t)w * 3);
		return 0;
	}
	if ((r = coeffs_make(inh, by0, by1, h, f, &cv)) != 0)
		return r;
	/* Only the rows the vertical pass reads, as Pillow does. */
	first = cv.bounds[0];
	last = cv.bounds[(h - 1) * 2] + cv.bounds[(h - 1) * 2 + 1];
	src += (size_t)first * stride;
	tstride = stride;
	if (need_h) {
		/* Square (box and size): the same coefficients both ways. */
		if (inw == inh && w == h && bx0 == by0 && bx1 == by1)
			hc = &cv;
		else if ((r = coeffs_make(inw, bx0, bx1, w, f, &ch)) != 0)
			goto out;
		r = -ENOMEM;
		if ((tmp = xf_alloc((size_t)w * (last - first) * 3)) == NULL)
			goto out;
#ifdef HAVE_AVX2_KERNELS
		if (simd && (r = resize_hvec_make(hc, w, &hv)) != 0)
			goto out;
		if (simd)
			resize_h_avx2(src, stride, end, tmp, w,
			    (uint32_t)(last - first), hc, &hv);
		else
#endif
			pass_horizontal(
			    src, stride, tmp, w, (uint32_t)(last - first), hc);
		src = tmp;
		tstride = (size_t)w * 3;
	}
	if (need_v) {
#ifdef HAVE_AVX2_KERNELS
		if (simd && (size_t)w * 3 >= 8) /* narrower: the loop's */
			resize_v_avx2(src, tstride, w, dst, h, first, &cv);
		else
#endif
			pass_vertical(src, tstride, w, dst, h, first, &cv);
	} else {
		for (uint32_t y = 0; y < h; y++)
			memcpy(dst + (size_t)y * w * 3,
			    src + (size_t)y * tstride, (size_t)w * 3);
	}
	r = 0;
out:
#ifdef HAVE_AVX2_KERNELS
	xf_free(hv.mem);
#endif
	coeffs_free(&ch);
	coeffs_free(&cv);
	xf_free(tmp);
	return r;
}

int
xf_resize(
    const struct xf_image *in, uint32_t w, uint32_t h, struct xf_image *out)
{
	return xf_resize_box(in, 0, 0, in->w, in->h, w, h, out);
}

/* resize_rect into a new w x h image *out (set on success only). */
static int
resize_new(const uint8_t *src, size_t stride, const uint8_t *end, uint32_t cw,
    uint32_t ch, const float *box, uint32_t w, uint32_t h,
    const struct filter *f, struct xf_image *out)
{
	uint8_t *px;
	int r;

	if ((px = xf_alloc((size_t)w * h * 3)) == NULL)
		return -ENOMEM;
	if ((r = resize_rect(src, stride, end, cw, ch, box, w, h, f, px)) !=
	    0) {
		xf_free(px);
		return r;
	}
	*out = (struct xf_image){.w = w, .h = h, .px = px}; /* transferred */
	return 0;
}

int
xf_resize_filter(const struct xf_image *in, uint32_t w, uint32_t h,
    enum xf_filter f, struct xf_image *out)
{
	size_t stride = (size_t)in->w * 3;

	if (w == 0 || h == 0 || in->w == 0 || in->h == 0 ||
	    (f != XF_BILINEAR && f != XF_LANCZOS))
		return -EINVAL;
	return resize_new(in->px, stride, in->px + stride * in->h, in->w, in->h,
	    NULL, w, h, &filters[f], out);
}

int
xf_resize_box(const struct xf_image *in, uint32_t x, uint32_t y, uint32_t cw,
    uint32_t ch, uint32_t w, uint32_t h, struct xf_image *out)
{
	size_t stride = (size_t)in->w * 3;

	if (w == 0 || h == 0 || cw == 0 || ch == 0 || in->w == 0 ||
	    in->h == 0 || x > in->w || cw > in->w - x || y > in->h ||
	    ch > in->h - y)
		return -EINVAL;
	return resize_new(in->px + (size_t)y * stride + (size_t)x * 3, stride,
	    in->px + stride * in->h, cw, ch, NULL, w, h, &filters[XF_BILINEAR],
	    out);
}

int
xf_resize_fbox(const struct xf_image *in, const float box[4], uint32_t w,
    uint32_t h, struct xf_image *out)
{
	size_t stride = (size_t)in->w * 3;

	if (w == 0 || h == 0 || in->w == 0 || in->h == 0 ||
	    !(box[0] >= 0.0f && box[0] < box[2] && box[2] <= (float)in->w) ||
	    !(box[1] >= 0.0f && box[1] < box[3] && box[3] <= (float)in->h))
		return -EINVAL;
	return resize_new(in->px, stride, in->px + stride * in->h, in->w, in->h,
	    box, w, h, &filters[XF_BILINEAR], out);
}
