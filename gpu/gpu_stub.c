/*
 * gpu_stub.c - gpu.h for a build without CUDA (gpu/, CUDA staging): every
 * call says so.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gpu/gpu.h"

#define NO_CUDA "feedfs was built without CUDA"

bool
gpu_built(void)
{
	return false;
}

int
gpu_probe(char *err, size_t errlen)
{
	snprintf(err, errlen, NO_CUDA);
	return -ENOTSUP;
}

int
gpu_init(struct gpu **out, uint64_t budget, char *err, size_t errlen)
{
	(void)out;
	(void)budget;
	snprintf(err, errlen, NO_CUDA);
	return -ENOTSUP;
}

void
gpu_fini(struct gpu *g)
{
	(void)g;
}

int
gpu_job_pool(struct gpu *g, uint32_t job, uint64_t bytes, char *err,
    size_t errlen)
{
	(void)g;
	(void)job;
	(void)bytes;
	snprintf(err, errlen, NO_CUDA);
	return -ENOTSUP;
}

int
gpu_stage(struct gpu *g, uint32_t job, const struct gpu_conv *cv,
    const uint8_t *src, uint32_t n, struct gpu_buf **out, char *err,
    size_t errlen)
{
	(void)g;
	(void)job;
	(void)cv;
	(void)src;
	(void)n;
	(void)out;
	snprintf(err, errlen, NO_CUDA);
	return -ENOTSUP;
}

void
gpu_put(struct gpu *g, struct gpu_buf *b)
{
	(void)g;
	(void)b;
}

void
gpu_buf_desc(const struct gpu *g, const struct gpu_buf *b,
    struct feedfs_cuda_desc *d)
{
	(void)g;
	(void)b;
	memset(d, 0, sizeof(*d));
}

int
gpu_buf_read(struct gpu *g, const struct gpu_buf *b, uint64_t off, void *dst,
    size_t len)
{
	(void)g;
	(void)b;
	(void)off;
	(void)dst;
	(void)len;
	return -ENOTSUP;
}

void
gpu_get_stats(struct gpu *g, struct gpu_stats *st)
{
	(void)g;
	memset(st, 0, sizeof(*st));
}

int
gpu_ipc_open(const struct feedfs_cuda_desc *d, void **base, char *err,
    size_t errlen)
{
	(void)d;
	(void)base;
	snprintf(err, errlen, NO_CUDA);
	return -ENOTSUP;
}

void
gpu_ipc_close(void *base)
{
	(void)base;
}

int
gpu_copy_to_host(void *dst, const void *dev, size_t len)
{
	(void)dst;
	(void)dev;
	(void)len;
	return -ENOTSUP;
}
