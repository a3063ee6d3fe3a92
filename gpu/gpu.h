/*
 * gpu.h - optional CUDA staging of batches (see DESIGN "GPU staging").
 *
 * This build may lack CUDA: then gpu_built() is false and gpu_probe() and
 * gpu_init() fail with "feedfs was built without CUDA" (gpu_stub.c).  With
 * CUDA and no usable device they fail with "no CUDA device: <why>".
 *
 * A struct gpu owns, on device 0: one allocation of pool_bytes carved into
 * batch buffers (gpu/pool.h: one IPC handle covers them all), a ring of
 * pinned host staging buffers (cudaHostAlloc), one stream per ring slot
 * and a device scratch of uint8 input per slot.  gpu_stage copies uint8
 * HWC samples through the ring (host copy of chunk i+1 overlapping the
 * transfer and conversion of chunk i) and converts them on the device to
 * the job's dtype and layout, normalizing exactly as xf_convert does.
 * Nothing here logs: failures come back as an errno and a message in err.
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
#include "transforms/xf.h"

struct gpu;
struct gpu_buf;

/* The conversion of one sample: uint8 HWC w x h x 3 to dtype/layout. */
struct gpu_conv {
	uint32_t w, h;
	enum xf_dtype dtype;
	enum xf_layout layout;
	bool normalize;
	float mean[3], std[3];
};

struct gpu_stats {
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
 * Open device 0 for staging with a pool of pool_bytes; on failure err says
 * why (no CUDA, no device, out of device memory).
 */
int gpu_init(struct gpu **out, uint64_t pool_bytes, char *err,
    size_t errlen);
void gpu_fini(struct gpu *g);

/*
 * Stage n samples of uint8 HWC (n * w * h * 3 bytes at src, any host
 * memory) as one batch converted by cv; blocks until the device is done.
 * *out holds the buffer (and its bytes) until gpu_put.  -ENOSPC when the
 * pool holds no room now, -E2BIG when the batch is larger than the pool,
 * -EIO on a CUDA error; err says which.
 */
int gpu_stage(struct gpu *g, const struct gpu_conv *cv, const uint8_t *src,
    uint32_t n, struct gpu_buf **out, char *err, size_t errlen);
/* Give a staged buffer back to the pool. */
void gpu_put(struct gpu *g, struct gpu_buf *b);
/* Descriptor fields of b: handle, device, uuid, offset, nbytes, dtype. */
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
