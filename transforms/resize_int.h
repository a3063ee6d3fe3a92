/*
 * resize_int.h - layer: transforms (transforms/).  What resize.c (the
 * coefficients, the portable passes, xf_resize*) and resize_avx2.c (the
 * AVX2 kernels of both passes) share; nothing else includes it.
 * resize.c says how the passes compute Pillow's exact integers.
 */
#ifndef FEEDFS_RESIZE_INT_H
#define FEEDFS_RESIZE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* The coefficients of c (outw outputs) for resize_h_avx2: 0 or -ENOMEM. */
int resize_hvec_make(const struct coeffs *c, uint32_t outw, struct hvec *hv);
/*
 * The two passes, as pass_horizontal and pass_vertical in resize.c, by
 * the AVX2 kernels (end: the end of the buffer src lies in, which they do
 * not read past).  Only where resize_use_avx2; resize_v_avx2 only for
 * rows of 8 bytes or more (w >= 3).
 */
void resize_h_avx2(const uint8_t *src, size_t stride, const uint8_t *end,
    uint8_t *dst, uint32_t outw, uint32_t rows, const struct coeffs *c,
    const struct hvec *hv);
void resize_v_avx2(const uint8_t *src, size_t stride, uint32_t w, uint8_t *dst,
    uint32_t outh, int first, const struct coeffs *c);
/* AVX2 unless the CPU lacks it or FEEDFS_XF_SCALAR is set (tests). */
bool resize_use_avx2(void);
#endif

#endif
