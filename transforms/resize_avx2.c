/*
 * resize_avx2.c - layer: transforms (under resize.c, which calls it only
 * where resize_use_avx2).  The AVX2 kernels of resize.c's two passes,
 * computing the same integers as its portable loops (resize.c says how).
 * Empty where the compiler targets no x86-64.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/cpu.h"
#include "transforms/xf.h"
#include "transforms/resize_int.h"

#ifdef HAVE_AVX2_KERNELS
/*
 * How an output's taps are loaded: 16 bytes (five pixels and a byte) at
 * off + 12w for window w, then one pshufb per tap pair from that window.
 * H_N1..H_N4: npairs 1..4, windows of two pairs; H_N3W: npairs 3 with at
 * most 5 taps, all three pairs from the one window (tap 5 is zero);
 * H_ANY: any npairs, not unrolled.
 */
enum { H_N1, H_N2, H_N3, H_N4, H_N3W, H_ANY };

int
resize_hvec_make(const struct coeffs *c, uint32_t outw, struct hvec *hv)
{
	uint32_t ng = (outw + 3) / 4;
	int np = c->nmax > 1 ? (c->nmax + 1) / 2 : 1;
	size_t vbytes = (size_t)ng * np * 4 * 32;
	int16_t *v;

	hv->npairs = np;
	hv->ngroups = ng;
	if (np == 3 && c->nmax <= 5)
		hv->kind = H_N3W;
	else if (np <= 4)
		hv->kind = H_N1 + np - 1;
	else
		hv->kind = H_ANY;
	/* The last window starts at 12 * ((np - 1) / 2) (H_N3W: at 0). */
	hv->reach = hv->kind == H_N3W ? 16 : (size_t)12 * ((np - 1) / 2) + 16;
	hv->mem = xf_alloc(vbytes + (size_t)ng * 4 * sizeof(int32_t) + 32);
	if (hv->mem == NULL)
		return -ENOMEM;
	hv->v = v = (int16_t *)(((uintptr_t)hv->mem + 31) & ~(uintptr_t)31);
	hv->off = (int32_t *)((char *)v + vbytes);
	memset(v, 0, vbytes);
	for (uint32_t xx = 0; xx < ng * 4; xx++) {
		uint32_t x = xx < outw ? xx : outw - 1;

		hv->off[xx] = c->bounds[x * 2] * 3;
	}
	for (uint32_t xx = 0; xx < outw; xx++) {
		const int32_t *k = c->k + (size_t)xx * c->ksize;
		int n = c->bounds[xx * 2 + 1];
		/* a, c in vectors 0, 1; b, d in 2, 3; c, d the high halves. */
		size_t vec = (xx % 4) % 2 * 2, half = (xx % 4) / 2;

		for (int j = 0; j < np; j++) {
			int16_t *hi =
			    v + (((size_t)(xx / 4) * np + j) * 4 + vec) * 16 +
			    half * 8;
			int16_t *lo = hi + 16;

			for (int t = 0; t < 2; t++) {
				int32_t kk = 2 * j + t < n ? k[2 * j + t] : 0;

				for (int ch = 0; ch < 3; ch++) {
					hi[ch * 2 + t] = (int16_t)(kk >> 11);
					lo[ch * 2 + t] = (int16_t)(kk & 2047);
				}
			}
		}
	}
	return 0;
}

/* Taps 0 1 of RGB as int16 pairs r0 r1 g0 g1 b0 b1 0 0, then taps 2 3. */
#define H_SHUF0 0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1
#define H_SHUF1 6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1
/* Tap 4 alone (r4 0 g4 0 b4 0 0 0): tap 5 lies past the window. */
#define H_SHUF2 12, -1, -1, -1, 13, -1, -1, -1, 14, -1, -1, -1, -1, -1, -1, -1

/* 16 bytes from p into the low half, from q into the high one. */
__attribute__((target("avx2"))) static inline __m256i
h_win(const uint8_t *p, const uint8_t *q)
{
	return _mm256_inserti128_si256(
	    _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p)),
	    _mm_loadu_si128((const __m128i *)q), 1);
}

/* The products of the tap pair in x (two outputs) into hi and lo. */
#define H_MADD(h, l, x, k)                                                     \
	do {                                                                   \
		h = _mm256_add_epi32(h, _mm256_madd_epi16(x, (k)[0]));         \
		l = _mm256_add_epi32(l, _mm256_madd_epi16(x, (k)[1]));         \
	} while (0)

/*
 * Outputs 4g .. 4g + 3 of the row at s, packed in the low 12 bytes: off
 * and kv are the group's.  np and kind are constants where the callers
 * below inline it, so that the pair loop unrolls.  The sum starts at the
 * rounding bias (in the lo half, which is added unshifted), then
 * (hi << 11) + lo, >> 22, and clip8 in the packs.
 */
__attribute__((target("avx2"), always_inline)) static inline __m128i
h_group(
    const uint8_t *s, const int32_t *off, const __m256i *kv, int np, int kind)
{
	const __m256i m0 = _mm256_setr_epi8(H_SHUF0, H_SHUF0);
	const __m256i m1 = _mm256_setr_epi8(H_SHUF1, H_SHUF1);
	const __m256i m2 = _mm256_setr_epi8(H_SHUF2, H_SHUF2);
	const __m128i pack = _mm_setr_epi8(
	    0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
	const uint8_t *pa = s + off[0], *pb = s + off[1];
	const uint8_t *pc = s + off[2], *pd = s + off[3];
	__m256i ha = _mm256_setzero_si256(), hb = ha;
	__m256i la = _mm256_set1_epi32(ROUND_BIAS), lb = la;
	__m256i va, vb;

	for (int j = 0; j < np; j += 2) {
		__m256i xa = h_win(pa + 6 * j, pc + 6 * j);
		__m256i xb = h_win(pb + 6 * j, pd + 6 * j);
		const __m256i *k = kv + 4 * j;

		H_MADD(ha, la, _mm256_shuffle_epi8(xa, m0), k);
		H_MADD(hb, lb, _mm256_shuffle_epi8(xb, m0), k + 2);
		if (j + 1 == np)
			break;
		H_MADD(ha, la, _mm256_shuffle_epi8(xa, m1), k + 4);
		H_MADD(hb, lb, _mm256_shuffle_epi8(xb, m1), k + 6);
		if (kind == H_N3W) {
			H_MADD(ha, la, _mm256_shuffle_epi8(xa, m2), k + 8);
			H_MADD(hb, lb, _mm256_shuffle_epi8(xb, m2), k + 10);
			break;
		}
	}
	va = _mm256_add_epi32(_mm256_slli_epi32(ha, 11), la);
	vb = _mm256_add_epi32(_mm256_slli_epi32(hb, 11), lb);
	va = _mm256_srai_epi32(va, PRECISION_BITS);
	vb = _mm256_srai_epi32(vb, PRECISION_BITS);
	va = _mm256_packs_epi32(va, vb);	 /* a b | c d */
	va = _mm256_packus_epi16(va, va);	 /* a b a b | c d c d */
	va = _mm256_permute4x64_epi64(va, 0x08); /* a b c d */
	return _mm_shuffle_epi8(_mm256_castsi256_si128(va), pack);
}

/* m (< 4, or 4 where 16 bytes would pass the output) outputs of q to d. */
__attribute__((target("avx2"))) static inline void
h_store_short(uint8_t *d, __m128i q, uint32_t m)
{
	uint8_t t[16];

	_mm_storeu_si128((__m128i *)t, q);
	memcpy(d, t, (size_t)m * 3);
}

/*
 * One row at s of the horizontal pass into d, all groups: np and kind
 * constant in each instance (H_ANY: np from hv).  A group stores 16 bytes,
 * 4 past its outputs, which the next group or row overwrites; dend (the
 * end of the output) must not be passed.
 */
__attribute__((target("avx2"), always_inline)) static inline void
h_row(const uint8_t *s, uint8_t *d, const uint8_t *dend, uint32_t outw,
    const struct hvec *hv, int np, int kind)
{
	const int32_t *off = hv->off;
	const __m256i *kv = (const __m256i *)hv->v;
	uint32_t nfull = outw / 4, nfast = nfull, g;

	if (nfast > 0 && dend - (d + (size_t)nfull * 12) < 4)
		nfast--;
	for (g = 0; g < nfast; g++, off += 4, kv += 4 * np, d += 12)
		_mm_storeu_si128((__m128i *)d, h_group(s, off, kv, np, kind));
	for (; g < hv->ngroups; g++, off += 4, kv += 4 * np, d += 12)
		h_store_short(d, h_group(s, off, kv, np, kind),
		    outw - 4 * g < 4 ? outw - 4 * g : 4);
}

#define H_ROWS(np, kind)                                                       \
	for (uint32_t y = y0; y < y1; y++)                                     \
	h_row(src + (size_t)y * stride, dst + (size_t)y * outw * 3, dend,      \
	    outw, hv, np, kind)

/* Rows [y0, y1), all groups, with the kernel unrolled for hv's kind. */
__attribute__((target("avx2"))) static void
h_rows(const uint8_t *src, size_t stride, uint8_t *dst, const uint8_t *dend,
    uint32_t outw, uint32_t y0, uint32_t y1, const struct hvec *hv)
{
	switch (hv->kind) {
	case H_N1:
		H_ROWS(1, H_N1);
		break;
	case H_N2:
		H_ROWS(2, H_N2);
		break;
	case H_N3:
		H_ROWS(3, H_N3);
		break;
	case H_N3W:
		H_ROWS(3, H_N3W);
		break;
	case H_N4:
		H_ROWS(4, H_N4);
		break;
	default:
		H_ROWS(hv->npairs, H_ANY);
		break;
	}
}
#undef H_ROWS

/*
 * The horizontal pass with AVX2, four outputs at a time.  An output reads
 * hv->reach bytes from its off[], which may run past the row (into the
 * next one, times a zero coefficient): in the rows where that would pass
 * end (the end of the source buffer), only the groups that stay inside
 * are vector ones, and the rest of the row is done by the portable loop.
 */
__attribute__((target("avx2"))) void
resize_h_avx2(const uint8_t *src, size_t stride, const uint8_t *end,
    uint8_t *dst, uint32_t outw, uint32_t rows, const struct coeffs *c,
    const struct hvec *hv)
{
	const uint8_t *dend = dst + (size_t)outw * rows * 3;
	size_t need = (size_t)hv->off[outw - 1] + hv->reach;
	uint32_t y = 0;

	/* The rows that can read all they may: all but the last few. */
	while (y < rows && (size_t)(end - (src + (size_t)y * stride)) >= need)
		y++;
	h_rows(src, stride, dst, dend, outw, 0, y, hv);
	for (; y < rows; y++) {
		const uint8_t *s = src + (size_t)y * stride;
		uint8_t *d = dst + (size_t)y * outw * 3;
		size_t left = (size_t)(end - s);
		uint32_t g = 0, xx;

		while (g < hv->ngroups && 4 * g + 3 < outw &&
		       (size_t)hv->off[4 * g + 3] + hv->reach <= left) {
			h_store_short(d + 4 * g * 3,
			    h_group(s, hv->off + 4 * g,
				(const __m256i *)hv->v +
				    (size_t)4 * g * hv->npairs,
				hv->npairs, hv->kind),
			    4);
			g++;
		}
		for (xx = 4 * g; xx < outw; xx++)
			h_one(s, d, xx, c);
	}
}

/* One tap: the 8 bytes at p, widened to int32, times ky, added to a. */
#define V_TAP(a, p, ky)                                                        \
	a = _mm256_add_epi32(a,                                                \
	    _mm256_mullo_epi32(                                                \
		_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p))),   \
		ky))

/* The 8 sums in a (shifted, int32) to 8 clipped bytes at d. */
__attribute__((target("avx2"))) static inline void
v_store8(uint8_t *d, __m256i a)
{
	__m128i x = _mm_packs_epi32(
	    _mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));

	_mm_storel_epi64((__m128i *)d, _mm_packus_epi16(x, x));
}

/*
 * Bytes [i, n) of an output row (0 < n - i < 32, 8 <= n) from the rows at
 * s, in m = (n - i + 7) / 8 steps of 8 (m constant where inlined), the
 * last at n - 8: it writes again, with the same values, bytes that an
 * earlier step wrote, and no step reads outside the row's n bytes.
 */
__attribute__((target("avx2"), always_inline)) static inline void
v_tail(const uint8_t *s, size_t stride, const int32_t *k, int cnt, uint8_t *d,
    size_t i, size_t n, int m)
{
	__m256i a[4];
	size_t o[4];

	for (int j = 0; j < m; j++) {
		o[j] = j + 1 < m ? i + 8 * (size_t)j : n - 8;
		a[j] = _mm256_set1_epi32(ROUND_BIAS);
	}
	for (int y = 0; y < cnt; y++, s += stride) {
		__m256i ky = _mm256_set1_epi32(k[y]);

		for (int j = 0; j < m; j++)
			V_TAP(a[j], s + o[j], ky);
	}
	for (int j = 0; j < m; j++)
		v_store8(d + o[j], _mm256_srai_epi32(a[j], PRECISION_BITS));
}

/*
 * The vertical pass with AVX2, 32 bytes of a row at a time, then the rest
 * (n % 32) in steps of 8; rows narrower than 8 bytes (w < 3) are
 * resize.c's portable loop's (it calls this one only for w >= 3).
 */
__attribute__((target("avx2"))) void
resize_v_avx2(const uint8_t *src, size_t stride, uint32_t w, uint8_t *dst,
    uint32_t outh, int first, const struct coeffs *c)
{
	const __m256i bias = _mm256_set1_epi32(ROUND_BIAS);
	const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	size_t n = (size_t)w * 3, nv = n / 32 * 32;
	int m = (int)(n - nv + 7) / 8;

	for (uint32_t yy = 0; yy < outh; yy++) {
		const int32_t *k = c->k + (size_t)yy * c->ksize;
		int lo = c->bounds[yy * 2] - first, cnt = c->bounds[yy * 2 + 1];
		const uint8_t *s0 = src + (size_t)lo * stride;
		uint8_t *d = dst + yy * n;

		for (size_t i = 0; i < nv; i += 32) {
			__m256i a0 = bias, a1 = bias, a2 = bias, a3 = bias;
			const uint8_t *s = s0 + i;

			for (int y = 0; y < cnt; y++, s += stride) {
				__m256i ky = _mm256_set1_epi32(k[y]);

				V_TAP(a0, s, ky);
				V_TAP(a1, s + 8, ky);
				V_TAP(a2, s + 16, ky);
				V_TAP(a3, s + 24, ky);
			}
			a0 = _mm256_srai_epi32(a0, PRECISION_BITS);
			a1 = _mm256_srai_epi32(a1, PRECISION_BITS);
			a2 = _mm256_srai_epi32(a2, PRECISION_BITS);
			a3 = _mm256_srai_epi32(a3, PRECISION_BITS);
			a0 = _mm256_packus_epi16(_mm256_packs_epi32(a0, a1),
			    _mm256_packs_epi32(a2, a3));
			a0 = _mm256_permutevar8x32_epi32(a0, perm);
			_mm256_storeu_si256((__m256i *)(d + i), a0);
		}
		switch (m) {
		case 1:
			v_tail(s0, stride, k, cnt, d, nv, n, 1);
			break;
		case 2:
			v_tail(s0, stride, k, cnt, d, nv, n, 2);
			break;
		case 3:
			v_tail(s0, stride, k, cnt, d, nv, n, 3);
			break;
		case 4:
			v_tail(s0, stride, k, cnt, d, nv, n, 4);
			break;
		default: /* n % 32 == 0 */
			break;
		}
	}
}
#undef V_TAP

/* AVX2 unless the CPU lacks it or FEEDFS_XF_SCALAR is set (tests). */
bool
resize_use_avx2(void)
{
	if (xf_scalar_forced())
		return false;
	return __builtin_cpu_supports("avx2");
}
#endif
