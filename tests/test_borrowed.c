/*
 * test_borrowed - the transforms library's promise to a cache hit read in
 * place (transforms/, xf_run_suffix): a borrowed image's pixels are only
 * read.  Each op that may follow `cache` runs on a prefix image held in
 * pages made read-only (a write there faults, as a write into RocksDB's
 * pinned value must never happen), and serves the bytes it serves from
 * an image of its own.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/testlib.h"
#include "transforms/xf.h"
#include "tests/xftest.h"

#define W 40
#define H 30

/* Every op after `cache`, each first on the image (then a fixed size). */
static const char *const suffixes[] = {
    "flip(1) center_crop(24)",
    "flip(0.5) center_crop(24)",
    "solarize(128) center_crop(24)",
    "solarize(100, p=1) center_crop(24)",
    "gaussian_blur(5, 0.1, 2.0) center_crop(24)",
    "gaussian_blur(5, 0.1, 2.0, p=1) center_crop(24)",
    "trivial_augment center_crop(24)",
    "rand_augment(2, 9) center_crop(24)",
    "auto_augment(imagenet) center_crop(24)",
    "color_jitter(0.4, 0.4, 0.4, 0.1) center_crop(24)",
    "color_jitter(0.4, 0.4, 0.4, 0.1, p=1) center_crop(24)",
    "grayscale(1) center_crop(24)",
    "center_crop(24) flip(1)",
    "resize(20) solarize(128) center_crop(16)",
    "random_resized_crop(24) flip(1) solarize(64)",
    "random_resized_crop(24) normalize(imagenet) random_erasing(1)",
};

static void
fill(uint8_t *px)
{
	for (size_t i = 0; i < (size_t)W * H * 3; i++)
		px[i] = (uint8_t)(i * 37 + i / 97);
}

/* The suffix of "decode cache TAIL" on a borrowed read-only image and on
 * an owned copy, for a few keys: the same bytes, no fault. */
static void
check_tail(const char *tail, long page)
{
	char text[512];
	struct xf_pipeline *pl;
	size_t n = (size_t)W * H * 3, map = (n + page - 1) / page * page;
	uint8_t *ro, *a, *b;
	size_t out;

	snprintf(text, sizeof(text), "decode cache %s", tail);
	if ((pl = parse_ok(text)) == NULL)
		return;
	out = xf_sample_bytes(pl, XF_FLOAT32);
	ro = mmap(NULL, map, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(ro != MAP_FAILED);
	a = malloc(out);
	b = malloc(out);
	CHECK(a != NULL && b != NULL);
	if (ro == MAP_FAILED || a == NULL || b == NULL)
		goto out;
	fill(ro);
	CHECK_EQ_INT(mprotect(ro, map, PROT_READ), 0);
	for (uint64_t key = 1; key <= 8; key++) {
		struct xf_image bi = {.w = W, .h = H, .px = ro, .borrowed = true};
		struct xf_image oi = {.w = W, .h = H, .px = xf_alloc(n)};

		CHECK(oi.px != NULL);
		if (oi.px == NULL)
			break;
		memcpy(oi.px, ro, n);
		CHECK_EQ_INT(
		    xf_run_suffix(pl, &bi, key, XF_FLOAT32, XF_CHW, a), 0);
		CHECK_EQ_INT(
		    xf_run_suffix(pl, &oi, key, XF_FLOAT32, XF_CHW, b), 0);
		if (memcmp(a, b, out) != 0) {
			fprintf(stderr, "%s, key %llu: a borrowed image serves "
			    "other bytes than its copy\n", text,
			    (unsigned long long)key);
			CHECK(memcmp(a, b, out) == 0);
		}
	}
	/* Still the value as it was given (read-only pages: never written). */
	{
		uint8_t *want = malloc(n);

		if (want != NULL) {
			fill(want);
			CHECK(memcmp(ro, want, n) == 0);
			free(want);
		}
	}
out:
	if (ro != MAP_FAILED)
		munmap(ro, map);
	free(a);
	free(b);
	xf_pipeline_free(pl);
}

int
main(void)
{
	long page = sysconf(_SC_PAGESIZE);

	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
		check_tail(suffixes[i], page);
	return TEST_SUMMARY();
}
