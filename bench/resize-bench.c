/*
 * resize-bench - xf_resize as `decode resize(256)` calls it, alone.
 *
 *   resize-bench [-n IMAGES] [-r ROUNDS] [-s SIZE] DIR
 *
 * DIR is a dataset of class directories (/var/tmp/feedfs-bench/ds5000):
 * the first IMAGES (500) JPEGs, in name order, are decoded once as the
 * pipeline's prefix decodes them (xf_decode with the DCT-scaling hint of
 * twice the target, ops.c's xf_run_prefix), then xf_resize takes each to
 * a short side of SIZE (256) ROUNDS (20) times, on one thread with an
 * arena installed as a worker does.  Prints ms per image and an FNV-1a
 * digest of every output byte, so that two builds (or the AVX2 and the
 * FEEDFS_XF_SCALAR=1 paths) can be shown to give the same bytes.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "transforms/xf.h"
#include "bench/benchlib.h"

struct img {
	struct xf_image im;
	uint32_t tw, th;
};

/* torchvision's resize(S): the short side to S, int() of the long one. */
static void
target(uint32_t w, uint32_t h, uint32_t s, uint32_t *tw, uint32_t *th)
{
	if (w <= h) {
		*tw = s;
		*th = (uint32_t)((double)s * h / w);
	} else {
		*th = s;
		*tw = (uint32_t)((double)s * w / h);
	}
}

struct load_arg {
	uint32_t size;
	struct img *imgs;
	size_t n;
};

/* A JPEG decoded (DCT-scaled for its resize target) into the next img. */
static int
take_decoded(void *arg, const char *path, const uint8_t *buf, size_t len)
{
	struct load_arg *la = arg;
	struct img *m = &la->imgs[la->n];
	char err[256];
	uint32_t w, h;

	if (xf_jpeg_dims(buf, len, &w, &h) != 0)
		return -1;
	target(w, h, la->size, &m->tw, &m->th);
	if (xf_decode(buf, len, 2 * m->tw, 2 * m->th, &m->im, err,
		sizeof(err)) != 0) {
		fprintf(stderr, "%s: %s\n", path, err);
		return -1;
	}
	la->n++;
	return 0;
}

/* Up to max images of dir's class directories into imgs; how many. */
static size_t
load(const char *dir, uint32_t size, struct img *imgs, size_t max)
{
	struct load_arg la = {size, imgs, 0};

	return bench_load_jpegs(dir, max, take_decoded, &la);
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int
main(int argc, char **argv)
{
	size_t max = 500, n;
	unsigned rounds = 20, size = 256;
	uint64_t digest = 0xcbf29ce484222325ULL, inpx = 0, outpx = 0;
	struct xf_arena *arena;
	struct img *imgs;
	double t0, t;
	const char *e;
	int opt;

	while ((opt = getopt(argc, argv, "n:r:s:")) != -1) {
		switch (opt) {
		case 'n':
			max = strtoul(optarg, NULL, 10);
			break;
		case 'r':
			rounds = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 's':
			size = (unsigned)strtoul(optarg, NULL, 10);
			break;
		default:
			goto usage;
		}
	}
	if (optind != argc - 1 || max == 0 || rounds == 0 || size == 0)
		goto usage;
	if ((imgs = calloc(max, sizeof(*imgs))) == NULL)
		return 1;
	if ((n = load(argv[optind], size, imgs, max)) == 0) {
		fprintf(stderr, "resize-bench: no JPEG in %s\n", argv[optind]);
		return 1;
	}
	/* A worker's arena: the outputs reuse pages, as in a cold epoch. */
	arena = xf_arena_new((size_t)64 << 20);
	xf_arena_use(arena);
	t0 = now();
	for (unsigned r = 0; r < rounds; r++) {
		for (size_t i = 0; i < n; i++) {
			struct xf_image out;

			if (xf_resize(&imgs[i].im, imgs[i].tw, imgs[i].th,
				&out) != 0) {
				fprintf(
				    stderr, "resize-bench: resize failed\n");
				return 1;
			}
			if (r == 0) {
				size_t b = (size_t)out.w * out.h * 3;

				for (size_t k = 0; k < b; k++) {
					digest ^= out.px[k];
					digest *= 0x100000001b3ULL;
				}
				inpx += (uint64_t)imgs[i].im.w * imgs[i].im.h;
				outpx += (uint64_t)out.w * out.h;
			}
			xf_free(out.px);
		}
	}
	t = now() - t0;
	e = getenv("FEEDFS_XF_SCALAR");
	printf("resize-bench: %zu images (%.0f -> %.0f kpx avg) x %u rounds: "
	       "%.4f ms/image (%s), digest %016llx\n",
	    n, inpx / 1e3 / n, outpx / 1e3 / n, rounds, t * 1e3 / n / rounds,
	    e != NULL && *e != '\0' && strcmp(e, "0") != 0 ? "scalar" : "simd",
	    (unsigned long long)digest);
	xf_arena_use(NULL);
	xf_arena_free(arena);
	for (size_t i = 0; i < n; i++)
		xf_free(imgs[i].im.px);
	free(imgs);
	return 0;
usage:
	fprintf(stderr, "usage: resize-bench [-n IMAGES] [-r ROUNDS] "
			"[-s SIZE] DIR\n");
	return 2;
}
