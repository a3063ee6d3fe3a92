/*
 * stage.c - the pinned staging ring and gpu_stage (gpu/, CUDA staging; see
 * gpu.h, gpu_int.h).
 *
 * The ring is GPU_RING slots, each a pinned host buffer, a device scratch
 * buffer, a stream and an event; ring_lock serializes its use.
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
#include "gpu/kernels.h"

static void
slot_free(struct slot *s)
{
	if (s->host)
		cudaFreeHost(s->host);
	if (s->scratch)
		cudaFree(s->scratch);
	s->host = s->scratch = NULL;
	s->cap = 0;
}

/* Make slot s hold at least cap bytes (its old bytes are not kept). */
static cudaError_t
slot_reserve(struct slot *s, size_t cap)
{
	cudaError_t e;

	if (s->cap >= cap)
		return cudaSuccess;
	if (s->busy) {
		cudaEventSynchronize(s->done);
		s->busy = false;
	}
	slot_free(s);
	if ((e = cudaHostAlloc((void **)&s->host, cap, cudaHostAllocDefault)) !=
	    cudaSuccess) {
		s->host = NULL;
		return e;
	}
	if ((e = cudaMalloc((void **)&s->scratch, cap)) != cudaSuccess) {
		s->scratch = NULL;
		slot_free(s);
		return e;
	}
	s->cap = cap;
	return cudaSuccess;
}

cudaError_t
gpu_ring_init(struct gpu *g)
{
	cudaError_t e;

	for (int i = 0; i < GPU_RING; i++) {
		struct slot *s = &g->ring[i];

		if ((e = cudaStreamCreateWithFlags(
			 &s->s, cudaStreamNonBlocking)) != cudaSuccess ||
		    (e = cudaEventCreateWithFlags(
			 &s->done, cudaEventDisableTiming)) != cudaSuccess ||
		    (e = slot_reserve(s, GPU_SLOT_BYTES)) != cudaSuccess)
			return e;
	}
	return cudaSuccess;
}

void
gpu_ring_fini(struct gpu *g)
{
	for (int i = 0; i < GPU_RING; i++) {
		struct slot *s = &g->ring[i];

		if (s->s)
			cudaStreamSynchronize(s->s);
		slot_free(s);
		if (s->done)
			cudaEventDestroy(s->done);
		if (s->s)
			cudaStreamDestroy(s->s);
	}
}

/*
 * One conversion of a 1 x 1 sample for each kernel, in slot 0: whether
 * they run here (an image can load yet fail to launch).  Device current.
 */
cudaError_t
gpu_ring_trial(struct gpu *g)
{
	struct slot *s = &g->ring[0];
	struct gpu_kconv kc = {1, 1, 0, 1, 1, {0, 0, 0}, {1, 1, 1}};
	cudaError_t e;

	if ((e = cudaMemsetAsync(s->scratch, 7, 3, s->s)) != cudaSuccess)
		return e;
	for (int d = 0; d < 3; d++) {
		kc.dtype = d;
		if ((e = (cudaError_t)gpu_launch_convert(s->s, s->scratch,
			 s->scratch + 256, 1, &kc)) != cudaSuccess)
			return e;
	}
	return cudaStreamSynchronize(s->s);
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * The chunks of a batch through the ring: the host copy into slot k+1 runs
 * while slot k's transfer and kernel run on its stream.  Called with
 * ring_lock held.
 */
static int
stage_locked(struct gpu *g, const struct gpu_conv *cv, const uint8_t *src,
    uint32_t n, uint8_t *dst, char *err, size_t errlen)
{
	size_t in = (size_t)cv->w * cv->h * 3;
	size_t out = in * feedfs_cuda_dtype_size(cv->dtype);
	uint32_t per =
	    (uint32_t)(GPU_SLOT_BYTES / in ? GPU_SLOT_BYTES / in : 1);
	bool direct =
	    cv->dtype == FEEDFS_CUDA_UINT8 && cv->layout == FEEDFS_CUDA_NHWC;
	struct gpu_kconv kc;
	cudaError_t e = cudaSuccess;
	unsigned k = 0;

	/* An error left by another call must not be taken for ours. */
	(void)cudaGetLastError();

	kc.w = cv->w;
	kc.h = cv->h;
	kc.dtype = (int)cv->dtype;
	kc.layout = (int)cv->layout;
	kc.normalize = cv->normalize;
	for (int c = 0; c < 3; c++) {
		kc.mean[c] = cv->normalize ? cv->mean[c] : 0.0f;
		kc.std[c] = cv->normalize ? cv->std[c] : 1.0f;
	}
	for (uint32_t s0 = 0; s0 < n; s0 += per, k++) {
		struct slot *s = &g->ring[k % GPU_RING];
		uint32_t cnt = n - s0 < per ? n - s0 : per;
		size_t bytes = (size_t)cnt * in;

		if ((e = slot_reserve(s, (size_t)per * in)) != cudaSuccess)
			break;
		if (s->busy &&
		    (e = cudaEventSynchronize(s->done)) != cudaSuccess)
			break;
		s->busy = false;
		memcpy(s->host, src + (size_t)s0 * in, bytes);
		if (direct) {
			e = cudaMemcpyAsync(dst + (size_t)s0 * out, s->host,
			    bytes, cudaMemcpyHostToDevice, s->s);
		} else if ((e = cudaMemcpyAsync(s->scratch, s->host, bytes,
				cudaMemcpyHostToDevice, s->s)) == cudaSuccess) {
			e = (cudaError_t)gpu_launch_convert(
			    s->s, s->scratch, dst + (size_t)s0 * out, cnt, &kc);
		}
		if (e != cudaSuccess ||
		    (e = cudaEventRecord(s->done, s->s)) != cudaSuccess)
			break;
		s->busy = true;
	}
	/* Wait for every slot, also after an error: none may run on. */
	for (int i = 0; i < GPU_RING; i++) {
		struct slot *s = &g->ring[i];
		cudaError_t e2;

		if (!s->busy)
			continue;
		if ((e2 = cudaEventSynchronize(s->done)) != cudaSuccess &&
		    e == cudaSuccess)
			e = e2;
		s->busy = false;
	}
	if (e != cudaSuccess)
		return gpu_fail(g, e, "staging a batch", err, errlen);
	atomic_fetch_add(&g->h2d_bytes, (uint64_t)n * in);
	return 0;
}

int
gpu_stage(struct gpu *g, uint32_t job, const struct gpu_conv *cv,
    const uint8_t *src, uint32_t n, struct gpu_buf **out, char *err,
    size_t errlen)
{
	unsigned esize = feedfs_cuda_dtype_size(cv->dtype);
	uint64_t len = (uint64_t)n * cv->w * cv->h * 3 * esize;
	uint64_t t0 = now_ns();
	struct gpu_buf *b;
	int r;

	if (esize == 0 || cv->layout > FEEDFS_CUDA_NCHW) {
		snprintf(err, errlen, "dtype %u, layout %u: no such code",
		    (unsigned)cv->dtype, (unsigned)cv->layout);
		return -EINVAL;
	}
	if ((r = gpu_enter(g, err, errlen)) != 0)
		return r;
	if ((b = calloc(1, sizeof(*b))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if ((r = gpu_job_hold(g, job, len ? len : 1, b, err, errlen)) != 0) {
		free(b);
		return r;
	}
	b->len = len;
	b->dtype = cv->dtype;
	b->layout = cv->layout;
	pthread_mutex_lock(&g->ring_lock);
	if ((r = gpu_enter(g, err, errlen)) == 0)
		r = stage_locked(
		    g, cv, src, n, b->p->base + b->off, err, errlen);
	pthread_mutex_unlock(&g->ring_lock);
	if (r != 0) {
		gpu_put(g, b);
		return r;
	}
	atomic_fetch_add(&g->staged, 1);
	atomic_fetch_add(&g->stage_ns, now_ns() - t0);
	*out = b;
	return 0;
}
