/*
 * pipeline.c - parsing pipeline text, its canonical prefix text and the
 * output checks.
 *
 * Grammar: ops separated by white space; an op is a name, optionally
 * followed by "(" arguments separated by "," ")".  White space is allowed
 * around the parentheses and the arguments ("resize(256, 256)").
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/xf.h"

#define MAX_ARGS 6
#define ARG_LEN 64
#define NAME_LEN 32

struct optext {
	char name[NAME_LEN];
	int nargs;
	char args[MAX_ARGS][ARG_LEN];
};

static const float imagenet_mean[3] = {0.485f, 0.456f, 0.406f};
static const float imagenet_std[3] = {0.229f, 0.224f, 0.225f};

static void
skip_space(const char **sp)
{
	while (isspace((unsigned char)**sp))
		(*sp)++;
}

/*
 * The next op of *sp into t.  Returns 1 when there is none left, 0 when t
 * holds one, -EINVAL with a message on a syntax error.
 */
static int
next_op(const char **sp, struct optext *t, char *err, size_t errlen)
{
	const char *s = *sp;
	size_t n = 0;

	skip_space(&s);
	if (*s == '\0')
		return 1;
	while (isalnum((unsigned char)s[n]) || s[n] == '_')
		n++;
	if (n == 0) {
		snprintf(err, errlen, "unexpected '%c' in pipeline", *s);
		return -EINVAL;
	}
	if (n >= NAME_LEN) {
		snprintf(err, errlen, "unknown op \"%.*s\"", (int)n, s);
		return -EINVAL;
	}
	memcpy(t->name, s, n);
	t->name[n] = '\0';
	t->nargs = 0;
	s += n;
	skip_space(&s);
	if (*s != '(') {
		*sp = s;
		return 0;
	}
	s++;
	skip_space(&s);
	if (*s == ')') { /* name() */
		*sp = s + 1;
		return 0;
	}
	for (;;) {
		skip_space(&s);
		n = 0;
		while (s[n] != '\0' && s[n] != ',' && s[n] != ')' &&
		       !isspace((unsigned char)s[n]))
			n++;
		if (n == 0) {
			snprintf(err, errlen, "%s: %s", t->name,
			    *s == '\0' ? "missing ')'" : "empty argument");
			return -EINVAL;
		}
		if (t->nargs == MAX_ARGS) {
			snprintf(
			    err, errlen, "%s: too many arguments", t->name);
			return -EINVAL;
		}
		if (n >= ARG_LEN) {
			snprintf(err, errlen,
			    "%s: argument \"%.*s...\" too "
			    "long",
			    t->name, 16, s);
			return -EINVAL;
		}
		memcpy(t->args[t->nargs], s, n);
		t->args[t->nargs++][n] = '\0';
		s += n;
		skip_space(&s);
		if (*s == ',') {
			s++;
			continue;
		}
		if (*s == ')')
			break;
		snprintf(err, errlen, "%s: %s", t->name,
		    *s == '\0' ? "missing ')'" : "expected ',' or ')'");
		return -EINVAL;
	}
	*sp = s + 1;
	return 0;
}

static int
parse_size(const struct optext *t, int i, uint32_t *v, char *err, size_t errlen)
{
	const char *s = t->args[i];
	char *end;
	long l;

	errno = 0;
	l = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || l < 1 || l > 65535) {
		snprintf(err, errlen, "%s: \"%s\" is not a size in 1..65535",
		    t->name, s);
		return -EINVAL;
	}
	*v = (uint32_t)l;
	return 0;
}

static int
parse_real(const struct optext *t, int i, double *v, char *err, size_t errlen)
{
	const char *s = t->args[i];
	char *end;
	double d;

	errno = 0;
	d = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !isfinite(d)) {
		snprintf(err, errlen, "%s: \"%s\" is not a number", t->name, s);
		return -EINVAL;
	}
	*v = d;
	return 0;
}

static int bad_nargs(
    const struct optext *t, const char *want, char *err, size_t errlen);

/* An integer argument in lo..hi; what names it in the message. */
static int
parse_int(const struct optext *t, int i, long lo, long hi, const char *what,
    uint32_t *v, char *err, size_t errlen)
{
	const char *s = t->args[i];
	char *end;
	long l;

	errno = 0;
	l = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || l < lo || l > hi) {
		snprintf(err, errlen, "%s: %s \"%s\" is not an integer in %ld..%ld",
		    t->name, what, s, lo, hi);
		return -EINVAL;
	}
	*v = (uint32_t)l;
	return 0;
}

/* Argument i, a probability: every op that takes one refuses 0..1's outside. */
static int
parse_prob(const struct optext *t, int i, double *p, char *err, size_t errlen)
{
	int r;

	if ((r = parse_real(t, i, p, err, errlen)) != 0)
		return r;
	if (*p < 0 || *p > 1) {
		snprintf(err, errlen, "%s: probability %s not in 0..1", t->name,
		    t->args[i]);
		return -EINVAL;
	}
	return 0;
}

/*
 * The augmentations of issue 28 (transforms/augment.c): 1 when t is none
 * of them, else 0 or -EINVAL with a message.
 */
static int
make_aug_op(const struct optext *t, struct xf_op *op, char *err, size_t errlen)
{
	static const char *const jname[4] = {
	    "brightness", "contrast", "saturation", "hue"};
	double d;
	int r;

	if (strcmp(t->name, "trivial_augment") == 0) {
		op->kind = XF_OP_TRIVIAL_AUGMENT;
		return t->nargs == 0 ? 0
				     : bad_nargs(t, "no arguments", err, errlen);
	}
	if (strcmp(t->name, "rand_augment") == 0) {
		op->kind = XF_OP_RAND_AUGMENT;
		op->n_ops = 2;
		op->magnitude = 9;
		if (t->nargs != 0 && t->nargs != 2)
			return bad_nargs(t, "0 or 2 arguments (N, M)", err,
			    errlen);
		if (t->nargs == 2 &&
		    ((r = parse_int(t, 0, 1, XF_AUG_MAX_STEPS, "N", &op->n_ops,
			  err, errlen)) != 0 ||
			(r = parse_int(t, 1, 0, 30, "M", &op->magnitude, err,
			     errlen)) != 0))
			return r;
		return 0;
	}
	if (strcmp(t->name, "auto_augment") == 0) {
		op->kind = XF_OP_AUTO_AUGMENT;
		op->policy = XF_AUG_POLICY_IMAGENET;
		if (t->nargs > 1)
			return bad_nargs(t, "0 or 1 argument", err, errlen);
		if (t->nargs == 1 && strcmp(t->args[0], "imagenet") != 0) {
			snprintf(err, errlen,
			    "%s: unknown policy \"%s\" (feedfs has imagenet)",
			    t->name, t->args[0]);
			return -EINVAL;
		}
		return 0;
	}
	if (strcmp(t->name, "color_jitter") == 0) {
		op->kind = XF_OP_COLOR_JITTER;
		if (t->nargs < 1 || t->nargs > 4)
			return bad_nargs(t, "1 to 4 arguments", err, errlen);
		for (int k = 0; k < t->nargs; k++) {
			if ((r = parse_real(t, k, &d, err, errlen)) != 0)
				return r;
			if (d < 0 || (k == 3 && d > 0.5)) {
				snprintf(err, errlen, "%s: %s %s not in %s",
				    t->name, jname[k], t->args[k],
				    k == 3 ? "0..0.5" : "0.. (>= 0)");
				return -EINVAL;
			}
			/* ColorJitter._check_input: 0 turns it off */
			op->jitter_on[k] = d != 0;
			if (k == 3) {
				op->jitter[k][0] = -d;
				op->jitter[k][1] = d;
			} else {
				op->jitter[k][0] = 1 - d < 0 ? 0 : 1 - d;
				op->jitter[k][1] = 1 + d;
			}
		}
		return 0;
	}
	if (strcmp(t->name, "grayscale") == 0) {
		op->kind = XF_OP_GRAYSCALE;
		op->p = 0.1; /* RandomGrayscale's default */
		if (t->nargs > 1)
			return bad_nargs(t, "0 or 1 argument", err, errlen);
		return t->nargs == 1 ? parse_prob(t, 0, &op->p, err, errlen) : 0;
	}
	return 1;
}

static int
bad_nargs(const struct optext *t, const char *want, char *err, size_t errlen)
{
	snprintf(
	    err, errlen, "%s: expected %s, got %d", t->name, want, t->nargs);
	return -EINVAL;
}

/*
 * A batch op: mixup(alpha), cutmix(alpha), mixup_cutmix(alpha_mix,
 * alpha_cut, switch_prob); alphas > 0 (Beta's), the switch in 0..1.
 */
static int
make_batch_op(
    const struct optext *t, struct xf_op *op, char *err, size_t errlen)
{
	bool both = strcmp(t->name, "mixup_cutmix") == 0;
	double d[3];
	int r;

	op->kind = both		       ? XF_OP_MIXUP_CUTMIX
		   : t->name[0] == 'm' ? XF_OP_MIXUP
				       : XF_OP_CUTMIX;
	if (t->nargs != (both ? 3 : 1))
		return bad_nargs(
		    t, both ? "3 arguments" : "1 argument", err, errlen);
	for (int i = 0; i < t->nargs; i++) {
		if ((r = parse_real(t, i, &d[i], err, errlen)) != 0)
			return r;
		if (i < 2 && !(d[i] > 0)) {
			snprintf(err, errlen,
			    "%s: alpha %s must be > 0 (Beta(alpha, alpha))",
			    t->name, t->args[i]);
			return -EINVAL;
		}
	}
	if (both && (d[2] < 0 || d[2] > 1)) {
		snprintf(err, errlen, "%s: switch probability %s not in 0..1",
		    t->name, t->args[2]);
		return -EINVAL;
	}
	op->alpha[0] = op->kind == XF_OP_CUTMIX ? 0 : d[0];
	op->alpha[1] = op->kind == XF_OP_CUTMIX ? d[0] : both ? d[1] : 0;
	op->p = both ? d[2] : 0;
	return 0;
}

/* gaussian_blur(k, sigma_min, sigma_max), as torchvision's GaussianBlur. */
static int
make_blur(const struct optext *t, struct xf_op *op, char *err, size_t errlen)
{
	char *end;
	long k;
	int r;

	op->kind = XF_OP_GAUSSIAN_BLUR;
	if (t->nargs != 3)
		return bad_nargs(
		    t, "3 arguments (k, sigma_min, sigma_max)", err, errlen);
	errno = 0;
	k = strtol(t->args[0], &end, 10);
	if (errno != 0 || end == t->args[0] || *end != '\0' || k < 1 ||
	    k > 1023 || k % 2 == 0) {
		snprintf(err, errlen,
		    "%s: kernel size \"%s\" is not an odd number in 1..1023",
		    t->name, t->args[0]);
		return -EINVAL;
	}
	op->ksize = (uint32_t)k;
	if ((r = parse_real(t, 1, &op->sigma[0], err, errlen)) != 0 ||
	    (r = parse_real(t, 2, &op->sigma[1], err, errlen)) != 0)
		return r;
	if (!(op->sigma[0] > 0 && op->sigma[0] <= op->sigma[1] &&
		op->sigma[1] <= 1e6)) {
		snprintf(err, errlen,
		    "%s: sigma must satisfy 0 < sigma_min <= sigma_max "
		    "(<= 1e6)",
		    t->name);
		return -EINVAL;
	}
	return 0;
}

/*
 * random_erasing(p[, smin, smax, rmin, rmax]), as torchvision's
 * RandomErasing(p, scale=(smin, smax), ratio=(rmin, rmax), value=0).
 */
static int
make_erasing(const struct optext *t, struct xf_op *op, char *err, size_t errlen)
{
	double d[MAX_ARGS];
	int r;

	op->kind = XF_OP_RANDOM_ERASING;
	if (t->nargs != 1 && t->nargs != 3 && t->nargs != 5)
		return bad_nargs(t, "1, 3 or 5 arguments", err, errlen);
	if ((r = parse_prob(t, 0, &op->p, err, errlen)) != 0)
		return r;
	op->scale[0] = 0.02;
	op->scale[1] = 0.33;
	op->ratio[0] = 0.3;
	op->ratio[1] = 3.3;
	for (int i = 1; i < t->nargs; i++)
		if ((r = parse_real(t, i, &d[i], err, errlen)) != 0)
			return r;
	if (t->nargs >= 3) {
		if (!(d[1] >= 0 && d[1] <= d[2] && d[2] <= 1)) {
			snprintf(err, errlen,
			    "%s: scale must satisfy 0 <= smin <= smax <= 1",
			    t->name);
			return -EINVAL;
		}
		op->scale[0] = d[1];
		op->scale[1] = d[2];
	}
	if (t->nargs == 5) {
		if (!(d[3] > 0 && d[3] <= d[4] && d[4] <= 1e6)) {
			snprintf(err, errlen,
			    "%s: ratio must satisfy 0 < rmin <= rmax (<= 1e6)",
			    t->name);
			return -EINVAL;
		}
		op->ratio[0] = d[3];
		op->ratio[1] = d[4];
	}
	return 0;
}

/* One op from its text: names, argument counts and ranges. */
static int
make_op(const struct optext *t, struct xf_op *op, char *err, size_t errlen)
{
	double d[MAX_ARGS];
	int r;

	memset(op, 0, sizeof(*op));
	if (strcmp(t->name, "decode") == 0 || strcmp(t->name, "cache") == 0) {
		op->kind = t->name[0] == 'd' ? XF_OP_DECODE : XF_OP_CACHE;
		if (t->nargs != 0)
			return bad_nargs(t, "no arguments", err, errlen);
		return 0;
	}
	if (strcmp(t->name, "resize") == 0 ||
	    strcmp(t->name, "center_crop") == 0) {
		op->kind = t->name[0] == 'r' ? XF_OP_RESIZE : XF_OP_CENTER_CROP;
		if (t->nargs != 1 && t->nargs != 2)
			return bad_nargs(t, "1 or 2 arguments", err, errlen);
		if ((r = parse_size(t, 0, &op->w, err, errlen)) != 0)
			return r;
		if (t->nargs == 2)
			return parse_size(t, 1, &op->h, err, errlen);
		/* center_crop(S) is center_crop(S,S); resize(S) keeps h 0. */
		if (op->kind == XF_OP_CENTER_CROP)
			op->h = op->w;
		return 0;
	}
	if (strcmp(t->name, "random_resized_crop") == 0) {
		op->kind = XF_OP_RRC;
		if (t->nargs != 1 && t->nargs != 3 && t->nargs != 5)
			return bad_nargs(t, "1, 3 or 5 arguments", err, errlen);
		if ((r = parse_size(t, 0, &op->w, err, errlen)) != 0)
			return r;
		op->h = op->w;
		op->scale[0] = 0.08;
		op->scale[1] = 1.0;
		op->ratio[0] = 3.0 / 4.0;
		op->ratio[1] = 4.0 / 3.0;
		for (int i = 1; i < t->nargs; i++)
			if ((r = parse_real(t, i, &d[i], err, errlen)) != 0)
				return r;
		if (t->nargs >= 3) {
			if (!(d[1] > 0 && d[1] <= d[2] && d[2] <= 1)) {
				snprintf(err, errlen,
				    "%s: scale must satisfy "
				    "0 < smin <= smax <= 1",
				    t->name);
				return -EINVAL;
			}
			op->scale[0] = d[1];
			op->scale[1] = d[2];
		}
		if (t->nargs == 5) {
			if (!(d[3] > 0 && d[3] <= d[4])) {
				snprintf(err, errlen,
				    "%s: ratio must satisfy "
				    "0 < rmin <= rmax",
				    t->name);
				return -EINVAL;
			}
			op->ratio[0] = d[3];
			op->ratio[1] = d[4];
		}
		return 0;
	}
	if (strcmp(t->name, "flip") == 0) {
		op->kind = XF_OP_FLIP;
		if (t->nargs != 1)
			return bad_nargs(t, "1 argument", err, errlen);
		return parse_prob(t, 0, &op->p, err, errlen);
	}
	if (strcmp(t->name, "gaussian_blur") == 0)
		return make_blur(t, op, err, errlen);
	if (strcmp(t->name, "random_erasing") == 0)
		return make_erasing(t, op, err, errlen);
	if (strcmp(t->name, "normalize") == 0) {
		op->kind = XF_OP_NORMALIZE;
		if (t->nargs == 1 && strcmp(t->args[0], "imagenet") == 0) {
			memcpy(op->mean, imagenet_mean, sizeof(op->mean));
			memcpy(op->std, imagenet_std, sizeof(op->std));
			return 0;
		}
		if (t->nargs != 6)
			return bad_nargs(
			    t, "imagenet or 6 arguments", err, errlen);
		for (int i = 0; i < 6; i++)
			if ((r = parse_real(t, i, &d[i], err, errlen)) != 0)
				return r;
		for (int c = 0; c < 3; c++) {
			if (!(d[3 + c] > 0)) {
				snprintf(err, errlen, "%s: std must be > 0",
				    t->name);
				return -EINVAL;
			}
			op->mean[c] = (float)d[c];
			op->std[c] = (float)d[3 + c];
		}
		return 0;
	}
	if (strcmp(t->name, "mixup") == 0 || strcmp(t->name, "cutmix") == 0 ||
	    strcmp(t->name, "mixup_cutmix") == 0)
		return make_batch_op(t, op, err, errlen);
	if ((r = make_aug_op(t, op, err, errlen)) <= 0)
		return r;
	snprintf(err, errlen, "unknown op \"%s\"", t->name);
	return -EINVAL;
}

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
};

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
	if (check_order(pl, err, errlen) != 0)
		return -EINVAL;
	if (size_op == NULL ||
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
	while ((r = next_op(&text, &t, err, errlen)) == 0) {
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
		if ((r = make_op(&t, &pl->ops[pl->nops], err, errlen)) != 0)
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
			append(buf, len, &pos, "%sdecode", sep);
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
