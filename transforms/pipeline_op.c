/*
 * pipeline_op.c - one op of a pipeline's text: the lexer (an op's name
 * and arguments) and each op's arguments checked against its names,
 * counts and ranges into a struct xf_op (see pipeline_int.h).  Layer:
 * transforms (transforms/), under pipeline.c, which parses a whole
 * pipeline with it.
 *
 * Grammar: ops separated by white space; an op is a name, optionally
 * followed by "(" arguments separated by "," ")".  White space is allowed
 * around the parentheses and the arguments ("resize(256, 256)").
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/pipeline_int.h"
#include "transforms/xf.h"

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
int
pipeline_next_op(const char **sp, struct optext *t, char *err, size_t errlen)
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

/*
 * decode, decode(exact): Pillow's full decode; decode(scaled): a JPEG may
 * be DCT-scaled where the next op shrinks it (xf_run_prefix).
 */
static int
make_decode(const struct optext *t, struct xf_op *op, char *err, size_t errlen)
{
	op->kind = XF_OP_DECODE;
	if (t->nargs > 1)
		return bad_nargs(
		    t, "no argument, or exact or scaled", err, errlen);
	if (t->nargs == 0 || strcmp(t->args[0], "exact") == 0)
		return 0;
	if (strcmp(t->args[0], "scaled") == 0) {
		op->scaled = true;
		return 0;
	}
	snprintf(err, errlen,
	    "%s: unknown argument \"%s\" (expected exact, the default, or "
	    "scaled)",
	    t->name, t->args[0]);
	return -EINVAL;
}

/* One op from its text: names, argument counts and ranges. */
int
pipeline_make_op(
    const struct optext *t, struct xf_op *op, char *err, size_t errlen)
{
	double d[MAX_ARGS];
	int r;

	memset(op, 0, sizeof(*op));
	if (strcmp(t->name, "cache") == 0) {
		op->kind = XF_OP_CACHE;
		if (t->nargs != 0)
			return bad_nargs(t, "no arguments", err, errlen);
		return 0;
	}
	if (strcmp(t->name, "decode") == 0)
		return make_decode(t, op, err, errlen);
	if (strcmp(t->name, "shrink") == 0) {
		op->kind = XF_OP_SHRINK;
		if (t->nargs != 1)
			return bad_nargs(t,
			    "1 argument (the largest short side)", err, errlen);
		return parse_size(t, 0, &op->w, err, errlen);
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
