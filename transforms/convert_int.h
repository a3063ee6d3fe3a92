/*
 * convert_int.h - the output conversion's insides, shared by convert.c
 * (whole images, the tables, the AVX2 kernels), convert_vbmi.c (the
 * AVX-512 VBMI kernels) and convert_range.c (a part of a sample's output:
 * xf_convert_range).  Layer: transforms (transforms/).
 */
#ifndef FEEDFS_XF_CONVERT_INT_H
#define FEEDFS_XF_CONVERT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transforms/xf.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_AVX2_KERNELS 1
#endif

/* One channel's float value of every byte. */
typedef float table_row[256];

/* The value of every byte of each channel (three rows of each): float32,
 * float16 (the float32 value rounded, as numpy's astype does), and that
 * half as a float32 again (what a blend of halves computes from). */
struct tables {
	table_row t[3];
	uint16_t half[3][256];
	table_row halff[3];
	/* t's bytes, byte b of every value in plane [c][b] (vbmi kernels). */
	_Alignas(64) uint8_t planes[3][4][256];
	/* Where the vbmi kernels take channel c's bytes from 192 bytes (64
	 * pixels): the first 128 at ia's places, else (bit j of mb[c]) the
	 * last 128 at ib's, in vbmi_order. */
	_Alignas(64) uint8_t ia[3][64], ib[3][64];
	uint64_t mb[3];
};

/*
 * The pixel whose value the vbmi kernels' unpacks put at byte j of the
 * four planes: j = 16L + 4m + q (lane L, register m of the unpacks'
 * output, dword q) holds pixel 16m + 4L + q.
 */
static inline unsigned
vbmi_order(unsigned j)
{
	return (j & 3) | ((j >> 4 & 3) << 2) | ((j >> 2 & 3) << 4);
}

/* This thread's tables, made again when normalize, mean or std change. */
const struct tables *xf_conv_tables(
    bool normalize, const float mean[3], const float std[3]);

/* The kernels a call runs: asked once per call (cpu.h: getenv); and
 * whether a whole image's output may go past the caches (convert.c's
 * STREAM_MIN), not for a buffer read next, as a reply's is. */
struct kernels {
	bool avx2, vbmi, stream;
};
struct kernels xf_conv_kernels(void);

/*
 * img converted to dst as xf_convert does, with pv (another image's
 * pixels, the same size; NULL: none) blended in: prev * a + own * c per
 * value (float dtypes only).
 */
void xf_conv_image(const struct xf_image *img, const uint8_t *pv, float a,
    float c, bool normalize, const float mean[3], const float std[3],
    enum xf_dtype dtype, enum xf_layout layout, struct kernels k, void *dst);

/*
 * A run of one channel's values of a sample (CHW): count pixels from px
 * (blended with pv's, a mixup, where pv is not NULL) to dst.
 */
struct seg {
	const uint8_t *px, *pv;
	size_t count;
	void *dst;
};

#ifdef HAVE_AVX2_KERNELS
/* convert.c: channel ch's values of pixels [0, n8) (n8 a multiple of 8)
 * of px, blended with pv's where it is not NULL, to dst (float16 when
 * half), from rows t. */
void xf_conv_run_avx2(const uint8_t *px, const uint8_t *pv, float a, float c,
    int ch, size_t n8, const table_row *t, bool half, void *dst);

/* convert_vbmi.c: pixels [0, n64) of a whole image of n pixels (n64 a
 * multiple of 64) as float32 CHW planes (stream: non-temporal stores,
 * dst and the planes 64-byte aligned); runs of channel ch, of any length
 * (float32). */
void xf_conv_chw_vbmi(const uint8_t *px, size_t n, size_t n64,
    const struct tables *tb, bool stream, float *dst);
void xf_conv_segs_vbmi(const struct seg *sg, size_t nseg, int ch, float a,
    float c, const struct tables *tb);
#endif

#endif
