/*
 * fuzz_decode - libFuzzer target: JPEG, PNG and WebP decode and the whole
 * pipeline.
 *
 * The input is a JPEG, PNG or WebP file (seeds of each in corpus/decode).
 * It goes through xf_decode (full size), then through two pipelines with
 * DCT scaling (decode(scaled)), one with a resize and one with a shrink
 * (whose prefix keeps the source's size for the crop's box), a random
 * crop, a flip and normalize, into float32 CHW and uint8 HWC buffers:
 * what a worker does to a source file.  max_pixels is lowered to 4 MP so
 * that a large header is refused instead of tripping libFuzzer's RSS
 * limit (the bound itself is what is tested there).
 */
#include <stdint.h>
#include <stdlib.h>

#include "transforms/xf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const texts[] = {
    "decode(scaled) resize(40) cache random_resized_crop(32) flip(0.5) "
    "normalize(imagenet)",
    "decode(scaled) shrink(40) cache flip(0.5) random_resized_crop(32) "
    "normalize(imagenet)",
};
static struct xf_pipeline *pls[2];

/* The prefix and suffix of pl on the input, into both outputs. */
static void
run(const struct xf_pipeline *pl, const uint8_t *data, size_t size)
{
	static float out[3 * 32 * 32];
	static uint8_t out8[3 * 32 * 32];
	struct xf_image img;
	char err[256];

	if (xf_run_prefix(pl, data, size, &img, err, sizeof(err)) == 0) {
		struct xf_image copy = img;
		size_t n = (size_t)img.w * img.h * 3;

		if ((copy.px = malloc(n ? n : 1)) == NULL)
			abort();
		for (size_t i = 0; i < n; i++)
			copy.px[i] = img.px[i];
		xf_run_suffix(pl, &img, size, XF_FLOAT32, XF_CHW, out);
		xf_run_suffix(pl, &copy, size + 1, XF_UINT8, XF_HWC, out8);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xf_image img;
	char err[256];

	for (int i = 0; i < 2 && pls[1] == NULL; i++) {
		if (xf_pipeline_parse(texts[i], &pls[i], err, sizeof(err)) != 0)
			abort();
		pls[i]->max_pixels = 4u << 20;
	}
	if (xf_decode_max(data, size, 0, 0, 4u << 20, &img, err, sizeof(err)) ==
	    0)
		free(img.px);
	run(pls[0], data, size);
	run(pls[1], data, size);
	return 0;
}
