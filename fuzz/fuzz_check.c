/*
 * fuzz_check - libFuzzer target: feedfs --check's header reads
 * (check_header: core/check.c's cursor over a sample, through which the
 * header probes of transforms/probe.h walk JPEG segments, read PNG and
 * WebP headers and search the tails for the end of an image).  Layer:
 * fuzz/ (tests of the model, core/).
 *
 * The input is a file, given through a memfd at an offset (as a tar
 * member is read, so that a read past the member would read bytes that
 * are not the input's); the check must give a kind and a reason, with
 * dimensions only when ok, and never read outside.  Seeds: corpus/check.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PAD 512

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static uint8_t pad[PAD];
	char why[512];
	uint32_t w = 0, h = 0;
	int k;

	if (fd < 0) {
		if ((fd = memfd_create("fuzz.img", 0)) < 0)
			abort();
		memset(pad, 0xff, sizeof(pad)); /* markers, if read */
	}
	/* PAD bytes of 0xff before and after the input */
	if (ftruncate(fd, 0) != 0 || pwrite(fd, pad, PAD, 0) != PAD ||
	    pwrite(fd, data, size, PAD) != (ssize_t)size ||
	    pwrite(fd, pad, PAD, (off_t)(PAD + size)) != PAD)
		abort();
	why[0] = '\0';
	k = check_header(fd, PAD, size, 4u << 20, &w, &h, why, sizeof(why));
	if (k < 0 || k > 4)
		abort();
	if (k == 0 && (w == 0 || h == 0 || (uint64_t)w * h > (4u << 20)))
		abort(); /* ok means a size within max_pixels */
	if (k != 0 && why[0] == '\0')
		abort(); /* a problem must say why */
	return 0;
}
