/*
 * augment.c - the per-sample augmentations of issue 28: TrivialAugmentWide,
 * RandAugment, AutoAugment (ImageNet policy), ColorJitter and
 * RandomGrayscale, as torchvision 0.14's transforms.functional computes
 * them on uint8 tensors (the tensor path, not PIL's).  Layer: transforms
 * (transforms/).  This file draws a sample's ops and magnitudes
 * (xf_aug_params) and applies them (xf_aug_apply, xf_aug_op); the ops
 * themselves are augment_color.c's and augment_geom.c's, their AVX2
 * kernels augment_avx2.c's.
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
		return aug_geometric(img, op, mag);
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
		return aug_sharpness(img, 1.0 + mag);
	case XF_AUG_POSTERIZE:
		aug_posterize(img, (int)mag);
		return 0;
	case XF_AUG_SOLARIZE:
		aug_solarize(img, mag);
		return 0;
	case XF_AUG_AUTOCONTRAST:
		aug_autocontrast(img);
		return 0;
	case XF_AUG_EQUALIZE:
		aug_equalize(img);
		return 0;
	case XF_AUG_INVERT:
		aug_invert(img);
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
