/*
 * flip.c - layer: transforms (transforms/).  The horizontal flip
 * (xf_flip, in place), with an SSSE3 row kernel where the CPU has it that
 * gives the same bytes as the portable loop (FEEDFS_XF_SCALAR=1 in the
 * environment forces the loop, for the tests).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/cpu.h"
#include "transforms/xf.h"

/* Pixels o.. of row (w pixels) mirrored into out, one at a time. */
static void
flip_row_scalar(const uint8_t *row, uint32_t w, uint32_t o, uint8_t *out)
{
	for (; o < w; o++)
		memcpy(out + (size_t)o * 3, row + ((size_t)w - 1 - o) * 3, 3);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

static bool
flip_use_ssse3(void)
{
	if (xf_scalar_forced())
		return false;
	return __builtin_cpu_supports("ssse3");
}

/*
 * Row (w pixels) mirrored into out (3w + 16 bytes): five pixels a step,
 * loaded as 16 bytes from the byte before them (so no load passes the
 * row's end) and reversed by one pshufb; a store's 16th byte is
 * overwritten by the next; the pixels left (fewer than six) one at a
 * time.  The same bytes as flip_row_scalar.
 */
__attribute__((target("ssse3"))) static void
flip_row_ssse3(const uint8_t *row, uint32_t w, uint8_t *out)
{
	const __m128i rev = _mm_setr_epi8(13, 14, 15, 10, 11, 12, 7, 8, 9, 4,
	    5, 6, 1, 2, 3, (char)0x80);
	uint32_t o = 0;

	for (; o + 6 <= w; o += 5) {
		__m128i v = _mm_loadu_si128(
		    (const __m128i *)(row + ((size_t)w - o - 5) * 3 - 1));

		_mm_storeu_si128(
		    (__m128i *)(out + (size_t)o * 3), _mm_shuffle_epi8(v, rev));
	}
	flip_row_scalar(row, w, o, out);
}
#endif

/* Rows up to this many pixels go through a row buffer on the stack. */
#define FLIP_ROW_MAX 2048

void
xf_flip(struct xf_image *img)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (img->w >= 6 && img->w <= FLIP_ROW_MAX && flip_use_ssse3()) {
		uint8_t tmp[FLIP_ROW_MAX * 3 + 16];
		size_t rb = (size_t)img->w * 3;

		for (uint32_t r = 0; r < img->h; r++) {
			uint8_t *a = img->px + (size_t)r * rb;

			flip_row_ssse3(a, img->w, tmp);
			memcpy(a, tmp, rb);
		}
		return;
	}
#endif
	for (uint32_t r = 0; r < img->h; r++) {
		uint8_t *a = img->px + (size_t)r * img->w * 3;
		uint8_t *b = a + ((size_t)img->w - 1) * 3;

		for (; a < b; a += 3, b -= 3) {
			uint8_t t0 = a[0], t1 = a[1], t2 = a[2];

			a[0] = b[0];
			a[1] = b[1];
			a[2] = b[2];
			b[0] = t0;
			b[1] = t1;
			b[2] = t2;
		}
	}
}
