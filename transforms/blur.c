/*
 * blur.c - gaussian_blur and random_erasing, as torchvision 0.14's
 * GaussianBlur and RandomErasing (after Normalize, value 0).  Layer:
 * transforms (transforms/).
 *
 * torchvision blurs a uint8 tensor in float32: a k x k kernel, the outer
 * product of _get_gaussian_kernel1d, over the image reflect-padded by
 * k / 2, then torch.round (half to even) back to uint8.  Here the same
 * float32 1-D kernel runs as two passes, rows then columns: the same real
 * sum as torch's 2-D convolution, rounded differently (float32 sums in
 * another order), so a pixel can differ by 1 where the sum lies within
 * about 1e-4 of a half (tests/test_blur_ref.py counts them).  The kernel
 * is symmetric bit for bit, so each pass adds the two pixels at distance
 * d before multiplying them by their weight; taps whose weight is 0 in
 * float32 (exp underflows for small sigma) are left out, which changes no
 * bit of the sums.
 *
 * The passes have an AVX2 path (eight floats at a time, checked at run
 * time; FEEDFS_XF_SCALAR=1 forces the scalar one, for the tests) with the
 * same float operations in the same order, mul and add kept apart (no
 * FMA), which IEEE makes give the same bits.
 *
 * The column pass reads the row pass's output from a ring of min(k, h)
 * rows, and the image is blurred in place: output row y is written after
 * the last row pass that reads input row y.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/cpu.h"
#include "transforms/rng.h"
#include "transforms/xf.h"

/* clang fuses a * b + c where it may (GCC does not in ISO C mode). */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX2_KERNELS 1
#endif

/* The largest kernel the parser allows; pipeline.c refuses more. */
#define MAX_K 1023

void
xf_gauss_kernel(uint32_t k, float sigma, float *w)
{
	float half = (float)(k - 1) * 0.5f, sum = 0;

	/*
	 * torch.linspace(-half, half, k) has a step of exactly 1 here, so
	 * its points are the integers; then exp(-0.5 * (x / sigma)^2) in
	 * float32, divided by its float32 sum.
	 */
	for (uint32_t t = 0; t < k; t++) {
		float x = (float)t - half, q = x / sigma;

		q = q * q;
		w[t] = expf(-0.5f * q);
	}
	for (uint32_t t = 0; t < k; t++)
		sum += w[t];
	for (uint32_t t = 0; t < k; t++)
		w[t] = w[t] / sum;
}

/*
 * GaussianBlur.get_params: torch.empty(1).uniform_(min, max) in float32.
 */
float
xf_blur_sigma(const struct xf_op *op, uint64_t rngkey, uint64_t counter)
{
	double u = rng_uniform(rngkey, counter);

	return (float)(op->sigma[0] + (op->sigma[1] - op->sigma[0]) * u);
}

/* torch's reflect padding of index i into 0..n-1, repeated as needed. */
static uint32_t
reflect(int64_t i, uint32_t n)
{
	int64_t period = 2 * ((int64_t)n - 1);

	if (n == 1)
		return 0;
	i %= period;
	if (i < 0)
		i += period;
	return (uint32_t)(i < n ? i : period - i);
}

static bool
use_avx2(void)
{
#ifdef HAVE_AVX2_KERNELS
	if (xf_scalar_forced())
		return false;
	return __builtin_cpu_supports("avx2");
#else
	return false;
#endif
}

/*
 * One output of a pass: the center times w[r], then for d = 1..r the two
 * values at distance d (stride s apart) added, times w[r - d].
 */
static inline float
tap_sum(const float *c, size_t s, const float *w, uint32_t r)
{
	float acc = w[r] * c[0];

	for (uint32_t d = 1; d <= r; d++) {
		float pair = c[-(ptrdiff_t)(d * s)] + c[d * s];

		acc = acc + w[r - d] * pair;
	}
	return acc;
}

/* torch.round then .to(uint8): half to even, in 0..255. */
static inline uint8_t
to_u8(float v)
{
	v = nearbyintf(v);
	return v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v;
}

#ifdef HAVE_AVX2_KERNELS
/* tap_sum of eight consecutive outputs (c[0..7]). */
__attribute__((target("avx2"))) static inline __m256
tap_sum8(const float *c, size_t s, const float *w, uint32_t r)
{
	__m256 acc = _mm256_mul_ps(_mm256_set1_ps(w[r]), _mm256_loadu_ps(c));

	for (uint32_t d = 1; d <= r; d++) {
		__m256 pair = _mm256_add_ps(
		    _mm256_loadu_ps(c - d * s), _mm256_loadu_ps(c + d * s));

		acc = _mm256_add_ps(
		    acc, _mm256_mul_ps(_mm256_set1_ps(w[r - d]), pair));
	}
	return acc;
}

/*
 * tap_sum8 of four groups of eight at once (c[0..31]): the same
 * operations per output, four chains in flight.
 */
__attribute__((target("avx2"))) static inline void
tap_sum32(const float *c, size_t s, const float *w, uint32_t r, float *out)
{
	__m256 wr = _mm256_set1_ps(w[r]);
	__m256 a0 = _mm256_mul_ps(wr, _mm256_loadu_ps(c));
	__m256 a1 = _mm256_mul_ps(wr, _mm256_loadu_ps(c + 8));
	__m256 a2 = _mm256_mul_ps(wr, _mm256_loadu_ps(c + 16));
	__m256 a3 = _mm256_mul_ps(wr, _mm256_loadu_ps(c + 24));

	for (uint32_t d = 1; d <= r; d++) {
		const float *lo = c - d * s, *hi = c + d * s;
		__m256 wd = _mm256_set1_ps(w[r - d]);

		a0 = _mm256_add_ps(
		    a0, _mm256_mul_ps(wd, _mm256_add_ps(_mm256_loadu_ps(lo),
					      _mm256_loadu_ps(hi))));
		a1 = _mm256_add_ps(
		    a1, _mm256_mul_ps(wd, _mm256_add_ps(_mm256_loadu_ps(lo + 8),
					      _mm256_loadu_ps(hi + 8))));
		a2 = _mm256_add_ps(a2,
		    _mm256_mul_ps(wd, _mm256_add_ps(_mm256_loadu_ps(lo + 16),
					  _mm256_loadu_ps(hi + 16))));
		a3 = _mm256_add_ps(a3,
		    _mm256_mul_ps(wd, _mm256_add_ps(_mm256_loadu_ps(lo + 24),
					  _mm256_loadu_ps(hi + 24))));
	}
	_mm256_storeu_ps(out, a0);
	_mm256_storeu_ps(out + 8, a1);
	_mm256_storeu_ps(out + 16, a2);
	_mm256_storeu_ps(out + 24, a3);
}

/* The row pass over n outputs of pad (centers at pad + 3r); i = done. */
__attribute__((target("avx2"))) static size_t
row_avx2(const float *c, size_t n, const float *w, uint32_t r, float *out)
{
	size_t i = 0;

	for (; i + 32 <= n; i += 32)
		tap_sum32(c + i, 3, w, r, out + i);
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(out + i, tap_sum8(c + i, 3, w, r));
	return i;
}

/*
 * The column pass of n values: rows[t] is the ring row of tap t - r
 * (rows[r] the center), to uint8.  Returns how many were done.
 */
__attribute__((target("avx2"))) static size_t
col_avx2(const float *const *rows, size_t n, const float *w, uint32_t r,
    uint8_t *out)
{
	const __m256 lo = _mm256_setzero_ps(), hi = _mm256_set1_ps(255.0f);
	size_t i = 0;

	/* Four groups of eight at once: four chains in flight. */
	for (; i + 32 <= n; i += 32) {
		__m256 wr = _mm256_set1_ps(w[r]), a[4];

		for (int g = 0; g < 4; g++)
			a[g] = _mm256_mul_ps(
			    wr, _mm256_loadu_ps(rows[r] + i + 8 * g));
		for (uint32_t d = 1; d <= r; d++) {
			const float *p0 = rows[r - d] + i,
				    *p1 = rows[r + d] + i;
			__m256 wd = _mm256_set1_ps(w[r - d]);

			for (int g = 0; g < 4; g++)
				a[g] = _mm256_add_ps(a[g],
				    _mm256_mul_ps(
					wd, _mm256_add_ps(
						_mm256_loadu_ps(p0 + 8 * g),
						_mm256_loadu_ps(p1 + 8 * g))));
		}
		for (int g = 0; g < 4; g++) {
			__m256 v = _mm256_round_ps(a[g],
			    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
			__m256i q;
			__m128i q16;

			v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
			q = _mm256_cvtps_epi32(v);
			q16 = _mm_packus_epi32(_mm256_castsi256_si128(q),
			    _mm256_extracti128_si256(q, 1));
			_mm_storel_epi64((__m128i *)(out + i + 8 * g),
			    _mm_packus_epi16(q16, q16));
		}
	}
	for (; i + 8 <= n; i += 8) {
		__m256 acc = _mm256_mul_ps(
		    _mm256_set1_ps(w[r]), _mm256_loadu_ps(rows[r] + i));
		__m128i v32lo, v32hi, v16;
		__m256i v;

		for (uint32_t d = 1; d <= r; d++) {
			__m256 pair =
			    _mm256_add_ps(_mm256_loadu_ps(rows[r - d] + i),
				_mm256_loadu_ps(rows[r + d] + i));

			acc = _mm256_add_ps(
			    acc, _mm256_mul_ps(_mm256_set1_ps(w[r - d]), pair));
		}
		acc = _mm256_round_ps(
		    acc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		acc = _mm256_min_ps(_mm256_max_ps(acc, lo), hi);
		v = _mm256_cvtps_epi32(acc);
		v32lo = _mm256_castsi256_si128(v);
		v32hi = _mm256_extracti128_si256(v, 1);
		v16 = _mm_packus_epi32(v32lo, v32hi);
		_mm_storel_epi64(
		    (__m128i *)(out + i), _mm_packus_epi16(v16, v16));
	}
	return i;
}
#endif

/*
 * The column pass's sum is tap_sum over the ring rows, which are not
 * evenly spaced: the same operations in the same order.
 */
static inline float
col_sum(const float *const *rows, size_t i, const float *w, uint32_t r)
{
	float acc = w[r] * rows[r][i];

	for (uint32_t d = 1; d <= r; d++) {
		float pair = rows[r - d][i] + rows[r + d][i];

		acc = acc + w[r - d] * pair;
	}
	return acc;
}

int
xf_gaussian_blur(struct xf_image *img, uint32_t k, float sigma)
{
	float wk[MAX_K], *ring, *pad;
	const float *rows[MAX_K];
	uint32_t r, nring, next = 0;
	size_t rowlen = (size_t)img->w * 3;
	bool avx2 = use_avx2();

	if (k == 0 || k % 2 == 0 || k > MAX_K || img->w == 0 || img->h == 0)
		return -EINVAL;
	xf_gauss_kernel(k, sigma, wk);
	/* Taps of weight 0 add nothing: the kernel ends at the last other. */
	r = (k - 1) / 2;
	while (r > 0 && wk[0] == 0.0f) {
		k -= 2;
		r--;
		memmove(wk, wk + 1, k * sizeof(*wk));
	}
	if (r == 0)
		return 0; /* w[0] is 1: the image itself */
	nring = k < img->h ? k : img->h;
	ring =
	    xf_alloc(((size_t)nring * rowlen + ((size_t)img->w + 2 * r) * 3) *
		     sizeof(float));
	if (ring == NULL)
		return -ENOMEM;
	pad = ring + (size_t)nring * rowlen;
	for (uint32_t y = 0; y < img->h; y++) {
		uint32_t last = y + r < img->h ? y + r : img->h - 1;
		uint8_t *o = img->px + (size_t)y * rowlen;
		size_t i = 0;

		/* Row passes of the input rows up to y + r, into the ring. */
		for (; next <= last; next++) {
			const uint8_t *src = img->px + (size_t)next * rowlen;
			float *dst = ring + (size_t)(next % nring) * rowlen;
			const float *c = pad + (size_t)r * 3;

			/* The reflected margins, then the row itself. */
			for (uint32_t x = 0; x < r; x++)
				for (int ch = 0; ch < 3; ch++) {
					pad[(size_t)x * 3 + ch] =
					    src[(size_t)reflect(
						    (int64_t)x - r, img->w) *
						    3 +
						ch];
					pad[((size_t)img->w + r + x) * 3 + ch] =
					    src[(size_t)reflect(
						    (int64_t)img->w + x,
						    img->w) *
						    3 +
						ch];
				}
			for (size_t e = 0; e < rowlen; e++)
				pad[(size_t)r * 3 + e] = src[e];
			i = 0;
#ifdef HAVE_AVX2_KERNELS
			if (avx2)
				i = row_avx2(c, rowlen, wk, r, dst);
#endif
			for (; i < rowlen; i++)
				dst[i] = tap_sum(c + i, 3, wk, r);
		}
		/* The column pass of row y, over the rows y - r .. y + r. */
		for (uint32_t t = 0; t < k; t++)
			rows[t] = ring +
				  (size_t)(reflect((int64_t)y + t - r, img->h) %
					   nring) *
				      rowlen;
		i = 0;
#ifdef HAVE_AVX2_KERNELS
		if (avx2)
			i = col_avx2(rows, rowlen, wk, r, o);
#endif
		for (; i < rowlen; i++)
			o[i] = to_u8(col_sum(rows, i, wk, r));
	}
	xf_free(ring);
	return 0;
}

/*
 * RandomErasing.get_params, draws at counter + 1 + 4 * attempt + j (area,
 * log-ratio, top, left); the p draw is counter + 0.  Sizes as torchvision
 * computes them: the area fraction and the ratio in float32 (uniform_ and
 * exp of float32 tensors), h from area * ratio, Python's round.
 */
bool
xf_erasing_params(const struct xf_op *op, uint32_t w, uint32_t h,
    uint64_t rngkey, uint64_t counter, uint32_t *top, uint32_t *left,
    uint32_t *eh, uint32_t *ew)
{
	double area = (double)h * w;
	float lr0 = logf((float)op->ratio[0]), lr1 = logf((float)op->ratio[1]);

	if (!(rng_uniform(rngkey, counter) < op->p))
		return false;
	for (uint64_t a = 0; a < 10; a++) {
		uint64_t c = counter + 1 + 4 * a;
		double u = rng_uniform(rngkey, c);
		double ea =
		    area * (double)(float)(op->scale[0] +
					   (op->scale[1] - op->scale[0]) * u);
		double ar;
		double th, tw;

		u = rng_uniform(rngkey, c + 1);
		ar = (double)expf(
		    (float)((double)lr0 + ((double)lr1 - lr0) * u));
		th = nearbyint(sqrt(ea * ar));
		tw = nearbyint(sqrt(ea / ar));
		if (!(th < h && tw < w))
			continue;
		*eh = (uint32_t)th;
		*ew = (uint32_t)tw;
		*top = (uint32_t)rng_below(rngkey, c + 2, h - *eh + 1);
		*left = (uint32_t)rng_below(rngkey, c + 3, w - *ew + 1);
		return true;
	}
	return false;
}

void
xf_erase(void *dst, enum xf_dtype dtype, enum xf_layout layout, uint32_t w,
    uint32_t h, uint32_t top, uint32_t left, uint32_t eh, uint32_t ew)
{
	size_t e = dtype == XF_UINT8 ? 1 : dtype == XF_FLOAT16 ? 2 : 4;
	uint8_t *d = dst;

	if (top >= h || left >= w)
		return;
	if (eh > h - top)
		eh = h - top;
	if (ew > w - left)
		ew = w - left;
	for (uint32_t y = top; y < top + eh; y++) {
		if (layout == XF_HWC) {
			memset(d + ((size_t)y * w + left) * 3 * e, 0,
			    (size_t)ew * 3 * e);
			continue;
		}
		for (size_t c = 0; c < 3; c++)
			memset(d + ((c * h + y) * w + left) * e, 0,
			    (size_t)ew * e);
	}
}
