/*
 * augment.c - the per-sample augmentations of issue 28: TrivialAugmentWide,
 * RandAugment, AutoAugment (ImageNet policy), ColorJitter and
 * RandomGrayscale, as torchvision 0.14's transforms.functional computes
 * them on uint8 tensors (the tensor path, not PIL's).
 *
 * The colour ops are bit-exact: each step is the float32 operation that
 * torch performs, in its order (_blend: ratio * img1 + (1 - ratio) * img2,
 * clamped, truncated to uint8; rgb_to_grayscale's weights; adjust_hue
 * through _rgb2hsv/_hsv2rgb in float32).  The magnitudes are torch's
 * float32 linspace values, which its AVX2 kernel computes in a way of its
 * own (torch_linspace).  The geometric ops (rotate, shear, translate) use
 * NEAREST and fill 0 as the auto-augment transforms do; their source
 * coordinates are torchvision's affine grid in float32, so they agree
 * with torch except where a coordinate falls within rounding of a pixel
 * boundary.
 *
 * This file needs ISO C's default of no floating-point contraction
 * (-std=c11): a fused multiply-add would round differently from torch.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/augment_int.h"
#include "transforms/rng.h"
#include "transforms/xf.h"

#define NBINS_WIDE 31 /* TrivialAugmentWide's and RandAugment's default */
#define NBINS_AUTO 10 /* AutoAugment's */

static const char *const aug_names[XF_AUG_COUNT] = {"Identity", "ShearX",
    "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color",
    "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast",
    "Equalize", "Invert"};

const char *
xf_aug_name(int op)
{
	return op >= 0 && op < XF_AUG_COUNT ? aug_names[op] : "?";
}

/* ---- magnitudes ------------------------------------------------------ */

/*
 * torch.linspace(start, end, steps)[idx] in float32 as torch 1.13's CPU
 * kernel computes it where it runs its AVX2 code: the scalar formula
 * (start + step * idx before halfway, end - step * (steps - idx - 1)
 * after, compiled to a fused multiply-add), except in the leading
 * 16-element chunks, which are filled 8 lanes at a time from the value at
 * the lane group's start plus lane * step (a multiply, then an add).
 */
static float
torch_linspace(double start, double end, int steps, int idx)
{
	float s = (float)start, e = (float)end, st, base;
	int half = steps / 2, b;

	if (steps == 1)
		return s;
	st = (e - s) / (float)(steps - 1);
	b = idx < steps / 16 * 16 ? idx - idx % 8 : idx;
	base = b < half ? fmaf(st, (float)b, s)
			: fmaf(-st, (float)(steps - b - 1), e);
	return b == idx ? base : base + (float)(idx - b) * st;
}

/* The three spaces: TrivialAugmentWide's, RandAugment's, AutoAugment's. */
enum space { SP_WIDE, SP_RAND, SP_AUTO };

/* Whether op has magnitudes (a tensor of bins) and whether it is signed. */
static bool
has_bins(int op)
{
	return op != XF_AUG_IDENTITY && op != XF_AUG_AUTOCONTRAST &&
	       op != XF_AUG_EQUALIZE && op != XF_AUG_INVERT;
}

static bool
is_signed(int op)
{
	return op >= XF_AUG_SHEAR_X && op <= XF_AUG_SHARPNESS;
}

/* float(magnitudes[bin]) of op in space sp for an image of w x h. */
static double
magnitude(enum space sp, int op, int bin, uint32_t w, uint32_t h)
{
	int n = sp == SP_AUTO ? NBINS_AUTO : NBINS_WIDE;
	bool wide = sp == SP_WIDE;

	switch (op) {
	case XF_AUG_SHEAR_X:
	case XF_AUG_SHEAR_Y:
		return torch_linspace(0.0, wide ? 0.99 : 0.3, n, bin);
	case XF_AUG_TRANSLATE_X:
		return torch_linspace(
		    0.0, wide ? 32.0 : 150.0 / 331.0 * w, n, bin);
	case XF_AUG_TRANSLATE_Y:
		return torch_linspace(
		    0.0, wide ? 32.0 : 150.0 / 331.0 * h, n, bin);
	case XF_AUG_ROTATE:
		return torch_linspace(0.0, wide ? 135.0 : 30.0, n, bin);
	case XF_AUG_BRIGHTNESS:
	case XF_AUG_COLOR:
	case XF_AUG_CONTRAST:
	case XF_AUG_SHARPNESS:
		return torch_linspace(0.0, wide ? 0.99 : 0.9, n, bin);
	case XF_AUG_POSTERIZE: {
		/* 8 - (arange(n) / ((n - 1) / d)).round().int() */
		float q = (float)bin / (float)((n - 1) / (wide ? 6.0 : 4.0));

		return 8 - (int)nearbyintf(q);
	}
	case XF_AUG_SOLARIZE:
		return torch_linspace(255.0, 0.0, n, bin);
	default:
		return 0.0;
	}
}

/*
 * AutoAugmentPolicy.IMAGENET: (op, probability, bin or -1) pairs, the
 * probabilities as the doubles Python has (0.4, not 0.4f).
 */
/* clang-format off */
static const struct {
	signed char op, bin;
	double p;
} imagenet[25][2] = {
#define P(o, p, b) {XF_AUG_##o, b, p}
    {P(POSTERIZE, 0.4, 8), P(ROTATE, 0.6, 9)},
    {P(SOLARIZE, 0.6, 5), P(AUTOCONTRAST, 0.6, -1)},
    {P(EQUALIZE, 0.8, -1), P(EQUALIZE, 0.6, -1)},
    {P(POSTERIZE, 0.6, 7), P(POSTERIZE, 0.6, 6)},
    {P(EQUALIZE, 0.4, -1), P(SOLARIZE, 0.2, 4)},
    {P(EQUALIZE, 0.4, -1), P(ROTATE, 0.8, 8)},
    {P(SOLARIZE, 0.6, 3), P(EQUALIZE, 0.6, -1)},
    {P(POSTERIZE, 0.8, 5), P(EQUALIZE, 1.0, -1)},
    {P(ROTATE, 0.2, 3), P(SOLARIZE, 0.6, 8)},
    {P(EQUALIZE, 0.6, -1), P(POSTERIZE, 0.4, 6)},
    {P(ROTATE, 0.8, 8), P(COLOR, 0.4, 0)},
    {P(ROTATE, 0.4, 9), P(EQUALIZE, 0.6, -1)},
    {P(EQUALIZE, 0.0, -1), P(EQUALIZE, 0.8, -1)},
    {P(INVERT, 0.6, -1), P(EQUALIZE, 1.0, -1)},
    {P(COLOR, 0.6, 4), P(CONTRAST, 1.0, 8)},
    {P(ROTATE, 0.8, 8), P(COLOR, 1.0, 2)},
    {P(COLOR, 0.8, 8), P(SOLARIZE, 0.8, 7)},
    {P(SHARPNESS, 0.4, 7), P(INVERT, 0.6, -1)},
    {P(SHEAR_X, 0.6, 5), P(EQUALIZE, 1.0, -1)},
    {P(COLOR, 0.4, 0), P(EQUALIZE, 0.6, -1)},
    {P(EQUALIZE, 0.4, -1), P(SOLARIZE, 0.2, 4)},
    {P(SOLARIZE, 0.6, 5), P(AUTOCONTRAST, 0.6, -1)},
    {P(INVERT, 0.6, -1), P(EQUALIZE, 1.0, -1)},
    {P(COLOR, 0.6, 4), P(CONTRAST, 1.0, 8)},
    {P(EQUALIZE, 0.8, -1), P(EQUALIZE, 0.6, -1)},
#undef P
};
/* clang-format on */

/* ---- drawing ---------------------------------------------------------- */

/* torch.rand's float32: 24 random bits times 2^-24. */
static float
uniform_f32(uint64_t key, uint64_t counter)
{
	return (float)(rng_u64(key, counter) >> 40) * 0x1.0p-24f;
}

/* A step of op with bin (or -1) in space sp; neg as drawn (or -1). */
static void
set_step(struct xf_aug_step *s, enum space sp, int op, int bin, int neg,
    uint32_t w, uint32_t h)
{
	s->op = op;
	s->bin = has_bins(op) ? bin : -1;
	s->neg = is_signed(op) ? neg : -1;
	s->on = true;
	s->mag = s->bin >= 0 ? magnitude(sp, op, bin, w, h) : 0.0;
	if (s->neg == 1)
		s->mag = -s->mag;
}

int
xf_aug_params(const struct xf_pipeline *pl, size_t i, uint64_t rngkey,
    uint32_t w, uint32_t h, struct xf_aug_params *out)
{
	const struct xf_op *op = &pl->ops[i];
	uint64_t c = (uint64_t)i << 32;

	memset(out, 0, sizeof(*out));
	out->kind = op->kind;
	switch (op->kind) {
	case XF_OP_TRIVIAL_AUGMENT: {
		/* op, then its bin where it has bins, then its sign */
		int o = (int)rng_below(rngkey, c, 14);
		int bin = (int)rng_below(rngkey, c + 1, NBINS_WIDE);

		set_step(&out->step[0], SP_WIDE, o, bin,
		    (int)rng_below(rngkey, c + 2, 2), w, h);
		out->nsteps = 1;
		return 0;
	}
	case XF_OP_RAND_AUGMENT:
		for (uint32_t k = 0; k < op->n_ops; k++)
			set_step(&out->step[k], SP_RAND,
			    (int)rng_below(rngkey, c + 2 * k, 14),
			    (int)op->magnitude,
			    (int)rng_below(rngkey, c + 2 * k + 1, 2), w, h);
		out->nsteps = op->n_ops;
		return 0;
	case XF_OP_AUTO_AUGMENT: {
		/* policy_id, probs = rand(2), signs = randint(2, (2,)) */
		uint32_t id = (uint32_t)rng_below(rngkey, c, 25);

		out->policy_id = id;
		for (int k = 0; k < 2; k++) {
			/* signs[k] == 0 negates */
			int sign = (int)rng_below(rngkey, c + 3 + k, 2);

			out->probs[k] = uniform_f32(rngkey, c + 1 + k);
			set_step(&out->step[k], SP_AUTO, imagenet[id][k].op,
			    imagenet[id][k].bin, sign == 0, w, h);
			out->step[k].on = out->probs[k] <= imagenet[id][k].p;
		}
		out->nsteps = 2;
		return 0;
	}
	case XF_OP_COLOR_JITTER: {
		uint8_t *o = out->order;

		/* randperm(4): a uniform permutation (Fisher-Yates) */
		for (int k = 0; k < 4; k++)
			o[k] = (uint8_t)k;
		for (int k = 3; k > 0; k--) {
			int j = (int)rng_below(
			    rngkey, c + (uint64_t)(3 - k), (uint64_t)k + 1);
			uint8_t t = o[k];

			o[k] = o[j];
			o[j] = t;
		}
		/* uniform_(lo, hi) in float32 */
		for (int k = 0; k < 4; k++) {
			const double *r = op->jitter[k];

			out->on[k] = op->jitter_on[k];
			if (out->on[k])
				out->factor[k] =
				    (float)(r[0] +
					    (r[1] - r[0]) *
						rng_uniform(rngkey, c + 4 + k));
		}
		return 0;
	}
	case XF_OP_GRAYSCALE:
		out->apply = rng_uniform(rngkey, c) < op->p;
		return 0;
	default:
		return -EINVAL;
	}
}

/* ---- the colour ops ---------------------------------------------------- */

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

static size_t
npix(const struct xf_image *img)
{
	return (size_t)img->w * img->h;
}

/* Each byte v of img to lut[v]. */
static void
apply_lut(struct xf_image *img, const uint8_t lut[256])
{
	uint8_t *p = img->px;
	size_t n = npix(img) * 3;

	for (size_t k = 0; k < n; k++)
		p[k] = lut[p[k]];
}

/* A per-channel lut: lut[c][v] for channel c. */
static void
apply_lut3(struct xf_image *img, const uint8_t lut[3][256])
{
	uint8_t *p = img->px;
	size_t n = npix(img);

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
	size_t n = npix(img);
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
	size_t n = npix(img), k = 0;

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
	size_t n = npix(img), k = 0;

#ifdef HAVE_AUG_AVX2
	if (aug_use_avx2()) {
		k = aug_grayscale_avx2(p, n, gw);
		p += k * 3;
	}
#endif
	for (; k < n; k++, p += 3)
		p[0] = p[1] = p[2] = gray1(p);
}

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
	size_t n = npix(img);
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

static void
posterize(struct xf_image *img, int bits)
{
	uint8_t lut[256];
	uint8_t mask = (uint8_t)(0xff << (8 - bits));

	for (int v = 0; v < 256; v++)
		lut[v] = (uint8_t)(v & mask);
	apply_lut(img, lut);
}

static void
solarize(struct xf_image *img, double threshold)
{
	uint8_t lut[256];

	for (int v = 0; v < 256; v++)
		lut[v] = v >= threshold ? (uint8_t)(255 - v) : (uint8_t)v;
	apply_lut(img, lut);
}

static void
invert(struct xf_image *img)
{
	uint8_t lut[256];

	for (int v = 0; v < 256; v++)
		lut[v] = (uint8_t)(255 - v);
	apply_lut(img, lut);
}

/* autocontrast: each channel from its min..max to 0..255, float32. */
static void
autocontrast(struct xf_image *img)
{
	const uint8_t *p = img->px;
	size_t n = npix(img);
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
static void
equalize(struct xf_image *img)
{
	const uint8_t *p = img->px;
	size_t n = npix(img);
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
static int
sharpness(struct xf_image *img, double f)
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

/* ---- the geometric ops ------------------------------------------------- */

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

	if ((out = xf_alloc(npix(img) * 3)) == NULL)
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
static int
geometric(struct xf_image *img, int op, double mag)
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

int
xf_aug_op(struct xf_image *img, int op, double mag)
{
	/* torchvision refuses these too (posterize's bits in 0..8) */
	if (!isfinite(mag) || fabs(mag) > 1e9 ||
	    (op == XF_AUG_POSTERIZE && (mag < 0 || mag >= 9)))
		return -EINVAL;
	switch (op) {
	case XF_AUG_IDENTITY:
		return 0;
	case XF_AUG_SHEAR_X:
	case XF_AUG_SHEAR_Y:
	case XF_AUG_TRANSLATE_X:
	case XF_AUG_TRANSLATE_Y:
	case XF_AUG_ROTATE:
		return geometric(img, op, mag);
	case XF_AUG_BRIGHTNESS:
		xf_adjust_brightness(img, 1.0 + mag);
		return 0;
	case XF_AUG_COLOR:
		xf_adjust_saturation(img, 1.0 + mag);
		return 0;
	case XF_AUG_CONTRAST:
		xf_adjust_contrast(img, 1.0 + mag);
		return 0;
	case XF_AUG_SHARPNESS:
		return sharpness(img, 1.0 + mag);
	case XF_AUG_POSTERIZE:
		posterize(img, (int)mag);
		return 0;
	case XF_AUG_SOLARIZE:
		solarize(img, mag);
		return 0;
	case XF_AUG_AUTOCONTRAST:
		autocontrast(img);
		return 0;
	case XF_AUG_EQUALIZE:
		equalize(img);
		return 0;
	case XF_AUG_INVERT:
		invert(img);
		return 0;
	default:
		return -EINVAL;
	}
}

int
xf_aug_apply(const struct xf_aug_params *p, struct xf_image *img)
{
	int r;

	switch (p->kind) {
	case XF_OP_TRIVIAL_AUGMENT:
	case XF_OP_RAND_AUGMENT:
	case XF_OP_AUTO_AUGMENT:
		for (uint32_t k = 0; k < p->nsteps; k++)
			if (p->step[k].on && (r = xf_aug_op(img, p->step[k].op,
						  p->step[k].mag)) != 0)
				return r;
		return 0;
	case XF_OP_COLOR_JITTER:
		for (int k = 0; k < 4; k++) {
			int fn = p->order[k];

			if (!p->on[fn])
				continue;
			if (fn == 0)
				xf_adjust_brightness(img, p->factor[0]);
			else if (fn == 1)
				xf_adjust_contrast(img, p->factor[1]);
			else if (fn == 2)
				xf_adjust_saturation(img, p->factor[2]);
			else
				xf_adjust_hue(img, p->factor[3]);
		}
		return 0;
	case XF_OP_GRAYSCALE:
		if (p->apply)
			xf_grayscale(img);
		return 0;
	default:
		return -EINVAL;
	}
}
