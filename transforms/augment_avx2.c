/*
 * augment_avx2.c - layer: transforms (under augment.c, which calls it only
 * where aug_use_avx2).  adjust_hue and the affine grid of the geometric
 * ops, 8 pixels at a time, with the float32 operations of augment.c's
 * hue1 and grid1 in the same order: IEEE add, sub, mul and div round the
 * same in a vector lane as in a scalar, and this file is compiled for
 * AVX2 without FMA, so nothing is fused.  Empty where the compiler
 * targets no x86-64.
 */
#include <stdlib.h>
#include <string.h>

#include "transforms/augment_int.h"

#ifdef HAVE_AUG_AVX2
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

/* x < 0 ? 0 : x > 1 ? 1 : x for x not NaN (-0 stays below 1/255 either
 * way: both truncate to byte 0). */
AVX2 static inline __m256
clamp01(__m256 x)
{
	return _mm256_min_ps(_mm256_max_ps(x, _mm256_setzero_ps()),
	    _mm256_set1_ps(1.0f));
}

/* a where m, else b */
AVX2 static inline __m256
pick(__m256 m, __m256 a, __m256 b)
{
	return _mm256_blendv_ps(b, a, m);
}

AVX2 size_t
aug_hue_avx2(uint8_t *px, size_t n, float hf, const float tab[256])
{
	const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
	const __m256 six = _mm256_set1_ps(6.0f), vhf = _mm256_set1_ps(hf);
	const __m256 c255 = _mm256_set1_ps(255.0f);
	size_t k;

	for (k = 0; k + 8 <= n; k += 8) {
		uint8_t *p = px + k * 3;
		float rf[8], gf[8], bf[8];
		int32_t o[3][8];

		for (int j = 0; j < 8; j++) {
			rf[j] = tab[p[3 * j]];
			gf[j] = tab[p[3 * j + 1]];
			bf[j] = tab[p[3 * j + 2]];
		}
		__m256 r = _mm256_loadu_ps(rf), g = _mm256_loadu_ps(gf),
		       b = _mm256_loadu_ps(bf);
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
		__m256 hg = _mm256_sub_ps(
		    _mm256_add_ps(_mm256_set1_ps(2.0f), rc), bc);
		__m256 hb = _mm256_sub_ps(
		    _mm256_add_ps(_mm256_set1_ps(4.0f), gc), rc);
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
		__m256 q = clamp01(_mm256_mul_ps(
		    v, _mm256_sub_ps(one, _mm256_mul_ps(s, f))));
		__m256 t = clamp01(_mm256_mul_ps(v,
		    _mm256_sub_ps(
			one, _mm256_mul_ps(s, _mm256_sub_ps(one, f)))));
		__m256 e[6];

		/* i % 6: i is 0..6 */
		i = _mm256_blendv_epi8(i, _mm256_setzero_si256(),
		    _mm256_cmpeq_epi32(i, _mm256_set1_epi32(6)));
		for (int c = 0; c < 6; c++)
			e[c] = _mm256_castsi256_ps(
			    _mm256_cmpeq_epi32(i, _mm256_set1_epi32(c)));
		/* (v,t,p) (q,v,p) (p,v,t) (p,q,v) (t,p,v) (v,p,q) */
		__m256 o0 = pick(e[1], q, pick(e[2], pp, pick(e[3], pp,
		    pick(e[4], t, v))));
		__m256 o1 = pick(e[0], t, pick(e[3], q, pick(e[4], pp,
		    pick(e[5], pp, v))));
		__m256 o2 = pick(e[0], pp, pick(e[1], pp, pick(e[2], t,
		    pick(e[5], q, v))));

		_mm256_storeu_si256((__m256i *)o[0],
		    _mm256_cvttps_epi32(_mm256_mul_ps(o0, c255)));
		_mm256_storeu_si256((__m256i *)o[1],
		    _mm256_cvttps_epi32(_mm256_mul_ps(o1, c255)));
		_mm256_storeu_si256((__m256i *)o[2],
		    _mm256_cvttps_epi32(_mm256_mul_ps(o2, c255)));
		for (int j = 0; j < 8; j++) {
			p[3 * j] = (uint8_t)o[0][j];
			p[3 * j + 1] = (uint8_t)o[1][j];
			p[3 * j + 2] = (uint8_t)o[2][j];
		}
	}
	return k;
}

AVX2 uint32_t
aug_grid_avx2(int64_t *src, uint32_t w, uint32_t h, float yo,
    const float r[6], float hw, float hh)
{
	const __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
	const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
	const __m256 fw = _mm256_set1_ps((float)w), fh = _mm256_set1_ps((float)h);
	const __m256 zero = _mm256_setzero_ps();
	const __m256 vhw = _mm256_set1_ps(hw), vhh = _mm256_set1_ps(hh);
	/* yo * r1 and yo * r4 are the same products in every lane */
	const __m256 yx = _mm256_set1_ps(yo * r[1]), yy = _mm256_set1_ps(yo * r[4]);
	const __m256 r0 = _mm256_set1_ps(r[0]), r2 = _mm256_set1_ps(r[2]);
	const __m256 r3 = _mm256_set1_ps(r[3]), r5 = _mm256_set1_ps(r[5]);
	uint32_t x;

	for (x = 0; x + 8 <= w; x += 8) {
		/* (float)x - hw + 0.5f, as grid1 */
		__m256 fx = _mm256_add_ps(_mm256_set1_ps((float)x), lane);
		__m256 xo = _mm256_add_ps(_mm256_sub_ps(fx, vhw), half);
		__m256 gx = _mm256_add_ps(
		    _mm256_add_ps(_mm256_mul_ps(xo, r0), yx), r2);
		__m256 gy = _mm256_add_ps(
		    _mm256_add_ps(_mm256_mul_ps(xo, r3), yy), r5);
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
		_mm256_storeu_si256((__m256i *)xs,
		    _mm256_cvttps_epi32(_mm256_and_ps(sx, in)));
		_mm256_storeu_si256((__m256i *)ys,
		    _mm256_cvttps_epi32(_mm256_and_ps(sy, in)));
		for (int j = 0; j < 8; j++)
			src[x + j] = m >> j & 1
			    ? (int64_t)ys[j] * w + xs[j] : -1;
	}
	return x;
}

/* AVX2 unless the CPU lacks it or FEEDFS_XF_SCALAR is set (tests). */
bool
aug_use_avx2(void)
{
	const char *e = getenv("FEEDFS_XF_SCALAR");

	if (e != NULL && *e != '\0' && strcmp(e, "0") != 0)
		return false;
	return __builtin_cpu_supports("avx2");
}
#endif
