/*
 * augment_color.c - the colour ops of the augmentations (augment.c):
 * brightness, contrast, saturation, hue, grayscale, posterize, solarize,
 * invert, autocontrast, equalize and sharpness.  Layer: transforms
 * (transforms/), under augment.c; calls augment_avx2.c's kernels where
 * aug_use_avx2.
 *
 * They are bit-exact: each step is the float32 operation that torch
 * performs, in its order (_blend: ratio * img1 + (1 - ratio) * img2,
 * clamped, truncated to uint8; rgb_to_grayscale's weights; adjust_hue
 * through _rgb2hsv/_hsv2rgb in float32).  The steps of one pixel (to_u8,
 * blend1, gray1, hue1) are in this file, beside the loops that call them.
 *
 * This file needs ISO C's default of no floating-point contraction
 * (-std=c11): a fused multiply-add would round differently from torch.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/augment_int.h"
#include "transforms/xf.h"

/* _blend's last steps: clamp(0, 255), then .to(uint8), which truncates. */
static inline uint8_t
to_u8(float v)
{
	if (!(v > 0.0f)) /* NaN too: only from factors no op draws */
		v = 0.0f;
	if (v > 255.0f)
		v = 255.0f;
	return (uint8_t)v;
}

/* ratio * img1 + (1.0 - ratio) * img2 in float32, ratio from Python. */
struct blend {
	float r, o;
};

static struct blend
blend_of(double ratio)
{
	struct blend b = {(float)ratio, (float)(1.0 - ratio)};

	return b;
}

static inline uint8_t
blend1(struct blend b, uint8_t x, float y)
{
	float a = b.r * (float)x, c = b.o * y;

	return to_u8(a + c);
}

/* rgb_to_grayscale: (0.2989 * r + 0.587 * g + 0.114 * b).to(uint8). */
static const float gw_r = (float)0.2989, gw_g = (float)0.587,
		   gw_b = (float)0.114;
#ifdef HAVE_AUG_AVX2
static const float gw[3] = {(float)0.2989, (float)0.587, (float)0.114};
#endif

static inline uint8_t
gray1(const uint8_t *p)
{
	float a = gw_r * (float)p[0], b = gw_g * (float)p[1],
	      c = gw_b * (float)p[2];

	return (uint8_t)((a + b) + c);
}

/* Each byte v of img to lut[v]. */
static void
apply_lut(struct xf_image *img, const uint8_t lut[256])
{
	uint8_t *p = img->px;
	size_t n = aug_npix(img) * 3;

	for (size_t k = 0; k < n; k++)
		p[k] = lut[p[k]];
}

/* A per-channel lut: lut[c][v] for channel c. */
static void
apply_lut3(struct xf_image *img, const uint8_t lut[3][256])
{
	uint8_t *p = img->px;
	size_t n = aug_npix(img);

	for (size_t k = 0; k < n; k++, p += 3) {
		p[0] = lut[0][p[0]];
		p[1] = lut[1][p[1]];
		p[2] = lut[2][p[2]];
	}
}

void
xf_adjust_brightness(struct xf_image *img, double f)
{
	struct blend b = blend_of(f);
	uint8_t lut[256];

	/* img2 is zeros: (1 - ratio) * 0 adds a zero */
	for (int v = 0; v < 256; v++)
		lut[v] = blend1(b, (uint8_t)v, 0.0f);
	apply_lut(img, lut);
}

void
xf_adjust_contrast(struct xf_image *img, double f)
{
	struct blend b = blend_of(f);
	const uint8_t *p = img->px;
	size_t n = aug_npix(img);
	uint64_t sum = 0;
	uint8_t lut[256];
	float mean;

	/*
	 * torch.mean of the grayscale image as float32: its sum is exact
	 * while below 2^24 (any image of up to 65793 pixels), then divided
	 * by the count.
	 */
	size_t k = 0;

#ifdef HAVE_AUG_AVX2
	if (aug_use_avx2()) {
		k = aug_gray_sum_avx2(p, n, gw, &sum);
		p += k * 3;
	}
#endif
	for (; k < n; k++, p += 3)
		sum += gray1(p);
	mean = (float)sum / (float)n;
	for (int v = 0; v < 256; v++)
		lut[v] = blend1(b, (uint8_t)v, mean);
	apply_lut(img, lut);
}

void
xf_adjust_saturation(struct xf_image *img, double f)
{
	struct blend b = blend_of(f);
	uint8_t *p = img->px;
	size_t n = aug_npix(img), k = 0;

#ifdef HAVE_AUG_AVX2
	if (aug_use_avx2()) {
		k = aug_saturation_avx2(p, n, b.r, b.o, gw);
		p += k * 3;
	}
#endif
	for (; k < n; k++, p += 3) {
		float g = (float)gray1(p);

		p[0] = blend1(b, p[0], g);
		p[1] = blend1(b, p[1], g);
		p[2] = blend1(b, p[2], g);
	}
}

void
xf_grayscale(struct xf_image *img)
{
	uint8_t *p = img->px;
	size_t n = aug_npix(img), k = 0;

#ifdef HAVE_AUG_AVX2
	if (aug_use_avx2()) {
		k = aug_grayscale_avx2(p, n, gw);
		p += k * 3;
	}
#endif
	for (; k < n; k++, p += 3)
		p[0] = p[1] = p[2] = gray1(p);
}

/* x / 255.0 for each byte, as torch's uint8 -> float32 / 255.0 */
struct hue_tab {
	float f[256];
};

static void
hue_tab_init(struct hue_tab *t)
{
	for (int v = 0; v < 256; v++)
		t->f[v] = (float)v / 255.0f;
}

/*
 * adjust_hue of one pixel: _rgb2hsv, h shifted, _hsv2rgb, float32.  Each
 * fmod and floor of torch's is here an exact equivalent for its range: h
 * / 6 + 1 is in [5/6, 11/6], h + hf in [-0.5, 1.5), h * 6 in [0, 6].
 */
static void
hue1(uint8_t *px, float hf, const struct hue_tab *tab)
{
	float r = tab->f[px[0]], g = tab->f[px[1]], b = tab->f[px[2]];
	float maxc = r > g ? r : g, minc = r < g ? r : g;
	float cr, s, crd, rc, gc, bc, h, f, p, q, t, v, o[3];
	bool eqc;
	int i;

	maxc = maxc > b ? maxc : b;
	minc = minc < b ? minc : b;
	eqc = maxc == minc;
	cr = maxc - minc;
	s = cr / (eqc ? 1.0f : maxc);
	crd = eqc ? 1.0f : cr;
	rc = (maxc - r) / crd;
	gc = (maxc - g) / crd;
	bc = (maxc - b) / crd;
	/* exactly one of hr, hg, hb is not multiplied by 0 */
	if (maxc == r)
		h = bc - gc;
	else if (maxc == g)
		h = (2.0f + rc) - bc;
	else
		h = (4.0f + gc) - rc;
	h = h / 6.0f + 1.0f; /* torch.fmod(h / 6.0 + 1.0, 1.0) */
	if (h >= 1.0f)
		h -= 1.0f;
	h = h + hf; /* (h + hue_factor) % 1.0: fmod, then + 1 below 0 */
	if (h >= 1.0f)
		h -= 1.0f;
	else if (h < 0.0f)
		h += 1.0f;
	/* _hsv2rgb */
	v = maxc;
	i = (int)(h * 6.0f); /* floor: h * 6.0 >= 0 */
	f = h * 6.0f - (float)i;
	p = v * (1.0f - s);
	q = v * (1.0f - s * f);
	t = v * (1.0f - s * (1.0f - f));
	/* torch.clamp(.., 0.0, 1.0) */
	p = p < 0.0f ? 0.0f : p > 1.0f ? 1.0f : p;
	q = q < 0.0f ? 0.0f : q > 1.0f ? 1.0f : q;
	t = t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t;
	switch (i % 6) {
	case 0:
		o[0] = v, o[1] = t, o[2] = p;
		break;
	case 1:
		o[0] = q, o[1] = v, o[2] = p;
		break;
	case 2:
		o[0] = p, o[1] = v, o[2] = t;
		break;
	case 3:
		o[0] = p, o[1] = q, o[2] = v;
		break;
	case 4:
		o[0] = t, o[1] = p, o[2] = v;
		break;
	default:
		o[0] = v, o[1] = p, o[2] = q;
		break;
	}
	/* (img * 255.0).to(uint8): truncation, the values are in 0..255 */
	for (int c = 0; c < 3; c++)
		px[c] = (uint8_t)(o[c] * 255.0f);
}

void
xf_adjust_hue(struct xf_image *img, double f)
{
	uint8_t *p = img->px;
	size_t n = aug_npix(img);
	float hf = (float)f;
	struct hue_tab tab;
	size_t k = 0;

	hue_tab_init(&tab);
#ifdef HAVE_AUG_AVX2
	if (aug_use_avx2()) {
		k = aug_hue_avx2(p, n, hf);
		p += k * 3;
	}
#endif
	for (; k < n; k++, p += 3)
		hue1(p, hf, &tab);
}

void
aug_posterize(struct xf_image *img, int bits)
{
	uint8_t lut[256];
	uint8_t mask = (uint8_t)(0xff << (8 - bits));

	for (int v = 0; v < 256; v++)
		lut[v] = (uint8_t)(v & mask);
	apply_lut(img, lut);
}

void
aug_solarize(struct xf_image *img, double threshold)
{
	uint8_t lut[256];

	for (int v = 0; v < 256; v++)
		lut[v] = v >= threshold ? (uint8_t)(255 - v) : (uint8_t)v;
	apply_lut(img, lut);
}

void
aug_invert(struct xf_image *img)
{
	uint8_t lut[256];

	for (int v = 0; v < 256; v++)
		lut[v] = (uint8_t)(255 - v);
	apply_lut(img, lut);
}

/* autocontrast: each channel from its min..max to 0..255, float32. */
void
aug_autocontrast(struct xf_image *img)
{
	const uint8_t *p = img->px;
	size_t n = aug_npix(img);
	uint8_t lo[3] = {255, 255, 255}, hi[3] = {0, 0, 0};
	uint8_t lut[3][256];
	size_t k = 0;

#ifdef HAVE_AUG_AVX2
	if (aug_use_avx2()) {
		k = aug_minmax_avx2(p, n, lo, hi);
		p += k * 3;
	}
#endif
	for (; k < n; k++, p += 3)
		for (int c = 0; c < 3; c++) {
			if (p[c] < lo[c])
				lo[c] = p[c];
			if (p[c] > hi[c])
				hi[c] = p[c];
		}
	for (int c = 0; c < 3; c++) {
		float mn = (float)lo[c], scale;

		if (hi[c] == lo[c]) { /* scale not finite */
			mn = 0.0f;
			scale = 1.0f;
		} else {
			scale = 255.0f / ((float)hi[c] - (float)lo[c]);
		}
		for (int v = 0; v < 256; v++)
			lut[c][v] = to_u8(((float)v - mn) * scale);
	}
	apply_lut3(img, lut);
}

/* equalize: _scale_channel's lookup table per channel, in integers. */
void
aug_equalize(struct xf_image *img)
{
	const uint8_t *p = img->px;
	size_t n = aug_npix(img);
	uint64_t hist[3][256];
	uint8_t lut[3][256];

	memset(hist, 0, sizeof(hist));
	for (size_t k = 0; k < n; k++, p += 3) {
		hist[0][p[0]]++;
		hist[1][p[1]]++;
		hist[2][p[2]]++;
	}
	for (int c = 0; c < 3; c++) {
		uint64_t sum = 0, last = 0, step, cum = 0;

		/* the nonzero bins but the last one */
		for (int v = 0; v < 256; v++)
			if (hist[c][v] != 0) {
				sum += last;
				last = hist[c][v];
			}
		step = sum / 255;
		for (int v = 0; v < 256; v++) {
			uint64_t l;

			if (step == 0) {
				lut[c][v] = (uint8_t)v;
				continue;
			}
			/* lut shifted by one: entry v from cumsum[v - 1] */
			l = v == 0 ? 0 : (cum + step / 2) / step;
			lut[c][v] = (uint8_t)(l > 255 ? 255 : l);
			cum += hist[c][v];
		}
	}
	apply_lut3(img, lut);
}

/*
 * adjust_sharpness: the blend of img with its 3x3 smoothing (1 1 1 / 1 5 1
 * / 1 1 1, over 13) on the interior, the border rows and columns kept;
 * images of 2 pixels or less in a side unchanged.  torch rounds the
 * float32 convolution; (2S + 13) / 26 is that rounding of S / 13, which
 * never ties.
 */
int
aug_sharpness(struct xf_image *img, double f)
{
	struct blend b = blend_of(f);
	uint32_t w = img->w, h = img->h;
	size_t row = (size_t)w * 3;
	uint8_t *buf, *prev, *cur;
	bool simd = false;

	if (w <= 2 || h <= 2)
		return 0;
#ifdef HAVE_AUG_AVX2
	simd = aug_use_avx2();
#endif
	/* the original rows above and at y, as the rows are overwritten */
	if ((buf = malloc(2 * row)) == NULL)
		return -ENOMEM;
	prev = buf;
	cur = buf + row;
	memcpy(prev, img->px, row);
	memcpy(cur, img->px + row, row);
	for (uint32_t y = 1; y + 1 < h; y++) {
		const uint8_t *up = prev, *mid = cur;
		const uint8_t *dn = img->px + (size_t)(y + 1) * row;
		uint8_t *o = img->px + (size_t)y * row, *t;
		size_t x = 3;

#ifdef HAVE_AUG_AVX2
		if (simd)
			x = aug_sharp_row_avx2(up, mid, dn, o, row, b.r, b.o);
#endif
		for (; x + 3 < row; x++) {
			unsigned s = up[x - 3] + up[x] + up[x + 3] +
				     mid[x - 3] + 5u * mid[x] + mid[x + 3] +
				     dn[x - 3] + dn[x] + dn[x + 3];
			unsigned blur = (2 * s + 13) / 26;

			o[x] = blend1(b, mid[x], (float)blur);
		}
		/* the border columns: blended with themselves */
		for (size_t c = 0; c < 3; c++) {
			o[c] = blend1(b, mid[c], (float)mid[c]);
			o[row - 3 + c] = blend1(
			    b, mid[row - 3 + c], (float)mid[row - 3 + c]);
		}
		/* the next row's "above" is this row's original */
		t = prev;
		prev = cur;
		cur = t;
		memcpy(cur, dn, row);
	}
	(void)simd;
	free(buf);
	/* the border rows */
	for (size_t x = 0; x < row; x++) {
		uint8_t *a = img->px + x,
			*z = img->px + (size_t)(h - 1) * row + x;

		*a = blend1(b, *a, (float)*a);
		*z = blend1(b, *z, (float)*z);
	}
	return 0;
}
