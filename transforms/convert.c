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
 * as numpy; float32 CHW with AVX-512 VBMI by byte permutes, 64 at a time
 * (convert_vbmi.c; FEEDFS_XF_AVX512=0 forces the AVX2 loops).  A part of
 * a sample's output is convert_range.c's.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/convert_int.h"

#ifdef HAVE_AVX2_KERNELS
#include <immintrin.h>

#include "transforms/cpu.h"
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

/* Its inverse, exact (mix.c blends halves in float32). */
float
xf_half_to_float(uint16_t h)
{
	uint32_t sgn = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f,
		 s = h & 0x3ffu, b;
	float f;

	if (e == 0x1f)
		b = sgn | 0x7f800000u | (s << 13);
	else if (e != 0)
		b = sgn | ((e + 112) << 23) | (s << 13);
	else if (s == 0)
		b = sgn;
	else { /* subnormal: s * 2^-24, exact in float32 */
		f = (float)s * 0x1.0p-24f;
		return sgn ? -f : f;
	}
	memcpy(&f, &b, sizeof(f));
	return f;
}

static inline uint32_t
float_bits(float x)
{
	uint32_t b;

	memcpy(&b, &x, sizeof(b));
	return b;
}

const struct tables *
xf_conv_tables(bool normalize, const float mean[3], const float std[3])
{
	static _Thread_local struct {
		bool made, normalize;
		float mean[3], std[3];
		struct tables tb;
	} k;
	table_row *t = k.tb.t;

	if (k.made && k.normalize == normalize &&
	    (!normalize || (memcmp(k.mean, mean, sizeof(k.mean)) == 0 &&
			       memcmp(k.std, std, sizeof(k.std)) == 0)))
		return &k.tb;
	k.made = true;
	k.normalize = normalize;
	if (normalize) {
		memcpy(k.mean, mean, sizeof(k.mean));
		memcpy(k.std, std, sizeof(k.std));
	}
	for (int c = 0; c < 3; c++) {
		k.tb.mb[c] = 0;
		for (unsigned j = 0; j < 64; j++) {
			unsigned src = 3 * vbmi_order(j) + (unsigned)c;

			k.tb.ia[c][j] = (uint8_t)(src & 127);
			k.tb.ib[c][j] = (uint8_t)((src - 64) & 127);
			if (src >= 128)
				k.tb.mb[c] |= 1ull << j;
		}
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
			for (int b = 0; b < 4; b++)
				k.tb.planes[c][b][v] =
				    (uint8_t)(float_bits(x) >> (8 * b));
			k.tb.half[c][v] = xf_float_to_half(x);
			k.tb.halff[c][v] = xf_half_to_float(k.tb.half[c][v]);
		}
	return &k.tb;
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

/*
 * Eight values of channel table t at the byte offsets v (of px), with
 * pv: blended with those of pv (the same offsets) as xf_mix_images's
 * mixup blends, prev * a + own * c, each product rounded apart.
 */
__attribute__((target("avx2,f16c"))) static inline __m256
lookup8(
    const float *t, __m256i v, __m256i pvv, bool blend, __m256 va, __m256 vc)
{
	__m256 x = _mm256_i32gather_ps(t, v, 4);

	if (!blend)
		return x;
	return _mm256_add_ps(_mm256_mul_ps(_mm256_i32gather_ps(t, pvv, 4), va),
	    _mm256_mul_ps(x, vc));
}

/* Eight bytes at p as offsets into the tables: plus off (their rows). */
__attribute__((target("avx2,f16c"))) static inline __m256i
hwc8(const uint8_t *p, __m256i off)
{
	return _mm256_add_epi32(
	    _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)), off);
}

/* The shuffles that take channel ch's eight bytes (of eight pixels) out
 * of two overlapping 16-byte loads, at p and p + 8: ma's, then mb's. */
__attribute__((target("avx2,f16c"))) static inline void
chw_shuffles(int ch, __m128i *ma, __m128i *mb)
{
	int8_t sa[16], sb[16];

	for (int k = 0; k < 16; k++) {
		int q = 3 * k + ch;

		sa[k] = k < 8 && q < 16 ? (int8_t)q : -1;
		sb[k] = k < 8 && q >= 16 ? (int8_t)(q - 8) : -1;
	}
	*ma = _mm_loadu_si128((const __m128i *)sa);
	*mb = _mm_loadu_si128((const __m128i *)sb);
}

/* A channel's eight bytes of the 24 at p (chw_shuffles'), as offsets. */
__attribute__((target("avx2,f16c"))) static inline __m256i
chw8(const uint8_t *p, __m128i ma, __m128i mb)
{
	return _mm256_cvtepu8_epi32(_mm_or_si128(
	    _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)p), ma),
	    _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 8)), mb)));
}

/* The loops of convert_avx2 and convert_mixup_avx2 (blend a constant). */
__attribute__((target("avx2,f16c"), always_inline)) static inline void
convert8(const uint8_t *px, const uint8_t *pv, float a, float c, size_t n,
    size_t n8, const table_row *t, bool half, enum xf_layout layout,
    bool may_stream, void *dst, const bool blend)
{
	const float *t0 = &t[0][0];
	bool stream = may_stream && n * 3 * (half ? 2 : 4) >= STREAM_MIN &&
		      ((uintptr_t)dst & 31) == 0 &&
		      (layout == XF_HWC || n % 8 == 0);
	__m256 va = _mm256_set1_ps(a), vc = _mm256_set1_ps(c);
	__m256i zero = _mm256_setzero_si256();

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
				__m256i v = hwc8(px + i + 8 * g, off[g]);
				__m256i w =
				    blend ? hwc8(pv + i + 8 * g, off[g]) : zero;

				store8(dst, i + 8 * g, half, stream,
				    lookup8(t0, v, w, blend, va, vc));
			}
		if (stream)
			_mm_sfence();
		return;
	}
	__m128i ma[3], mb[3];

	for (int ch = 0; ch < 3; ch++)
		chw_shuffles(ch, &ma[ch], &mb[ch]);
	for (size_t i = 0; i < n8; i += 8)
		for (int ch = 0; ch < 3; ch++) {
			__m256i v = chw8(px + i * 3, ma[ch], mb[ch]);
			__m256i w =
			    blend ? chw8(pv + i * 3, ma[ch], mb[ch]) : zero;

			store8(dst, ch * n + i, half, stream,
			    lookup8(t[ch], v, w, blend, va, vc));
		}
	if (stream)
		_mm_sfence();
}

__attribute__((target("avx2,f16c"))) static void
convert_avx2(const uint8_t *px, size_t n, size_t n8, const table_row *t,
    bool half, enum xf_layout layout, bool may_stream, void *dst)
{
	convert8(px, px, 0, 0, n, n8, t, half, layout, may_stream, dst, false);
}

/* convert_avx2 with pv blended in: prev * a + own * c. */
__attribute__((target("avx2,f16c"))) static void
convert_mixup_avx2(const uint8_t *px, const uint8_t *pv, float a, float c,
    size_t n, size_t n8, const table_row *t, bool half, enum xf_layout layout,
    bool may_stream, void *dst)
{
	convert8(px, pv, a, c, n, n8, t, half, layout, may_stream, dst, true);
}
/*
 * Channel ch's values of pixels [0, n8) (n8 a multiple of 8) to dst, as
 * convert8's CHW loop makes them (one channel's run: convert_range.c).
 */
__attribute__((target("avx2,f16c"), always_inline)) static inline void
run8(const uint8_t *px, const uint8_t *pv, float a, float c, int ch,
    size_t n8, const float *t, bool half, void *dst, const bool blend)
{
	__m256 va = _mm256_set1_ps(a), vc = _mm256_set1_ps(c);
	__m256i zero = _mm256_setzero_si256();
	__m128i ma, mb;

	chw_shuffles(ch, &ma, &mb);
	for (size_t i = 0; i < n8; i += 8) {
		__m256i v = chw8(px + i * 3, ma, mb);
		__m256i w = blend ? chw8(pv + i * 3, ma, mb) : zero;

		store8(dst, i, half, false, lookup8(t, v, w, blend, va, vc));
	}
}

__attribute__((target("avx2,f16c"))) static void
run_plain(const uint8_t *px, int ch, size_t n8, const float *t, bool half,
    void *dst)
{
	run8(px, px, 0, 0, ch, n8, t, half, dst, false);
}

__attribute__((target("avx2,f16c"))) static void
run_mixup(const uint8_t *px, const uint8_t *pv, float a, float c, int ch,
    size_t n8, const float *t, bool half, void *dst)
{
	run8(px, pv, a, c, ch, n8, t, half, dst, true);
}

void
xf_conv_run_avx2(const uint8_t *px, const uint8_t *pv, float a, float c,
    int ch, size_t n8, const table_row *t, bool half, void *dst)
{
	if (pv != NULL)
		run_mixup(px, pv, a, c, ch, n8, t[ch], half, dst);
	else
		run_plain(px, ch, n8, t[ch], half, dst);
}
#endif

struct kernels
xf_conv_kernels(void)
{
	struct kernels k = {false, false, true};

#ifdef HAVE_AVX2_KERNELS
	k.avx2 = xf_use_avx2_f16c();
	k.vbmi = k.avx2 && xf_use_avx512_vbmi();
#endif
	return k;
}

void
xf_conv_image(const struct xf_image *img, const uint8_t *pv, float a,
    float c, bool normalize, const float mean[3], const float std[3],
    enum xf_dtype dtype, enum xf_layout layout, struct kernels k, void *dst)
{
	const uint8_t *px = img->px;
	size_t n = (size_t)img->w * img->h;
	const struct tables *tb;
	const table_row *t;
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
	tb = xf_conv_tables(normalize, mean, std);
	/* A blend of halves: each value as the plain conversion stores it,
	 * then the blend in float32, rounded once. */
	t = pv != NULL && dtype == XF_FLOAT16 ? tb->halff : tb->t;
#ifdef HAVE_AVX2_KERNELS
	if (pv == NULL && dtype == XF_FLOAT32 && layout == XF_CHW && n >= 64 &&
	    k.vbmi) {
		bool stream = k.stream && n * 12 >= STREAM_MIN &&
			      ((uintptr_t)dst & 63) == 0 && n % 16 == 0;

		skip = n & ~(size_t)63;
		xf_conv_chw_vbmi(px, n, skip, tb, stream, dst);
		if (skip == n)
			return;
		/* The pixels left: the AVX2 loops, then the tables. */
	}
	if (n - skip >= 8 && k.avx2) {
		size_t es = dtype == XF_FLOAT16 ? 2 : 4;
		size_t at = (layout == XF_HWC ? 3 : 1) * skip;
		size_t k8 = (n - skip) & ~(size_t)7;

		if (pv != NULL)
			convert_mixup_avx2(px + 3 * skip, pv + 3 * skip, a,
			    c, n, k8, t, dtype == XF_FLOAT16, layout, k.stream,
			    (uint8_t *)dst + at * es);
		else
			convert_avx2(px + 3 * skip, n, k8, t,
			    dtype == XF_FLOAT16, layout, k.stream,
			    (uint8_t *)dst + at * es);
		skip += k8;
		if (skip == n)
			return;
		/* The last pixels from the tables, as below. */
	}
#endif
	if (pv != NULL) {
		/* xf_mix_images's blend_scalar, of the tables' values */
		for (size_t i = skip; i < n; i++)
			for (int ch = 0; ch < 3; ch++) {
				size_t at =
				    layout == XF_HWC ? i * 3 + ch : ch * n + i;
				float x = t[ch][pv[i * 3 + ch]] * a,
				      y = t[ch][px[i * 3 + ch]] * c;

				if (dtype == XF_FLOAT32)
					((float *)dst)[at] = x + y;
				else
					((uint16_t *)dst)[at] =
					    xf_float_to_half(x + y);
			}
		return;
	}
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
	/* float16 */
	{
		const uint16_t(*t16)[256] = tb->half;
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

void
xf_convert(const struct xf_image *img, bool normalize, const float mean[3],
    const float std[3], enum xf_dtype dtype, enum xf_layout layout, void *dst)
{
	xf_conv_image(img, NULL, 0, 0, normalize, mean, std, dtype, layout,
	    xf_conv_kernels(), dst);
}
