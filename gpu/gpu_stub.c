/*
 * gpu_stub.c - gpu.h for a build without CUDA: every call says so.
 */
#include <errno.h>
#include <stdio.h>

#include "gpu/gpu.h"

bool
gpu_built(void)
{
	return false;
}

int
gpu_init(struct gpu **out, char *err, size_t errlen)
{
	(void)out;
	snprintf(err, errlen, "feedfs was built without CUDA");
	return -ENOTSUP;
}

void
gpu_fini(struct gpu *g)
{
	(void)g;
}
