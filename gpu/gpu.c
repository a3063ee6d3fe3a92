/*
 * gpu.c - CUDA staging of batches (see gpu.h).
 *
 * Locking: ring_lock serializes gpu_stage's use of the ring (one batch
 * goes through the ring at a time; its chunks overlap each other);
 * pool_lock protects the pool accounting and is taken alone or inside
 * ring_lock, never the other way round.  Every entry point makes device
 * g->dev current for the calling thread (FUSE threads come and go).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "gpu/gpu.h"
#include "gpu/kernels.h"
#include "gpu/pool.h"

#define GPU_RING 4                /* pinned staging slots */
#define GPU_SLOT_BYTES (8u << 20) /* each, unless one sample needs more */
#define GPU_ALIGN 4096u           /* of batch buffers in the pool */

struct gpu_buf {
	uint64_t off, len;
	uint32_t dtype, layout;
};

struct slot {
	uint8_t *host;    /* pinned (cudaHostAlloc) */
	uint8_t *scratch; /* device, uint8 input of the conversion */
	size_t cap;
	cudaStream_t s;
	cudaEvent_t done;
	bool busy; /* done not yet waited for */
};

struct gpu {
	int dev;
	uint8_t uuid[16];
	uint8_t *base; /* the pool's allocation */
	cudaIpcMemHandle_t handle;

	pthread_mutex_t pool_lock;
	struct gpu_pool pool; /* pool_lock */

	pthread_mutex_t ring_lock;
	struct slot ring[GPU_RING]; /* ring_lock */

	atomic_uint_fast64_t staged, h2d_bytes, stage_ns;
};

bool
gpu_built(void)
{
	return true;
}

static int
cuda_fail(cudaError_t e, const char *what, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s: %s", what, cudaGetErrorString(e));
	return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

/* Whether this process sees a device; err says why not. */
static int
have_device(char *err, size_t errlen)
{
	cudaError_t e;
	int n = 0;

	if ((e = cudaGetDeviceCount(&n)) != cudaSuccess) {
		snprintf(err, errlen, "no CUDA device: %s",
		    cudaGetErrorString(e));
		return -ENODEV;
	}
	if (n == 0) {
		snprintf(err, errlen, "no CUDA device: none is visible");
		return -ENODEV;
	}
	return 0;
}

int
gpu_probe(char *err, size_t errlen)
{
	char msg[512] = "";
	ssize_t got = 0;
	int fd[2], st = 0;
	pid_t pid;

	if (pipe(fd) != 0) {
		snprintf(err, errlen, "no CUDA device: pipe: %s",
		    strerror(errno));
		return -errno;
	}
	if ((pid = fork()) < 0) {
		snprintf(err, errlen, "no CUDA device: fork: %s",
		    strerror(errno));
		close(fd[0]);
		close(fd[1]);
		return -EAGAIN;
	}
	if (pid == 0) {
		close(fd[0]);
		if (have_device(msg, sizeof(msg)) != 0 &&
		    write(fd[1], msg, strlen(msg)) < 0)
			_exit(2);
		_exit(0);
	}
	close(fd[1]);
	for (;;) {
		ssize_t r = read(fd[0], msg + got, sizeof(msg) - 1 - (size_t)got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += r;
	}
	msg[got] = '\0';
	close(fd[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (got > 0) {
		snprintf(err, errlen, "%s", msg);
		return -ENODEV;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		snprintf(err, errlen, "no CUDA device: the probe process "
		    "failed (status %d)", st);
		return -ENODEV;
	}
	return 0;
}

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
	if ((e = cudaHostAlloc((void **)&s->host, cap,
		 cudaHostAllocDefault)) != cudaSuccess) {
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

int
gpu_init(struct gpu **out, uint64_t pool_bytes, char *err, size_t errlen)
{
	struct cudaDeviceProp prop;
	struct gpu *g;
	cudaError_t e;
	char what[384];
	int r;

	if ((r = have_device(err, errlen)) != 0)
		return r;
	if ((g = calloc(1, sizeof(*g))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&g->pool_lock, NULL);
	pthread_mutex_init(&g->ring_lock, NULL);
	g->dev = 0;
	if ((e = cudaSetDevice(g->dev)) != cudaSuccess ||
	    (e = cudaGetDeviceProperties(&prop, g->dev)) != cudaSuccess) {
		r = cuda_fail(e, "no CUDA device: device 0", err, errlen);
		goto fail;
	}
	memcpy(g->uuid, prop.uuid.bytes, sizeof(g->uuid));
	if ((r = gpu_pool_init(&g->pool, pool_bytes, GPU_ALIGN)) != 0 ||
	    g->pool.size == 0) {
		snprintf(err, errlen, "gpu_memory: %llu bytes is too small",
		    (unsigned long long)pool_bytes);
		r = -EINVAL;
		goto fail;
	}
	if ((e = cudaMalloc((void **)&g->base, g->pool.size)) != cudaSuccess) {
		g->base = NULL;
		snprintf(what, sizeof(what), "gpu_memory: cudaMalloc of %llu "
		    "bytes on %s", (unsigned long long)g->pool.size, prop.name);
		r = cuda_fail(e, what, err, errlen);
		goto fail;
	}
	if ((e = cudaIpcGetMemHandle(&g->handle, g->base)) != cudaSuccess) {
		r = cuda_fail(e, "cudaIpcGetMemHandle", err, errlen);
		goto fail;
	}
	for (int i = 0; i < GPU_RING; i++) {
		struct slot *s = &g->ring[i];

		if ((e = cudaStreamCreateWithFlags(&s->s,
			 cudaStreamNonBlocking)) != cudaSuccess ||
		    (e = cudaEventCreateWithFlags(&s->done,
			 cudaEventDisableTiming)) != cudaSuccess ||
		    (e = slot_reserve(s, GPU_SLOT_BYTES)) != cudaSuccess) {
			r = cuda_fail(e, "pinned staging ring", err, errlen);
			goto fail;
		}
	}
	*out = g;
	return 0;
fail:
	gpu_fini(g);
	return r;
}

void
gpu_fini(struct gpu *g)
{
	if (!g)
		return;
	cudaSetDevice(g->dev);
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
	if (g->base)
		cudaFree(g->base);
	gpu_pool_fini(&g->pool);
	pthread_mutex_destroy(&g->pool_lock);
	pthread_mutex_destroy(&g->ring_lock);
	free(g);
}

static unsigned
dtype_size(enum xf_dtype d)
{
	return d == XF_UINT8 ? 1 : d == XF_FLOAT16 ? 2 : 4;
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
	size_t out = in * dtype_size(cv->dtype);
	uint32_t per = (uint32_t)(GPU_SLOT_BYTES / in ? GPU_SLOT_BYTES / in : 1);
	bool direct = cv->dtype == XF_UINT8 && cv->layout == XF_HWC;
	struct gpu_kconv kc;
	cudaError_t e = cudaSuccess;
	unsigned k = 0;

	kc.w = cv->w;
	kc.h = cv->h;
	kc.dtype = cv->dtype == XF_UINT8 ? 0 : cv->dtype == XF_FLOAT16 ? 1 : 2;
	kc.layout = cv->layout == XF_HWC ? 0 : 1;
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
		if (s->busy && (e = cudaEventSynchronize(s->done)) !=
		    cudaSuccess)
			break;
		s->busy = false;
		memcpy(s->host, src + (size_t)s0 * in, bytes);
		if (direct) {
			e = cudaMemcpyAsync(dst + (size_t)s0 * out, s->host,
			    bytes, cudaMemcpyHostToDevice, s->s);
		} else if ((e = cudaMemcpyAsync(s->scratch, s->host, bytes,
				cudaMemcpyHostToDevice, s->s)) == cudaSuccess) {
			e = (cudaError_t)gpu_launch_convert(s->s, s->scratch,
			    dst + (size_t)s0 * out, cnt, &kc);
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
		return cuda_fail(e, "staging a batch", err, errlen);
	atomic_fetch_add(&g->h2d_bytes, (uint64_t)n * in);
	return 0;
}

int
gpu_stage(struct gpu *g, const struct gpu_conv *cv, const uint8_t *src,
    uint32_t n, struct gpu_buf **out, char *err, size_t errlen)
{
	uint64_t len = (uint64_t)n * cv->w * cv->h * 3 * dtype_size(cv->dtype);
	uint64_t t0 = now_ns(), off;
	struct gpu_buf *b;
	int r;

	if ((b = calloc(1, sizeof(*b))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_lock(&g->pool_lock);
	r = gpu_pool_get(&g->pool, len ? len : 1, &off);
	pthread_mutex_unlock(&g->pool_lock);
	if (r != 0) {
		snprintf(err, errlen, "gpu_memory: a batch of %llu bytes %s",
		    (unsigned long long)len, r == -E2BIG
			? "is larger than the whole pool"
			: "does not fit while the open .cuda files hold the "
			  "rest of the pool");
		free(b);
		return r;
	}
	b->off = off;
	b->len = len;
	b->dtype = cv->dtype == XF_UINT8 ? FEEDFS_CUDA_UINT8
	    : cv->dtype == XF_FLOAT16	 ? FEEDFS_CUDA_FLOAT16
					 : FEEDFS_CUDA_FLOAT32;
	b->layout = cv->layout == XF_HWC ? FEEDFS_CUDA_NHWC : FEEDFS_CUDA_NCHW;
	pthread_mutex_lock(&g->ring_lock);
	cudaSetDevice(g->dev);
	r = stage_locked(g, cv, src, n, g->base + off, err, errlen);
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

void
gpu_put(struct gpu *g, struct gpu_buf *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&g->pool_lock);
	gpu_pool_put(&g->pool, b->off);
	pthread_mutex_unlock(&g->pool_lock);
	free(b);
}

void
gpu_buf_desc(const struct gpu *g, const struct gpu_buf *b,
    struct feedfs_cuda_desc *d)
{
	memset(d, 0, sizeof(*d));
	memcpy(d->handle, &g->handle, FEEDFS_CUDA_HANDLE_SIZE);
	d->device = g->dev;
	memcpy(d->uuid, g->uuid, sizeof(d->uuid));
	d->offset = b->off;
	d->nbytes = b->len;
	d->dtype = b->dtype;
	d->layout = b->layout;
}

int
gpu_buf_read(struct gpu *g, const struct gpu_buf *b, uint64_t off, void *dst,
    size_t len)
{
	cudaError_t e;

	if (off > b->len || len > b->len - off)
		return -EINVAL;
	cudaSetDevice(g->dev);
	e = cudaMemcpy(dst, g->base + b->off + off, len,
	    cudaMemcpyDeviceToHost);
	return e == cudaSuccess ? 0 : -EIO;
}

void
gpu_get_stats(struct gpu *g, struct gpu_stats *st)
{
	pthread_mutex_lock(&g->pool_lock);
	st->pool_bytes = g->pool.size;
	st->pool_used = g->pool.used;
	st->pool_peak = g->pool.peak;
	st->pool_fails = g->pool.fails;
	pthread_mutex_unlock(&g->pool_lock);
	st->staged = atomic_load(&g->staged);
	st->h2d_bytes = atomic_load(&g->h2d_bytes);
	st->stage_ns = atomic_load(&g->stage_ns);
}

/* ---- the client side ---------------------------------------------------- */

int
gpu_ipc_open(const struct feedfs_cuda_desc *d, void **base, char *err,
    size_t errlen)
{
	cudaIpcMemHandle_t h;
	cudaError_t e;
	int n = 0, dev = d->device, r;

	if ((r = have_device(err, errlen)) != 0)
		return r;
	/* The exporter's device by UUID: ordinals depend on the process. */
	cudaGetDeviceCount(&n);
	for (int i = 0; i < n; i++) {
		struct cudaDeviceProp p;

		if (cudaGetDeviceProperties(&p, i) == cudaSuccess &&
		    memcmp(p.uuid.bytes, d->uuid, sizeof(d->uuid)) == 0) {
			dev = i;
			break;
		}
	}
	if ((e = cudaSetDevice(dev)) != cudaSuccess)
		return cuda_fail(e, "cudaSetDevice", err, errlen);
	memcpy(&h, d->handle, sizeof(h));
	if ((e = cudaIpcOpenMemHandle(base, h,
		 cudaIpcMemLazyEnablePeerAccess)) != cudaSuccess)
		return cuda_fail(e, "cudaIpcOpenMemHandle", err, errlen);
	return 0;
}

void
gpu_ipc_close(void *base)
{
	if (base)
		cudaIpcCloseMemHandle(base);
}

int
gpu_copy_to_host(void *dst, const void *dev, size_t len)
{
	return cudaMemcpy(dst, dev, len, cudaMemcpyDeviceToHost) ==
		cudaSuccess
	    ? 0
	    : -EIO;
}
