/*
 * convert.c - the output conversion: uint8, float16 or float32, HWC or
 * CHW, optionally normalized.  Layer: transforms (transforms/).
 *
 * Float values are torchvision's: ToTensor divides by 255 in float32 and
 * Normalize subtracts the mean and divides by the std, both in float32.
 * A pixel has only 256 values per channel, so each channel's results are
 * computed once into a table and the loops over the image only look up.
 * On x86-64 with AVX2 and F16C (checked at run time; FEEDFS_XF_SCALAR=1
 * forces the tables, for the tests), eight pixels at a time are computed
 * with the same float32 operations in the same order, which IEEE makes
 * give the same bits, and rounded to float16 by vcvtps2ph, round to
 * nearest even as numpy.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/xf.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_AVX2_KERNELS 1
#endif

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

#ifdef HAVE_AVX2_KERNELS
static bool
use_avx2(void)
{
	const char *e = getenv("FEEDFS_XF_SCALAR");

	if (e != NULL && *e != '\0' && strcmp(e, "0") != 0)
		return false;
	/*
	 * F16C from CPUID leaf 1 (ECX bit 29): clang (14) knows no "f16c"
	 * for __builtin_cpu_supports, and `make fuzz` builds with clang.
	 */
	unsigned a, b, c, d;

	return __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) &&
	       (c & bit_F16C) != 0;
}

/* x / 255, then (x - m) / s when normalizing: make_table's operations. */
__attribute__((target("avx2,f16c"))) static inline __m256
to_float(__m128i v8, bool normalize, __m256 m, __m256 s)
{
	__m256 x = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v8));

	x = _mm256_div_ps(x, _mm256_set1_ps(255.0f));
	if (normalize)
		x = _mm256_div_ps(_mm256_sub_ps(x, m), s);
	return x;
}

__attribute__((target("avx2,f16c"))) static inline void
store8(void *dst, size_t i, bool half, __m256 x)
{
	if (half)
		_mm_storeu_si128((__m128i *)((uint16_t *)dst + i),
		    _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
	else
		_mm256_storeu_ps((float *)dst + i, x);
}

/*
 * The pixels [0, n8) (n8 a multiple of 8) of a float conversion, eight
 * at a time (24 bytes in).  HWC: the channel of byte k is k % 3, so the
 * mean and std come in three patterns; CHW: each channel's eight bytes
 * are gathered from two overlapping 16-byte loads.
 */
__attribute__((target("avx2,f16c"))) static void
convert_avx2(const uint8_t *px, size_t n, size_t n8, bool normalize,
    const float mean[3], const float std[3], bool half,
    enum xf_layout layout, void *dst)
{
	if (layout == XF_HWC) {
		__m256 m[3], s[3];

		for (int g = 0; g < 3; g++) {
			float mv[8], sv[8];

			for (int k = 0; k < 8; k++) {
				mv[k] = mean[(g * 8 + k) % 3];
				sv[k] = std[(g * 8 + k) % 3];
			}
			m[g] = _mm256_loadu_ps(mv);
			s[g] = _mm256_loadu_ps(sv);
		}
		for (size_t i = 0; i < n8 * 3; i += 24)
			for (int g = 0; g < 3; g++)
				store8(dst, i + 8 * g, half,
				    to_float(_mm_loadl_epi64((const __m128i *)(
						 px + i + 8 * g)),
					normalize, m[g], s[g]));
		return;
	} else {
		__m128i ma[3], mb[3];
		__m256 m[3], s[3];

		for (int c = 0; c < 3; c++) {
			int8_t a[16], b[16];

			for (int k = 0; k < 16; k++) {
				int q = 3 * k + c;

				a[k] = k < 8 && q < 16 ? (int8_t)q : -1;
				b[k] = k < 8 && q >= 16 ? (int8_t)(q - 8) : -1;
			}
			ma[c] = _mm_loadu_si128((const __m128i *)a);
			mb[c] = _mm_loadu_si128((const __m128i *)b);
			m[c] = _mm256_set1_ps(mean[c]);
			s[c] = _mm256_set1_ps(std[c]);
		}
		for (size_t i = 0; i < n8; i += 8) {
			const uint8_t *p = px + i * 3;
			__m128i a = _mm_loadu_si128((const __m128i *)p);
			__m128i b = _mm_loadu_si128((const __m128i *)(p + 8));

			for (int c = 0; c < 3; c++) {
				__m128i v = _mm_or_si128(
				    _mm_shuffle_epi8(a, ma[c]),
				    _mm_shuffle_epi8(b, mb[c]));

				store8(dst, c * n + i, half,
				    to_float(v, normalize, m[c], s[c]));
			}
		}
	}
}
#endif

void
xf_convert(const struct xf_image *img, bool normalize, const float mean[3],
    const float std[3], enum xf_dtype dtype, enum xf_layout layout, void *dst)
{
	const uint8_t *px = img->px;
	size_t n = (size_t)img->w * img->h;
	float t[3][256];
	uint16_t t16[3][256];
	size_t skip = 0; /* pixels already done */

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
#ifdef HAVE_AVX2_KERNELS
	if (n >= 8 && use_avx2()) {
		static const float zero[3], one[3] = {1, 1, 1};

		skip = n & ~(size_t)7;
		convert_avx2(px, n, skip, normalize, normalize ? mean : zero,
		    normalize ? std : one, dtype == XF_FLOAT16, layout, dst);
		if (skip == n)
			return;
		/* The last pixels from the tables, as below. */
	}
#endif
	make_table(normalize, mean, std, t);
	if (dtype == XF_FLOAT32) {
		float *d = dst;

		if (layout == XF_HWC) {
			for (size_t i = skip * 3; i < n * 3; i += 3) {
				d[i] = t[0][px[i]];
				d[i + 1] = t[1][px[i + 1]];
				d[i + 2] = t[2][px[i + 2]];
			}
			return;
		}
		for (size_t i = skip; i < n; i++) {
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
			for (size_t i = skip * 3; i < n * 3; i += 3) {
				d[i] = t16[0][px[i]];
				d[i + 1] = t16[1][px[i + 1]];
				d[i + 2] = t16[2][px[i + 2]];
			}
			return;
		}
		for (size_t i = skip; i < n; i++) {
			d[i] = t16[0][px[i * 3]];
			d[n + i] = t16[1][px[i * 3 + 1]];
			d[2 * n + i] = t16[2][px[i * 3 + 2]];
		}
	}
}
