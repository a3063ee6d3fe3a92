/*
 * augment_int.h - layer: transforms (transforms/).  What the files of
 * the augmentations share: augment.c (the draws, and applying them),
 * augment_color.c and augment_geom.c (the ops), augment_avx2.c (the AVX2
 * kernels of the per-pixel colour ops and of the geometric ops' grid);
 * nothing else includes it.  The kernels compute the float32 operations
 * of the ops' portable loops, one for one (no fused multiply-add), so the
 * two give the same bytes; test_transforms compares them.
 */
#ifndef FEEDFS_AUGMENT_INT_H
#define FEEDFS_AUGMENT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transforms/xf.h"

/* The pixels of img. */
static inline size_t
aug_npix(const struct xf_image *img)
{
	return (size_t)img->w * img->h;
}

/*
 * The ops of xf_aug_op that xf.h does not export, torchvision's
 * _apply_op: augment_color.c's posterize (bits 0..8), solarize,
 * invert, autocontrast, equalize and sharpness (-ENOMEM), and
 * augment_geom.c's ShearX, ShearY, TranslateX, TranslateY and Rotate
 * (op, by mag; -ENOMEM).
 */
void aug_posterize(struct xf_image *img, int bits);
void aug_solarize(struct xf_image *img, double threshold);
void aug_invert(struct xf_image *img);
void aug_autocontrast(struct xf_image *img);
void aug_equalize(struct xf_image *img);
int aug_sharpness(struct xf_image *img, double f);
int aug_geometric(struct xf_image *img, int op, double mag);

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_AUG_AVX2 1

/*
 * The pixel kernels work on the first n - n % 8 pixels of px (HWC) and
 * return how many they did.  k: rgb_to_grayscale's weights as floats.
 * adjust_hue by hf; _blend of each channel with the pixel's gray (ratio
 * rf, 1 - ratio of); rgb_to_grayscale into all three channels; the sum
 * of the pixels' grays into *sum.
 */
size_t aug_hue_avx2(uint8_t *px, size_t n, float hf);
size_t aug_saturation_avx2(
    uint8_t *px, size_t n, float rf, float of, const float k[3]);
size_t aug_grayscale_avx2(uint8_t *px, size_t n, const float k[3]);
size_t aug_gray_sum_avx2(
    const uint8_t *px, size_t n, const float k[3], uint64_t *sum);
/*
 * One output row of the affine grid: for x in 0..w - w % 8, src[x] gets
 * the source pixel's index (sy * w + sx) or -1 outside; r holds r00, r10,
 * r20, r01, r11, r21; yo the row's centred coordinate, hw and hh half
 * the size.  Returns how many it did.
 */
uint32_t aug_grid_avx2(int64_t *src, uint32_t w, uint32_t h, float yo,
    const float r[6], float hw, float hh);
/*
 * adjust_sharpness's interior of one row (row bytes; up, mid, dn the
 * original rows) into o: bytes 3.. while 8 more and their right
 * neighbours fit; returns the first byte not done.
 */
size_t aug_sharp_row_avx2(const uint8_t *up, const uint8_t *mid,
    const uint8_t *dn, uint8_t *o, size_t row, float rf, float of);
/* Each channel's least and greatest byte over the first n - n % 32
 * pixels (lo 255, hi 0 when none); returns how many it did. */
size_t aug_minmax_avx2(
    const uint8_t *px, size_t n, uint8_t lo[3], uint8_t hi[3]);
/* AVX2 unless the CPU lacks it or FEEDFS_XF_SCALAR is set (tests). */
bool aug_use_avx2(void);
#endif

#endif
