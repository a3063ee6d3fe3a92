/*
 * ops.c - crop, shrink, random resized crop parameters (in the frame
 * shrink keeps), and running a pipeline's ops: the deterministic prefix
 * (xf_run_prefix) and the rest (xf_run_suffix).  Layer: transforms/
 * (pixels); the flip is flip.c's.  A JPEG's size before decoding (for
 * the DCT scale and the partial decode) is the JPEG probe's
 * (xf_jpeg_dims, jpeg_probe.c).
 *
 * Each op does what torchvision 0.14 does on a PIL image, so that feedfs
 * and a torchvision DataLoader give the same tensors for the same boxes.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/rng.h"
#include "transforms/xf.h"

int
xf_crop(const struct xf_image *in, int32_t x, int32_t y, uint32_t w, uint32_t h,
    struct xf_image *out)
{
	int64_t x0 = x, x1 = (int64_t)x + w, ix0, ix1;
	uint8_t *px;

	if (w == 0 || h == 0)
		return -EINVAL;
	if ((px = xf_alloc((size_t)w * h * 3)) == NULL)
		return -ENOMEM;
	/* The columns of in that fall inside the box, in box coordinates. */
	ix0 = x0 < 0 ? 0 : x0;
	ix1 = x1 > (int64_t)in->w ? (int64_t)in->w : x1;
	for (uint32_t r = 0; r < h; r++) {
		int64_t sy = (int64_t)y + r;
		uint8_t *d = px + (size_t)r * w * 3;

		if (sy < 0 || sy >= (int64_t)in->h || ix0 >= ix1) {
			memset(d, 0, (size_t)w * 3);
			continue;
		}
		memset(d, 0, (size_t)(ix0 - x0) * 3);
		memcpy(d + (ix0 - x0) * 3,
		    in->px + ((size_t)sy * in->w + (size_t)ix0) * 3,
		    (size_t)(ix1 - ix0) * 3);
		memset(d + (ix1 - x0) * 3, 0, (size_t)(x1 - ix1) * 3);
	}
	out->w = w;
	out->h = h;
	out->px = px;
	out->borrowed = false;
	return 0;
}

/* Python's int(round(v)): half to even, as nearbyint in FE_TONEAREST. */
static int64_t
py_round(double v)
{
	return (int64_t)nearbyint(v);
}

/* Python's a // b for b > 0. */
static int64_t
floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;

	return (a % b != 0 && a < 0) ? q - 1 : q;
}

/*
 * Draw k of an attempt: counter + 4 * attempt + k (scale, aspect, top,
 * left), so every draw has a counter of its own.
 */
void
xf_rrc_params(uint32_t w, uint32_t h, const double scale[2],
    const double ratio[2], uint64_t rngkey, uint64_t counter, int32_t *x,
    int32_t *y, uint32_t *cw, uint32_t *ch)
{
	double area = (double)h * w;
	double lr0 = log(ratio[0]), lr1 = log(ratio[1]);
	double in_ratio;
	int64_t tw, th;

	for (uint64_t a = 0; a < 10; a++) {
		uint64_t c = counter + 4 * a;
		double u = rng_uniform(rngkey, c);
		double target = area * (scale[0] + (scale[1] - scale[0]) * u);
		double aspect;

		u = rng_uniform(rngkey, c + 1);
		aspect = exp(lr0 + (lr1 - lr0) * u);
		tw = py_round(sqrt(target * aspect));
		th = py_round(sqrt(target / aspect));
		if (tw > 0 && tw <= (int64_t)w && th > 0 && th <= (int64_t)h) {
			*y = (int32_t)rng_below(
			    rngkey, c + 2, (uint64_t)(h - th + 1));
			*x = (int32_t)rng_below(
			    rngkey, c + 3, (uint64_t)(w - tw + 1));
			*cw = (uint32_t)tw;
			*ch = (uint32_t)th;
			return;
		}
	}
	/* Fallback: the central crop of the nearest allowed ratio. */
	in_ratio = (double)w / (double)h;
	if (in_ratio < ratio[0]) {
		tw = w;
		th = py_round(tw / ratio[0]);
	} else if (in_ratio > ratio[1]) {
		th = h;
		tw = py_round(th * ratio[1]);
	} else {
		tw = w;
		th = h;
	}
	/* Keep the box inside the image and non-empty. */
	if (th < 1)
		th = 1;
	if (tw < 1)
		tw = 1;
	*y = (int32_t)floor_div((int64_t)h - th, 2);
	*x = (int32_t)floor_div((int64_t)w - tw, 2);
	*cw = (uint32_t)tw;
	*ch = (uint32_t)th;
}

bool
xf_rrc_box(const struct xf_pipeline *pl, size_t i, const struct xf_image *img,
    uint64_t rngkey, int32_t *x, int32_t *y, uint32_t *cw, uint32_t *ch)
{
	const struct xf_op *op = &pl->ops[i];
	/* A frame smaller than the image is none: shrink never enlarges. */
	bool own = img->src_w <= img->w || img->src_h <= img->h;

	xf_rrc_params(own ? img->w : img->src_w, own ? img->h : img->src_h,
	    op->scale, op->ratio, rngkey, (uint64_t)i << 32, x, y, cw, ch);
	return own;
}

/* Pillow's resize maps a pixel of the shrunk image onto w / src_w of the
 * source's: the source's x is x * w / src_w in img. */
void
xf_rrc_fbox(const struct xf_image *img, int32_t x, int32_t y, uint32_t cw,
    uint32_t ch, float box[4])
{
	double sx = (double)img->w / img->src_w,
	       sy = (double)img->h / img->src_h;

	box[0] = (float)(x * sx);
	box[1] = (float)(y * sy);
	box[2] = (float)(((double)x + cw) * sx);
	box[3] = (float)(((double)y + ch) * sy);
	if (box[2] > (float)img->w)
		box[2] = (float)img->w;
	if (box[3] > (float)img->h)
		box[3] = (float)img->h;
}

/* int(s * a / b), saturated at UINT32_MAX (which no bound allows). */
static uint32_t
long_side(uint32_t s, uint32_t a, uint32_t b)
{
	double v = (double)s * a / b;

	return v >= (double)UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* torchvision's resize(S): the short side to S, int() of the long one. */
static void
resize_dims(
    uint32_t w, uint32_t h, const struct xf_op *op, uint32_t *tw, uint32_t *th)
{
	if (op->h != 0) {
		*tw = op->w;
		*th = op->h;
	} else if (w <= h) {
		*tw = op->w;
		*th = long_side(op->w, h, w);
	} else {
		*th = op->w;
		*tw = long_side(op->w, w, h);
	}
	/* A very thin image could round its long side to 0. */
	if (*tw == 0)
		*tw = 1;
	if (*th == 0)
		*th = 1;
}

/* torchvision's center_crop: zero padding split (d // 2, (d + 1) // 2). */
static void
center_offsets(
    uint32_t w, uint32_t h, uint32_t cw, uint32_t ch, int32_t *x, int32_t *y)
{
	*x = cw > w ? -(int32_t)((cw - w) / 2)
		    : (int32_t)py_round(((double)w - cw) / 2.0);
	*y = ch > h ? -(int32_t)((ch - h) / 2)
		    : (int32_t)py_round(((double)h - ch) / 2.0);
}

/* The op as written in a pipeline, for messages. */
static void
op_label(const struct xf_op *op, char *buf, size_t len)
{
	switch (op->kind) {
	case XF_OP_RESIZE:
		if (op->h == 0)
			snprintf(buf, len, "resize(%u)", (unsigned)op->w);
		else
			snprintf(buf, len, "resize(%u,%u)", (unsigned)op->w,
			    (unsigned)op->h);
		break;
	case XF_OP_CENTER_CROP:
		snprintf(buf, len, "center_crop(%u,%u)", (unsigned)op->w,
		    (unsigned)op->h);
		break;
	case XF_OP_RRC:
		snprintf(buf, len, "random_resized_crop(%u)", (unsigned)op->w);
		break;
	default:
		snprintf(buf, len, "op");
		break;
	}
}

/*
 * The bound of issue 12 item 5: an image of w x h that op is about to
 * allocate (what: "output", or "intermediate" for the horizontal pass of
 * a resize, which is w x the rows it reads) must not exceed max_pixels (0:
 * no bound), whatever the source's size: a 1x65500 JPEG passes the
 * decode's bound, and its resize(256) would be 256x16768000 (12.9 GB).
 * 0, or -EFBIG with a message naming the op and the size.
 */
static int
bound(const struct xf_pipeline *pl, const struct xf_op *op, const char *what,
    uint64_t w, uint64_t h, char *err, size_t errlen)
{
	char name[64];

	if (pl->max_pixels == 0 || w * h <= pl->max_pixels)
		return 0;
	op_label(op, name, sizeof(name));
	snprintf(err, errlen, "%s: %s %llux%llu exceeds max_pixels (%llu)",
	    name, what, (unsigned long long)w, (unsigned long long)h,
	    (unsigned long long)pl->max_pixels);
	return -EFBIG;
}

/* img takes n's pixels, a new image without a frame; its old ones are
 * freed. */
static int
replace(struct xf_image *img, struct xf_image *n)
{
	if (!img->borrowed)
		xf_free(img->px);
	*img = (struct xf_image){.w = n->w, .h = n->h, .px = n->px};
	return 0;
}

/*
 * Make a borrowed img its own (xf_image): a copy for an op that works in
 * place.  0, or -ENOMEM with img unchanged.
 */
static int
own(struct xf_image *img)
{
	size_t n = (size_t)img->w * img->h * 3;
	uint8_t *p;

	if (!img->borrowed)
		return 0;
	if ((p = xf_alloc(n)) == NULL)
		return -ENOMEM;
	memcpy(p, img->px, n);
	img->px = p;
	img->borrowed = false;
	return 0;
}

/*
 * Op i of pl on img (replaced in place); tw, th: resize target if set.
 * Every size is bounded (bound) before anything is allocated.  On error
 * err holds a message.
 */
static int
apply_op(const struct xf_pipeline *pl, size_t i, struct xf_image *img,
    uint64_t rngkey, uint32_t tw, uint32_t th, char *err, size_t errlen)
{
	const struct xf_op *op = &pl->ops[i];
	struct xf_image n;
	int32_t x, y;
	uint32_t cw, ch;
	int r;

	if (!xf_op_applies(pl, i, rngkey)) /* p= */
		return 0;
	switch (op->kind) {
	case XF_OP_RESIZE:
		if (tw == 0)
			resize_dims(img->w, img->h, op, &tw, &th);
		if (tw == img->w && th == img->h)
			return 0;
		if ((r = bound(pl, op, "output", tw, th, err, errlen)) != 0 ||
		    (tw != img->w && (r = bound(pl, op, "intermediate", tw,
					  img->h, err, errlen)) != 0))
			return r;
		if ((r = xf_resize(img, tw, th, &n)) != 0)
			break;
		return replace(img, &n);
	case XF_OP_CENTER_CROP:
		if (op->w == img->w && op->h == img->h)
			return 0;
		if ((r = bound(pl, op, "output", op->w, op->h, err, errlen)) !=
		    0)
			return r;
		center_offsets(img->w, img->h, op->w, op->h, &x, &y);
		if ((r = xf_crop(img, x, y, op->w, op->h, &n)) != 0)
			break;
		return replace(img, &n);
	case XF_OP_SHRINK: /* resize(S) that never enlarges; sets the frame */
		cw = img->w;
		ch = img->h;
		if (tw == 0 && (cw < ch ? cw : ch) > op->w)
			resize_dims(cw, ch, op, &tw, &th);
		if (tw != 0 && (tw != cw || th != ch)) {
			/* smaller than img: within max_pixels */
			r = xf_resize_filter(img, tw, th, XF_LANCZOS, &n);
			if (r != 0)
				break;
			replace(img, &n);
		}
		img->src_w = cw;
		img->src_h = ch;
		return 0;
	case XF_OP_RRC: {
		/* a shrunk image: the source's box, fractional in img */
		bool own = xf_rrc_box(pl, i, img, rngkey, &x, &y, &cw, &ch);
		float box[4];

		if (!own)
			xf_rrc_fbox(img, x, y, cw, ch, box);
		if ((r = bound(pl, op, "output", op->w, op->h, err, errlen)) !=
			0 ||
		    ((op->w != cw || !own) &&
			(r = bound(pl, op, "intermediate", op->w,
			     own ? ch : img->h, err, errlen)) != 0))
			return r;
		/* The box is inside: crop + resize without the copy. */
		r = own ? xf_resize_box(img, (uint32_t)x, (uint32_t)y, cw, ch,
			      op->w, op->h, &n)
			: xf_resize_fbox(img, box, op->w, op->h, &n);
		if (r != 0)
			break;
		return replace(img, &n);
	}
	case XF_OP_FLIP:
		if (rng_uniform(rngkey, (uint64_t)i << 32) < op->p) {
			if ((r = own(img)) != 0)
				break;
			xf_flip(img);
		}
		return 0;
	case XF_OP_GAUSSIAN_BLUR:
		if ((r = own(img)) != 0)
			break;
		r = xf_gaussian_blur(img, op->ksize,
		    xf_blur_sigma(op, rngkey, (uint64_t)i << 32));
		if (r != 0)
			break;
		return 0;
	case XF_OP_SOLARIZE:
		if ((r = own(img)) != 0 ||
		    (r = xf_aug_op(img, XF_AUG_SOLARIZE, op->threshold)) != 0)
			break;
		return 0;
	case XF_OP_TRIVIAL_AUGMENT:
	case XF_OP_RAND_AUGMENT:
	case XF_OP_AUTO_AUGMENT:
	case XF_OP_COLOR_JITTER:
	case XF_OP_GRAYSCALE: {
		struct xf_aug_params ap;

		/* draws from counters (i << 32) + k, as the crop and flip */
		if ((r = xf_aug_params(pl, i, rngkey, img->w, img->h, &ap)) !=
			0 ||
		    (r = own(img)) != 0 || (r = xf_aug_apply(&ap, img)) != 0)
			break;
		return 0;
	}
	default: /* decode ran first; normalize acts in xf_convert and
		  * random_erasing after it, in run_from */
		return 0;
	}
	snprintf(err, errlen, "%s", strerror(-r));
	return r;
}

bool
xf_op_applies(const struct xf_pipeline *pl, size_t i, uint64_t rngkey)
{
	const struct xf_op *op = &pl->ops[i];

	return !op->has_p ||
	       rng_uniform(rngkey, ((uint64_t)i << 32) + XF_APPLY_DRAW) <
		   op->p_apply;
}

int
xf_run_op(const struct xf_pipeline *pl, size_t i, struct xf_image *img,
    uint64_t rngkey, char *err, size_t errlen)
{
	return apply_op(pl, i, img, rngkey, 0, 0, err, errlen);
}

bool
xf_has_output_ops(const struct xf_pipeline *pl)
{
	for (size_t i = 0; i < pl->nops; i++)
		if (pl->ops[i].kind == XF_OP_RANDOM_ERASING)
			return true;
	return false;
}

void
xf_run_op_output(const struct xf_pipeline *pl, size_t i, uint64_t rngkey,
    enum xf_dtype dtype, enum xf_layout layout, uint32_t w, uint32_t h,
    void *dst)
{
	uint32_t top, left, eh, ew;

	if (pl->ops[i].kind == XF_OP_RANDOM_ERASING &&
	    xf_op_applies(pl, i, rngkey) &&
	    xf_erasing_params(&pl->ops[i], w, h, rngkey, (uint64_t)i << 32,
		&top, &left, &eh, &ew))
		xf_erase(dst, dtype, layout, w, h, top, left, eh, ew);
}

/*
 * Where the prefix ends: at cache, or without one at the first random op,
 * so that everything deterministic can run once before the random part.
 */
static size_t
prefix_end(const struct xf_pipeline *pl)
{
	if (pl->cache_at < pl->nops)
		return pl->cache_at;
	for (size_t i = 0; i < pl->nops; i++)
		if (xf_op_draws(&pl->ops[i]))
			return i;
	return pl->nops;
}

uint64_t
xf_prefix_dims(
    const struct xf_pipeline *pl, uint32_t w, uint32_t h, uint32_t *ow,
    uint32_t *oh)
{
	size_t end = prefix_end(pl);
	uint64_t most = (uint64_t)w * h;

	for (size_t i = 1; i < end; i++) {
		const struct xf_op *op = &pl->ops[i];
		uint32_t tw, th;

		if (op->kind == XF_OP_SHRINK && (w < h ? w : h) <= op->w)
			continue;
		if (op->kind == XF_OP_RESIZE || op->kind == XF_OP_SHRINK) {
			resize_dims(w, h, op, &tw, &th);
			if (tw == w && th == h)
				continue;
			/* as apply_op bounds it: the horizontal pass too */
			if (tw != w && (uint64_t)tw * h > most)
				most = (uint64_t)tw * h;
		} else if (op->kind == XF_OP_CENTER_CROP) {
			tw = op->w;
			th = op->h;
		} else
			continue;
		w = tw;
		h = th;
		if ((uint64_t)w * h > most)
			most = (uint64_t)w * h;
	}
	*ow = w;
	*oh = h;
	return most;
}

int
xf_run_prefix(const struct xf_pipeline *pl, const uint8_t *jpeg, size_t len,
    struct xf_image *out, char *err, size_t errlen)
{
	struct xf_image img;
	size_t end = prefix_end(pl);
	uint32_t w, h, tw = 0, th = 0, min_w = 0, min_h = 0;
	int r;

	if (len == 0) {
		snprintf(err, errlen, XF_EMPTY_FILE);
		return -EINVAL;
	}

	/*
	 * DCT scaling, with decode(scaled), when a resize or a shrink that
	 * shrinks follows decode.  A scaled decode is not Pillow's full
	 * decode followed by the resize, so scale only while the scaled
	 * image stays at least twice the target in both sides: the
	 * antialiasing resize then averages the difference away (a few
	 * levels at most).  The target comes from the full size, so a scaled
	 * decode gives the same shape (and shrink the same frame) as a full
	 * one.
	 */
	if (end > 1 && pl->ops[0].scaled &&
	    (pl->ops[1].kind == XF_OP_RESIZE ||
		pl->ops[1].kind == XF_OP_SHRINK) &&
	    xf_jpeg_dims(jpeg, len, &w, &h) == 0 &&
	    (pl->ops[1].kind == XF_OP_RESIZE ||
		(w < h ? w : h) > pl->ops[1].w)) {
		resize_dims(w, h, &pl->ops[1], &tw, &th);
		min_w = tw > 0x7fffffff ? UINT32_MAX : 2 * tw;
		min_h = th > 0x7fffffff ? UINT32_MAX : 2 * th;
	}
	if ((r = xf_decode_max(jpeg, len, min_w, min_h, pl->max_pixels, &img,
		 err, errlen)) != 0)
		return r;
	img.src_w = img.src_h = 0;
	for (size_t i = 1; i < end; i++) {
		r = apply_op(pl, i, &img, 0, i == 1 ? tw : 0, i == 1 ? th : 0,
		    err, errlen);
		if (r != 0) {
			xf_free(img.px);
			return r;
		}
	}
	/* After a scaled decode, shrink's frame is still the source's. */
	if (tw != 0 && pl->ops[1].kind == XF_OP_SHRINK) {
		img.src_w = w;
		img.src_h = h;
	}
	*out = img;
	return 0;
}

/*
 * Ops start.. of pl on img (consumed), then the output conversion.  On
 * error err holds a message.
 */
static int
run_from(const struct xf_pipeline *pl, size_t start, struct xf_image *img,
    uint64_t rngkey, enum xf_dtype dtype, enum xf_layout layout, void *dst,
    char *err, size_t errlen)
{
	int r = 0;

	for (size_t i = start; i < pl->nops && r == 0; i++)
		r = apply_op(pl, i, img, rngkey, 0, 0, err, errlen);
	/* A cached prefix of another shape must not overrun dst. */
	if (r == 0 && (img->w != pl->out_w || img->h != pl->out_h)) {
		snprintf(err, errlen, "image of %ux%u, expected %ux%u",
		    (unsigned)img->w, (unsigned)img->h, (unsigned)pl->out_w,
		    (unsigned)pl->out_h);
		r = -EINVAL;
	}
	if (r == 0)
		xf_convert(
		    img, pl->normalize, pl->mean, pl->std, dtype, layout, dst);
	/* random_erasing: a box of the output, in its dtype and layout. */
	for (size_t i = start; i < pl->nops && r == 0; i++)
		xf_run_op_output(
		    pl, i, rngkey, dtype, layout, img->w, img->h, dst);
	if (!img->borrowed)
		xf_free(img->px);
	img->px = NULL;
	return r;
}

int
xf_run_suffix(const struct xf_pipeline *pl, struct xf_image *img,
    uint64_t rngkey, enum xf_dtype dtype, enum xf_layout layout, void *dst)
{
	char err[192]; /* no room for it in this interface: errno only */

	return run_from(pl, prefix_end(pl), img, rngkey, dtype, layout, dst,
	    err, sizeof(err));
}

/*
 * Partial decode for "decode random_resized_crop(S) ..." without cache:
 * the box is the one apply_op would draw on the full decode (same size,
 * key and counter: op 1), so the boxes follow torchvision's distribution
 * exactly; only the pixels differ, where a DCT scale is used (a box at
 * least twice the output) or where libjpeg's cropped decode differs at
 * the iMCU edges.  Returns 1 when the pipeline or the JPEG header does
 * not allow it (the caller then runs the full path).
 */
static int
run_rrc_partial(const struct xf_pipeline *pl, const uint8_t *jpeg,
    size_t len, uint64_t rngkey, enum xf_dtype dtype, enum xf_layout layout,
    void *dst, char *err, size_t errlen)
{
	const struct xf_op *op = &pl->ops[1];
	struct xf_image img, n;
	uint32_t w, h, cw, ch;
	int32_t x, y;
	float box[4];
	int r;

	if (pl->cache_at < pl->nops || pl->nops < 2 || op->kind != XF_OP_RRC ||
	    op->has_p || xf_jpeg_dims(jpeg, len, &w, &h) != 0)
		return 1;
	xf_rrc_params(w, h, op->scale, op->ratio, rngkey, 1ULL << 32, &x, &y,
	    &cw, &ch);
	if ((r = bound(pl, op, "output", op->w, op->h, err, errlen)) != 0)
		return r;
	r = xf_decode_box(jpeg, len, pl->max_pixels, (uint32_t)x, (uint32_t)y,
	    cw, ch, op->w, op->h, &img, box, err, errlen);
	if (r != 0)
		return r;
	/* The horizontal pass reads at most img.h rows. */
	if ((r = bound(pl, op, "intermediate", op->w, img.h, err, errlen)) !=
	    0) {
		xf_free(img.px);
		return r;
	}
	r = xf_resize_fbox(&img, box, op->w, op->h, &n);
	if (r != 0) {
		xf_free(img.px);
		snprintf(err, errlen, "%s", strerror(-r));
		return r;
	}
	replace(&img, &n);
	return run_from(pl, 2, &img, rngkey, dtype, layout, dst, err, errlen);
}

int
xf_run(const struct xf_pipeline *pl, const uint8_t *jpeg, size_t len,
    uint64_t rngkey, enum xf_dtype dtype, enum xf_layout layout, void *dst,
    char *err, size_t errlen)
{
	struct xf_image img;
	int r;

	if (len == 0) {
		snprintf(err, errlen, XF_EMPTY_FILE);
		return -EINVAL;
	}
	r = run_rrc_partial(pl, jpeg, len, rngkey, dtype, layout, dst, err,
	    errlen);
	if (r <= 0)
		return r;
	if ((r = xf_run_prefix(pl, jpeg, len, &img, err, errlen)) != 0)
		return r;
	return run_from(
	    pl, prefix_end(pl), &img, rngkey, dtype, layout, dst, err, errlen);
}
