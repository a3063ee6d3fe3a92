/*
 * augment-bench - what each augmentation of transforms/augment.c costs
 * per image, in process, next to the crop and the flip.
 *
 *   augment-bench [-r ROUNDS] [-s SIZE]
 *
 * On one thread with an arena installed as a worker does, ROUNDS (300)
 * times each: random_resized_crop(SIZE) of a 256x320 image (the draw and
 * xf_resize_box), flip of a SIZE x SIZE (224) image, each op of
 * _apply_op at a mid magnitude (bin 15 of TrivialAugmentWide's space),
 * ColorJitter's four, grayscale, and the whole pipeline ops with their
 * draws.  Each op runs on a fresh copy of a photo-like synthetic image;
 * the copy's own time is measured and subtracted.  The ops take turns
 * within each round, so that a machine's changing load falls on all of
 * them alike; prints each op's median over the rounds, ns per image.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "transforms/xf.h"

static double
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Smooth gradients with texture: what a resized crop of a photo holds. */
static void
fill(uint8_t *px, uint32_t w, uint32_t h)
{
	uint32_t s = 12345;

	for (uint32_t y = 0; y < h; y++)
		for (uint32_t x = 0; x < w; x++) {
			uint8_t *p = px + ((size_t)y * w + x) * 3;

			s = s * 1103515245u + 12345u;
			p[0] = (uint8_t)(x * 200 / w + (s >> 28));
			p[1] = (uint8_t)(y * 180 / h + (s >> 29));
			p[2] = (uint8_t)((x + y) * 90 / (w + h) + 60);
		}
}

static int
by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

enum { K_OP, K_JIT, K_PIPE, K_CROP, K_FLIP, K_COPY };

struct bench {
	const char *label;
	int kind, op;
	double v;
	const char *pipe;
};

int
main(int argc, char **argv)
{
	static const struct bench b[] = {
	    {"copy (subtracted)", K_COPY, 0, 0, NULL},
	    {"random_resized_crop", K_CROP, 0, 0, NULL},
	    {"flip", K_FLIP, 0, 0, NULL},
	    {"Identity", K_OP, XF_AUG_IDENTITY, 0, NULL},
	    {"ShearX", K_OP, XF_AUG_SHEAR_X, 0.495, NULL},
	    {"ShearY", K_OP, XF_AUG_SHEAR_Y, 0.495, NULL},
	    {"TranslateX", K_OP, XF_AUG_TRANSLATE_X, 16, NULL},
	    {"TranslateY", K_OP, XF_AUG_TRANSLATE_Y, 16, NULL},
	    {"Rotate", K_OP, XF_AUG_ROTATE, 67.5, NULL},
	    {"Brightness", K_OP, XF_AUG_BRIGHTNESS, 0.495, NULL},
	    {"Color", K_OP, XF_AUG_COLOR, 0.495, NULL},
	    {"Contrast", K_OP, XF_AUG_CONTRAST, 0.495, NULL},
	    {"Sharpness", K_OP, XF_AUG_SHARPNESS, 0.495, NULL},
	    {"Posterize", K_OP, XF_AUG_POSTERIZE, 5, NULL},
	    {"Solarize", K_OP, XF_AUG_SOLARIZE, 127.5, NULL},
	    {"AutoContrast", K_OP, XF_AUG_AUTOCONTRAST, 0, NULL},
	    {"Equalize", K_OP, XF_AUG_EQUALIZE, 0, NULL},
	    {"Invert", K_OP, XF_AUG_INVERT, 0, NULL},
	    {"adjust_brightness", K_JIT, 0, 1.3, NULL},
	    {"adjust_contrast", K_JIT, 1, 1.3, NULL},
	    {"adjust_saturation", K_JIT, 2, 1.3, NULL},
	    {"adjust_hue", K_JIT, 3, 0.1, NULL},
	    {"rgb_to_grayscale", K_JIT, 4, 0, NULL},
	    {"trivial_augment", K_PIPE, 0, 0, "trivial_augment"},
	    {"rand_augment(2,9)", K_PIPE, 0, 0, "rand_augment(2,9)"},
	    {"auto_augment(imagenet)", K_PIPE, 0, 0, "auto_augment"},
	    {"color_jitter(.4,.4,.4,.1)", K_PIPE, 0, 0,
		"color_jitter(0.4,0.4,0.4,0.1)"},
	    {"grayscale(0.2)", K_PIPE, 0, 0, "grayscale(0.2)"},
	};
	uint32_t rounds = 300, s = 224;
	struct xf_arena *arena = xf_arena_new(64u << 20);
	struct xf_image src, big;
	struct xf_pipeline *pl[sizeof(b) / sizeof(b[0])];
	double copy_ns = 0, *t;
	size_t nb;
	int c;

	while ((c = getopt(argc, argv, "r:s:")) != -1) {
		if (c == 'r')
			rounds = (uint32_t)atoi(optarg);
		else if (c == 's')
			s = (uint32_t)atoi(optarg);
		else {
			fprintf(stderr, "usage: augment-bench [-r ROUNDS] "
					"[-s SIZE]\n");
			return 2;
		}
	}
	if (rounds == 0 || s == 0 || arena == NULL)
		return 2;
	xf_arena_use(arena);
	src.w = src.h = s;
	big.w = 320;
	big.h = 256;
	src.px = malloc((size_t)s * s * 3);
	big.px = malloc((size_t)320 * 256 * 3);
	if (src.px == NULL || big.px == NULL) {
		free(src.px);
		free(big.px);
		return 1;
	}
	fill(src.px, s, s);
	fill(big.px, 320, 256);
	printf("%-28s %12s  (%ux%u, median of %u rounds, one thread)\n", "op",
	    "ns/image", s, s, rounds);
	nb = sizeof(b) / sizeof(b[0]);
	if ((t = calloc(nb * rounds, sizeof(*t))) == NULL)
		return 1;
	for (size_t i = 0; i < nb; i++) {
		char text[160], err[256];

		pl[i] = NULL;
		if (b[i].kind != K_PIPE)
			continue;
		snprintf(text, sizeof(text), "decode cache center_crop(%u) %s",
		    s, b[i].pipe);
		if (xf_pipeline_parse(text, &pl[i], err, sizeof(err)) != 0) {
			fprintf(stderr, "%s: %s\n", text, err);
			return 1;
		}
	}
	for (uint32_t r = 0; r < rounds; r++)
		for (size_t i = 0; i < nb; i++) {
			struct xf_image img = {.w = s, .h = s}, out;
			double scale[2] = {0.08, 1.0},
			       ratio[2] = {0.75, 4.0 / 3};
			double t0 = now_ns();
			int32_t x, y;
			uint32_t cw, ch;

			if (b[i].kind == K_CROP) {
				xf_rrc_params(320, 256, scale, ratio, r, 0, &x,
				    &y, &cw, &ch);
				if (xf_resize_box(&big, (uint32_t)x,
					(uint32_t)y, cw, ch, s, s, &out) != 0)
					return 1;
				xf_free(out.px);
				t[i * rounds + r] = now_ns() - t0;
				continue;
			}
			if ((img.px = xf_alloc((size_t)s * s * 3)) == NULL)
				return 1;
			memcpy(img.px, src.px, (size_t)s * s * 3);
			if (b[i].kind == K_FLIP)
				xf_flip(&img);
			else if (b[i].kind == K_OP)
				xf_aug_op(&img, b[i].op, b[i].v);
			else if (b[i].kind == K_JIT) {
				if (b[i].op == 0)
					xf_adjust_brightness(&img, b[i].v);
				else if (b[i].op == 1)
					xf_adjust_contrast(&img, b[i].v);
				else if (b[i].op == 2)
					xf_adjust_saturation(&img, b[i].v);
				else if (b[i].op == 3)
					xf_adjust_hue(&img, b[i].v);
				else
					xf_grayscale(&img);
			} else if (b[i].kind == K_PIPE) {
				struct xf_aug_params p;

				xf_aug_params(pl[i], 3,
				    r * 0x9e3779b97f4a7c15ULL, s, s, &p);
				xf_aug_apply(&p, &img);
			}
			xf_free(img.px);
			t[i * rounds + r] = now_ns() - t0;
		}
	for (size_t i = 0; i < nb; i++) {
		double ns;

		qsort(t + i * rounds, rounds, sizeof(*t), by_value);
		ns = t[i * rounds + rounds / 2];
		if (b[i].kind == K_COPY)
			copy_ns = ns;
		else if (b[i].kind != K_CROP)
			ns -= copy_ns;
		printf("%-28s %12.0f\n", b[i].label, ns);
		xf_pipeline_free(pl[i]);
	}
	free(t);
	xf_arena_use(NULL);
	xf_arena_free(arena);
	free(src.px);
	free(big.px);
	return 0;
}
