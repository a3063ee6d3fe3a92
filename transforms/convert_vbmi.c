/*
 * convert_vbmi.c - float32 CHW conversion with AVX-512 VBMI: 64 values of
 * a channel at a time, looked up by byte permutes instead of gathers.
 * Layer: transforms (transforms/), convert.c's and convert_range.c's.
 *
 * A table row of 256 floats is four planes of 256 bytes (byte b of every
 * value, four registers each); vpermi2b looks 64 indices up in 128
 * bytes, so a plane is two of them and a blend on the index's top bit.
 * The four planes' bytes are then interleaved into 64 floats by unpacks,
 * which work within 128-bit lanes: the values come out in order because
 * the indices were taken from the pixels in the order the unpacks undo
 * (vbmi_order, convert_int.h).  The table's own bits: the same values as
 * the portable loops.  Measured (bench/tier-recv, 224 x 224 float32 CHW,
 * one thread): 37.9-39.9 us an image against the AVX2 gathers' 45.0-46.8,
 * 65.0 against 74.4-76.6 with mixup.
 */
#include "transforms/convert_int.h"

#ifdef HAVE_AVX2_KERNELS
#include <immintrin.h>

#define VBMI_TARGET "avx512f,avx512bw,avx512vbmi"
#define ROUND (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* 64 bytes of a channel table's plane T (four registers) at indices v. */
__attribute__((target(VBMI_TARGET))) static inline __m512i
plane64(const __m512i T[4], __m512i v, __mmask64 top)
{
	return _mm512_mask_blend_epi8(top, _mm512_permutex2var_epi8(T[0], v, T[1]),
	    _mm512_permutex2var_epi8(T[2], v, T[3]));
}

/* The 64 floats of indices v, in pixel order, to f[0..3]. */
__attribute__((target(VBMI_TARGET))) static inline void
look64(const __m512i T[4][4], __m512i v, __m512 f[4])
{
	__mmask64 top = _mm512_movepi8_mask(v);
	__m512i b0 = plane64(T[0], v, top), b1 = plane64(T[1], v, top),
		b2 = plane64(T[2], v, top), b3 = plane64(T[3], v, top);
	__m512i w0 = _mm512_unpacklo_epi8(b0, b1),
		w1 = _mm512_unpackhi_epi8(b0, b1),
		w2 = _mm512_unpacklo_epi8(b2, b3),
		w3 = _mm512_unpackhi_epi8(b2, b3);

	f[0] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(w0, w2));
	f[1] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(w0, w2));
	f[2] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(w1, w3));
	f[3] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(w1, w3));
}

/* Channel ch's table: its planes' sixteen registers. */
__attribute__((target(VBMI_TARGET))) static inline void
load_table(const struct tables *tb, int ch, __m512i T[4][4])
{
	for (int b = 0; b < 4; b++)
		for (int r = 0; r < 4; r++)
			T[b][r] = _mm512_load_si512(tb->planes[ch][b] + 64 * r);
}

/*
 * The 192 bytes at p (64 pixels) to x[0..2]; of the first len only (len
 * < 192: a run's last pixels, the bytes after them not read, so not past
 * the sample).
 */
__attribute__((target(VBMI_TARGET))) static inline void
load192(const uint8_t *p, size_t len, __m512i x[3])
{
	if (len >= 192) {
		x[0] = _mm512_loadu_si512(p);
		x[1] = _mm512_loadu_si512(p + 64);
		x[2] = _mm512_loadu_si512(p + 128);
		return;
	}
	for (size_t k = 0; k < 3; k++) {
		size_t from = 64 * k,
		       n = len <= from ? 0 : len - from >= 64 ? 64 : len - from;

		x[k] = _mm512_maskz_loadu_epi8(
		    _cvtu64_mask64(n == 64 ? ~0ull : (1ull << n) - 1), p + from);
	}
}

/* Where a channel's bytes are in 192 (struct tables' ia, ib and mb). */
struct where {
	__m512i ia, ib;
	__mmask64 mb;
};

__attribute__((target(VBMI_TARGET))) static inline struct where
where(const struct tables *tb, int ch)
{
	return (struct where){_mm512_load_si512(tb->ia[ch]),
	    _mm512_load_si512(tb->ib[ch]), _cvtu64_mask64(tb->mb[ch])};
}

/* A channel's 64 bytes of the 192 in x, in vbmi_order. */
__attribute__((target(VBMI_TARGET))) static inline __m512i
chan64(struct where w, const __m512i x[3])
{
	return _mm512_mask_blend_epi8(w.mb,
	    _mm512_permutex2var_epi8(x[0], w.ia, x[1]),
	    _mm512_permutex2var_epi8(x[1], w.ib, x[2]));
}

/* prev * a + own * c, each product rounded: no fused multiply-add. */
__attribute__((target(VBMI_TARGET))) static inline __m512
blend16(__m512 own, __m512 prev, __m512 va, __m512 vc)
{
	return _mm512_add_round_ps(_mm512_mul_round_ps(prev, va, ROUND),
	    _mm512_mul_round_ps(own, vc, ROUND), ROUND);
}

/* 64 values of channel ch (left of them wanted) to d. */
__attribute__((target(VBMI_TARGET))) static inline void
store64(float *d, const __m512 f[4], size_t left, bool stream)
{
	for (int m = 0; m < 4; m++) {
		size_t at = 16 * (size_t)m;

		if (left >= at + 16) {
			if (stream)
				_mm512_stream_ps(d + at, f[m]);
			else
				_mm512_storeu_ps(d + at, f[m]);
		} else if (left > at)
			_mm512_mask_storeu_ps(d + at,
			    (__mmask16)((1u << (left - at)) - 1), f[m]);
	}
}

/*
 * Channel ch of n pixels from px (pv's blended in) to d: the table in
 * registers, 64 at a time, the last fewer by masked loads and stores.
 */
__attribute__((target(VBMI_TARGET), always_inline)) static inline void
chan_run(const struct tables *tb, int ch, const uint8_t *px, const uint8_t *pv,
    size_t n, __m512 va, __m512 vc, bool stream, float *d, const bool blend)
{
	__m512i T[4][4], x[3];
	struct where w = where(tb, ch);

	load_table(tb, ch, T);
	for (size_t i = 0; i < n; i += 64) {
		size_t left = n - i < 64 ? n - i : 64;
		__m512 f[4], g[4];

		load192(px + 3 * i, 3 * left, x);
		look64(T, chan64(w, x), f);
		if (blend) {
			load192(pv + 3 * i, 3 * left, x);
			look64(T, chan64(w, x), g);
			for (int m = 0; m < 4; m++)
				f[m] = blend16(f[m], g[m], va, vc);
		}
		store64(d + i, f, left, stream);
	}
}

__attribute__((target(VBMI_TARGET))) static void
chw(const uint8_t *px, size_t n, size_t n64, const struct tables *tb,
    bool stream, float *dst)
{
	__m512 z = _mm512_setzero_ps();

	for (int ch = 0; ch < 3; ch++)
		chan_run(tb, ch, px, px, n64, z, z, stream,
		    dst + (size_t)ch * n, false);
	if (stream)
		_mm_sfence();
}

/* A whole image's planes: what xf_convert makes (no blend: a mixed
 * batch from the tier is made as read, convert_range.c). */
void
xf_conv_chw_vbmi(const uint8_t *px, size_t n, size_t n64,
    const struct tables *tb, bool stream, float *dst)
{
	chw(px, n, n64, tb, stream, dst);
}

/* Runs of channel ch (tables loaded once for them all). */
__attribute__((target(VBMI_TARGET), always_inline)) static inline void
segs(const struct seg *sg, size_t nseg, int ch, float a, float c,
    const struct tables *tb, const bool blend)
{
	__m512 va = _mm512_set1_ps(a), vc = _mm512_set1_ps(c);

	for (size_t k = 0; k < nseg; k++)
		chan_run(tb, ch, sg[k].px, sg[k].pv, sg[k].count, va, vc, false,
		    sg[k].dst, blend);
}

__attribute__((target(VBMI_TARGET))) static void
segs_plain(const struct seg *sg, size_t nseg, int ch, const struct tables *tb)
{
	segs(sg, nseg, ch, 0, 0, tb, false);
}

__attribute__((target(VBMI_TARGET))) static void
segs_mixup(const struct seg *sg, size_t nseg, int ch, float a, float c,
    const struct tables *tb)
{
	segs(sg, nseg, ch, a, c, tb, true);
}

void
xf_conv_segs_vbmi(const struct seg *sg, size_t nseg, int ch, float a, float c,
    const struct tables *tb)
{
	if (nseg > 0 && sg[0].pv != NULL)
		segs_mixup(sg, nseg, ch, a, c, tb);
	else
		segs_plain(sg, nseg, ch, tb);
}
#endif
