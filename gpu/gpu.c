/*
 * gpu.c - CUDA staging of batches (see gpu.h).
 *
 * Locking: ring_lock serializes gpu_stage's use of the ring (one batch
 * goes through the ring at a time; its chunks overlap each other);
 * pool_lock protects the job pools (the table and each one's accounting)
 * and is taken alone or inside ring_lock, never the other way round.
 * Every entry point makes device g->dev current for the calling thread
 * (FUSE threads come and go), and fails when it cannot.
 *
 * One allocation per job, not per open: cudaMalloc and cudaFree cost
 * milliseconds and cudaFree synchronizes the device, a client would have
 * to cudaIpcOpenMemHandle (also milliseconds) for every batch, and a range
 * freed while a client still has it mapped is undefined behaviour, where
 * a range given back to a pool only holds another batch of the same job.
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
#define GPU_MAX_JOBS 65536u       /* job ids gpu_job_pool takes */

/* The pool of one job: its own allocation, so its own IPC handle. */
struct jpool {
	uint8_t *base;
	cudaIpcMemHandle_t handle;
	struct gpu_pool acct; /* pool_lock */
};

struct gpu_buf {
	struct jpool *p;
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
	char name[256];
	int major, minor;
	uint64_t budget; /* gpu_memory: every pool together */

	pthread_mutex_t pool_lock;
	pthread_cond_t pool_freed; /* a buffer went back to some pool */
	struct jpool **pools;      /* pool_lock; by job id, NULL: none */
	uint32_t npools;           /* pool_lock; entries of pools */
	uint64_t reserved;         /* pool_lock; bytes of every pool */

	pthread_mutex_t ring_lock;
	struct slot ring[GPU_RING]; /* ring_lock */

	_Atomic int lost; /* the sticky cudaError_t that lost the context */
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

/*
 * Errors after which the context cannot be used again (CUDA documents each
 * as leaving the process in an inconsistent state).
 */
static bool
sticky_code(cudaError_t e)
{
	switch (e) {
	case cudaErrorIllegalAddress:
	case cudaErrorLaunchFailure:
	case cudaErrorLaunchTimeout:
	case cudaErrorHardwareStackError:
	case cudaErrorIllegalInstruction:
	case cudaErrorMisalignedAddress:
	case cudaErrorInvalidAddressSpace:
	case cudaErrorInvalidPc:
	case cudaErrorAssert:
	case cudaErrorECCUncorrectable:
	case cudaErrorContextIsDestroyed:
		return true;
	default:
		return false;
	}
}

/*
 * A CUDA call failed with e while doing what: clear the thread's error
 * state when the error can be cleared (so that it does not fail the next
 * call), or mark the context lost when it cannot.  Returns -errno, err
 * saying what happened.
 */
static int
gpu_fail(struct gpu *g, cudaError_t e, const char *what, char *err,
    size_t errlen)
{
	int none = 0;

	(void)cudaGetLastError(); /* resets a non-sticky error */
	if (!sticky_code(e) && cudaPeekAtLastError() == cudaSuccess)
		return cuda_fail(e, what, err, errlen);
	if (atomic_compare_exchange_strong(&g->lost, &none, (int)e))
		snprintf(err, errlen, "%s: %s: CUDA context lost (a sticky "
		    "error): every later .cuda read fails with EIO until "
		    "feedfs is mounted again", what, cudaGetErrorString(e));
	else
		snprintf(err, errlen, "%s: %s (CUDA context lost earlier)",
		    what, cudaGetErrorString(e));
	return -EIO;
}

/* -EIO at once when the context was lost; else make g->dev current. */
static int
gpu_enter(struct gpu *g, char *err, size_t errlen)
{
	int lost = atomic_load(&g->lost);
	cudaError_t e;

	if (lost != 0) {
		snprintf(err, errlen, "CUDA context lost earlier (%s): .cuda "
		    "reads fail until feedfs is mounted again",
		    cudaGetErrorName((cudaError_t)lost));
		return -EIO;
	}
	if ((e = cudaSetDevice(g->dev)) != cudaSuccess)
		return gpu_fail(g, e, "cudaSetDevice", err, errlen);
	return 0;
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

/*
 * Whether this build's kernels can run on the current device, whose name
 * and compute capability are given: every kernel has an image for it.
 */
static int
kernels_usable(const char *name, int major, int minor, char *err,
    size_t errlen)
{
	cudaError_t e = (cudaError_t)gpu_kernels_check();

	if (e == cudaSuccess)
		return 0;
	(void)cudaGetLastError();
	snprintf(err, errlen, "%s (compute capability %d.%d) cannot run "
	    "feedfs's CUDA kernels: %s; they were built for compute "
	    "capabilities %s (rebuild with NVCC_ARCH naming sm_%d%d)", name,
	    major, minor, cudaGetErrorString(e), gpu_kernels_archs(), major,
	    minor);
	return -ENOTSUP;
}

/* The child of gpu_probe: a device, and kernels that run on device 0. */
static int
probe_child(char *err, size_t errlen)
{
	struct cudaDeviceProp prop;
	cudaError_t e;
	int r;

	if ((r = have_device(err, errlen)) != 0)
		return r;
	if ((e = cudaSetDevice(0)) != cudaSuccess ||
	    (e = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess) {
		snprintf(err, errlen, "no CUDA device: device 0: %s",
		    cudaGetErrorString(e));
		return -ENODEV;
	}
	return kernels_usable(prop.name, prop.major, prop.minor, err, errlen);
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
		if (probe_child(msg, sizeof(msg)) != 0 &&
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

/*
 * One conversion of a 1 x 1 sample for each kernel, in slot 0: whether
 * they run here (an image can load yet fail to launch).  Device current.
 */
static cudaError_t
trial_run(struct gpu *g)
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

int
gpu_init(struct gpu **out, uint64_t budget, char *err, size_t errlen)
{
	struct cudaDeviceProp prop;
	size_t avail = 0, total = 0;
	pthread_condattr_t ca;
	struct gpu *g;
	cudaError_t e;
	int r;

	if ((r = have_device(err, errlen)) != 0)
		return r;
	if ((g = calloc(1, sizeof(*g))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&g->pool_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g->pool_freed, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&g->ring_lock, NULL);
	g->dev = 0;
	g->budget = budget;
	if ((e = cudaSetDevice(g->dev)) != cudaSuccess ||
	    (e = cudaGetDeviceProperties(&prop, g->dev)) != cudaSuccess) {
		r = cuda_fail(e, "no CUDA device: device 0", err, errlen);
		goto fail;
	}
	memcpy(g->uuid, prop.uuid.bytes, sizeof(g->uuid));
	snprintf(g->name, sizeof(g->name), "%s", prop.name);
	g->major = prop.major;
	g->minor = prop.minor;
	if ((r = kernels_usable(g->name, g->major, g->minor, err, errlen)) !=
	    0)
		goto fail;
	if (gpu_pool_share(budget, 1) == 0) {
		snprintf(err, errlen, "gpu_memory: %llu bytes is too small",
		    (unsigned long long)budget);
		r = -EINVAL;
		goto fail;
	}
	/* The pools are made at their job's first read: say now if the
	 * budget cannot be had (another process may still take it later). */
	if ((e = cudaMemGetInfo(&avail, &total)) != cudaSuccess) {
		r = cuda_fail(e, "cudaMemGetInfo", err, errlen);
		goto fail;
	}
	if (budget > avail) {
		snprintf(err, errlen, "gpu_memory: %llu bytes, but %s has %llu "
		    "bytes free (of %llu)", (unsigned long long)budget,
		    g->name, (unsigned long long)avail,
		    (unsigned long long)total);
		r = -ENOMEM;
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
	if ((e = trial_run(g)) != cudaSuccess) {
		char what[400];

		snprintf(what, sizeof(what), "a trial conversion on %s "
		    "(compute capability %d.%d, kernels built for %s)", g->name,
		    g->major, g->minor, gpu_kernels_archs());
		r = cuda_fail(e, what, err, errlen);
		goto fail;
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
	/* Without the device current the frees would go to another one:
	 * leave them to the end of the process. */
	if (cudaSetDevice(g->dev) == cudaSuccess) {
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
		for (uint32_t i = 0; i < g->npools; i++)
			if (g->pools[i] && g->pools[i]->base)
				cudaFree(g->pools[i]->base);
	}
	for (uint32_t i = 0; i < g->npools; i++)
		if (g->pools[i]) {
			gpu_pool_fini(&g->pools[i]->acct);
			free(g->pools[i]);
		}
	free(g->pools);
	pthread_mutex_destroy(&g->pool_lock);
	pthread_cond_destroy(&g->pool_freed);
	pthread_mutex_destroy(&g->ring_lock);
	free(g);
}

/* Make the pool of job; pool_lock held, device current. */
static int
job_pool_locked(struct gpu *g, uint32_t job, uint64_t bytes, char *err,
    size_t errlen)
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
		snprintf(err, errlen, "gpu_memory: a pool of %llu bytes for "
		    "this job does not fit in the %llu bytes that the other "
		    "jobs' pools leave", (unsigned long long)bytes,
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
		snprintf(what, sizeof(what), "gpu_memory: cudaMalloc of the "
		    "job's pool of %llu bytes on %s", (unsigned long long)bytes,
		    g->name);
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
gpu_job_pool(struct gpu *g, uint32_t job, uint64_t bytes, char *err,
    size_t errlen)
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

	/* An error left by another call must not be taken for ours. */
	(void)cudaGetLastError();

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
		return gpu_fail(g, e, "staging a batch", err, errlen);
	atomic_fetch_add(&g->h2d_bytes, (uint64_t)n * in);
	return 0;
}

/*
 * Hold len bytes of job's pool in *b, waiting up to GPU_FULL_WAIT_MS for
 * room when it is full now.
 */
static int
hold(struct gpu *g, uint32_t job, uint64_t len, struct gpu_buf *b,
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
	while ((r = gpu_pool_get(&p->acct, len, &b->off)) == -ENOSPC &&
	    !late) {
		p->acct.fails--; /* counted once, when it gives up */
		late = pthread_cond_timedwait(&g->pool_freed, &g->pool_lock,
			   &until) == ETIMEDOUT;
	}
	pthread_mutex_unlock(&g->pool_lock);
	if (r != 0) {
		snprintf(err, errlen, "gpu_memory: a batch of %llu bytes %s",
		    (unsigned long long)len, r == -E2BIG
			? "is larger than the job's whole pool"
			: "does not fit while the open .cuda files of the job "
			  "hold the rest of its pool");
		return r;
	}
	b->p = p;
	return 0;
}

int
gpu_stage(struct gpu *g, uint32_t job, const struct gpu_conv *cv,
    const uint8_t *src, uint32_t n, struct gpu_buf **out, char *err,
    size_t errlen)
{
	uint64_t len = (uint64_t)n * cv->w * cv->h * 3 * dtype_size(cv->dtype);
	uint64_t t0 = now_ns();
	struct gpu_buf *b;
	int r;

	if ((r = gpu_enter(g, err, errlen)) != 0)
		return r;
	if ((b = calloc(1, sizeof(*b))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if ((r = hold(g, job, len ? len : 1, b, err, errlen)) != 0) {
		free(b);
		return r;
	}
	b->len = len;
	b->dtype = cv->dtype == XF_UINT8 ? FEEDFS_CUDA_UINT8
	    : cv->dtype == XF_FLOAT16	 ? FEEDFS_CUDA_FLOAT16
					 : FEEDFS_CUDA_FLOAT32;
	b->layout = cv->layout == XF_HWC ? FEEDFS_CUDA_NHWC : FEEDFS_CUDA_NCHW;
	pthread_mutex_lock(&g->ring_lock);
	if ((r = gpu_enter(g, err, errlen)) == 0)
		r = stage_locked(g, cv, src, n, b->p->base + b->off, err,
		    errlen);
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
	gpu_pool_put(&b->p->acct, b->off);
	pthread_cond_broadcast(&g->pool_freed);
	pthread_mutex_unlock(&g->pool_lock);
	free(b);
}

void
gpu_buf_desc(const struct gpu *g, const struct gpu_buf *b,
    struct feedfs_cuda_desc *d)
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
gpu_buf_read(struct gpu *g, const struct gpu_buf *b, uint64_t off, void *dst,
    size_t len)
{
	char err[256];
	cudaError_t e;
	int r;

	if (off > b->len || len > b->len - off)
		return -EINVAL;
	if ((r = gpu_enter(g, err, sizeof(err))) != 0)
		return r;
	e = cudaMemcpy(dst, b->p->base + b->off + off, len,
	    cudaMemcpyDeviceToHost);
	return e == cudaSuccess ? 0
				: gpu_fail(g, e, "gpu_buf_read", err,
				      sizeof(err));
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
