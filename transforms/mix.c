/*
 * mix.c - layer: transforms (transforms/).  The batch ops: torchvision
 * v2's MixUp and CutMix on a whole batch of output samples (see xf.h for
 * the draws).
 *
 * The pixel math is v2's, in the output dtype: mixup is
 * `x.roll(1, 0).mul_(1.0 - lam).add_(x.mul(lam))`, whose float32 steps
 * (two products, one sum; no fused multiply-add: ISO C, and two AVX2
 * instructions) give the same bits in the portable loop and in the AVX2
 * one.  Float16 is widened, mixed in float32 and rounded once to nearest
 * even (torch rounds after each step on a half tensor: up to an ulp of
 * float16 apart).  CutMix copies, so it is exact in every dtype.
 *
 * The batch is mixed in place: sample i reads sample i - 1 before that
 * one is mixed (from the last down to 1), and sample 0 reads the copy of
 * the last one taken first.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/rng.h"
#include "transforms/xf.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "transforms/cpu.h"
#define HAVE_AVX2_KERNELS 1
#endif

/* Counters of the draw: stream << 32 + i (xf.h). */
#define STREAM_SWITCH 0 /* mixup_cutmix's choice */
#define STREAM_BETA 1	/* 1 and 2: the two Gamma draws */
#define STREAM_BOX 3	/* cutmix's center: x, then y */
#define GAMMA_TRIES 64	/* acceptance is > 95% a try */

static uint64_t
ctr(uint64_t stream, uint64_t i)
{
	return (stream << 32) + i;
}

/*
 * log of a Gamma(alpha) draw of stream: Marsaglia and Tsang (2000), each
 * try on three counters (two uniforms of a Box-Muller normal, one of the
 * acceptance); for alpha < 1, Gamma(alpha + 1) * U^(1 / alpha) with U on
 * the stream's counter 2^31.
 */
static double
gamma_log(uint64_t key, uint64_t stream, double alpha)
{
	double a = alpha < 1 ? alpha + 1 : alpha;
	double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d), lg = log(d);

	for (uint64_t i = 0; i < GAMMA_TRIES; i++) {
		double u1 = rng_uniform(key, ctr(stream, 3 * i));
		double u2 = rng_uniform(key, ctr(stream, 3 * i + 1));
		double u = rng_uniform(key, ctr(stream, 3 * i + 2));
		double x = sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2);
		double v = 1.0 + c * x;

		if (v <= 0)
			continue;
		v = v * v * v;
		if (u == 0 || log(u) < 0.5 * x * x + d - d * v + d * log(v)) {
			lg = log(d) + log(v);
			break;
		}
	}
	if (alpha < 1)
		lg +=
		    log(1.0 - rng_uniform(key, ctr(stream, 1u << 31))) / alpha;
	return lg;
}

double
xf_beta(uint64_t key, uint64_t stream, double alpha)
{
	double lx = gamma_log(key, stream, alpha);
	double ly = gamma_log(key, stream + 1, alpha);

	/* X / (X + Y) = 1 / (1 + Y / X) */
	return (double)(float)(1.0 / (1.0 + exp(ly - lx)));
}

void
xf_mix_params(const struct xf_op *op, uint64_t key, uint32_t w, uint32_t h,
    struct xf_mix *m)
{
	bool cut = op->kind == XF_OP_CUTMIX ||
		   (op->kind == XF_OP_MIXUP_CUTMIX &&
		       rng_uniform(key, ctr(STREAM_SWITCH, 0)) < op->p);
	double lam = xf_beta(key, STREAM_BETA, op->alpha[cut ? 1 : 0]);

	memset(m, 0, sizeof(*m));
	m->cut = cut;
	m->lam = lam;
	if (cut && w > 0 && h > 0) {
		int64_t rx = (int64_t)rng_below(key, ctr(STREAM_BOX, 0), w);
		int64_t ry = (int64_t)rng_below(key, ctr(STREAM_BOX, 1), h);
		double r = 0.5 * sqrt(1.0 - lam);
		int64_t rw = (int64_t)(r * w), rh = (int64_t)(r * h);

		m->x0 = (uint32_t)(rx - rw < 0 ? 0 : rx - rw);
		m->y0 = (uint32_t)(ry - rh < 0 ? 0 : ry - rh);
		m->x1 = (uint32_t)(rx + rw > w ? w : rx + rw);
		m->y1 = (uint32_t)(ry + rh > h ? h : ry + rh);
		m->lam = 1.0 -
			 (double)((uint64_t)(m->x1 - m->x0) * (m->y1 - m->y0)) /
			     ((double)w * h);
	}
}

void
xf_mix_labels(const struct xf_mix *m, const int64_t *labels, uint32_t n,
    uint32_t nclasses, float *out)
{
	float a, c;

	xf_mix_weights(m, &a, &c);
	memset(out, 0, (size_t)n * nclasses * sizeof(float));
	for (uint32_t i = 0; i < n; i++) {
		float *row = out + (size_t)i * nclasses;
		int64_t prev = labels[i ? i - 1 : n - 1], self = labels[i];
		float pv = 0;

		/* prev * a + self * c, per class, as v2's two terms. */
		if (prev >= 0 && (uint64_t)prev < nclasses)
			row[prev] = pv = a;
		if (self >= 0 && (uint64_t)self < nclasses)
			row[self] = (self == prev ? pv : 0.0f) + c;
	}
}

void
xf_mix_rows(
    const struct xf_mix *m, float *rows, uint32_t n, uint32_t k, float *tmp)
{
	float a, c;

	xf_mix_weights(m, &a, &c);
	if (n == 0)
		return;
	memcpy(tmp, rows + (size_t)(n - 1) * k, (size_t)k * sizeof(float));
	for (uint32_t i = n; i-- > 0;) {
		float *row = rows + (size_t)i * k;
		const float *prev = i ? row - k : tmp;

		for (uint32_t x = 0; x < k; x++) {
			float p = prev[x] * a, s = row[x] * c;

			row[x] = p + s;
		}
	}
}

static size_t
elem_size(enum xf_dtype dtype)
{
	return dtype == XF_UINT8 ? 1 : dtype == XF_FLOAT16 ? 2 : 4;
}

/* dst = prev * a + dst * c over k elements (portable). */
static void
blend_scalar(void *dst, const void *prev, size_t k, enum xf_dtype dtype,
    float a, float c)
{
	if (dtype == XF_FLOAT32) {
		float *d = dst;
		const float *p = prev;

		for (size_t i = 0; i < k; i++) {
			float t = p[i] * a, u = d[i] * c;

			d[i] = t + u;
		}
		return;
	}
	uint16_t *d = dst;
	const uint16_t *p = prev;

	for (size_t i = 0; i < k; i++) {
		float t = xf_half_to_float(p[i]) * a,
		      u = xf_half_to_float(d[i]) * c;

		d[i] = xf_float_to_half(t + u);
	}
}

#ifdef HAVE_AVX2_KERNELS
/* blend_scalar, eight elements at a time, then the rest by it. */
__attribute__((target("avx2,f16c"))) static void
blend_avx2(void *dst, const void *prev, size_t k, enum xf_dtype dtype, float a,
    float c)
{
	__m256 va = _mm256_set1_ps(a), vc = _mm256_set1_ps(c);
	size_t i = 0;

	if (dtype == XF_FLOAT32) {
		float *d = dst;
		const float *p = prev;

		for (; i + 8 <= k; i += 8) {
			__m256 t = _mm256_mul_ps(_mm256_loadu_ps(p + i), va);
			__m256 u = _mm256_mul_ps(_mm256_loadu_ps(d + i), vc);

			_mm256_storeu_ps(d + i, _mm256_add_ps(t, u));
		}
		blend_scalar(d + i, p + i, k - i, dtype, a, c);
		return;
	}
	uint16_t *d = dst;
	const uint16_t *p = prev;

	for (; i + 8 <= k; i += 8) {
		__m256 t = _mm256_mul_ps(
		    _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + i))),
		    va);
		__m256 u = _mm256_mul_ps(
		    _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(d + i))),
		    vc);

		_mm_storeu_si128(
		    (__m128i *)(d + i), _mm256_cvtps_ph(_mm256_add_ps(t, u),
					    _MM_FROUND_TO_NEAREST_INT));
	}
	blend_scalar(d + i, p + i, k - i, dtype, a, c);
}
#endif

/* The box of src into dst, one sample of w x h x 3 elements of es bytes. */
static void
paste_box(uint8_t *dst, const uint8_t *src, const struct xf_mix *m, uint32_t w,
    uint32_t h, size_t es, enum xf_layout layout)
{
	size_t run;

	if (m->x1 <= m->x0 || m->y1 <= m->y0)
		return;
	if (layout == XF_HWC) {
		run = (size_t)(m->x1 - m->x0) * 3 * es;
		for (uint32_t y = m->y0; y < m->y1; y++) {
			size_t at = ((size_t)y * w + m->x0) * 3 * es;

			memcpy(dst + at, src + at, run);
		}
		return;
	}
	run = (size_t)(m->x1 - m->x0) * es;
	for (uint32_t ch = 0; ch < 3; ch++)
		for (uint32_t y = m->y0; y < m->y1; y++) {
			size_t at = (((size_t)ch * h + y) * w + m->x0) * es;

			memcpy(dst + at, src + at, run);
		}
}

static int
mix_images(const struct xf_mix *m, void *px, uint32_t n, uint32_t w, uint32_t h,
    enum xf_dtype dtype, enum xf_layout layout, void *tmp, bool simd)
{
	size_t es = elem_size(dtype), k = (size_t)w * h * 3, bytes = k * es;
	uint8_t *x = px;
	float a, c;

	xf_mix_weights(m, &a, &c);
	if (!m->cut && dtype == XF_UINT8)
		return -EINVAL;
	if (n == 0)
		return 0;
	memcpy(tmp, x + (size_t)(n - 1) * bytes, bytes);
	for (uint32_t i = n; i-- > 0;) {
		uint8_t *d = x + (size_t)i * bytes;
		const uint8_t *p = i ? d - bytes : (const uint8_t *)tmp;

		if (m->cut)
			paste_box(d, p, m, w, h, es, layout);
#ifdef HAVE_AVX2_KERNELS
		else if (simd)
			blend_avx2(d, p, k, dtype, a, c);
#endif
		else
			blend_scalar(d, p, k, dtype, a, c);
	}
	(void)simd;
	return 0;
}

int
xf_mix_images(const struct xf_mix *m, void *px, uint32_t n, uint32_t w,
    uint32_t h, enum xf_dtype dtype, enum xf_layout layout, void *tmp)
{
	bool simd = false;

#ifdef HAVE_AVX2_KERNELS
	simd = xf_use_avx2_f16c();
#endif
	return mix_images(m, px, n, w, h, dtype, layout, tmp, simd);
}

int
xf_mix_images_scalar(const struct xf_mix *m, void *px, uint32_t n, uint32_t w,
    uint32_t h, enum xf_dtype dtype, enum xf_layout layout, void *tmp)
{
	return mix_images(m, px, n, w, h, dtype, layout, tmp, false);
}
