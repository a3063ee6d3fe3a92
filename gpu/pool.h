/*
 * pool.h - accounting of the device buffer pool (plain C, no CUDA).
 *
 * The pool is one device allocation of `gpu_memory` bytes; batches are
 * carved out of it at offsets, so a single IPC handle covers every batch
 * and a client opens it once.  This is the bookkeeping of which
 * [off, off+len) ranges are held: first fit, so a range given back is the
 * first one handed out again.  Not thread-safe: the caller locks.
 */
#ifndef FEEDFS_GPU_POOL_H
#define FEEDFS_GPU_POOL_H

#include <stddef.h>
#include <stdint.h>

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

#endif
