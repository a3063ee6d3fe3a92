/*
 * pool.h - accounting of the device buffer pool (gpu/; plain C, no CUDA).
 *
 * Each gpu = on job has its own pool: one device allocation, its share of
 * `gpu_memory` (gpu_pool_share), out of which its batches are carved at
 * offsets, so the IPC handle of a job covers every batch of that job and
 * no batch of another, and a client opens it once.  This is the
 * bookkeeping of one pool, which [off, off+len) ranges are held: first
 * fit, so a range given back is the first one handed out again.  Not
 * thread-safe: the caller locks.
 */
#ifndef FEEDFS_GPU_POOL_H
#define FEEDFS_GPU_POOL_H

#include <stddef.h>
#include <stdint.h>

#define GPU_POOL_ALIGN 4096u /* of batch buffers in a pool, and of pools */

struct gpu_extent {
	uint64_t off, len;
};

struct gpu_pool {
	uint64_t size;  /* the bound */
	uint64_t align; /* every offset and length is a multiple */
	uint64_t used, peak; /* bytes held (rounded up to align) */
	uint64_t gets, fails;
	struct gpu_extent *held; /* sorted by off */
	size_t n, cap;
};

/* size bytes, offsets aligned to align (a power of two). */
int gpu_pool_init(struct gpu_pool *p, uint64_t size, uint64_t align);
void gpu_pool_fini(struct gpu_pool *p);
/*
 * Hold len bytes (len > 0): *off on success.  -E2BIG when len exceeds the
 * whole pool (it never fits), -ENOSPC when it does not fit now.
 */
int gpu_pool_get(struct gpu_pool *p, uint64_t len, uint64_t *off);
/* Give back the range held at off; -ENOENT when none is. */
int gpu_pool_put(struct gpu_pool *p, uint64_t off);
/*
 * The bytes of the pool of each of njobs gpu = on jobs sharing total bytes
 * (gpu_memory): an equal share rounded down to GPU_POOL_ALIGN, so the
 * pools together never exceed total.  0 when njobs is 0 or the share is
 * less than GPU_POOL_ALIGN.
 */
uint64_t gpu_pool_share(uint64_t total, uint32_t njobs);

#endif
