/*
 * feedfs_cuda.h - the descriptor read from a feedfs batch-NNNNNN.cuda file
 * (gpu/; installed for clients, and the dtype and layout codes that the
 * rest of gpu/ speaks).
 *
 * Reading JOB/epoch-NNNN/batch-NNNNNN.cuda of a job with gpu = on stages
 * that batch in device memory and returns FEEDFS_CUDA_DESC_SIZE bytes:
 * this struct, little-endian, at fixed offsets (see feedfs(8)):
 *
 *   off  size  field
 *     0     8  magic "FFSCUDA\0"
 *     8     4  version (1)
 *    12     4  size of the descriptor (160)
 *    16    64  cudaIpcMemHandle_t of the job's pool holding the batch
 *    80     4  device ordinal in the feedfs daemon (int32)
 *    84     4  dtype: 0 uint8, 1 float16, 2 float32
 *    88     8  byte offset of the batch within that allocation
 *    96     8  bytes of the batch (product of shape times dtype size)
 *   104     4  ndim (4)
 *   108     4  layout: 0 NHWC, 1 NCHW
 *   112    32  shape[4] (uint64): B, then H W C or C H W
 *   144    16  UUID of the device (cudaDeviceProp.uuid): ordinals differ
 *              between processes with different CUDA_VISIBLE_DEVICES
 *
 * A client opens the handle with cudaIpcOpenMemHandle (once per job: the
 * handle names the job's whole pool, so keep the pointer it gives and add
 * offset for every batch of that job), and may use the bytes only while it
 * holds the .cuda file open; after close they are reused for another
 * batch.  The handle opens every batch of its job, and no other job's.
 *
 * This header needs no CUDA header: the handle is kept as 64 raw bytes,
 * which is exactly cudaIpcMemHandle_t (memcpy one into the other).
 * Everything here is static inline, reentrant and allocation-free.
 */
#ifndef FEEDFS_CUDA_H
#define FEEDFS_CUDA_H

#include <errno.h>
#include <stdint.h>
#include <string.h>

#define FEEDFS_CUDA_MAGIC "FFSCUDA"
#define FEEDFS_CUDA_VERSION 1
#define FEEDFS_CUDA_DESC_SIZE 160
#define FEEDFS_CUDA_HANDLE_SIZE 64

enum feedfs_cuda_dtype {
	FEEDFS_CUDA_UINT8 = 0,
	FEEDFS_CUDA_FLOAT16 = 1,
	FEEDFS_CUDA_FLOAT32 = 2,
};
enum feedfs_cuda_layout { FEEDFS_CUDA_NHWC = 0, FEEDFS_CUDA_NCHW = 1 };

struct feedfs_cuda_desc {
	uint8_t handle[FEEDFS_CUDA_HANDLE_SIZE];
	int32_t device;
	uint32_t dtype;  /* enum feedfs_cuda_dtype */
	uint64_t offset; /* bytes into the allocation of handle */
	uint64_t nbytes;
	uint32_t ndim;   /* 1..4; entries of shape past ndim are 0 */
	uint32_t layout; /* enum feedfs_cuda_layout */
	uint64_t shape[4];
	uint8_t uuid[16];
};

/* Bytes of one element of dtype, or 0 for an unknown code. */
static inline unsigned
feedfs_cuda_dtype_size(uint32_t dtype)
{
	return dtype == FEEDFS_CUDA_UINT8 ? 1
	    : dtype == FEEDFS_CUDA_FLOAT16 ? 2
	    : dtype == FEEDFS_CUDA_FLOAT32 ? 4
					   : 0;
}

static inline void
feedfs_cuda_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void
feedfs_cuda_put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t
feedfs_cuda_get32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static inline uint64_t
feedfs_cuda_get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Write d into buf (FEEDFS_CUDA_DESC_SIZE bytes). */
static inline void
feedfs_cuda_encode(const struct feedfs_cuda_desc *d, uint8_t *buf)
{
	memset(buf, 0, FEEDFS_CUDA_DESC_SIZE);
	memcpy(buf, FEEDFS_CUDA_MAGIC, sizeof(FEEDFS_CUDA_MAGIC));
	feedfs_cuda_put32(buf + 8, FEEDFS_CUDA_VERSION);
	feedfs_cuda_put32(buf + 12, FEEDFS_CUDA_DESC_SIZE);
	memcpy(buf + 16, d->handle, FEEDFS_CUDA_HANDLE_SIZE);
	feedfs_cuda_put32(buf + 80, (uint32_t)d->device);
	feedfs_cuda_put32(buf + 84, d->dtype);
	feedfs_cuda_put64(buf + 88, d->offset);
	feedfs_cuda_put64(buf + 96, d->nbytes);
	feedfs_cuda_put32(buf + 104, d->ndim);
	feedfs_cuda_put32(buf + 108, d->layout);
	for (int i = 0; i < 4; i++)
		feedfs_cuda_put64(buf + 112 + 8 * i, d->shape[i]);
	memcpy(buf + 144, d->uuid, 16);
}

/*
 * Read a descriptor of len bytes.  -EINVAL when it is not one (short, bad
 * magic, ndim, dtype, or nbytes that do not match the shape), -ENOTSUP for
 * a version this header does not know.  *d is set on success only.
 */
static inline int
feedfs_cuda_decode(const uint8_t *buf, size_t len, struct feedfs_cuda_desc *d)
{
	struct feedfs_cuda_desc t;
	uint64_t n;

	if (len < 16 || memcmp(buf, FEEDFS_CUDA_MAGIC,
			    sizeof(FEEDFS_CUDA_MAGIC)) != 0)
		return -EINVAL;
	if (feedfs_cuda_get32(buf + 8) != FEEDFS_CUDA_VERSION)
		return -ENOTSUP;
	if (feedfs_cuda_get32(buf + 12) != FEEDFS_CUDA_DESC_SIZE ||
	    len < FEEDFS_CUDA_DESC_SIZE)
		return -EINVAL;
	memcpy(t.handle, buf + 16, FEEDFS_CUDA_HANDLE_SIZE);
	t.device = (int32_t)feedfs_cuda_get32(buf + 80);
	t.dtype = feedfs_cuda_get32(buf + 84);
	t.offset = feedfs_cuda_get64(buf + 88);
	t.nbytes = feedfs_cuda_get64(buf + 96);
	t.ndim = feedfs_cuda_get32(buf + 104);
	t.layout = feedfs_cuda_get32(buf + 108);
	for (int i = 0; i < 4; i++)
		t.shape[i] = feedfs_cuda_get64(buf + 112 + 8 * i);
	memcpy(t.uuid, buf + 144, 16);
	if (t.ndim < 1 || t.ndim > 4 || t.layout > FEEDFS_CUDA_NCHW ||
	    feedfs_cuda_dtype_size(t.dtype) == 0)
		return -EINVAL;
	n = feedfs_cuda_dtype_size(t.dtype);
	for (uint32_t i = 0; i < 4; i++) {
		if (i >= t.ndim) {
			if (t.shape[i] != 0)
				return -EINVAL;
			continue;
		}
		if (t.shape[i] != 0 && n > UINT64_MAX / t.shape[i])
			return -EINVAL;
		n *= t.shape[i];
	}
	if (n != t.nbytes || t.offset > UINT64_MAX - t.nbytes)
		return -EINVAL;
	*d = t;
	return 0;
}

#endif
