/*
 * augment_int.h - layer: transforms.  What augment.c and augment_avx2.c
 * (the AVX2 kernels of adjust_hue and of the geometric ops' grid) share;
 * nothing else includes it.  The kernels compute the float32 operations of
 * augment.c's portable loops, one for one (no fused multiply-add), so the
 * two give the same bytes; test_transforms compares them.
 */
#ifndef FEEDFS_AUGMENT_INT_H
#define FEEDFS_AUGMENT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_AUG_AVX2 1

/*
 * adjust_hue on the first n - n % 8 pixels of px (HWC); tab[v] is v /
 * 255.0f.  Returns how many pixels it did.
 */
size_t aug_hue_avx2(uint8_t *px, size_t n, float hf, const float tab[256]);
/*
 * One output row of the affine grid: for x in 0..w - w % 8, src[x] gets
 * the source pixel's index (sy * w + sx) or -1 outside; r holds r00, r10,
 * r20, r01, r11, r21; yo the row's centred coordinate, hw and hh half
 * the size.  Returns how many it did.
 */
uint32_t aug_grid_avx2(int64_t *src, uint32_t w, uint32_t h, float yo,
    const float r[6], float hw, float hh);
/* AVX2 unless the CPU lacks it or FEEDFS_XF_SCALAR is set (tests). */
bool aug_use_avx2(void);
#endif

#endif
