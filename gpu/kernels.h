/*
 * kernels.h - the device conversion of gpu/kernels.cu, callable from C
 * (gpu/, CUDA builds only).
 */
#ifndef FEEDFS_GPU_KERNELS_H
#define FEEDFS_GPU_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dtype and layout codes: the descriptor's (feedfs_cuda.h). */
struct gpu_kconv {
	uint32_t w, h;
	int dtype;  /* 0 uint8, 1 float16, 2 float32 */
	int layout; /* 0 HWC (NHWC), 1 CHW (NCHW) */
	int normalize;
	float mean[3], std[3];
};

/*
 * Queue on stream (a cudaStream_t) the conversion of n uint8 HWC samples at
 * src (device) into dst (device; sample i at i * its output bytes), with
 * the arithmetic of xf_convert: (float)v / 255, then - mean, then / std, in
 * float32 round-to-nearest, then float16 round-to-nearest-even.  Returns
 * the cudaError_t of the launch.
 */
int gpu_launch_convert(void *stream, const uint8_t *src, void *dst,
    uint32_t n, const struct gpu_kconv *cv);

/*
 * Whether every kernel of gpu_launch_convert has an image the current
 * device can run (a cubin for its compute capability, or PTX it can JIT):
 * the cudaError_t of cudaFuncGetAttributes on each, cudaSuccess when all
 * have one (cudaErrorNoKernelImageForDevice or InvalidDeviceFunction when
 * not).
 */
int gpu_kernels_check(void);
/* The compute capabilities the kernels were built for, e.g. "750,800,900". */
const char *gpu_kernels_archs(void);

#ifdef __cplusplus
}
#endif

#endif
