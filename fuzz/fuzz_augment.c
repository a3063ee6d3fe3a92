/*
 * fuzz_augment - libFuzzer target: the augmentations of
 * transforms/augment.c on images of fuzzer-chosen, often degenerate,
 * sizes (1x1, 1xN, Nx1, huge aspect ratios).
 *
 * Input: byte 0 picks the op (one of _apply_op's, a ColorJitter
 * function, grayscale, or a whole pipeline op with drawn parameters),
 * bytes 1-2 the width and 3-4 the height (each 1..1024, at most 64K
 * pixels), bytes 5-6 the magnitude or factor, bytes 7-14 the key; the
 * rest fills the pixels (repeated).  Every op must keep the size, return
 * 0 for a magnitude torchvision accepts, and read and write nothing
 * outside the image (ASan).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/xf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const pipelines[] = {
    "decode cache center_crop(4) trivial_augment",
    "decode cache center_crop(4) rand_augment(4,30)",
    "decode cache center_crop(4) rand_augment(1,0)",
    "decode cache center_crop(4) auto_augment(imagenet)",
    "decode cache center_crop(4) color_jitter(0.8,0.8,0.8,0.5)",
    "decode cache center_crop(4) color_jitter(1.5,0,2)",
    "decode cache center_crop(4) grayscale(0.5)",
};
#define NPIPE (sizeof(pipelines) / sizeof(pipelines[0]))

static struct xf_pipeline *pl[NPIPE];

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xf_image img;
	uint32_t w, h, sel;
	uint64_t key = 0;
	double u;
	size_t n;
	char err[256];
	int r = 0;

	if (pl[0] == NULL)
		for (size_t k = 0; k < NPIPE; k++)
			if (xf_pipeline_parse(
				pipelines[k], &pl[k], err, sizeof(err)) != 0)
				abort();
	if (size < 15)
		return 0;
	sel = data[0] % (XF_AUG_COUNT + 5 + NPIPE);
	w = 1 + ((uint32_t)data[1] << 8 | data[2]) % 1024;
	h = 1 + ((uint32_t)data[3] << 8 | data[4]) % 1024;
	if ((uint64_t)w * h > 65536)
		h = 65536 / w;
	u = (double)((uint32_t)data[5] << 8 | data[6]) / 65535.0; /* 0..1 */
	for (int k = 0; k < 8; k++)
		key = key << 8 | data[7 + k];
	n = (size_t)w * h * 3;
	img.w = w;
	img.h = h;
	if ((img.px = malloc(n)) == NULL)
		return 0;
	for (size_t k = 0; k < n; k++)
		img.px[k] = size > 15 ? data[15 + k % (size - 15)] : 0;
	if (sel < XF_AUG_COUNT) {
		/* magnitudes beyond every space's: shear 2, 200 px, 360 deg */
		double mag = (2 * u - 1) * (sel == XF_AUG_ROTATE	   ? 360
					       : sel <= XF_AUG_SHEAR_Y	   ? 2
					       : sel <= XF_AUG_TRANSLATE_Y ? 200
					       : sel == XF_AUG_SOLARIZE	   ? 300
									   : 1);
		if (sel == XF_AUG_POSTERIZE)
			mag = floor(u * 8.999);
		r = xf_aug_op(&img, (int)sel, mag);
	} else if (sel == XF_AUG_COUNT)
		xf_adjust_brightness(&img, 4 * u);
	else if (sel == XF_AUG_COUNT + 1)
		xf_adjust_contrast(&img, 4 * u);
	else if (sel == XF_AUG_COUNT + 2)
		xf_adjust_saturation(&img, 4 * u);
	else if (sel == XF_AUG_COUNT + 3)
		xf_adjust_hue(&img, u - 0.5);
	else if (sel == XF_AUG_COUNT + 4)
		xf_grayscale(&img);
	else {
		struct xf_aug_params p;
		struct xf_pipeline *q = pl[sel - XF_AUG_COUNT - 5];

		if (xf_aug_params(q, 3, key, w, h, &p) != 0)
			abort();
		r = xf_aug_apply(&p, &img);
	}
	if (r != 0 || img.w != w || img.h != h)
		abort();
	free(img.px);
	return 0;
}
