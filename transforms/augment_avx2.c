/*
 * augment_avx2.c - layer: transforms (transforms/), under
 * augment_color.c and augment_geom.c, which call it only where
 * aug_use_avx2.  adjust_hue and the affine grid of the geometric ops,
 * adjust_saturation, rgb_to_grayscale and contrast's gray mean, 8 pixels
 * at a time, with the float32 operations of augment_color.c's hue1,
 * gray1 and blend1 and augment_geom.c's grid1 in the same order: IEEE
 * add, sub, mul and div round the same in a vector lane as in a scalar,
 * and this file is compiled for AVX2 without FMA, so nothing is fused.
 * Empty where the compiler targets no x86-64.
 */
#include <stdlib.h>
#include <string.h>

#include "transforms/augment_int.h"
#include "transforms/cpu.h"

#ifdef HAVE_AUG_AVX2
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

/* x < 0 ? 0 : x > 1 ? 1 : x for x not NaN (-0 stays below 1/255 either
 * way: both truncate to byte 0). */
AVX2 static inline __m256
clamp01(__m256 x)
{
	return _mm256_min_ps(
	    _mm256_max_ps(x, _mm256_setzero_ps()), _mm256_set1_ps(1.0f));
}

/* a where m, else b */
AVX2 static inline __m256
pick(__m256 m, __m256 a, __m256 b)
{
	return _mm256_blendv_ps(b, a, m);
}

/* 8 RGB pixels (24 bytes at p, nothing past them read) as floats. */
AVX2 static inline void
load_rgb8(const uint8_t *p, __m256 *r, __m256 *g, __m256 *b)
{
	__m128i lo = _mm_loadu_si128((const __m128i *)p);
	__m128i hi = _mm_loadl_epi64((const __m128i *)(p + 16));
	const __m128i rl = _mm_setr_epi8(
	    0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i rh = _mm_setr_epi8(
	    -1, -1, -1, -1, -1, -1, 2, 5, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i gl = _mm_setr_epi8(
	    1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i gh = _mm_setr_epi8(
	    -1, -1, -1, -1, -1, 0, 3, 6, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i bl = _mm_setr_epi8(
	    2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i bh = _mm_setr_epi8(
	    -1, -1, -1, -1, -1, 1, 4, 7, -1, -1, -1, -1, -1, -1, -1, -1);
	__m128i r8 =
	    _mm_or_si128(_mm_shuffle_epi8(lo, rl), _mm_shuffle_epi8(hi, rh));
	__m128i g8 =
	    _mm_or_si128(_mm_shuffle_epi8(lo, gl), _mm_shuffle_epi8(hi, gh));
	__m128i b8 =
	    _mm_or_si128(_mm_shuffle_epi8(lo, bl), _mm_shuffle_epi8(hi, bh));

	*r = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(r8));
	*g = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(g8));
	*b = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b8));
}

/* 8 int32 in 0..255 to 8 bytes in the low half. */
AVX2 static inline __m128i
bytes8(__m256i v)
{
	__m128i w = _mm_packus_epi32(
	    _mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));

	return _mm_packus_epi16(w, w);
}

/* Channels r, g, b (int32 in 0..255) of 8 pixels to 24 bytes at p. */
AVX2 static inline void
store_rgb8(uint8_t *p, __m256i r, __m256i g, __m256i b)
{
	__m128i rg = _mm_unpacklo_epi64(bytes8(r), bytes8(g));
	__m128i b8 = bytes8(b);
	/* bytes 0..15: r0 g0 b0 r1 g1 b1 ... r5; 16..23: g5 b5 ... b7 */
	const __m128i m0 = _mm_setr_epi8(
	    0, 8, -1, 1, 9, -1, 2, 10, -1, 3, 11, -1, 4, 12, -1, 5);
	const __m128i n0 = _mm_setr_epi8(
	    -1, -1, 0, -1, -1, 1, -1, -1, 2, -1, -1, 3, -1, -1, 4, -1);
	const __m128i m1 = _mm_setr_epi8(
	    13, -1, 6, 14, -1, 7, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i n1 = _mm_setr_epi8(
	    -1, 5, -1, -1, 6, -1, -1, 7, -1, -1, -1, -1, -1, -1, -1, -1);

	_mm_storeu_si128((__m128i *)p,
	    _mm_or_si128(_mm_shuffle_epi8(rg, m0), _mm_shuffle_epi8(b8, n0)));
	_mm_storel_epi64((__m128i *)(p + 16),
	    _mm_or_si128(_mm_shuffle_epi8(rg, m1), _mm_shuffle_epi8(b8, n1)));
}

/* rgb_to_grayscale of 8 pixels: ((kr * r + kg * g) + kb * b) truncated. */
AVX2 static inline __m256i
gray8(__m256 r, __m256 g, __m256 b, const float k[3])
{
	__m256 a = _mm256_mul_ps(_mm256_set1_ps(k[0]), r);
	__m256 c = _mm256_mul_ps(_mm256_set1_ps(k[1]), g);
	__m256 d = _mm256_mul_ps(_mm256_set1_ps(k[2]), b);

	return _mm256_cvttps_epi32(_mm256_add_ps(_mm256_add_ps(a, c), d));
}

/* _blend of x with y (ratio rf, 1 - ratio of), clamped, truncated. */
AVX2 static inline __m256i
blend8(__m256 rf, __m256 of, __m256 x, __m256 y)
{
	__m256 v = _mm256_add_ps(_mm256_mul_ps(rf, x), _mm256_mul_ps(of, y));

	/* !(v > 0) -> 0, as to_u8 (NaN too) */
	v = _mm256_and_ps(v, _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ));
	return _mm256_cvttps_epi32(_mm256_min_ps(v, _mm256_set1_ps(255.0f)));
}

AVX2 size_t
aug_saturation_avx2(uint8_t *px, size_t n, float rf, float of, const float k[3])
{
	const __m256 vr = _mm256_set1_ps(rf), vo = _mm256_set1_ps(of);
	size_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		__m256 r, g, b, y;

		load_rgb8(px + i * 3, &r, &g, &b);
		y = _mm256_cvtepi32_ps(gray8(r, g, b, k));
		store_rgb8(px + i * 3, blend8(vr, vo, r, y),
		    blend8(vr, vo, g, y), blend8(vr, vo, b, y));
	}
	return i;
}

AVX2 size_t
aug_grayscale_avx2(uint8_t *px, size_t n, const float k[3])
{
	size_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		__m256 r, g, b;
		__m256i y;

		load_rgb8(px + i * 3, &r, &g, &b);
		y = gray8(r, g, b, k);
		store_rgb8(px + i * 3, y, y, y);
	}
	return i;
}

AVX2 size_t
aug_gray_sum_avx2(const uint8_t *px, size_t n, const float k[3], uint64_t *sum)
{
	uint32_t lanes[8];
	size_t i = 0;

	*sum = 0;
	while (i + 8 <= n) {
		__m256i acc = _mm256_setzero_si256();

		/* at most 2^20 groups a lane: 255 * 2^20 fits 32 bits */
		for (size_t g = 0; g < (1u << 20) && i + 8 <= n; g++, i += 8) {
			__m256 r, gg, b;

			load_rgb8(px + i * 3, &r, &gg, &b);
			acc = _mm256_add_epi32(acc, gray8(r, gg, b, k));
		}
		_mm256_storeu_si256((__m256i *)lanes, acc);
		for (int j = 0; j < 8; j++)
			*sum += lanes[j];
	}
	return i;
}

AVX2 size_t
aug_hue_avx2(uint8_t *px, size_t n, float hf)
{
	const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
	const __m256 six = _mm256_set1_ps(6.0f), vhf = _mm256_set1_ps(hf);
	const __m256 c255 = _mm256_set1_ps(255.0f);
	size_t k;

	for (k = 0; k + 8 <= n; k += 8) {
		uint8_t *p = px + k * 3;
		__m256 r, g, b;

		/* x / 255.0f, as tab[x] */
		load_rgb8(p, &r, &g, &b);
		r = _mm256_div_ps(r, c255);
		g = _mm256_div_ps(g, c255);
		b = _mm256_div_ps(b, c255);
		__m256 maxc = _mm256_max_ps(_mm256_max_ps(r, g), b);
		__m256 minc = _mm256_min_ps(_mm256_min_ps(r, g), b);
		__m256 eqc = _mm256_cmp_ps(maxc, minc, _CMP_EQ_OQ);
		__m256 cr = _mm256_sub_ps(maxc, minc);
		__m256 s = _mm256_div_ps(cr, pick(eqc, one, maxc));
		__m256 crd = pick(eqc, one, cr);
		__m256 rc = _mm256_div_ps(_mm256_sub_ps(maxc, r), crd);
		__m256 gc = _mm256_div_ps(_mm256_sub_ps(maxc, g), crd);
		__m256 bc = _mm256_div_ps(_mm256_sub_ps(maxc, b), crd);
		__m256 hr = _mm256_sub_ps(bc, gc);
		__m256 hg =
		    _mm256_sub_ps(_mm256_add_ps(_mm256_set1_ps(2.0f), rc), bc);
		__m256 hb =
		    _mm256_sub_ps(_mm256_add_ps(_mm256_set1_ps(4.0f), gc), rc);
		__m256 mr = _mm256_cmp_ps(maxc, r, _CMP_EQ_OQ);
		__m256 mg = _mm256_cmp_ps(maxc, g, _CMP_EQ_OQ);
		__m256 h = pick(mr, hr, pick(mg, hg, hb));

		h = _mm256_add_ps(_mm256_div_ps(h, six), one);
		h = pick(_mm256_cmp_ps(h, one, _CMP_GE_OQ),
		    _mm256_sub_ps(h, one), h);
		h = _mm256_add_ps(h, vhf);
		h = pick(_mm256_cmp_ps(h, one, _CMP_GE_OQ),
		    _mm256_sub_ps(h, one),
		    pick(_mm256_cmp_ps(h, zero, _CMP_LT_OQ),
			_mm256_add_ps(h, one), h));

		__m256 v = maxc, h6 = _mm256_mul_ps(h, six);
		__m256i i = _mm256_cvttps_epi32(h6);
		__m256 f = _mm256_sub_ps(h6, _mm256_cvtepi32_ps(i));
		__m256 pp = clamp01(_mm256_mul_ps(v, _mm256_sub_ps(one, s)));
		__m256 q = clamp01(
		    _mm256_mul_ps(v, _mm256_sub_ps(one, _mm256_mul_ps(s, f))));
		__m256 t = clamp01(_mm256_mul_ps(
		    v, _mm256_sub_ps(
			   one, _mm256_mul_ps(s, _mm256_sub_ps(one, f)))));
		__m256 e[6];

		/* i % 6: i is 0..6 */
		i = _mm256_blendv_epi8(i, _mm256_setzero_si256(),
		    _mm256_cmpeq_epi32(i, _mm256_set1_epi32(6)));
		for (int c = 0; c < 6; c++)
			e[c] = _mm256_castsi256_ps(
			    _mm256_cmpeq_epi32(i, _mm256_set1_epi32(c)));
		/* (v,t,p) (q,v,p) (p,v,t) (p,q,v) (t,p,v) (v,p,q) */
		__m256 o0 = pick(
		    e[1], q, pick(e[2], pp, pick(e[3], pp, pick(e[4], t, v))));
		__m256 o1 = pick(
		    e[0], t, pick(e[3], q, pick(e[4], pp, pick(e[5], pp, v))));
		__m256 o2 = pick(
		    e[0], pp, pick(e[1], pp, pick(e[2], t, pick(e[5], q, v))));

		store_rgb8(p, _mm256_cvttps_epi32(_mm256_mul_ps(o0, c255)),
		    _mm256_cvttps_epi32(_mm256_mul_ps(o1, c255)),
		    _mm256_cvttps_epi32(_mm256_mul_ps(o2, c255)));
	}
	return k;
}

AVX2 uint32_t
aug_grid_avx2(int64_t *src, uint32_t w, uint32_t h, float yo, const float r[6],
    float hw, float hh)
{
	const __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
	const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
	const __m256 fw = _mm256_set1_ps((float)w),
		     fh = _mm256_set1_ps((float)h);
	const __m256 zero = _mm256_setzero_ps();
	const __m256 vhw = _mm256_set1_ps(hw), vhh = _mm256_set1_ps(hh);
	/* yo * r1 and yo * r4 are the same products in every lane */
	const __m256 yx = _mm256_set1_ps(yo * r[1]),
		     yy = _mm256_set1_ps(yo * r[4]);
	const __m256 r0 = _mm256_set1_ps(r[0]), r2 = _mm256_set1_ps(r[2]);
	const __m256 r3 = _mm256_set1_ps(r[3]), r5 = _mm256_set1_ps(r[5]);
	uint32_t x;

	for (x = 0; x + 8 <= w; x += 8) {
		/* (float)x - hw + 0.5f, as grid1 */
		__m256 fx = _mm256_add_ps(_mm256_set1_ps((float)x), lane);
		__m256 xo = _mm256_add_ps(_mm256_sub_ps(fx, vhw), half);
		__m256 gx =
		    _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(xo, r0), yx), r2);
		__m256 gy =
		    _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(xo, r3), yy), r5);
		__m256 ix = _mm256_sub_ps(
		    _mm256_mul_ps(_mm256_add_ps(gx, one), vhw), half);
		__m256 iy = _mm256_sub_ps(
		    _mm256_mul_ps(_mm256_add_ps(gy, one), vhh), half);
		__m256 sx = _mm256_round_ps(
		    ix, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		__m256 sy = _mm256_round_ps(
		    iy, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		__m256 in = _mm256_and_ps(
		    _mm256_and_ps(_mm256_cmp_ps(sx, zero, _CMP_GE_OQ),
			_mm256_cmp_ps(sx, fw, _CMP_LT_OQ)),
		    _mm256_and_ps(_mm256_cmp_ps(sy, zero, _CMP_GE_OQ),
			_mm256_cmp_ps(sy, fh, _CMP_LT_OQ)));
		int32_t xs[8], ys[8];
		int m = _mm256_movemask_ps(in);

		/* outside lanes may hold anything: converted, not used */
		_mm256_storeu_si256(
		    (__m256i *)xs, _mm256_cvttps_epi32(_mm256_and_ps(sx, in)));
		_mm256_storeu_si256(
		    (__m256i *)ys, _mm256_cvttps_epi32(_mm256_and_ps(sy, in)));
		for (int j = 0; j < 8; j++)
			src[x + j] =
			    m >> j & 1 ? (int64_t)ys[j] * w + xs[j] : -1;
	}
	return x;
}

/* 8 bytes at p as int32 lanes */
AVX2 static inline __m256i
widen8(const uint8_t *p)
{
	return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

AVX2 size_t
aug_sharp_row_avx2(const uint8_t *up, const uint8_t *mid, const uint8_t *dn,
    uint8_t *o, size_t row, float rf, float of)
{
	const __m256 vr = _mm256_set1_ps(rf), vo = _mm256_set1_ps(of);
	const __m256 c26 = _mm256_set1_ps(26.0f);
	size_t x;

	for (x = 3; x + 11 <= row; x += 8) {
		__m256i m = widen8(mid + x);
		__m256i s = _mm256_add_epi32(
		    _mm256_add_epi32(
			_mm256_add_epi32(widen8(up + x - 3), widen8(up + x)),
			_mm256_add_epi32(
			    widen8(up + x + 3), widen8(mid + x - 3))),
		    _mm256_add_epi32(_mm256_add_epi32(_mm256_mullo_epi32(m,
							  _mm256_set1_epi32(5)),
					 widen8(mid + x + 3)),
			_mm256_add_epi32(_mm256_add_epi32(widen8(dn + x - 3),
					     widen8(dn + x)),
			    widen8(dn + x + 3))));
		/* (2S + 13) / 26: the float quotient is never within
		 * rounding of the next integer, so truncation floors it */
		__m256 q = _mm256_div_ps(
		    _mm256_cvtepi32_ps(_mm256_add_epi32(
			_mm256_add_epi32(s, s), _mm256_set1_epi32(13))),
		    c26);
		__m256 blur = _mm256_cvtepi32_ps(_mm256_cvttps_epi32(q));

		_mm_storel_epi64((__m128i *)(o + x),
		    bytes8(blend8(vr, vo, _mm256_cvtepi32_ps(m), blur)));
	}
	return x;
}

AVX2 size_t
aug_minmax_avx2(const uint8_t *px, size_t n, uint8_t lo[3], uint8_t hi[3])
{
	__m256i mn[3], mx[3];
	uint8_t a[3][32], b[3][32];
	size_t i;

	for (int q = 0; q < 3; q++) {
		mn[q] = _mm256_set1_epi8((char)0xff);
		mx[q] = _mm256_setzero_si256();
	}
	/* 32 pixels, 96 bytes: byte j of vector q is channel (32q + j) % 3 */
	for (i = 0; i + 32 <= n; i += 32)
		for (int q = 0; q < 3; q++) {
			__m256i v = _mm256_loadu_si256(
			    (const __m256i *)(px + i * 3 + 32 * q));

			mn[q] = _mm256_min_epu8(mn[q], v);
			mx[q] = _mm256_max_epu8(mx[q], v);
		}
	for (int q = 0; q < 3; q++) {
		_mm256_storeu_si256((__m256i *)a[q], mn[q]);
		_mm256_storeu_si256((__m256i *)b[q], mx[q]);
	}
	for (int c = 0; c < 3; c++) {
		lo[c] = 255;
		hi[c] = 0;
	}
	for (int q = 0; q < 3; q++)
		for (int j = 0; j < 32; j++) {
			int c = (32 * q + j) % 3;

			if (a[q][j] < lo[c])
				lo[c] = a[q][j];
			if (b[q][j] > hi[c])
				hi[c] = b[q][j];
		}
	return i;
}

/* AVX2 unless the CPU lacks it or FEEDFS_XF_SCALAR is set (tests). */
bool
aug_use_avx2(void)
{
	if (xf_scalar_forced())
		return false;
	return __builtin_cpu_supports("avx2");
}
#endif
