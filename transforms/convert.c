/*
 * convert.c - the output conversion: uint8, float16 or float32, HWC or
 * CHW, optionally normalized.  Layer: transforms (transforms/).
 *
 * Float values are torchvision's: ToTensor divides by 255 in float32 and
 * Normalize subtracts the mean and divides by the std, both in float32.
 * A pixel has only 256 values per channel, so each channel's results are
 * computed once into a table (kept per thread while mean and std stay
 * the same) and the loops over the image only look up.  On x86-64 with
 * AVX2 and F16C (checked at run time; FEEDFS_XF_SCALAR=1 forces the
 * plain loops, for the tests), eight values at a time are looked up by
 * one gather and rounded to float16 by vcvtps2ph, round to nearest even
 * as numpy.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/xf.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "transforms/cpu.h"
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

/* One channel's float value of every byte. */
typedef float table_row[256];

/* The float value of every byte of each channel (three rows): this
 * thread's table, made again when normalize, mean or std change. */
static const table_row *
make_table(bool normalize, const float mean[3], const float std[3])
{
	static _Thread_local struct {
		bool made, normalize;
		float mean[3], std[3];
		float t[3][256];
	} k;
	table_row *t = k.t;

	if (k.made && k.normalize == normalize &&
	    (!normalize || (memcmp(k.mean, mean, sizeof(k.mean)) == 0 &&
			       memcmp(k.std, std, sizeof(k.std)) == 0)))
		return k.t;
	k.made = true;
	k.normalize = normalize;
	if (normalize) {
		memcpy(k.mean, mean, sizeof(k.mean));
		memcpy(k.std, std, sizeof(k.std));
	}
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
	return k.t;
}

#ifdef HAVE_AVX2_KERNELS
/*
 * Eight values to dst[i..]: streamed past the caches (stream: dst aligned
 * for it) or stored.
 */
__attribute__((target("avx2,f16c"))) static inline void
store8(void *dst, size_t i, bool half, bool stream, __m256 x)
{
	if (half) {
		__m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
		__m128i *d = (__m128i *)((uint16_t *)dst + i);

		if (stream)
			_mm_stream_si128(d, h);
		else
			_mm_storeu_si128(d, h);
	} else if (stream)
		_mm256_stream_ps((float *)dst + i, x);
	else
		_mm256_storeu_ps((float *)dst + i, x);
}

/*
 * The pixels [0, n8) (n8 a multiple of 8) of a float conversion, eight
 * at a time (24 bytes in), each value looked up in t by vpgatherdd: the
 * table's own bits, so the same as the loops below (computing them, two
 * divisions per eight values, took twice the time).  HWC: the channel of
 * byte k is k % 3, so the offsets into t come in three patterns; CHW:
 * each channel's eight bytes are gathered from two overlapping 16-byte
 * loads.
 *
 * An image's output of STREAM_MIN bytes and more goes past the caches
 * (non-temporal stores, where dst and every plane are aligned for them):
 * a batch of such images is tens of megabytes, read next by the batch op
 * or the reader's copy long after it would have left the caches, and
 * stores that first read each line (write-allocate) cost a quarter of
 * the time of 224 x 224 float32 (tier-recv: 82 against 66 us).
 */
#define STREAM_MIN (128u << 10)

__attribute__((target("avx2,f16c"))) static void
convert_avx2(const uint8_t *px, size_t n, size_t n8, const table_row *t,
    bool half, enum xf_layout layout, void *dst)
{
	const float *t0 = &t[0][0];
	bool stream = n * 3 * (half ? 2 : 4) >= STREAM_MIN &&
		      ((uintptr_t)dst & 31) == 0 &&
		      (layout == XF_HWC || n % 8 == 0);

	if (layout == XF_HWC) {
		__m256i off[3];

		for (int g = 0; g < 3; g++) {
			int32_t o[8];

			for (int k = 0; k < 8; k++)
				o[k] = 256 * ((g * 8 + k) % 3);
			off[g] = _mm256_loadu_si256((const __m256i *)o);
		}
		for (size_t i = 0; i < n8 * 3; i += 24)
			for (int g = 0; g < 3; g++) {
				__m256i v = _mm256_add_epi32(
				    _mm256_cvtepu8_epi32(_mm_loadl_epi64(
					(const __m128i *)(px + i + 8 * g))),
				    off[g]);

				store8(dst, i + 8 * g, half, stream,
				    _mm256_i32gather_ps(t0, v, 4));
			}
		if (stream)
			_mm_sfence();
		return;
	}
	__m128i ma[3], mb[3];

	for (int c = 0; c < 3; c++) {
		int8_t a[16], b[16];

		for (int k = 0; k < 16; k++) {
			int q = 3 * k + c;

			a[k] = k < 8 && q < 16 ? (int8_t)q : -1;
			b[k] = k < 8 && q >= 16 ? (int8_t)(q - 8) : -1;
		}
		ma[c] = _mm_loadu_si128((const __m128i *)a);
		mb[c] = _mm_loadu_si128((const __m128i *)b);
	}
	for (size_t i = 0; i < n8; i += 8) {
		const uint8_t *p = px + i * 3;
		__m128i a = _mm_loadu_si128((const __m128i *)p);
		__m128i b = _mm_loadu_si128((const __m128i *)(p + 8));

		for (int c = 0; c < 3; c++) {
			__m128i v = _mm_or_si128(_mm_shuffle_epi8(a, ma[c]),
			    _mm_shuffle_epi8(b, mb[c]));

			store8(dst, c * n + i, half, stream,
			    _mm256_i32gather_ps(
				t[c], _mm256_cvtepu8_epi32(v), 4));
		}
	}
	if (stream)
		_mm_sfence();
}
#endif

void
xf_convert(const struct xf_image *img, bool normalize, const float mean[3],
    const float std[3], enum xf_dtype dtype, enum xf_layout layout, void *dst)
{
	const uint8_t *px = img->px;
	size_t n = (size_t)img->w * img->h;
	const table_row *t;
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
	t = make_table(normalize, mean, std);
#ifdef HAVE_AVX2_KERNELS
	if (n >= 8 && xf_use_avx2_f16c()) {
		skip = n & ~(size_t)7;
		convert_avx2(px, n, skip, t, dtype == XF_FLOAT16, layout, dst);
		if (skip == n)
			return;
		/* The last pixels from the tables, as below. */
	}
#endif
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
