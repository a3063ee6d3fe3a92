/*
 * errors.c - CUDA errors in gpu/ (CUDA staging; includes nothing of ours
 * outside gpu/): a failed call said in err and turned into an errno,
 * errors that leave the context usable cleared, sticky ones that do not
 * recorded so that every later call fails at once (see gpu.h, Errors).
 * gpu.c, stage.c and jobs.c call these; this file calls none of them.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "gpu/gpu_int.h"

int
gpu_cuda_fail(cudaError_t e, const char *what, char *err, size_t errlen)
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

int
gpu_fail(
    struct gpu *g, cudaError_t e, const char *what, char *err, size_t errlen)
{
	int none = 0;

	(void)cudaGetLastError(); /* resets a non-sticky error */
	if (!sticky_code(e) && cudaPeekAtLastError() == cudaSuccess)
		return gpu_cuda_fail(e, what, err, errlen);
	if (atomic_compare_exchange_strong(&g->lost, &none, (int)e))
		snprintf(err, errlen,
		    "%s: %s: CUDA context lost (a sticky "
		    "error): every later .cuda read fails with EIO until "
		    "feedfs is mounted again",
		    what, cudaGetErrorString(e));
	else
		snprintf(err, errlen, "%s: %s (CUDA context lost earlier)",
		    what, cudaGetErrorString(e));
	return -EIO;
}

int
gpu_enter(struct gpu *g, char *err, size_t errlen)
{
	int lost = atomic_load(&g->lost);
	cudaError_t e;

	if (lost != 0) {
		snprintf(err, errlen,
		    "CUDA context lost earlier (%s): .cuda "
		    "reads fail until feedfs is mounted again",
		    cudaGetErrorName((cudaError_t)lost));
		return -EIO;
	}
	if ((e = cudaSetDevice(g->dev)) != cudaSuccess)
		return gpu_fail(g, e, "cudaSetDevice", err, errlen);
	return 0;
}
