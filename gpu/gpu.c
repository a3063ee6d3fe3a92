/*
 * gpu.c - CUDA staging of batches (gpu/, which includes nothing of ours
 * outside it; see gpu.h): the device, its probe, gpu_init and gpu_fini,
 * and the client side.  The staging ring and gpu_stage are in stage.c,
 * the per-job pools and the buffers in jobs.c, CUDA errors in errors.c;
 * what they share, and the lock order, in gpu_int.h.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "gpu/gpu.h"
#include "gpu/gpu_int.h"
#include "gpu/kernels.h"
#include "gpu/pool.h"

bool
gpu_built(void)
{
	return true;
}

/* Whether this process sees a device; err says why not. */
static int
have_device(char *err, size_t errlen)
{
	cudaError_t e;
	int n = 0;

	if ((e = cudaGetDeviceCount(&n)) != cudaSuccess) {
		snprintf(
		    err, errlen, "no CUDA device: %s", cudaGetErrorString(e));
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
kernels_usable(const char *name, int major, int minor, char *err, size_t errlen)
{
	cudaError_t e = (cudaError_t)gpu_kernels_check();

	if (e == cudaSuccess)
		return 0;
	(void)cudaGetLastError();
	snprintf(err, errlen,
	    "%s (compute capability %d.%d) cannot run "
	    "feedfs's CUDA kernels: %s; they were built for compute "
	    "capabilities %s (rebuild with NVCC_ARCH naming sm_%d%d)",
	    name, major, minor, cudaGetErrorString(e), gpu_kernels_archs(),
	    major, minor);
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
		snprintf(
		    err, errlen, "no CUDA device: pipe: %s", strerror(errno));
		return -errno;
	}
	if ((pid = fork()) < 0) {
		snprintf(
		    err, errlen, "no CUDA device: fork: %s", strerror(errno));
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
		ssize_t r =
		    read(fd[0], msg + got, sizeof(msg) - 1 - (size_t)got);

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
		snprintf(err, errlen,
		    "no CUDA device: the probe process "
		    "failed (status %d)",
		    st);
		return -ENODEV;
	}
	return 0;
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
		r = gpu_cuda_fail(e, "no CUDA device: device 0", err, errlen);
		goto fail;
	}
	memcpy(g->uuid, prop.uuid.bytes, sizeof(g->uuid));
	snprintf(g->name, sizeof(g->name), "%s", prop.name);
	g->major = prop.major;
	g->minor = prop.minor;
	if ((r = kernels_usable(g->name, g->major, g->minor, err, errlen)) != 0)
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
		r = gpu_cuda_fail(e, "cudaMemGetInfo", err, errlen);
		goto fail;
	}
	if (budget > avail) {
		snprintf(err, errlen,
		    "gpu_memory: %llu bytes, but %s has %llu "
		    "bytes free (of %llu)",
		    (unsigned long long)budget, g->name,
		    (unsigned long long)avail, (unsigned long long)total);
		r = -ENOMEM;
		goto fail;
	}
	if ((e = gpu_ring_init(g)) != cudaSuccess) {
		r = gpu_cuda_fail(e, "pinned staging ring", err, errlen);
		goto fail;
	}
	if ((e = gpu_ring_trial(g)) != cudaSuccess) {
		char what[400];

		snprintf(what, sizeof(what),
		    "a trial conversion on %s "
		    "(compute capability %d.%d, kernels built for %s)",
		    g->name, g->major, g->minor, gpu_kernels_archs());
		r = gpu_cuda_fail(e, what, err, errlen);
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
	bool current;

	if (!g)
		return;
	/* Without the device current the frees would go to another one:
	 * leave them to the end of the process. */
	current = cudaSetDevice(g->dev) == cudaSuccess;
	if (current)
		gpu_ring_fini(g);
	gpu_jobs_fini(g, current);
	pthread_mutex_destroy(&g->pool_lock);
	pthread_cond_destroy(&g->pool_freed);
	pthread_mutex_destroy(&g->ring_lock);
	free(g);
}

/* ---- the client side ---------------------------------------------------- */

int
gpu_ipc_open(
    const struct feedfs_cuda_desc *d, void **base, char *err, size_t errlen)
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
		return gpu_cuda_fail(e, "cudaSetDevice", err, errlen);
	memcpy(&h, d->handle, sizeof(h));
	if ((e = cudaIpcOpenMemHandle(
		 base, h, cudaIpcMemLazyEnablePeerAccess)) != cudaSuccess)
		return gpu_cuda_fail(e, "cudaIpcOpenMemHandle", err, errlen);
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
	return cudaMemcpy(dst, dev, len, cudaMemcpyDeviceToHost) == cudaSuccess
		   ? 0
		   : -EIO;
}
