/*
 * first-touch - what this machine charges for memory touched for the
 * first time, against the same pages touched again: the cost behind a
 * cold epoch's kernel share (page cache of the dataset and of the
 * cache's files, a mount's first batch buffers), which on a VM whose
 * balloon reports free pages to the host is many times a memset's.
 *
 *   first-touch [MIB] [--huge]       (MIB: 1024)
 *
 * Maps MIB of fresh anonymous memory (with --huge, MADV_HUGEPAGE), writes
 * every byte (first touch: faults, zeroing, the host's backing), then
 * writes them all again.  Prints both in seconds per GB.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double
now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int
main(int argc, char **argv)
{
	size_t mib = 1024;
	int huge = 0;
	double t0, t1, t2;
	char *p;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--huge") == 0)
			huge = 1;
		else if ((mib = strtoul(argv[i], NULL, 10)) == 0) {
			fprintf(stderr, "usage: first-touch [MIB] [--huge]\n");
			return 2;
		}
	}
	p = mmap(NULL, mib << 20, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	if (huge)
		madvise(p, mib << 20, MADV_HUGEPAGE);
	t0 = now();
	memset(p, 1, mib << 20);
	t1 = now();
	memset(p, 2, mib << 20);
	t2 = now();
	printf("first-touch: %zu MiB%s: first touch %.3f s/GB, again %.3f "
	       "s/GB\n",
	    mib, huge ? " (huge pages)" : "",
	    (t1 - t0) / ((double)(mib << 20) / 1e9),
	    (t2 - t1) / ((double)(mib << 20) / 1e9));
	munmap(p, mib << 20);
	return 0;
}
