/*
 * fuzz_probe - libFuzzer target: the header probes of transforms/probe.h
 * (issue 35), the one place that knows each image format.  Layer: fuzz/
 * (tests of the transforms layer).
 *
 * The input is a file.  The probe in memory (what the decoders run) and
 * through a reader (what feedfs --check runs) must agree, verdict, words
 * and facts, with and without XF_PROBE_END, except where the reader's
 * bounds stop it (over 4096 stray bytes before a marker, 4096 segments
 * before the scan: "corrupt JPEG: ..." through the reader only).  And the
 * decoders must follow the probe: a file that decodes is ok to it with
 * the decoded size; one it finds unsupported (a format it knows) is
 * refused in its words, -EFBIG over max_pixels, else -ENOTSUP; the size
 * xf_jpeg_dims gives is its.  max_pixels is 4 MP, as in fuzz_decode.
 * Seeds: corpus/probe.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/probe.h"
#include "transforms/xf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXPX (4u << 20)

struct mem {
	const uint8_t *b;
	size_t n;
};

/* A reader of the input that, like a pread, copies. */
static ssize_t
mem_read(void *arg, uint64_t off, void *buf, size_t n)
{
	const struct mem *m = arg;

	if (off >= m->n)
		return 0;
	if (n > m->n - off)
		n = (size_t)(m->n - off);
	memcpy(buf, m->b + off, n);
	return (ssize_t)n;
}

static bool
same(const struct xf_probe *a, const struct xf_probe *b)
{
	return a->format == b->format && a->w == b->w && a->h == b->h &&
	       a->components == b->components && a->depth == b->depth &&
	       a->sof == b->sof && a->progressive == b->progressive &&
	       a->palette == b->palette && a->lossless == b->lossless &&
	       a->too_large == b->too_large;
}

static bool
bound_hit(const char *why)
{
	return strncmp(why, "corrupt JPEG: no marker at offset ", 34) == 0 ||
	       strncmp(why, "corrupt JPEG: no scan in ", 25) == 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mem m = {data, size};
	struct xf_reader rd = {.read = mem_read, .arg = &m, .size = size};
	struct xf_probe pm, pr;
	struct xf_image img;
	char wm[512], wr[512], err[512];
	enum xf_verdict vm, vr;
	uint32_t w, h;
	int d;

	for (unsigned flags = 0; flags <= XF_PROBE_END; flags++) {
		vm =
		    xf_probe_mem(data, size, MAXPX, flags, &pm, wm, sizeof(wm));
		vr = xf_probe(&rd, MAXPX, flags, &pr, wr, sizeof(wr));
		if (vm > XF_PROBE_CORRUPT || vr > XF_PROBE_CORRUPT)
			abort();
		if ((vm == XF_PROBE_OK) != (wm[0] == '\0') ||
		    (vr == XF_PROBE_OK) != (wr[0] == '\0'))
			abort(); /* a refusal says why, ok says nothing */
		if (vm == XF_PROBE_OK &&
		    (pm.w == 0 || pm.h == 0 || (uint64_t)pm.w * pm.h > MAXPX))
			abort();
		if (vr == XF_PROBE_CORRUPT && bound_hit(wr))
			continue;
		if (vm != vr || strcmp(wm, wr) != 0 || !same(&pm, &pr))
			abort(); /* memory and reader differ */
	}
	vm = xf_probe_mem(data, size, MAXPX, 0, &pm, wm, sizeof(wm));
	err[0] = '\0';
	d = xf_decode_max(data, size, 0, 0, MAXPX, &img, err, sizeof(err));
	if (d == 0) {
		if (vm != XF_PROBE_OK || img.w != pm.w || img.h != pm.h)
			abort(); /* decoded what the probe did not take */
		xf_free(img.px);
	}
	if (vm == XF_PROBE_UNSUPPORTED && pm.format != XF_SRC_NONE &&
	    (d != (pm.too_large ? -EFBIG : -ENOTSUP) || strcmp(err, wm) != 0))
		abort(); /* a rule refused in other words */
	/* xf_jpeg_dims asks the probe without max_pixels */
	vm = xf_probe_mem(data, size, 0, 0, &pm, wm, sizeof(wm));
	if (xf_jpeg_dims(data, size, &w, &h) == 0 &&
	    (vm != XF_PROBE_OK || pm.format != XF_SRC_JPEG || w != pm.w ||
		h != pm.h))
		abort();
	return 0;
}
