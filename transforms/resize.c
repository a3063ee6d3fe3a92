/*
 * resize.c - antialiased bilinear resize, bit-exact with Pillow 9.4's
 * Image.resize(size, Image.BILINEAR) on RGB images (src/libImaging/
 * Resample.c): a triangle filter widened by the scale when shrinking,
 * coefficients normalized in double and rounded to 22-bit fixed point,
 * a horizontal pass into an 8-bit temporary, then a vertical pass.
 *
 * Every sum is Pillow's exact int32 sum of pixel * coefficient products
 * (plus the rounding bias), so any order of summation gives Pillow's
 * bytes.  That leaves room for SIMD: on x86-64 CPUs with AVX2 (checked at
 * run time) both passes run in vector kernels that compute the same
 * integers; elsewhere, or with FEEDFS_XF_SCALAR=1 in the environment (the
 * tests compare both), the portable loops do.
 *
 * - horizontal, AVX2: the 22-bit coefficient k is split as
 *   k = kh * 2048 + kl (both fit int16), so that pmaddwd can multiply two
 *   taps of 8-bit pixels at once without losing a bit:
 *   sum(p * k) = (sum(p * kh) << 11) + sum(p * kl), all below 2^31.
 *   Four outputs per step, two taps per multiply, channels in the lanes;
 *   each output's pixels come in one 16-byte load per four or five taps,
 *   which pshufb spreads into the pairs (the loads, inserts and shuffles,
 *   not the multiplies, were most of the cost of two taps at a time).
 * - vertical, AVX2: contiguous rows, 32 bytes at a time in int32 lanes,
 *   the rest of a row 8 at a time, the last step ending at the row's end
 *   (it recomputes bytes already written, to the same values).
 */
#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/xf.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX2_KERNELS 1
#endif

#define PRECISION_BITS (32 - 8 - 2)
#define ROUND_BIAS (1 << (PRECISION_BITS - 1))

/* The coefficients of one pass: output i reads k[i*ksize..] from in[lo]. */
struct coeffs {
	int ksize;
	int nmax;    /* the largest n of any output */
	int *bounds; /* lo, n per output */
	int32_t *k;  /* ksize per output, of which only the first n are set */
};

static double
bilinear_filter(double x)
{
	if (x < 0.0)
		x = -x;
	if (x < 1.0)
		return 1.0 - x;
	return 0.0;
}

static void
coeffs_free(struct coeffs *c)
{
	xf_free(c->bounds);
	xf_free(c->k);
}

/*
 * Pillow's precompute_coeffs + normalize_coeffs_8bpc for the box (in0,
 * in1) of an input of insize pixels ((0, insize) for a plain resize).
 */
static int
coeffs_make(
    uint32_t insize, float in0, float in1, uint32_t outsize, struct coeffs *c)
{
	double support, scale, filterscale;
	double *kk = NULL;
	int ksize;

	filterscale = scale = (double)(in1 - in0) / outsize;
	if (filterscale < 1.0)
		filterscale = 1.0;
	support = 1.0 * filterscale;
	ksize = (int)ceil(support) * 2 + 1;

	c->ksize = ksize;
	c->nmax = 0;
	c->bounds = xf_alloc(sizeof(*c->bounds) * 2 * outsize);
	c->k = xf_alloc(sizeof(*c->k) * (size_t)ksize * outsize);
	kk = xf_alloc(sizeof(*kk) * (size_t)ksize);
	if (c->bounds == NULL || c->k == NULL || kk == NULL) {
		coeffs_free(c);
		xf_free(kk);
		return -ENOMEM;
	}
	for (uint32_t xx = 0; xx < outsize; xx++) {
		double center = in0 + (xx + 0.5) * scale;
		double ww = 0.0, ss = 1.0 / filterscale;
		int xmin, xmax, x;
		int32_t *k = c->k + (size_t)xx * ksize;

		xmin = (int)(center - support + 0.5);
		if (xmin < 0)
			xmin = 0;
		xmax = (int)(center + support + 0.5);
		if (xmax > (int)insize)
			xmax = (int)insize;
		xmax -= xmin;
		for (x = 0; x < xmax; x++) {
			double w =
			    bilinear_filter((x + xmin - center + 0.5) * ss);

			kk[x] = w;
			ww += w;
		}
		/*
		 * Pillow divides by ww (unless 0), then rounds away from
		 * zero; the triangle is never negative, so only the
		 * "+ 0.5" of its two roundings is ever taken.
		 */
		if (ww == 0.0)
			ww = 1.0;
		for (x = 0; x < xmax; x++)
			k[x] =
			    (int32_t)(0.5 + kk[x] / ww * (1 << PRECISION_BITS));
		c->bounds[xx * 2] = xmin;
		c->bounds[xx * 2 + 1] = xmax;
		if (xmax > c->nmax)
			c->nmax = xmax;
	}
	xf_free(kk);
	return 0;
}

static inline uint8_t
clip8(int32_t v)
{
	if (v >= (1 << PRECISION_BITS << 8))
		return 255;
	if (v <= 0)
		return 0;
	return (uint8_t)(v >> PRECISION_BITS);
}

/* Output xx of a horizontal pass over the row at s (portable). */
static inline void
h_one(const uint8_t *s, uint8_t *d, uint32_t xx, const struct coeffs *c)
{
	const int32_t *k = c->k + (size_t)xx * c->ksize;
	const uint8_t *p = s + (size_t)c->bounds[xx * 2] * 3;
	int n = c->bounds[xx * 2 + 1];
	int32_t s0 = ROUND_BIAS, s1 = ROUND_BIAS, s2 = ROUND_BIAS;

	for (int x = 0; x < n; x++, p += 3) {
		s0 += p[0] * k[x];
		s1 += p[1] * k[x];
		s2 += p[2] * k[x];
	}
	d[xx * 3] = clip8(s0);
	d[xx * 3 + 1] = clip8(s1);
	d[xx * 3 + 2] = clip8(s2);
}

/* rows rows (stride bytes apart) of width inw to width outw in dst. */
static void
pass_horizontal(const uint8_t *src, size_t stride, uint8_t *dst, uint32_t outw,
    uint32_t rows, const struct coeffs *c)
{
	for (uint32_t y = 0; y < rows; y++) {
		const uint8_t *s = src + (size_t)y * stride;
		uint8_t *d = dst + (size_t)y * outw * 3;

		for (uint32_t xx = 0; xx < outw; xx++)
			h_one(s, d, xx, c);
	}
}

/*
 * Output row yy of a vertical pass, elements [i0, n) (portable): rows
 * stride bytes apart, row 0 of src being the first any output reads.
 */
static void
v_row(const uint8_t *src, size_t stride, size_t i0, size_t n, uint8_t *d,
    uint32_t yy, int first, const struct coeffs *c)
{
	const int32_t *k = c->k + (size_t)yy * c->ksize;
	int lo = c->bounds[yy * 2] - first, cnt = c->bounds[yy * 2 + 1];
	int32_t acc[64];

	/* In blocks that stay in registers or L1. */
	for (size_t b = i0; b < n; b += 64) {
		size_t m = n - b < 64 ? n - b : 64;

		for (size_t i = 0; i < m; i++)
			acc[i] = ROUND_BIAS;
		for (int y = 0; y < cnt; y++) {
			const uint8_t *s = src + (size_t)(lo + y) * stride + b;
			int32_t ky = k[y];

			for (size_t i = 0; i < m; i++)
				acc[i] += s[i] * ky;
		}
		for (size_t i = 0; i < m; i++)
			d[b + i] = clip8(acc[i]);
	}
}

static void
pass_vertical(const uint8_t *src, size_t stride, uint32_t w, uint8_t *dst,
    uint32_t outh, int first, const struct coeffs *c)
{
	size_t n = (size_t)w * 3;

	for (uint32_t yy = 0; yy < outh; yy++)
		v_row(src, stride, 0, n, dst + yy * n, yy, first, c);
}

#ifdef HAVE_AVX2_KERNELS
/*
 * The horizontal coefficients for the AVX2 kernel, by groups of four
 * outputs a b c d (4g .. 4g + 3): for each pair of taps j (2j, 2j + 1),
 * four 32-byte vectors: hi of (a | c), lo of (a | c), hi of (b | d), lo of
 * (b | d).  Each 128-bit half (one output) holds the int16 pair
 * (k[2j] >> 11, k[2j + 1] >> 11) (resp. & 2047) three times, for R, G, B,
 * then zeros.  Taps past an output's n are 0, and so are the outputs past
 * outw that pad the last group; off[] holds each output's first byte in
 * the row (lo * 3), the padding repeating the last one, so that the pad
 * reads nothing the last output does not.
 */
struct hvec {
	int npairs;
	int kind; /* H_* below: which unrolled kernel */
	uint32_t ngroups;
	size_t reach; /* bytes an output reads past its off[] */
	int32_t *off; /* 4 * ngroups */
	int16_t *v;
	void *mem;
};

/*
 * How an output's taps are loaded: 16 bytes (five pixels and a byte) at
 * off + 12w for window w, then one pshufb per tap pair from that window.
 * H_N1..H_N4: npairs 1..4, windows of two pairs; H_N3W: npairs 3 with at
 * most 5 taps, all three pairs from the one window (tap 5 is zero);
 * H_ANY: any npairs, not unrolled.
 */
enum { H_N1, H_N2, H_N3, H_N4, H_N3W, H_ANY };

static int
hvec_make(const struct coeffs *c, uint32_t outw, struct hvec *hv)
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
__attribute__((target("avx2"))) static void
pass_horizontal_avx2(const uint8_t *src, size_t stride, const uint8_t *end,
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
 * (n % 32) in steps of 8; only rows narrower than 8 bytes (w < 3) are
 * left to the portable loop.
 */
__attribute__((target("avx2"))) static void
pass_vertical_avx2(const uint8_t *src, size_t stride, uint32_t w, uint8_t *dst,
    uint32_t outh, int first, const struct coeffs *c)
{
	const __m256i bias = _mm256_set1_epi32(ROUND_BIAS);
	const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	size_t n = (size_t)w * 3, nv = n / 32 * 32;
	int m = (int)(n - nv + 7) / 8;

	if (n < 8) {
		pass_vertical(src, stride, w, dst, outh, first, c);
		return;
	}
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
static bool
use_avx2(void)
{
	const char *e = getenv("FEEDFS_XF_SCALAR");

	if (e != NULL && *e != '\0' && strcmp(e, "0") != 0)
		return false;
	return __builtin_cpu_supports("avx2");
}
#endif

/*
 * The box fb (x0, y0, x1, y1; NULL: the whole image) of the inw x inh
 * image at src (rows stride bytes apart; end: the end of the buffer src
 * lies in, which the vector kernels must not read past) to w x h at dst,
 * as Pillow's resize(size, box=fb).
 */
static int
resize_rect(const uint8_t *src, size_t stride, const uint8_t *end, uint32_t inw,
    uint32_t inh, const float *fb, uint32_t w, uint32_t h, uint8_t *dst)
{
	float bx0 = fb ? fb[0] : 0.0f, by0 = fb ? fb[1] : 0.0f;
	float bx1 = fb ? fb[2] : (float)inw, by1 = fb ? fb[3] : (float)inh;
	bool need_h = w != inw || bx0 != 0.0f || bx1 != (float)inw;
	bool need_v = h != inh || by0 != 0.0f || by1 != (float)inh;
	struct coeffs ch = {0}, cv = {0};
	const struct coeffs *hc = &ch;
	uint8_t *tmp = NULL;
	size_t tstride;
	int first, last, r;
	bool simd = false;
#ifdef HAVE_AVX2_KERNELS
	struct hvec hv = {0};

	simd = use_avx2();
#endif

	if (!need_h && !need_v) {
		for (uint32_t y = 0; y < h; y++)
			memcpy(dst + (size_t)y * w * 3,
			    src + (size_t)y * stride, (size_t)w * 3);
		return 0;
	}
	if ((r = coeffs_make(inh, by0, by1, h, &cv)) != 0)
		return r;
	/* Only the rows the vertical pass reads, as Pillow does. */
	first = cv.bounds[0];
	last = cv.bounds[(h - 1) * 2] + cv.bounds[(h - 1) * 2 + 1];
	src += (size_t)first * stride;
	tstride = stride;
	if (need_h) {
		/* Square (box and size): the same coefficients both ways. */
		if (inw == inh && w == h && bx0 == by0 && bx1 == by1)
			hc = &cv;
		else if ((r = coeffs_make(inw, bx0, bx1, w, &ch)) != 0)
			goto out;
		r = -ENOMEM;
		if ((tmp = xf_alloc((size_t)w * (last - first) * 3)) == NULL)
			goto out;
#ifdef HAVE_AVX2_KERNELS
		if (simd && (r = hvec_make(hc, w, &hv)) != 0)
			goto out;
		if (simd)
			pass_horizontal_avx2(src, stride, end, tmp, w,
			    (uint32_t)(last - first), hc, &hv);
		else
#endif
			pass_horizontal(
			    src, stride, tmp, w, (uint32_t)(last - first), hc);
		src = tmp;
		tstride = (size_t)w * 3;
	}
	if (need_v) {
#ifdef HAVE_AVX2_KERNELS
		if (simd)
			pass_vertical_avx2(src, tstride, w, dst, h, first, &cv);
		else
#endif
			pass_vertical(src, tstride, w, dst, h, first, &cv);
	} else {
		for (uint32_t y = 0; y < h; y++)
			memcpy(dst + (size_t)y * w * 3,
			    src + (size_t)y * tstride, (size_t)w * 3);
	}
	r = 0;
out:
#ifdef HAVE_AVX2_KERNELS
	xf_free(hv.mem);
#endif
	coeffs_free(&ch);
	coeffs_free(&cv);
	xf_free(tmp);
	return r;
}

int
xf_resize(
    const struct xf_image *in, uint32_t w, uint32_t h, struct xf_image *out)
{
	return xf_resize_box(in, 0, 0, in->w, in->h, w, h, out);
}

/* resize_rect into a new w x h image *out (set on success only). */
static int
resize_new(const uint8_t *src, size_t stride, const uint8_t *end,
    uint32_t cw, uint32_t ch, const float *box, uint32_t w, uint32_t h,
    struct xf_image *out)
{
	uint8_t *px;
	int r;

	if ((px = xf_alloc((size_t)w * h * 3)) == NULL)
		return -ENOMEM;
	if ((r = resize_rect(src, stride, end, cw, ch, box, w, h, px)) != 0) {
		xf_free(px);
		return r;
	}
	out->w = w;
	out->h = h;
	out->px = px; /* transferred */
	return 0;
}

int
xf_resize_box(const struct xf_image *in, uint32_t x, uint32_t y, uint32_t cw,
    uint32_t ch, uint32_t w, uint32_t h, struct xf_image *out)
{
	size_t stride = (size_t)in->w * 3;

	if (w == 0 || h == 0 || cw == 0 || ch == 0 || in->w == 0 ||
	    in->h == 0 || x > in->w || cw > in->w - x || y > in->h ||
	    ch > in->h - y)
		return -EINVAL;
	return resize_new(in->px + (size_t)y * stride + (size_t)x * 3, stride,
	    in->px + stride * in->h, cw, ch, NULL, w, h, out);
}

int
xf_resize_fbox(const struct xf_image *in, const float box[4], uint32_t w,
    uint32_t h, struct xf_image *out)
{
	size_t stride = (size_t)in->w * 3;

	if (w == 0 || h == 0 || in->w == 0 || in->h == 0 ||
	    !(box[0] >= 0.0f && box[0] < box[2] && box[2] <= (float)in->w) ||
	    !(box[1] >= 0.0f && box[1] < box[3] && box[3] <= (float)in->h))
		return -EINVAL;
	return resize_new(in->px, stride, in->px + stride * in->h, in->w,
	    in->h, box, w, h, out);
}
