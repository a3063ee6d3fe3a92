/*
 * gpu.h - optional CUDA staging of batches (see DESIGN "GPU staging").
 *
 * This build may lack CUDA: then gpu_available() is false and gpu_init()
 * fails with "feedfs was built without CUDA".
 */
#ifndef FEEDFS_GPU_H
#define FEEDFS_GPU_H

#include <stdbool.h>
#include <stddef.h>

struct gpu;

/* Whether this build has CUDA. */
bool gpu_built(void);
/* Open device 0 for staging; on failure err says why (no CUDA, no device). */
int gpu_init(struct gpu **out, char *err, size_t errlen);
void gpu_fini(struct gpu *g);

#endif
