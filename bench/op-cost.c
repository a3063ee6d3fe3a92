/*
 * op-cost - what each op after `cache` costs, in ns per image, in process.
 *
 *   op-cost [-n IMAGES] [-r ROUNDS] [-d uint8|float16|float32]
 *       [-l HWC|CHW] PIPELINE [DIR]
 *
 * PIPELINE is a job's pipeline text with a cache op, e.g.
 * "decode resize(256) cache random_resized_crop(224) flip(0.5)
 * gaussian_blur(23, 0.1, 2.0) normalize(imagenet) random_erasing(0.25)".
 * The cached images are IMAGES (64) JPEGs of DIR's class directories run
 * through the prefix (xf_run_prefix), or without DIR as many synthetic
 * images of 341x256 (a smooth pattern plus noise: the short side 256 of a
 * 4:3 photo).  Then ROUNDS (20) times, on one thread with an arena
 * installed as a worker does, each image's copy goes through the ops
 * after cache one at a time (xf_run_op, the key changing with image and
 * round as a sample's does), then the output conversion (dtype -d,
 * float32, layout -l, CHW, with normalize if the pipeline has it), then
 * each op's part at the conversion (xf_run_op_output: random_erasing's
 * box).  Any op xf_run_suffix runs is timed the same way, so ops added
 * later need nothing here.
 *
 * Times are the thread's CPU time (CLOCK_THREAD_CPUTIME_ID, less what
 * reading that clock costs), so that the waits of a loaded machine are
 * not counted.  Prints one line per op (ns per image: its own time plus
 * its part at the conversion), the conversion's, the total, and an FNV-1a
 * digest of the
 * outputs of the first round, so that the AVX2 and FEEDFS_XF_SCALAR=1
 * paths can be shown to give the same bytes.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "transforms/rng.h"
#include "transforms/xf.h"
#include "bench/benchlib.h"

struct load_arg {
	const struct xf_pipeline *pl;
	struct xf_image *imgs;
	size_t n;
};

/* A JPEG's prefix image into the next of imgs. */
static int
take_prefix(void *arg, const char *path, const uint8_t *buf, size_t len)
{
	struct load_arg *la = arg;
	char err[256];

	if (xf_run_prefix(la->pl, buf, len, &la->imgs[la->n], err,
		sizeof(err)) != 0) {
		fprintf(stderr, "%s: %s\n", path, err);
		return -1;
	}
	la->n++;
	return 0;
}

/* Up to max prefix images of dir's JPEGs into imgs; how many. */
static size_t
load(const struct xf_pipeline *pl, const char *dir, struct xf_image *imgs,
    size_t max)
{
	struct load_arg la = {pl, imgs, 0};

	return bench_load_jpegs(dir, max, take_prefix, &la);
}

/* n synthetic 341x256 images: a smooth pattern plus noise. */
static size_t
synth(struct xf_image *imgs, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		struct xf_image *m = &imgs[k];

		m->w = 341;
		m->h = 256;
		if ((m->px = malloc((size_t)m->w * m->h * 3)) == NULL)
			return k;
		for (uint32_t y = 0; y < m->h; y++)
			for (uint32_t x = 0; x < m->w; x++)
				for (int c = 0; c < 3; c++) {
					uint32_t v = (x * (c + 1) + y * 2 +
							 (uint32_t)k * 37) %
						     200;

					v += rng_u64(k, ((uint64_t)y << 20) +
							    x * 3 + c) %
					     56;
					m->px[((size_t)y * m->w + x) * 3 + c] =
					    (uint8_t)v;
				}
	}
	return n;
}

/*
 * The thread's CPU time: on a loaded machine the time the thread waits
 * for a core is not counted (what it loses to shared caches still is).
 */
static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* What a pair of now_ns calls costs, subtracted from each timing. */
static uint64_t
clock_cost(void)
{
	uint64_t t0 = now_ns(), t = t0;

	for (int i = 0; i < 10000; i++)
		t = now_ns();
	return (t - t0) / 10000;
}

/* Op i as written in text (the parser's grammar: NAME [ "(" ... ")" ]). */
static void
op_text(const char *text, size_t i, char *buf, size_t len)
{
	const char *s = text, *b = s;

	for (size_t k = 0; k <= i; k++) {
		while (*s == ' ' || *s == '\t' || *s == '\n')
			s++;
		b = s;
		while (*s != '\0' && *s != '(' && *s != ' ' && *s != '\t' &&
		       *s != '\n')
			s++;
		{
			const char *p = s;

			while (*p == ' ' || *p == '\t' || *p == '\n')
				p++;
			if (*p == '(') {
				while (*p != '\0' && *p != ')')
					p++;
				s = *p == ')' ? p + 1 : p;
			}
		}
	}
	snprintf(buf, len, "%.*s", (int)(s - b), b);
}

int
main(int argc, char **argv)
{
	size_t max = 64, n, start, bytes;
	unsigned rounds = 20;
	enum xf_dtype dtype = XF_FLOAT32;
	enum xf_layout layout = XF_CHW;
	uint64_t digest = 0xcbf29ce484222325ULL, *ns, conv_ns = 0, tick;
	struct xf_pipeline *pl = NULL;
	struct xf_arena *arena;
	struct xf_image *imgs;
	const char *text, *e;
	char err[512];
	uint8_t *dst;
	int opt;

	while ((opt = getopt(argc, argv, "n:r:d:l:")) != -1) {
		switch (opt) {
		case 'n':
			max = strtoul(optarg, NULL, 10);
			break;
		case 'r':
			rounds = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'd':
			if (strcmp(optarg, "uint8") == 0)
				dtype = XF_UINT8;
			else if (strcmp(optarg, "float16") == 0)
				dtype = XF_FLOAT16;
			else if (strcmp(optarg, "float32") == 0)
				dtype = XF_FLOAT32;
			else
				goto usage;
			break;
		case 'l':
			if (strcmp(optarg, "HWC") == 0)
				layout = XF_HWC;
			else if (strcmp(optarg, "CHW") == 0)
				layout = XF_CHW;
			else
				goto usage;
			break;
		default:
			goto usage;
		}
	}
	if (optind >= argc || argc - optind > 2 || max == 0 || rounds == 0)
		goto usage;
	text = argv[optind];
	if (xf_pipeline_parse(text, &pl, err, sizeof(err)) != 0 ||
	    xf_check_output(pl, dtype, err, sizeof(err)) != 0) {
		fprintf(stderr, "op-cost: %s\n", err);
		return 1;
	}
	if (pl->cache_at >= pl->nops) {
		fprintf(stderr, "op-cost: the pipeline has no cache op\n");
		return 1;
	}
	start = pl->cache_at + 1;
	if ((imgs = calloc(max, sizeof(*imgs))) == NULL ||
	    (ns = calloc(pl->nops, sizeof(*ns))) == NULL)
		return 1;
	n = argc - optind == 2 ? load(pl, argv[optind + 1], imgs, max)
			       : synth(imgs, max);
	if (n == 0) {
		fprintf(stderr, "op-cost: no image\n");
		return 1;
	}
	bytes = xf_sample_bytes(pl, dtype);
	if ((dst = malloc(bytes)) == NULL)
		return 1;
	/* A worker's arena: the ops' buffers reuse pages. */
	arena = xf_arena_new((size_t)64 << 20);
	xf_arena_use(arena);
	tick = clock_cost();
	for (unsigned r = 0; r < rounds; r++)
		for (size_t k = 0; k < n; k++) {
			size_t sz = (size_t)imgs[k].w * imgs[k].h * 3;
			uint64_t key = (uint64_t)r * n + k, t;
			struct xf_image im = imgs[k];

			if ((im.px = xf_alloc(sz)) == NULL)
				return 1;
			memcpy(im.px, imgs[k].px, sz);
			for (size_t i = start; i < pl->nops; i++) {
				t = now_ns();
				if (xf_run_op(pl, i, &im, key, err,
					sizeof(err)) != 0) {
					fprintf(stderr, "op-cost: %s\n", err);
					return 1;
				}
				ns[i] += now_ns() - t - tick;
			}
			if (im.w != pl->out_w || im.h != pl->out_h) {
				fprintf(stderr, "op-cost: image of %ux%u\n",
				    (unsigned)im.w, (unsigned)im.h);
				return 1;
			}
			t = now_ns();
			xf_convert(&im, pl->normalize, pl->mean, pl->std, dtype,
			    layout, dst);
			conv_ns += now_ns() - t - tick;
			for (size_t i = start; i < pl->nops; i++) {
				t = now_ns();
				xf_run_op_output(
				    pl, i, key, dtype, layout, im.w, im.h, dst);
				ns[i] += now_ns() - t - tick;
			}
			xf_free(im.px);
			for (size_t b = 0; r == 0 && b < bytes; b++) {
				digest ^= dst[b];
				digest *= 0x100000001b3ULL;
			}
		}
	e = getenv("FEEDFS_XF_SCALAR");
	printf("op-cost: %zu images of %ux%u x %u rounds, %s path, "
	       "clock %llu ns, digest %016llx\n",
	    n, (unsigned)imgs[0].w, (unsigned)imgs[0].h, rounds,
	    e != NULL && *e != '\0' && strcmp(e, "0") != 0 ? "scalar" : "AVX2",
	    (unsigned long long)tick, (unsigned long long)digest);
	{
		double per = (double)n * rounds, total = (double)conv_ns;

		for (size_t i = start; i < pl->nops; i++) {
			char name[256];

			op_text(text, i, name, sizeof(name));
			printf("  %-40s %10.0f ns/image\n", name, ns[i] / per);
			total += (double)ns[i];
		}
		printf("  %-40s %10.0f ns/image\n", "(output conversion)",
		    conv_ns / per);
		printf("  %-40s %10.0f ns/image\n", "(total)", total / per);
	}
	xf_arena_use(NULL);
	xf_arena_free(arena);
	free(dst);
	for (size_t k = 0; k < n; k++)
		free(imgs[k].px);
	free(imgs);
	free(ns);
	xf_pipeline_free(pl);
	return 0;
usage:
	fprintf(stderr, "usage: op-cost [-n IMAGES] [-r ROUNDS] "
			"[-d uint8|float16|float32] [-l HWC|CHW] PIPELINE "
			"[DIR]\n");
	return 2;
}
