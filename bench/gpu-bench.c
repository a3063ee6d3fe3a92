/*
 * gpu-bench - the .cuda path against .npy + cudaMemcpy from pageable memory.
 *
 *   gpu-bench [-n BATCHES] EPOCH_DIR    a mounted gpu = on job's epoch-NNNN
 *   gpu-bench [-n BATCHES] [-b B] [-s S] [-t f16|f32]   synthetic, in-process
 *
 * With EPOCH_DIR: (a) open batch-NNNNNN.cuda, read the descriptor, use the
 * device bytes (the pool's handle is opened once), close; (b) read
 * batch-NNNNNN.npy into malloc'd memory and cudaMemcpy it to the device.
 * Without: (a) gpu_stage of B uint8 S x S samples (the device converts to
 * CHW float, normalized) and (b) cudaMemcpy of the same batch already
 * converted on the CPU, from pageable memory.  Prints batches/s and the
 * host-to-device GB/s of each (bytes that crossed PCIe per second).
 * Run the mount case twice: the first pass decodes, the second is warm.
 * Without CUDA or a device it says so and exits 77.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu/feedfs_cuda.h"
#include "gpu/gpu.h"
#include "transforms/xf.h"

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void
report(const char *what, unsigned n, double secs, double bytes)
{
	printf("%-34s %8.1f batches/s %8.2f GB/s H2D (%u batches, %.3f s)\n",
	    what, n / secs, bytes / secs / 1e9, n, secs);
}

static int
read_file(const char *path, uint8_t **buf, size_t *len)
{
	uint8_t *b = NULL;
	size_t cap = 0, got = 0;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t r;

		if (got == cap) {
			uint8_t *nb = realloc(b, cap = cap ? 2 * cap : 1 << 20);

			if (!nb) {
				free(b);
				close(fd);
				return -ENOMEM;
			}
			b = nb;
		}
		if ((r = read(fd, b + got, cap - got)) < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	*buf = b;
	*len = got;
	return 0;
}

static int
bench_mount(const char *dir, unsigned nb)
{
	char path[4096], err[512];
	uint8_t *host = NULL;
	void *base = NULL, *dev = NULL;
	size_t devcap = 0;
	double t0, h2d = 0;
	unsigned n;

	/* (a) the .cuda path */
	t0 = now();
	for (n = 0; n < nb; n++) {
		uint8_t buf[FEEDFS_CUDA_DESC_SIZE];
		struct feedfs_cuda_desc d;
		int fd;
		ssize_t r;

		snprintf(path, sizeof(path), "%s/batch-%06u.cuda", dir, n);
		if ((fd = open(path, O_RDONLY)) < 0)
			break; /* past the last batch */
		r = read(fd, buf, sizeof(buf));
		if (r != (ssize_t)sizeof(buf) ||
		    feedfs_cuda_decode(buf, sizeof(buf), &d) != 0) {
			fprintf(stderr, "gpu-bench: %s: not a descriptor\n",
			    path);
			close(fd);
			return 1;
		}
		if (!base && gpu_ipc_open(&d, &base, err, sizeof(err)) != 0) {
			fprintf(stderr, "gpu-bench: %s\n", err);
			close(fd);
			return 1;
		}
		/* PCIe carried the uint8 samples: a quarter of float32. */
		h2d += (double)d.nbytes / feedfs_cuda_dtype_size(d.dtype);
		close(fd); /* a trainer would use the batch before this */
	}
	if (n == 0) {
		fprintf(stderr, "gpu-bench: %s/batch-000000.cuda: %s (a job "
		    "with gpu = on?)\n", dir, strerror(errno));
		return 1;
	}
	report(".cuda (descriptor + IPC)", n, now() - t0, h2d);
	nb = n;

	/* (b) .npy read + cudaMemcpy from pageable memory */
	h2d = 0;
	t0 = now();
	for (n = 0; n < nb; n++) {
		size_t len = 0;

		snprintf(path, sizeof(path), "%s/batch-%06u.npy", dir, n);
		if (read_file(path, &host, &len) != 0)
			break;
		if (len > devcap) {
			cudaFree(dev);
			if (cudaMalloc(&dev, len) != cudaSuccess)
				return 1;
			devcap = len;
		}
		cudaMemcpy(dev, host, len, cudaMemcpyHostToDevice);
		h2d += (double)len;
		free(host);
	}
	report(".npy read + cudaMemcpy (pageable)", n, now() - t0, h2d);
	cudaFree(dev);
	gpu_ipc_close(base);
	return 0;
}

static int
bench_synthetic(unsigned nb, uint32_t B, uint32_t S, enum xf_dtype dt)
{
	struct gpu_conv cv = { S, S,
		dt == XF_FLOAT16 ? FEEDFS_CUDA_FLOAT16 : FEEDFS_CUDA_FLOAT32,
		FEEDFS_CUDA_NCHW, true,
		{ 0.485f, 0.456f, 0.406f }, { 0.229f, 0.224f, 0.225f } };
	size_t in = (size_t)B * S * S * 3, out = in * (dt == XF_FLOAT16 ? 2 : 4);
	uint8_t *src = malloc(in), *conv = malloc(out);
	struct gpu *g = NULL;
	char err[512];
	void *dev = NULL;
	double t0;

	if (!src || !conv)
		return 1;
	for (size_t i = 0; i < in; i++)
		src[i] = (uint8_t)(i * 2654435761u >> 24);
	if (gpu_init(&g, out + (16u << 20), err, sizeof(err)) != 0 ||
	    gpu_job_pool(g, 0, out + (16u << 20), err, sizeof(err)) != 0) {
		fprintf(stderr, "gpu-bench: %s\n", err);
		return 1;
	}
	t0 = now();
	for (unsigned n = 0; n < nb; n++) {
		struct gpu_buf *b = NULL;

		if (gpu_stage(g, 0, &cv, src, B, &b, err, sizeof(err)) != 0) {
			fprintf(stderr, "gpu-bench: %s\n", err);
			return 1;
		}
		gpu_put(g, b);
	}
	report("stage (pinned ring + kernel)", nb, now() - t0,
	    (double)in * nb);
	gpu_fini(g);

	/* The CPU conversion is not timed: the .npy path's bytes exist. */
	for (uint32_t s = 0; s < B; s++) {
		struct xf_image img = {
		    .w = S, .h = S, .px = src + (size_t)s * S * S * 3};

		xf_convert(&img, true, cv.mean, cv.std, dt, XF_CHW,
		    conv + s * (out / B));
	}
	if (cudaMalloc(&dev, out) != cudaSuccess)
		return 1;
	t0 = now();
	for (unsigned n = 0; n < nb; n++)
		cudaMemcpy(dev, conv, out, cudaMemcpyHostToDevice);
	report("cudaMemcpy of converted (pageable)", nb, now() - t0,
	    (double)out * nb);
	cudaFree(dev);
	free(src);
	free(conv);
	return 0;
}
#endif /* HAVE_CUDA */

int
main(int argc, char **argv)
{
	unsigned nb = 100;
	uint32_t B = 256, S = 224;
	enum xf_dtype dt = XF_FLOAT32;
	char err[512];
	int o;

	while ((o = getopt(argc, argv, "n:b:s:t:")) != -1) {
		switch (o) {
		case 'n':
			nb = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'b':
			B = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 's':
			S = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 't':
			dt = strcmp(optarg, "f16") == 0 ? XF_FLOAT16
							: XF_FLOAT32;
			break;
		default:
			fprintf(stderr, "usage: gpu-bench [-n BATCHES] "
			    "[-b B] [-s S] [-t f16|f32] [EPOCH_DIR]\n");
			return 2;
		}
	}
	if (gpu_probe(err, sizeof(err)) != 0) {
		fprintf(stderr, "gpu-bench: %s: nothing to measure\n", err);
		return 77;
	}
#ifdef HAVE_CUDA
	if (optind < argc)
		return bench_mount(argv[optind], nb);
	return bench_synthetic(nb ? nb : 1, B ? B : 1, S ? S : 1, dt);
#else
	(void)nb;
	(void)B;
	(void)S;
	(void)dt;
	return 77;
#endif
}
