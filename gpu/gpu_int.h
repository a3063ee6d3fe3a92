/*
 * gpu_int.h - what gpu.c, stage.c, jobs.c and errors.c share (gpu/, CUDA
 * builds only; not installed, not for the rest of feedfs, which sees
 * gpu.h).  They call one way: gpu.c the others, stage.c jobs.c, every one
 * errors.c.
 *
 * Locking: ring_lock serializes gpu_stage's use of the ring (one batch
 * goes through the ring at a time; its chunks overlap each other);
 * pool_lock protects the job pools (the table and each one's accounting)
 * and is taken alone or inside ring_lock, never the other way round.
 * Every entry point makes device g->dev current for the calling thread
 * (FUSE threads come and go), and fails when it cannot.
 */
#ifndef FEEDFS_GPU_INT_H
#define FEEDFS_GPU_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "gpu/gpu.h"
#include "gpu/pool.h"

#define GPU_RING 4		  /* pinned staging slots */
#define GPU_SLOT_BYTES (8u << 20) /* each, unless one sample needs more */
#define GPU_MAX_JOBS 65536u	  /* job ids gpu_job_pool takes */

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
	uint8_t *host;	  /* pinned (cudaHostAlloc) */
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
	struct jpool **pools;	   /* pool_lock; by job id, NULL: none */
	uint32_t npools;	   /* pool_lock; entries of pools */
	uint64_t reserved;	   /* pool_lock; bytes of every pool */

	pthread_mutex_t ring_lock;
	struct slot ring[GPU_RING]; /* ring_lock */

	_Atomic int lost; /* the sticky cudaError_t that lost the context */
	atomic_uint_fast64_t staged, h2d_bytes, stage_ns;
};

/* ---- errors.c: CUDA errors ---------------------------------------------- */

/* A CUDA call failed with e while doing what, before or outside a struct
 * gpu: err says so; -ENOMEM for an allocation, else -EIO. */
int gpu_cuda_fail(cudaError_t e, const char *what, char *err, size_t errlen);

/*
 * A CUDA call failed with e while doing what: clear the thread's error
 * state when the error can be cleared (so that it does not fail the next
 * call), or mark g's context lost when it cannot.  Returns -errno, err
 * saying what happened.
 */
int gpu_fail(
    struct gpu *g, cudaError_t e, const char *what, char *err, size_t errlen);

/* -EIO at once when the context was lost; else make g->dev current. */
int gpu_enter(struct gpu *g, char *err, size_t errlen);

/* ---- stage.c: the pinned staging ring ------------------------------------ */

/* Streams, events and GPU_SLOT_BYTES slots for the ring; device current.
 * On failure gpu_ring_fini undoes what was made. */
cudaError_t gpu_ring_init(struct gpu *g);

/* Convert a 1 x 1 sample with each kernel in slot 0: whether they run here
 * (an image can load yet fail to launch).  Device current. */
cudaError_t gpu_ring_trial(struct gpu *g);

/* Wait for and free every slot; device current. */
void gpu_ring_fini(struct gpu *g);

/* ---- jobs.c: the per-job pools ------------------------------------------ */

/*
 * Hold len bytes of job's pool in *b (b->p and b->off), waiting up to
 * GPU_FULL_WAIT_MS for room when it is full now.  Takes pool_lock.
 */
int gpu_job_hold(struct gpu *g, uint32_t job, uint64_t len, struct gpu_buf *b,
    char *err, size_t errlen);

/* Free every pool: their device memory too when current (device g->dev is
 * current), else that is left to the end of the process. */
void gpu_jobs_fini(struct gpu *g, bool current);

#endif
