/*
 * augrun - the augmentations of transforms/augment.c on a raw image, for
 * tests that compare them with torchvision.transforms.functional.
 *
 *   augrun op NAME VALUE W H IN OUT
 *	one op with a given value: NAME is one of _apply_op's (Identity,
 *	ShearX, ..., Invert; VALUE its final magnitude) or brightness,
 *	contrast, saturation, hue (VALUE the factor) or grayscale.
 *   augrun draw PIPELINE INDEX KEY W H [IN OUT]
 *	the parameters that op INDEX of PIPELINE draws for KEY on a W x H
 *	image, printed on one line; with IN and OUT, applied to IN.
 *   augrun draws PIPELINE INDEX SEED COUNT W H
 *	the parameters of COUNT draws, keys rng_mix(SEED + n), a line each.
 *   augrun decisions PIPELINE SEED COUNT
 *	for COUNT keys rng_mix(SEED + n), a line each: every op after
 *	cache as NAME:A (A: its p= draw, 1 without p=) and, for flip,
 *	grayscale and random_erasing, :D (its own probability's draw),
 *	separated by spaces (issue 36).
 *   augrun run PIPELINE KEY W H IN OUT
 *	the ops after cache on IN, one at a time, each one's draws on a
 *	line "NAME A PARAMS" (A as above; PARAMS: random_resized_crop's box
 *	"X Y W H", flip's "D", a parameter line as below for the
 *	augmentations, gaussian_blur's "K SIGMA", solarize's threshold,
 *	nothing for the others), then OUT: the last image, uint8 HWC
 *	(normalize and random_erasing, which act on the output, left out),
 *	its size printed last as "W H".
 *
 * IN and OUT are raw HWC RGB, W * H * 3 bytes.  A parameter line:
 * "P ID P0 P1" (auto_augment's policy and probability draws) then a
 * "NAME,BIN,NEG,ON,MAG" for each step (BIN -1: none; NEG -1: not drawn);
 * "J ORDER F0 F1 F2 F3 ON" for color_jitter (ORDER as "3102", ON as
 * "1101"); "G 0|1" for grayscale.  Exit 0, 1 on error, 2 on bad usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/rng.h"
#include "transforms/xf.h"

static void
usage(void)
{
	fprintf(stderr, "usage: augrun op NAME VALUE W H IN OUT\n"
			"       augrun draw PIPELINE INDEX KEY W H [IN OUT]\n"
			"       augrun draws PIPELINE INDEX SEED COUNT W H\n"
			"       augrun decisions PIPELINE SEED COUNT\n"
			"       augrun run PIPELINE KEY W H IN OUT\n");
}

static int
read_image(const char *path, struct xf_image *img)
{
	size_t n = (size_t)img->w * img->h * 3;
	FILE *fp = fopen(path, "rb");

	if ((img->px = xf_alloc(n)) == NULL || fp == NULL ||
	    fread(img->px, 1, n, fp) != n) {
		fprintf(stderr, "augrun: %s: cannot read %zu bytes\n", path, n);
		if (fp)
			fclose(fp);
		return -1;
	}
	fclose(fp);
	return 0;
}

static int
write_image(const char *path, const struct xf_image *img)
{
	size_t n = (size_t)img->w * img->h * 3;
	FILE *fp = fopen(path, "wb");

	if (fp == NULL || fwrite(img->px, 1, n, fp) != n || fclose(fp) != 0) {
		fprintf(stderr, "augrun: %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

static void
print_params(const struct xf_aug_params *p)
{
	switch (p->kind) {
	case XF_OP_COLOR_JITTER:
		printf("J %d%d%d%d %.17g %.17g %.17g %.17g %d%d%d%d\n",
		    p->order[0], p->order[1], p->order[2], p->order[3],
		    p->factor[0], p->factor[1], p->factor[2], p->factor[3],
		    p->on[0], p->on[1], p->on[2], p->on[3]);
		return;
	case XF_OP_GRAYSCALE:
		printf("G %d\n", p->apply);
		return;
	case XF_OP_AUTO_AUGMENT:
		printf("P %u %.9g %.9g ", (unsigned)p->policy_id,
		    (double)p->probs[0], (double)p->probs[1]);
		break;
	default:
		break;
	}
	for (uint32_t k = 0; k < p->nsteps; k++)
		printf("%s%s,%d,%d,%d,%.17g", k ? " " : "",
		    xf_aug_name(p->step[k].op), p->step[k].bin, p->step[k].neg,
		    p->step[k].on, p->step[k].mag);
	printf("\n");
}

/* Op i's name as written in a pipeline. */
static const char *
augrun_op_name(const struct xf_pipeline *pl, size_t i)
{
	static const char *const names[] = {
	    [XF_OP_RESIZE] = "resize", [XF_OP_CENTER_CROP] = "center_crop",
	    [XF_OP_RRC] = "random_resized_crop", [XF_OP_FLIP] = "flip",
	    [XF_OP_NORMALIZE] = "normalize",
	    [XF_OP_GAUSSIAN_BLUR] = "gaussian_blur",
	    [XF_OP_RANDOM_ERASING] = "random_erasing",
	    [XF_OP_TRIVIAL_AUGMENT] = "trivial_augment",
	    [XF_OP_RAND_AUGMENT] = "rand_augment",
	    [XF_OP_AUTO_AUGMENT] = "auto_augment",
	    [XF_OP_COLOR_JITTER] = "color_jitter",
	    [XF_OP_GRAYSCALE] = "grayscale", [XF_OP_SOLARIZE] = "solarize"};
	enum xf_opkind k = pl->ops[i].kind;

	return k < sizeof(names) / sizeof(names[0]) && names[k] ? names[k]
								 : "?";
}

static int
parse_u32(const char *s, uint32_t *v)
{
	char *end;
	unsigned long l = strtoul(s, &end, 10);

	if (end == s || *end != '\0' || l == 0 || l > 65535)
		return -1;
	*v = (uint32_t)l;
	return 0;
}

/* augrun op NAME VALUE W H IN OUT */
static int
run_op(char **argv)
{
	struct xf_image img;
	double v = strtod(argv[1], NULL);
	const char *name = argv[0];
	int op = -1, r = 0;

	if (parse_u32(argv[2], &img.w) != 0 || parse_u32(argv[3], &img.h)) {
		usage();
		return 2;
	}
	for (int k = 0; k < XF_AUG_COUNT; k++)
		if (strcmp(name, xf_aug_name(k)) == 0)
			op = k;
	if (op < 0 && strcmp(name, "brightness") != 0 &&
	    strcmp(name, "contrast") != 0 && strcmp(name, "saturation") != 0 &&
	    strcmp(name, "hue") != 0 && strcmp(name, "grayscale") != 0) {
		fprintf(stderr, "augrun: unknown op %s\n", name);
		return 2;
	}
	if (read_image(argv[4], &img) != 0)
		return 1;
	if (op >= 0)
		r = xf_aug_op(&img, op, v);
	else if (strcmp(name, "brightness") == 0)
		xf_adjust_brightness(&img, v);
	else if (strcmp(name, "contrast") == 0)
		xf_adjust_contrast(&img, v);
	else if (strcmp(name, "saturation") == 0)
		xf_adjust_saturation(&img, v);
	else if (strcmp(name, "hue") == 0)
		xf_adjust_hue(&img, v);
	else
		xf_grayscale(&img);
	if (r != 0) {
		fprintf(stderr, "augrun: %s: %s\n", name, strerror(-r));
		xf_free(img.px);
		return 1;
	}
	r = write_image(argv[5], &img);
	xf_free(img.px);
	return r == 0 ? 0 : 1;
}

/* Op i's own yes-or-no draw (flip, grayscale, random_erasing); -1: none. */
static int
own_draw(const struct xf_pipeline *pl, size_t i, uint64_t key)
{
	const struct xf_op *op = &pl->ops[i];
	struct xf_aug_params p;

	switch (op->kind) {
	case XF_OP_FLIP:
	case XF_OP_RANDOM_ERASING: /* the p test of blur.c's draw */
		return rng_uniform(key, (uint64_t)i << 32) < op->p;
	case XF_OP_GRAYSCALE:
		xf_aug_params(pl, i, key, 8, 8, &p);
		return p.apply;
	default:
		return -1;
	}
}

/* augrun decisions PIPELINE SEED COUNT */
static int
run_decisions(const struct xf_pipeline *pl, char **argv)
{
	uint64_t seed = strtoull(argv[0], NULL, 0);
	uint64_t count = strtoull(argv[1], NULL, 0);

	for (uint64_t n = 0; n < count; n++) {
		uint64_t key = rng_mix(seed + n);
		const char *sep = "";

		for (size_t i = pl->cache_at + 1; i < pl->nops; i++) {
			int d = own_draw(pl, i, key);

			printf("%s%s:%d", sep, augrun_op_name(pl, i),
			    xf_op_applies(pl, i, key));
			if (d >= 0)
				printf(":%d", d);
			sep = " ";
		}
		printf("\n");
	}
	return 0;
}

/* augrun run PIPELINE KEY W H IN OUT */
static int
run_ops(const struct xf_pipeline *pl, char **argv)
{
	uint64_t key = strtoull(argv[0], NULL, 0);
	struct xf_image img = {0};
	char err[512];
	int ret = 1;

	if (parse_u32(argv[1], &img.w) != 0 || parse_u32(argv[2], &img.h)) {
		usage();
		return 2;
	}
	if (read_image(argv[3], &img) != 0)
		return 1;
	for (size_t i = pl->cache_at + 1; i < pl->nops; i++) {
		const struct xf_op *op = &pl->ops[i];
		struct xf_aug_params p;
		int32_t x, y;
		uint32_t cw, ch;

		printf("%s %d", augrun_op_name(pl, i),
		    xf_op_applies(pl, i, key));
		if (op->kind == XF_OP_RRC) {
			xf_rrc_params(img.w, img.h, op->scale, op->ratio, key,
			    (uint64_t)i << 32, &x, &y, &cw, &ch);
			printf(" %d %d %u %u\n", x, y, cw, ch);
		} else if (op->kind == XF_OP_FLIP) {
			printf(" %d\n", own_draw(pl, i, key));
		} else if (xf_op_augment(op->kind)) {
			xf_aug_params(pl, i, key, img.w, img.h, &p);
			printf(" ");
			print_params(&p);
		} else if (op->kind == XF_OP_GAUSSIAN_BLUR) {
			printf(" %u %.9g\n", op->ksize,
			    (double)xf_blur_sigma(op, key, (uint64_t)i << 32));
		} else if (op->kind == XF_OP_SOLARIZE) {
			printf(" %.17g\n", op->threshold);
		} else {
			printf("\n");
		}
		if (xf_run_op(pl, i, &img, key, err, sizeof(err)) != 0) {
			fprintf(stderr, "augrun: op %zu: %s\n", i, err);
			goto out;
		}
	}
	printf("%u %u\n", img.w, img.h);
	ret = write_image(argv[4], &img) == 0 ? 0 : 1;
out:
	xf_free(img.px);
	return ret;
}

int
main(int argc, char **argv)
{
	struct xf_pipeline *pl = NULL;
	struct xf_aug_params p;
	struct xf_image img = {0};
	uint32_t w, h;
	size_t index;
	char err[512];
	int ret = 1;
	bool many;

	if (argc == 8 && strcmp(argv[1], "op") == 0)
		return run_op(argv + 2);
	if ((argc == 5 && strcmp(argv[1], "decisions") == 0) ||
	    (argc == 8 && strcmp(argv[1], "run") == 0)) {
		if (xf_pipeline_parse(argv[2], &pl, err, sizeof(err)) != 0) {
			fprintf(stderr, "augrun: %s\n", err);
			return 1;
		}
		if (pl->cache_at == pl->nops) {
			fprintf(stderr, "augrun: the pipeline has no cache\n");
			ret = 1;
		} else
			ret = argv[1][0] == 'd' ? run_decisions(pl, argv + 3)
						: run_ops(pl, argv + 3);
		xf_pipeline_free(pl);
		return ret;
	}
	many = argc == 8 && strcmp(argv[1], "draws") == 0;
	if (!many &&
	    !((argc == 7 || argc == 9) && strcmp(argv[1], "draw") == 0)) {
		usage();
		return 2;
	}
	if (parse_u32(argv[many ? 6 : 5], &w) != 0 ||
	    parse_u32(argv[many ? 7 : 6], &h) != 0) {
		usage();
		return 2;
	}
	if (xf_pipeline_parse(argv[2], &pl, err, sizeof(err)) != 0) {
		fprintf(stderr, "augrun: %s\n", err);
		return 1;
	}
	index = strtoul(argv[3], NULL, 10);
	if (index >= pl->nops || !xf_op_augment(pl->ops[index].kind)) {
		fprintf(
		    stderr, "augrun: op %zu is not an augmentation\n", index);
		goto out;
	}
	if (many) {
		uint64_t seed = strtoull(argv[4], NULL, 0);
		uint64_t count = strtoull(argv[5], NULL, 0);

		for (uint64_t n = 0; n < count; n++) {
			xf_aug_params(pl, index, rng_mix(seed + n), w, h, &p);
			print_params(&p);
		}
		ret = 0;
		goto out;
	}
	xf_aug_params(pl, index, strtoull(argv[4], NULL, 0), w, h, &p);
	print_params(&p);
	if (argc == 9) {
		img.w = w;
		img.h = h;
		if (read_image(argv[7], &img) != 0)
			goto out;
		if (xf_aug_apply(&p, &img) != 0) {
			fprintf(stderr, "augrun: out of memory\n");
			goto out;
		}
		if (write_image(argv[8], &img) != 0)
			goto out;
	}
	ret = 0;
out:
	xf_free(img.px);
	xf_pipeline_free(pl);
	return ret;
}
