/*
 * gpu.h - optional CUDA staging of batches (gpu/, a library that includes
 * nothing of ours outside it; see DESIGN "GPU staging").  The engine
 * (engine/stage.c) calls it and translates the job's dtype and layout
 * into the descriptor's codes (feedfs_cuda.h) that gpu/ speaks.
 *
 * This build may lack CUDA: then gpu_built() is false and gpu_probe() and
 * gpu_init() fail with "feedfs was built without CUDA" (gpu_stub.c).  With
 * CUDA and no usable device they fail with "no CUDA device: <why>".
 *
 * A struct gpu owns, on device 0: one pool per gpu = on job (gpu_job_pool:
 * its own device allocation, carved into that job's batch buffers, so the
 * IPC handle in a job's descriptors opens that job's batches and no other
 * job's; the pools together stay within the budget given to gpu_init), a
 * ring of pinned host staging buffers (cudaHostAlloc), one stream per ring
 * slot and a device scratch of uint8 input per slot.  gpu_stage copies
 * uint8 HWC samples through the ring (host copy of chunk i+1 overlapping
 * the transfer and conversion of chunk i) and converts them on the device
 * to the job's dtype and layout, normalizing exactly as transforms/'
 * xf_convert does (bit for bit: kernels.cu).
 * Nothing here logs: failures come back as an errno and a message in err.
 *
 * Errors: a CUDA error that leaves the context usable fails that call
 * only.  A sticky one (an illegal address in a kernel, an ECC error, a
 * lost device) leaves it unusable: the call that meets it says so in err
 * ("CUDA context lost"), and every later gpu_job_pool, gpu_stage and
 * gpu_buf_read fails at once with -EIO and "CUDA context lost earlier".
 * The device is not reset (cudaDeviceReset would free every pool under
 * clients that still have it open): only a new mount recovers.
 *
 * Thread safety: every function may be called from any thread, except
 * gpu_fini.  Lock order: ring lock, then pool lock (both inside gpu.c).
 * gpu_probe forks; call it before any thread exists (it keeps CUDA out of
 * the calling process, so a later fork() (daemonize) leaves CUDA usable).
 */
#ifndef FEEDFS_GPU_H
#define FEEDFS_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/feedfs_cuda.h"

struct gpu;
struct gpu_buf;

/*
 * The conversion of one sample: uint8 HWC w x h x 3 to dtype and layout,
 * the codes of the descriptor (feedfs_cuda.h: NHWC is HWC per sample),
 * with (v / 255 - mean[c]) / std[c] when normalize.
 */
struct gpu_conv {
	uint32_t w, h;
	enum feedfs_cuda_dtype dtype;
	enum feedfs_cuda_layout layout;
	bool normalize;
	float mean[3], std[3];
};

/* pool_*: of every job's pool together (peak: the sum of their peaks). */
struct gpu_stats {
	uint64_t budget, pools;
	uint64_t pool_bytes, pool_used, pool_peak, pool_fails;
	uint64_t staged, h2d_bytes, stage_ns;
};

/* Whether this build has CUDA. */
bool gpu_built(void);
/*
 * Whether gpu_init would find a device, asked in a child process so that
 * this one does not initialize CUDA.  On failure err says why.
 */
int gpu_probe(char *err, size_t errlen);
/*
 * Open device 0 for staging, with budget bytes (gpu_memory) for the job
 * pools together; allocates no pool.  Fails, err saying why, without
 * CUDA or a device, when the conversion kernels cannot run on the device
 * (this build has no image for its compute capability), when the device
 * has less than budget bytes free, or when the staging ring cannot be made.
 */
int gpu_init(struct gpu **out, uint64_t budget, char *err, size_t errlen);
void gpu_fini(struct gpu *g);

/*
 * Make the pool of job (any id below 65536) hold bytes (rounded down to
 * GPU_POOL_ALIGN), a device allocation of its own; 0 at once when the
 * job has its pool already (bytes is then ignored).  -E2BIG when bytes is
 * 0 or the pools would exceed the budget, -ENOMEM when the device has not
 * the memory, -EIO on another CUDA error.
 */
int gpu_job_pool(struct gpu *g, uint32_t job, uint64_t bytes, char *err,
    size_t errlen);
/*
 * Stage n samples of uint8 HWC (n * w * h * 3 bytes at src, any host
 * memory) as one batch of job (whose pool gpu_job_pool made) converted by
 * cv; blocks until the device is done.  *out holds the buffer (and its
 * bytes) until gpu_put.  When the pool has no room it waits up to
 * GPU_FULL_WAIT_MS for buffers to come back, then fails with -ENOSPC (a
 * later call may succeed); -E2BIG when the batch is larger than the whole
 * pool (no call will), -ENOENT when job has no pool, -EINVAL for a dtype
 * or layout that is no code of feedfs_cuda.h, -EIO on a CUDA error (see
 * Errors above); err says which.
 */
#define GPU_FULL_WAIT_MS 200
int gpu_stage(struct gpu *g, uint32_t job, const struct gpu_conv *cv,
    const uint8_t *src, uint32_t n, struct gpu_buf **out, char *err,
    size_t errlen);
/* Give a staged buffer back to its pool (NULL is fine). */
void gpu_put(struct gpu *g, struct gpu_buf *b);
/*
 * Descriptor fields of b: the handle of its job's pool, device, uuid,
 * offset in that pool, nbytes, dtype, layout.
 */
void gpu_buf_desc(const struct gpu *g, const struct gpu_buf *b,
    struct feedfs_cuda_desc *d);
/* Copy len bytes at off of b to host memory dst (tests, the bench). */
int gpu_buf_read(struct gpu *g, const struct gpu_buf *b, uint64_t off,
    void *dst, size_t len);
void gpu_get_stats(struct gpu *g, struct gpu_stats *st);

/*
 * The client side, for tests and bench/gpu-bench (a process other than the
 * exporter): open the allocation of a descriptor's handle, and close it.
 * *base is the device pointer of offset 0.
 */
int gpu_ipc_open(const struct feedfs_cuda_desc *d, void **base, char *err,
    size_t errlen);
void gpu_ipc_close(void *base);
/* Copy device bytes to host (the client side of gpu_buf_read). */
int gpu_copy_to_host(void *dst, const void *dev, size_t len);

#endif
