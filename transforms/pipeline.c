/*
 * pipeline.c - parsing pipeline text (its ops from pipeline_op.c, then
 * the rules between them: classes and order, cache, the output size),
 * its canonical prefix text and the output checks.  Layer: transforms
 * (transforms/); core/ parses every job's pipeline through it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/pipeline_int.h"
#include "transforms/xf.h"

/*
 * The classes of ops, for the rules of their order (check_order):
 * geometric ops move pixels, and normalize (applied at the output
 * conversion wherever it is written) commutes with them; pixel ops change
 * pixel values, and must come before normalize; random_erasing erases a
 * box of the normalized output, so it comes after normalize and after
 * every op that changes the image.
 */
enum op_class {
	OC_DECODE,
	OC_CACHE,
	OC_SHRINK,    /* shrink: right after decode (check_shrink too) */
	OC_GEOM,      /* resize, center_crop, random_resized_crop, flip */
	OC_PIXEL,     /* gaussian_blur, the augmentations of augment.c */
	OC_NORMALIZE, /* normalize */
	OC_ERASE,     /* random_erasing */
	OC_BATCH,     /* mixup, cutmix, mixup_cutmix: last (check_pipeline) */
	OC_COUNT
};

/*
 * Each op's name and class; random: it draws random numbers (must come
 * after cache; flip counts whatever its probability, flip(0) and flip(1)
 * included: simpler to explain, and nobody needs a deterministic flip);
 * sized: it sets the image's size (the last one gives the output size).
 */
static const struct op_info {
	const char *name;
	enum op_class cls;
	bool random, sized;
} op_info[] = {
    [XF_OP_DECODE] = {"decode", OC_DECODE, false, false},
    [XF_OP_RESIZE] = {"resize", OC_GEOM, false, true},
    [XF_OP_CENTER_CROP] = {"center_crop", OC_GEOM, false, true},
    [XF_OP_RRC] = {"random_resized_crop", OC_GEOM, true, true},
    [XF_OP_FLIP] = {"flip", OC_GEOM, true, false},
    [XF_OP_NORMALIZE] = {"normalize", OC_NORMALIZE, false, false},
    [XF_OP_CACHE] = {"cache", OC_CACHE, false, false},
    [XF_OP_GAUSSIAN_BLUR] = {"gaussian_blur", OC_PIXEL, true, false},
    [XF_OP_RANDOM_ERASING] = {"random_erasing", OC_ERASE, true, false},
    /* Batch ops draw per batch (core/job.c), never per sample. */
    [XF_OP_MIXUP] = {"mixup", OC_BATCH, false, false},
    [XF_OP_CUTMIX] = {"cutmix", OC_BATCH, false, false},
    [XF_OP_MIXUP_CUTMIX] = {"mixup_cutmix", OC_BATCH, false, false},
    /* transforms/augment.c: colour and geometric per-sample ops. */
    [XF_OP_TRIVIAL_AUGMENT] = {"trivial_augment", OC_PIXEL, true, false},
    [XF_OP_RAND_AUGMENT] = {"rand_augment", OC_PIXEL, true, false},
    [XF_OP_AUTO_AUGMENT] = {"auto_augment", OC_PIXEL, true, false},
    [XF_OP_COLOR_JITTER] = {"color_jitter", OC_PIXEL, true, false},
    [XF_OP_GRAYSCALE] = {"grayscale", OC_PIXEL, true, false},
    /* issue 36: the source kept, bounded, for random_resized_crop */
    [XF_OP_SHRINK] = {"shrink", OC_SHRINK, false, true},
};

/* Why shrink must come right after decode (order_rule's messages). */
#define SHRINK_FIRST                                                           \
	"%s after %s: shrink must come right after decode (the ops after "     \
	"it take the image it receives for the source: random_resized_crop "   \
	"draws its box in that image's pixels)"

/*
 * The order rules: after[a][b] is the message (a format of the later op's
 * name, then the earlier op's) when an op of class b comes after one of
 * class a; NULL where that order is fine.  Missing cache or decode rules
 * are check_pipeline's.
 */
static const char *const order_rule[OC_COUNT][OC_COUNT] = {
    [OC_NORMALIZE][OC_PIXEL] =
	"%s after %s: normalize must come after every pixel op (it is "
	"applied at the output conversion, after all the ops, so written "
	"before one it would not mean what it says): move normalize after it",
    [OC_ERASE][OC_NORMALIZE] =
	"%s after %s: random_erasing must come after normalize "
	"(torchvision's RandomErasing after Normalize erases to 0 on the "
	"normalized output)",
    [OC_ERASE][OC_PIXEL] =
	"%s after %s: random_erasing erases a box of the output, so it must "
	"come after every op that changes the image",
    [OC_ERASE][OC_GEOM] =
	"%s after %s: random_erasing erases a box of the output, so it must "
	"come after every op that changes the image",
    [OC_CACHE][OC_SHRINK] = SHRINK_FIRST,
    [OC_SHRINK][OC_SHRINK] = SHRINK_FIRST,
    [OC_GEOM][OC_SHRINK] = SHRINK_FIRST,
    [OC_PIXEL][OC_SHRINK] = SHRINK_FIRST,
    [OC_ERASE][OC_SHRINK] = SHRINK_FIRST,
};

bool
xf_op_random(enum xf_opkind k)
{
	return op_info[k].random;
}

bool
xf_op_augment(enum xf_opkind k)
{
	return k == XF_OP_TRIVIAL_AUGMENT || k == XF_OP_RAND_AUGMENT ||
	       k == XF_OP_AUTO_AUGMENT || k == XF_OP_COLOR_JITTER ||
	       k == XF_OP_GRAYSCALE;
}

static const char *
op_name(enum xf_opkind k)
{
	return op_info[k].name;
}

/* The order rules of order_rule over the whole pipeline. */
static int
check_order(const struct xf_pipeline *pl, char *err, size_t errlen)
{
	const struct xf_op *seen[OC_COUNT] = {NULL};

	for (size_t i = 0; i < pl->nops; i++) {
		enum op_class b = op_info[pl->ops[i].kind].cls;

		for (int a = 0; a < OC_COUNT; a++)
			if (seen[a] != NULL && order_rule[a][b] != NULL) {
				snprintf(err, errlen, order_rule[a][b],
				    op_name(pl->ops[i].kind),
				    op_name(seen[a]->kind));
				return -EINVAL;
			}
		if (seen[b] == NULL)
			seen[b] = &pl->ops[i];
	}
	return 0;
}

/*
 * After shrink the image stands for the source at a smaller size: until
 * a random_resized_crop (which draws its box in the source's pixels, and
 * makes an image of its own) only cache and flip may come, and normalize,
 * which acts at the output.  A resize, a crop or a pixel op there would
 * act on the smaller image as if it were the source.
 */
static int
check_shrink(const struct xf_pipeline *pl, char *err, size_t errlen)
{
	bool framed = false;

	for (size_t i = 1; i < pl->nops; i++) {
		enum xf_opkind k = pl->ops[i].kind;

		if (k == XF_OP_SHRINK)
			framed = true;
		else if (k == XF_OP_RRC)
			framed = false;
		else if (framed && k != XF_OP_CACHE && k != XF_OP_FLIP &&
			 k != XF_OP_NORMALIZE) {
			snprintf(err, errlen,
			    "%s after shrink: until random_resized_crop only "
			    "cache and flip may follow shrink (its image "
			    "stands for the source at a smaller size, which "
			    "random_resized_crop takes into account): write "
			    "%s after random_resized_crop, or resize instead "
			    "of shrink",
			    op_name(k), op_name(k));
			return -EINVAL;
		}
	}
	return 0;
}

/* The rules that involve more than one op; sets the summary fields. */
static int
check_pipeline(struct xf_pipeline *pl, char *err, size_t errlen)
{
	const struct xf_op *size_op = NULL;
	size_t first_random = pl->nops;

	if (pl->nops == 0 || pl->ops[0].kind != XF_OP_DECODE) {
		snprintf(err, errlen, "pipeline must start with decode");
		return -EINVAL;
	}
	pl->cache_at = pl->nops;
	for (size_t i = 1; i < pl->nops; i++) {
		const struct xf_op *op = &pl->ops[i];

		switch (op->kind) {
		case XF_OP_DECODE:
			snprintf(err, errlen, "a second decode");
			return -EINVAL;
		case XF_OP_CACHE:
			if (pl->cache_at != pl->nops) {
				snprintf(err, errlen, "a second cache");
				return -EINVAL;
			}
			if (first_random < i) {
				snprintf(err, errlen,
				    "random op %s before "
				    "cache",
				    op_name(pl->ops[first_random].kind));
				return -EINVAL;
			}
			pl->cache_at = i;
			break;
		case XF_OP_MIXUP:
		case XF_OP_CUTMIX:
		case XF_OP_MIXUP_CUTMIX:
			/* On the whole batch, after every sample's ops. */
			if (i + 1 != pl->nops) {
				snprintf(err, errlen,
				    "batch op %s must be the last op of the "
				    "pipeline",
				    op_name(op->kind));
				return -EINVAL;
			}
			pl->batch_op = op;
			break;
		case XF_OP_NORMALIZE:
			if (pl->normalize) {
				snprintf(err, errlen, "a second normalize");
				return -EINVAL;
			}
			pl->normalize = true;
			memcpy(pl->mean, op->mean, sizeof(pl->mean));
			memcpy(pl->std, op->std, sizeof(pl->std));
			break;
		default:
			if (xf_op_random(op->kind) && first_random == pl->nops)
				first_random = i;
			if (op_info[op->kind].sized)
				size_op = op;
			break;
		}
	}
	if (check_order(pl, err, errlen) != 0 ||
	    check_shrink(pl, err, errlen) != 0)
		return -EINVAL;
	if (size_op == NULL || size_op->kind == XF_OP_SHRINK ||
	    (size_op->kind == XF_OP_RESIZE && size_op->h == 0)) {
		snprintf(err, errlen,
		    "output size not fixed: the last resize "
		    "or crop must be resize(W,H), center_crop or "
		    "random_resized_crop");
		return -EINVAL;
	}
	pl->out_w = size_op->w;
	pl->out_h = size_op->h;
	pl->size_at = (size_t)(size_op - pl->ops);
	return 0;
}

int
xf_pipeline_parse(
    const char *text, struct xf_pipeline **out, char *err, size_t errlen)
{
	struct xf_pipeline *pl;
	struct optext t;
	size_t cap = 0;
	int r;

	if ((pl = calloc(1, sizeof(*pl))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pl->max_pixels = XF_DEFAULT_MAX_PIXELS;
	while ((r = pipeline_next_op(&text, &t, err, errlen)) == 0) {
		if (pl->nops == cap) {
			struct xf_op *n;

			cap = cap ? 2 * cap : 8;
			if ((n = realloc(pl->ops, cap * sizeof(*n))) == NULL) {
				snprintf(err, errlen, "out of memory");
				r = -ENOMEM;
				goto fail;
			}
			pl->ops = n;
		}
		if ((r = pipeline_make_op(&t, &pl->ops[pl->nops], err, errlen)) != 0)
			goto fail;
		pl->nops++;
	}
	if (r < 0)
		goto fail;
	if ((r = check_pipeline(pl, err, errlen)) != 0)
		goto fail;
	*out = pl;
	return 0;
fail:
	xf_pipeline_free(pl);
	return r;
}

void
xf_pipeline_free(struct xf_pipeline *pl)
{
	if (pl == NULL)
		return;
	free(pl->ops);
	free(pl);
}

int
xf_pipeline_sized(
    const struct xf_pipeline *pl, uint32_t s, struct xf_pipeline **out)
{
	struct xf_pipeline *n;

	if (pl->size_at < pl->cache_at && pl->cache_at < pl->nops)
		return -EINVAL;
	if (pl->out_w != pl->out_h || s == 0 || s > 65535)
		return -EINVAL;
	if ((n = malloc(sizeof(*n))) == NULL)
		return -ENOMEM;
	*n = *pl;
	if ((n->ops = malloc(pl->nops * sizeof(*n->ops))) == NULL) {
		free(n);
		return -ENOMEM;
	}
	memcpy(n->ops, pl->ops, pl->nops * sizeof(*n->ops));
	n->ops[n->size_at].w = n->ops[n->size_at].h = s;
	n->out_w = n->out_h = s;
	if (pl->batch_op != NULL) /* into the copy's ops */
		n->batch_op = n->ops + (pl->batch_op - pl->ops);
	*out = n;
	return 0;
}

/* snprintf at buf + *pos; *pos counts what would have been written. */
static void
append(char *buf, size_t len, size_t *pos, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	if (*pos < len)
		n = vsnprintf(buf + *pos, len - *pos, fmt, ap);
	else
		n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		*pos += (size_t)n;
}

/*
 * Canonical forms: sizes with %d, reals with %.17g, no spaces inside the
 * parentheses, center_crop always with both sizes.  Only deterministic ops
 * can stand before cache, so the random ones need no form here.
 */
size_t
xf_prefix_text(const struct xf_pipeline *pl, char *buf, size_t len)
{
	size_t pos = 0;

	if (buf != NULL && len > 0)
		buf[0] = '\0';
	if (pl->cache_at >= pl->nops)
		return 0;
	for (size_t i = 0; i < pl->cache_at; i++) {
		const struct xf_op *op = &pl->ops[i];
		const char *sep = pos > 0 ? " " : "";

		switch (op->kind) {
		case XF_OP_DECODE:
			append(buf, len, &pos, "%sdecode%s", sep,
			    op->scaled ? "(scaled)" : "");
			break;
		case XF_OP_SHRINK:
			append(buf, len, &pos, "%sshrink(%d)", sep, (int)op->w);
			break;
		case XF_OP_RESIZE:
			if (op->h == 0)
				append(buf, len, &pos, "%sresize(%d)", sep,
				    (int)op->w);
			else
				append(buf, len, &pos, "%sresize(%d,%d)", sep,
				    (int)op->w, (int)op->h);
			break;
		case XF_OP_CENTER_CROP:
			append(buf, len, &pos, "%scenter_crop(%d,%d)", sep,
			    (int)op->w, (int)op->h);
			break;
		case XF_OP_RRC:
			append(buf, len, &pos,
			    "%srandom_resized_crop(%d,%.17g,%.17g,%.17g,%.17g)",
			    sep, (int)op->w, op->scale[0], op->scale[1],
			    op->ratio[0], op->ratio[1]);
			break;
		case XF_OP_FLIP:
			append(buf, len, &pos, "%sflip(%.17g)", sep, op->p);
			break;
		default: /* normalize acts at output time; no cache here */
			break;
		}
	}
	return pos;
}

int
xf_check_output(
    const struct xf_pipeline *pl, enum xf_dtype dtype, char *err, size_t errlen)
{
	if (pl->batch_op != NULL && pl->batch_op->kind != XF_OP_CUTMIX &&
	    dtype == XF_UINT8) {
		snprintf(err, errlen,
		    "%s blends pixels, which uint8 cannot hold: use dtype "
		    "float16 or float32 (cutmix, which copies pixels, works "
		    "with uint8)",
		    op_name(pl->batch_op->kind));
		return -EINVAL;
	}
	if (pl->normalize && dtype == XF_UINT8) {
		snprintf(err, errlen,
		    "normalize needs dtype float16 or "
		    "float32, not uint8");
		return -EINVAL;
	}
	for (size_t i = 0; i < pl->nops && dtype == XF_UINT8; i++)
		if (pl->ops[i].kind == XF_OP_RANDOM_ERASING) {
			snprintf(err, errlen,
			    "random_erasing with dtype uint8 and no normalize "
			    "would erase to 0, black in uint8 pixel space, "
			    "not torchvision's RandomErasing after Normalize "
			    "(which erases to the mean); write normalize(...) "
			    "before random_erasing and dtype = float16 or "
			    "float32");
			return -EINVAL;
		}
	if (pl->out_w == 0 || pl->out_h == 0) {
		snprintf(err, errlen, "output size not fixed");
		return -EINVAL;
	}
	return 0;
}

size_t
xf_sample_bytes(const struct xf_pipeline *pl, enum xf_dtype dtype)
{
	size_t e = dtype == XF_UINT8 ? 1 : dtype == XF_FLOAT16 ? 2 : 4;

	return (size_t)pl->out_w * pl->out_h * 3 * e;
}
