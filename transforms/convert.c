/*
 * convert.c - the output conversion: uint8, float16 or float32, HWC or
 * CHW, optionally normalized.
 *
 * Float values are torchvision's: ToTensor divides by 255 in float32 and
 * Normalize subtracts the mean and divides by the std, both in float32.
 * A pixel has only 256 values per channel, so each channel's results are
 * computed once into a table and the loops over the image only look up.
 */
#include <stdint.h>
#include <string.h>

#include "transforms/xf.h"

/* numpy's npy_floatbits_to_halfbits: round to nearest even. */
uint16_t
xf_float_to_half(float f)
{
	uint32_t b, fexp, fsig;
	uint16_t sgn, hexp, hsig;

	memcpy(&b, &f, sizeof(b));
	sgn = (uint16_t)((b & 0x80000000u) >> 16);
	fexp = b & 0x7f800000u;

	if (fexp >= 0x47800000u) { /* overflow, inf, NaN */
		if (fexp == 0x7f800000u && (b & 0x007fffffu) != 0) {
			uint16_t nan =
			    (uint16_t)(0x7c00u + ((b & 0x007fffffu) >> 13));

			if (nan == 0x7c00u)
				nan++; /* keep it a NaN */
			return sgn | nan;
		}
		return sgn | 0x7c00u;
	}
	if (fexp <= 0x38000000u) { /* subnormal half or zero */
		if (fexp < 0x33000000u)
			return sgn;
		fexp >>= 23;
		fsig = 0x00800000u + (b & 0x007fffffu);
		fsig >>= (113 - fexp);
		/* Ties to even; the shift may have dropped sticky bits. */
		if ((fsig & 0x3fffu) != 0x1000u || (b & 0x7ffu) != 0)
			fsig += 0x1000u;
		hsig = (uint16_t)(fsig >> 13);
		return sgn | hsig; /* a carry makes the smallest normal */
	}
	hexp = (uint16_t)((fexp - 0x38000000u) >> 13);
	fsig = b & 0x007fffffu;
	if ((fsig & 0x3fffu) != 0x1000u)
		fsig += 0x1000u;
	hsig = (uint16_t)(fsig >> 13);
	/* A carry into the exponent is right, up to inf. */
	return (uint16_t)(sgn + (uint16_t)(hsig + hexp));
}

/* The float value of every byte of each channel. */
static void
make_table(
    bool normalize, const float mean[3], const float std[3], float t[3][256])
{
	for (int c = 0; c < 3; c++)
		for (int v = 0; v < 256; v++) {
			float x = (float)v / 255.0f;

			if (normalize) {
				/* Two statements: no fused multiply-add. */
				x = x - mean[c];
				x = x / std[c];
			}
			t[c][v] = x;
		}
}

void
xf_convert(const struct xf_image *img, bool normalize, const float mean[3],
    const float std[3], enum xf_dtype dtype, enum xf_layout layout, void *dst)
{
	const uint8_t *px = img->px;
	size_t n = (size_t)img->w * img->h;
	float t[3][256];
	uint16_t t16[3][256];

	if (dtype == XF_UINT8) {
		uint8_t *d = dst;

		if (layout == XF_HWC) {
			memcpy(d, px, n * 3);
			return;
		}
		for (size_t i = 0; i < n; i++) {
			d[i] = px[i * 3];
			d[n + i] = px[i * 3 + 1];
			d[2 * n + i] = px[i * 3 + 2];
		}
		return;
	}
	make_table(normalize, mean, std, t);
	if (dtype == XF_FLOAT32) {
		float *d = dst;

		if (layout == XF_HWC) {
			for (size_t i = 0; i < n * 3; i += 3) {
				d[i] = t[0][px[i]];
				d[i + 1] = t[1][px[i + 1]];
				d[i + 2] = t[2][px[i + 2]];
			}
			return;
		}
		for (size_t i = 0; i < n; i++) {
			d[i] = t[0][px[i * 3]];
			d[n + i] = t[1][px[i * 3 + 1]];
			d[2 * n + i] = t[2][px[i * 3 + 2]];
		}
		return;
	}
	/* float16: the float32 value rounded, as numpy's astype does. */
	for (int c = 0; c < 3; c++)
		for (int v = 0; v < 256; v++)
			t16[c][v] = xf_float_to_half(t[c][v]);
	{
		uint16_t *d = dst;

		if (layout == XF_HWC) {
			for (size_t i = 0; i < n * 3; i += 3) {
				d[i] = t16[0][px[i]];
				d[i + 1] = t16[1][px[i + 1]];
				d[i + 2] = t16[2][px[i + 2]];
			}
			return;
		}
		for (size_t i = 0; i < n; i++) {
			d[i] = t16[0][px[i * 3]];
			d[n + i] = t16[1][px[i * 3 + 1]];
			d[2 * n + i] = t16[2][px[i * 3 + 2]];
		}
	}
}
