/*
 * jobs.c - the per-job device pools and the buffers carved from them
 * (gpu/, CUDA staging; see gpu.h, gpu_int.h): gpu_job_pool, gpu_put,
 * gpu_buf_desc, gpu_buf_read, gpu_get_stats.  pool.c does the accounting;
 * pool_lock guards it here.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "gpu/gpu.h"
#include "gpu/gpu_int.h"
#include "gpu/pool.h"

/* Make the pool of job; pool_lock held, device current. */
static int
job_pool_locked(
    struct gpu *g, uint32_t job, uint64_t bytes, char *err, size_t errlen)
{
	struct jpool *p;
	cudaError_t e;
	int r;

	if (job >= g->npools) {
		uint32_t n = job + 1 > 2 * g->npools ? job + 1 : 2 * g->npools;
		struct jpool **t = realloc(g->pools, n * sizeof(*t));

		if (!t) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		memset(t + g->npools, 0, (n - g->npools) * sizeof(*t));
		g->pools = t;
		g->npools = n;
	}
	bytes &= ~(uint64_t)(GPU_POOL_ALIGN - 1);
	if (bytes == 0 || bytes > g->budget - g->reserved) {
		snprintf(err, errlen,
		    "gpu_memory: a pool of %llu bytes for "
		    "this job does not fit in the %llu bytes that the other "
		    "jobs' pools leave",
		    (unsigned long long)bytes,
		    (unsigned long long)(g->budget - g->reserved));
		return -E2BIG;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if ((r = gpu_pool_init(&p->acct, bytes, GPU_POOL_ALIGN)) != 0) {
		snprintf(err, errlen, "gpu_pool_init: %s", strerror(-r));
		free(p);
		return r;
	}
	if ((e = cudaMalloc((void **)&p->base, bytes)) != cudaSuccess) {
		char what[400];

		p->base = NULL;
		snprintf(what, sizeof(what),
		    "gpu_memory: cudaMalloc of the "
		    "job's pool of %llu bytes on %s",
		    (unsigned long long)bytes, g->name);
		r = gpu_fail(g, e, what, err, errlen);
		goto fail;
	}
	if ((e = cudaIpcGetMemHandle(&p->handle, p->base)) != cudaSuccess) {
		r = gpu_fail(g, e, "cudaIpcGetMemHandle", err, errlen);
		goto fail;
	}
	g->pools[job] = p;
	g->reserved += bytes;
	return 0;
fail:
	if (p->base)
		cudaFree(p->base);
	gpu_pool_fini(&p->acct);
	free(p);
	return r;
}

int
gpu_job_pool(
    struct gpu *g, uint32_t job, uint64_t bytes, char *err, size_t errlen)
{
	int r = 0;

	if (job >= GPU_MAX_JOBS) {
		snprintf(err, errlen, "job id %u is too large", job);
		return -EINVAL;
	}
	pthread_mutex_lock(&g->pool_lock);
	if ((job >= g->npools || !g->pools[job]) &&
	    (r = gpu_enter(g, err, errlen)) == 0)
		r = job_pool_locked(g, job, bytes, err, errlen);
	pthread_mutex_unlock(&g->pool_lock);
	return r;
}

/*
 * Hold len bytes of job's pool in *b, waiting up to GPU_FULL_WAIT_MS for
 * room when it is full now.
 */
int
gpu_job_hold(struct gpu *g, uint32_t job, uint64_t len, struct gpu_buf *b,
    char *err, size_t errlen)
{
	struct timespec until;
	struct jpool *p;
	bool late = false;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += (long)GPU_FULL_WAIT_MS * 1000000;
	until.tv_sec += until.tv_nsec / 1000000000;
	until.tv_nsec %= 1000000000;
	pthread_mutex_lock(&g->pool_lock);
	if (job >= g->npools || (p = g->pools[job]) == NULL) {
		pthread_mutex_unlock(&g->pool_lock);
		snprintf(err, errlen, "job %u has no device pool", job);
		return -ENOENT;
	}
	/* Full now: wait for a buffer to come back, then try again. */
	while ((r = gpu_pool_get(&p->acct, len, &b->off)) == -ENOSPC && !late) {
		p->acct.fails--; /* counted once, when it gives up */
		late = pthread_cond_timedwait(
			   &g->pool_freed, &g->pool_lock, &until) == ETIMEDOUT;
	}
	pthread_mutex_unlock(&g->pool_lock);
	if (r != 0) {
		snprintf(err, errlen, "gpu_memory: a batch of %llu bytes %s",
		    (unsigned long long)len,
		    r == -E2BIG
			? "is larger than the job's whole pool"
			: "does not fit while the open .cuda files of the job "
			  "hold the rest of its pool");
		return r;
	}
	b->p = p;
	return 0;
}

void
gpu_put(struct gpu *g, struct gpu_buf *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&g->pool_lock);
	gpu_pool_put(&b->p->acct, b->off);
	pthread_cond_broadcast(&g->pool_freed);
	pthread_mutex_unlock(&g->pool_lock);
	free(b);
}

void
gpu_buf_desc(
    const struct gpu *g, const struct gpu_buf *b, struct feedfs_cuda_desc *d)
{
	memset(d, 0, sizeof(*d));
	memcpy(d->handle, &b->p->handle, FEEDFS_CUDA_HANDLE_SIZE);
	d->device = g->dev;
	memcpy(d->uuid, g->uuid, sizeof(d->uuid));
	d->offset = b->off;
	d->nbytes = b->len;
	d->dtype = b->dtype;
	d->layout = b->layout;
}

int
gpu_buf_read(
    struct gpu *g, const struct gpu_buf *b, uint64_t off, void *dst, size_t len)
{
	char err[256];
	cudaError_t e;
	int r;

	if (off > b->len || len > b->len - off)
		return -EINVAL;
	if ((r = gpu_enter(g, err, sizeof(err))) != 0)
		return r;
	e = cudaMemcpy(
	    dst, b->p->base + b->off + off, len, cudaMemcpyDeviceToHost);
	return e == cudaSuccess
		   ? 0
		   : gpu_fail(g, e, "gpu_buf_read", err, sizeof(err));
}

void
gpu_get_stats(struct gpu *g, struct gpu_stats *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&g->pool_lock);
	st->budget = g->budget;
	for (uint32_t i = 0; i < g->npools; i++) {
		const struct gpu_pool *p;

		if (!g->pools[i])
			continue;
		p = &g->pools[i]->acct;
		st->pools++;
		st->pool_bytes += p->size;
		st->pool_used += p->used;
		st->pool_peak += p->peak;
		st->pool_fails += p->fails;
	}
	pthread_mutex_unlock(&g->pool_lock);
	st->staged = atomic_load(&g->staged);
	st->h2d_bytes = atomic_load(&g->h2d_bytes);
	st->stage_ns = atomic_load(&g->stage_ns);
}

void
gpu_jobs_fini(struct gpu *g, bool current)
{
	if (current)
		for (uint32_t i = 0; i < g->npools; i++)
			if (g->pools[i] && g->pools[i]->base)
				cudaFree(g->pools[i]->base);
	for (uint32_t i = 0; i < g->npools; i++)
		if (g->pools[i]) {
			gpu_pool_fini(&g->pools[i]->acct);
			free(g->pools[i]);
		}
	free(g->pools);
}
