/*
 * kernels.cu - uint8 HWC samples to the job's dtype and layout, on the
 * device (gpu/, CUDA staging; see kernels.h).
 *
 * The values must be those of transforms/convert.c bit for bit, so every
 * float operation is an explicit round-to-nearest intrinsic: nvcc may not
 * contract them into a fused multiply-add nor use its fast division.
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "gpu/kernels.h"

struct kparams {
	uint64_t total;  /* output elements of the batch */
	uint32_t hw;     /* pixels of one sample */
	int layout;
	int normalize;
	float mean[3], std[3];
};

__device__ __forceinline__ float
value(uint8_t v, int c, const kparams &p)
{
	float x = __fdiv_rn(__uint2float_rn(v), 255.0f);

	if (p.normalize) {
		x = __fsub_rn(x, p.mean[c]);
		x = __fdiv_rn(x, p.std[c]);
	}
	return x;
}

/* Output element e of the batch: the source byte and its channel. */
__device__ __forceinline__ uint64_t
source(uint64_t e, const kparams &p, int *c)
{
	uint64_t per = (uint64_t)p.hw * 3, s = e / per, r = e % per;

	if (p.layout == 0) { /* HWC: the same index */
		*c = (int)(r % 3);
		return e;
	}
	*c = (int)(r / p.hw); /* CHW: plane c, pixel r % hw */
	return s * per + (r % p.hw) * 3 + (uint64_t)*c;
}

template <typename T> __device__ __forceinline__ T convert(float x);
template <> __device__ __forceinline__ float convert<float>(float x)
{
	return x;
}
template <> __device__ __forceinline__ uint16_t convert<uint16_t>(float x)
{
	return __half_as_ushort(__float2half_rn(x));
}

template <typename T>
__global__ void
k_convert(const uint8_t *__restrict__ src, T *__restrict__ dst, kparams p)
{
	for (uint64_t e = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
	     e < p.total; e += (uint64_t)gridDim.x * blockDim.x) {
		int c;
		uint64_t i = source(e, p, &c);

		dst[e] = convert<T>(value(src[i], c, p));
	}
}

__global__ void
k_transpose_u8(const uint8_t *__restrict__ src, uint8_t *__restrict__ dst,
    kparams p)
{
	for (uint64_t e = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
	     e < p.total; e += (uint64_t)gridDim.x * blockDim.x) {
		int c;

		dst[e] = src[source(e, p, &c)];
	}
}

extern "C" int
gpu_launch_convert(void *stream, const uint8_t *src, void *dst, uint32_t n,
    const struct gpu_kconv *cv)
{
	cudaStream_t s = (cudaStream_t)stream;
	kparams p;
	unsigned threads = 256, blocks;

	p.hw = cv->w * cv->h;
	p.total = (uint64_t)n * p.hw * 3;
	p.layout = cv->layout;
	p.normalize = cv->normalize;
	for (int c = 0; c < 3; c++) {
		p.mean[c] = cv->mean[c];
		p.std[c] = cv->std[c];
	}
	if (p.total == 0)
		return (int)cudaSuccess;
	blocks = (unsigned)((p.total + threads - 1) / threads);
	if (blocks > 65535u * 4)
		blocks = 65535u * 4; /* grid-stride loops do the rest */
	if (cv->dtype == 0) {
		if (cv->layout == 0)
			return (int)cudaMemcpyAsync(dst, src, p.total,
			    cudaMemcpyDeviceToDevice, s);
		k_transpose_u8<<<blocks, threads, 0, s>>>(src,
		    (uint8_t *)dst, p);
	} else if (cv->dtype == 1) {
		k_convert<uint16_t><<<blocks, threads, 0, s>>>(src,
		    (uint16_t *)dst, p);
	} else {
		k_convert<float><<<blocks, threads, 0, s>>>(src, (float *)dst,
		    p);
	}
	return (int)cudaGetLastError();
}

extern "C" int
gpu_kernels_check(void)
{
	cudaFuncAttributes a;
	cudaError_t e;

	if ((e = cudaFuncGetAttributes(&a, k_convert<float>)) != cudaSuccess ||
	    (e = cudaFuncGetAttributes(&a, k_convert<uint16_t>)) !=
		cudaSuccess ||
	    (e = cudaFuncGetAttributes(&a, k_transpose_u8)) != cudaSuccess)
		return (int)e;
	return (int)cudaSuccess;
}

/* nvcc (11.5 and later) lists the virtual architectures it compiled for. */
#define FF_STR2(...) #__VA_ARGS__
#define FF_STR(...) FF_STR2(__VA_ARGS__)

extern "C" const char *
gpu_kernels_archs(void)
{
#ifdef __CUDA_ARCH_LIST__
	return FF_STR(__CUDA_ARCH_LIST__);
#else
	return "(unknown: nvcc older than 11.5)";
#endif
}
