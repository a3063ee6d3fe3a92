/*
 * augment_geom.c - the geometric ops of the augmentations (augment.c):
 * ShearX, ShearY, TranslateX, TranslateY and Rotate, with NEAREST and
 * fill 0 as the auto-augment transforms do.  Layer: transforms
 * (transforms/), under augment.c; calls augment_avx2.c's grid kernel
 * where aug_use_avx2.
 *
 * The source coordinates are torchvision's affine grid in float32, so
 * they agree with torch except where a coordinate falls within rounding
 * of a pixel boundary.  The grid of one pixel (grid1, rint_small) is in
 * this file, beside the loop that calls it.
 *
 * This file needs ISO C's default of no floating-point contraction
 * (-std=c11): a fused multiply-add would round differently from torch.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "transforms/augment_int.h"
#include "transforms/xf.h"

/*
 * round-half-to-even of v, |v| < 2^22, without a libm call (nearbyintf is
 * one where SSE4.1 is not assumed): adding 1.5 * 2^23 rounds in the FPU's
 * default mode, which is to nearest, ties to even.
 */
static inline float
rint_small(float v)
{
	volatile float big = 0x1.8p23f; /* not folded at compile time */
	float b = big;

	if (v >= 0x1p22f) /* a row of more than 4M pixels */
		return nearbyintf(v);
	return (v + b) - b;
}

/* CPython's math.radians and math.degrees. */
static double
radians(double d)
{
	return d * (M_PI / 180.0);
}

static double
degrees(double r)
{
	return r * (180.0 / M_PI);
}

/*
 * torchvision's _get_inverse_affine_matrix(center, angle, translate, 1.0,
 * shear), in Python's double arithmetic and order.
 */
static void
inverse_affine(const double center[2], double angle, const double tr[2],
    const double shear[2], double m[6])
{
	double rot = radians(angle), sx = radians(shear[0]),
	       sy = radians(shear[1]);
	double cx = center[0], cy = center[1], tx = tr[0], ty = tr[1];
	double a = cos(rot - sy) / cos(sy);
	double b = -cos(rot - sy) * tan(sx) / cos(sy) - sin(rot);
	double c = sin(rot - sy) / cos(sy);
	double d = -sin(rot - sy) * tan(sx) / cos(sy) + cos(rot);

	m[0] = d;
	m[1] = -b;
	m[2] = 0.0;
	m[3] = -c;
	m[4] = a;
	m[5] = 0.0;
	m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
	m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
	m[2] += cx;
	m[5] += cy;
}

/*
 * F_t.affine with NEAREST and no fill (zeros outside): the grid of
 * _gen_affine_grid (pixel centres relative to the image centre, theta
 * divided by half the size) in float32, then grid_sample's unnormalize
 * (align_corners=False) and round half to even.
 */
/* The source pixel of output x of a row (yo: its centred y), or -1. */
static inline int64_t
grid1(uint32_t x, uint32_t w, uint32_t h, float yo, const float r[6], float hw,
    float hh)
{
	float xo = (float)x - hw + 0.5f;
	/* bmm's x * r0 + y * r1 + 1 * r2 */
	float gx = (xo * r[0] + yo * r[1]) + r[2];
	float gy = (xo * r[3] + yo * r[4]) + r[5];
	/* unnormalize: (g + 1) * size / 2 - 0.5 */
	float ix = (gx + 1.0f) * hw - 0.5f;
	float iy = (gy + 1.0f) * hh - 0.5f;
	float sx, sy;

	/* nearbyint, where it can land inside (NaN: outside) */
	if (!(ix >= -1.0f && ix <= (float)w && iy >= -1.0f && iy <= (float)h))
		return -1;
	sx = rint_small(ix);
	sy = rint_small(iy);
	if (sx >= 0.0f && sx < (float)w && sy >= 0.0f && sy < (float)h)
		return (int64_t)sy * w + (int64_t)sx;
	return -1;
}

static int
affine_nearest(struct xf_image *img, const double m[6])
{
	uint32_t w = img->w, h = img->h;
	float hw = 0.5f * (float)w, hh = 0.5f * (float)h;
	float r[6] = {(float)m[0] / hw, (float)m[1] / hw, (float)m[2] / hw,
	    (float)m[3] / hh, (float)m[4] / hh, (float)m[5] / hh};
	bool simd = false;
	int64_t *src;
	uint8_t *out, *o;

	if ((out = xf_alloc(aug_npix(img) * 3)) == NULL)
		return -ENOMEM;
	if ((src = malloc((size_t)w * sizeof(*src))) == NULL) {
		xf_free(out);
		return -ENOMEM;
	}
#ifdef HAVE_AUG_AVX2
	simd = aug_use_avx2();
#endif
	o = out;
	for (uint32_t y = 0; y < h; y++) {
		float yo = (float)y - hh + 0.5f;
		uint32_t x = 0;

#ifdef HAVE_AUG_AVX2
		if (simd)
			x = aug_grid_avx2(src, w, h, yo, r, hw, hh);
#endif
		for (; x < w; x++)
			src[x] = grid1(x, w, h, yo, r, hw, hh);
		for (x = 0; x < w; x++, o += 3) {
			if (src[x] >= 0) {
				const uint8_t *s = img->px + src[x] * 3;

				o[0] = s[0];
				o[1] = s[1];
				o[2] = s[2];
			} else {
				o[0] = o[1] = o[2] = 0;
			}
		}
	}
	(void)simd;
	free(src);
	xf_free(img->px);
	img->px = out;
	return 0;
}

/* _apply_op's geometric ops: the inverse matrix of each. */
int
aug_geometric(struct xf_image *img, int op, double mag)
{
	double zero[2] = {0.0, 0.0}, tr[2] = {0.0, 0.0}, sh[2] = {0.0, 0.0};
	double corner[2], m[6];

	/* center=[0, 0] in pixels: (0 - w * 0.5, 0 - h * 0.5) from centre */
	corner[0] = 1.0 * (0 - img->w * 0.5);
	corner[1] = 1.0 * (0 - img->h * 0.5);
	switch (op) {
	case XF_AUG_SHEAR_X:
		sh[0] = degrees(atan(mag));
		inverse_affine(corner, 0.0, tr, sh, m);
		break;
	case XF_AUG_SHEAR_Y:
		sh[1] = degrees(atan(mag));
		inverse_affine(corner, 0.0, tr, sh, m);
		break;
	case XF_AUG_TRANSLATE_X:
		tr[0] = (double)(long long)mag; /* int(magnitude) */
		inverse_affine(zero, 0.0, tr, sh, m);
		break;
	case XF_AUG_TRANSLATE_Y:
		tr[1] = (double)(long long)mag;
		inverse_affine(zero, 0.0, tr, sh, m);
		break;
	default: /* F.rotate: the affine matrix of -angle */
		inverse_affine(zero, -mag, tr, sh, m);
		break;
	}
	return affine_nearest(img, m);
}
