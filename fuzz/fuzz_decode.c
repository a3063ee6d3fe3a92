/*
 * fuzz_decode - libFuzzer target: JPEG, PNG and WebP decode and the whole
 * pipeline.
 *
 * The input is a JPEG, PNG or WebP file (seeds of each in corpus/decode).
 * It goes through xf_decode (full size), then through a pipeline with DCT
 * scaling, a resize, a random crop, a flip and normalize, into float32
 * CHW and uint8 HWC buffers: what a worker does to a source file.  max_pixels is lowered to 4 MP so that a large header is
 * refused instead of tripping libFuzzer's RSS limit (the bound itself is
 * what is tested there).
 */
#include <stdint.h>
#include <stdlib.h>

#include "transforms/xf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct xf_pipeline *pl;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static float out[3 * 32 * 32];
	static uint8_t out8[3 * 32 * 32];
	struct xf_image img;
	char err[256];

	if (pl == NULL) {
		if (xf_pipeline_parse("decode resize(40) cache "
			"random_resized_crop(32) flip(0.5) normalize(imagenet)",
			&pl, err, sizeof(err)) != 0)
			abort();
		pl->max_pixels = 4u << 20;
	}
	if (xf_decode_max(data, size, 0, 0, 4u << 20, &img, err,
		sizeof(err)) == 0)
		free(img.px);
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
	return 0;
}
