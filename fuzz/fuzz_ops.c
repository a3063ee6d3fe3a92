/*
 * fuzz_ops - libFuzzer target: the pipeline parser and the ops after
 * `cache` (issue 28) on images of any size, degenerate ones included.
 *
 * The input is
 *
 *	bytes 0-1	image width - 1, little endian, mod 512 (1..512)
 *	bytes 2-3	image height - 1, the same, then lowered so that
 *			width x height <= 65536 (1xN, Nx1, 1x1 all occur)
 *	byte 4		dtype (bits 0-1: uint8, float16, float32, float32)
 *			and layout (bit 2: HWC, CHW)
 *	bytes 5-12	the random key
 *	the rest	the pipeline's tail, text: "decode cache " + it is
 *			parsed (any text must parse or give a message)
 *
 * and, where it parses and passes xf_check_output, the tail runs on an
 * image of that size (pixels from the key) through xf_run_suffix into a
 * buffer of exactly xf_sample_bytes: ASan sees any read or write out of
 * bounds.  max_pixels is 65536 so that no op makes a larger image, and a
 * gaussian_blur over 255 is not run (its cost, not its bounds, grows).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/rng.h"
#include "transforms/xf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HEAD "decode cache "
#define MAX_PX 65536u

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum xf_dtype dts[4] = {
	    XF_UINT8, XF_FLOAT16, XF_FLOAT32, XF_FLOAT32};
	struct xf_pipeline *pl = NULL;
	struct xf_image img;
	uint32_t w, h;
	uint64_t key = 0;
	enum xf_dtype dtype;
	enum xf_layout layout;
	char err[512], *text;
	void *dst;
	int r;

	if (size < 13)
		return 0;
	w = (uint32_t)(data[0] | data[1] << 8) % 512 + 1;
	h = (uint32_t)(data[2] | data[3] << 8) % 512 + 1;
	if (w * h > MAX_PX)
		h = MAX_PX / w;
	dtype = dts[data[4] & 3];
	layout = data[4] & 4 ? XF_CHW : XF_HWC;
	for (int i = 0; i < 8; i++)
		key |= (uint64_t)data[5 + i] << (8 * i);
	if ((text = malloc(strlen(HEAD) + size - 13 + 1)) == NULL)
		return 0;
	memcpy(text, HEAD, strlen(HEAD));
	memcpy(text + strlen(HEAD), data + 13, size - 13);
	text[strlen(HEAD) + size - 13] = '\0';
	err[0] = '\0';
	r = xf_pipeline_parse(text, &pl, err, sizeof(err));
	free(text);
	if (r != 0) {
		if (pl != NULL || err[0] == '\0')
			abort(); /* an error must say why */
		return 0;
	}
	if (xf_check_output(pl, dtype, err, sizeof(err)) != 0) {
		if (err[0] == '\0')
			abort();
		xf_pipeline_free(pl);
		return 0;
	}
	for (size_t i = 0; i < pl->nops; i++)
		if (pl->ops[i].kind == XF_OP_GAUSSIAN_BLUR &&
		    pl->ops[i].ksize > 255)
			goto out;
	if ((uint64_t)pl->out_w * pl->out_h > MAX_PX)
		goto out;
	pl->max_pixels = MAX_PX;
	img.w = w;
	img.h = h;
	if ((img.px = xf_alloc((size_t)w * h * 3)) == NULL)
		goto out;
	for (size_t i = 0; i < (size_t)w * h * 3; i += 8) {
		uint64_t v = rng_u64(key, i);
		size_t n =
		    (size_t)w * h * 3 - i < 8 ? (size_t)w * h * 3 - i : 8;

		memcpy(img.px + i, &v, n);
	}
	/* Exactly the sample's bytes: ASan sees a write past them. */
	if ((dst = malloc(xf_sample_bytes(pl, dtype))) == NULL) {
		xf_free(img.px);
		goto out;
	}
	r = xf_run_suffix(pl, &img, key, dtype, layout, dst);
	if (r != 0 && r != -EINVAL && r != -EFBIG && r != -ENOMEM)
		abort();
	free(dst);
out:
	xf_pipeline_free(pl);
	return 0;
}
