/*
 * replay - run a libFuzzer target without libFuzzer, for `make check`
 * (and so under CI's ASan+UBSan build): every file of the corpus
 * directories given, then deterministic pseudo-random mutations of them
 * (bit flips, bytes set, interesting 32-bit values such as lengths that
 * wrap, truncations, splices) until SECONDS have passed.
 *
 *	replay SECONDS DIR...
 *
 * Prints the executions; a crash or an abort() of the target fails.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_SEEDS 512
#define MAX_LEN (1 << 16)

static uint8_t *seed[MAX_SEEDS];
static size_t seed_len[MAX_SEEDS];
static int nseeds;
static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t
next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void
load(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char p[4096];

	while (d != NULL && (de = readdir(d)) != NULL && nseeds < MAX_SEEDS) {
		FILE *f;
		uint8_t *b;
		size_t n;

		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if ((f = fopen(p, "rb")) == NULL)
			continue;
		b = malloc(MAX_LEN);
		n = fread(b, 1, MAX_LEN, f);
		fclose(f);
		seed[nseeds] = b;
		seed_len[nseeds++] = n;
	}
	if (d != NULL)
		closedir(d);
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static size_t
mutate(uint8_t *b, size_t n)
{
	static const uint32_t magic[] = {0, 1, 0x7f, 0x80, 0xff, 0xffff,
	    0x10000, 0x7fffffff, 0x80000000u, 0xffffffffu, 0xfffffff0u,
	    1u << 30, 4096, 4097, 72, 71, 32, 33, 24, 255, 256};
	int k = 1 + (int)(next() % 4);

	while (k-- > 0 && n > 0) {
		size_t at = next() % n;

		switch (next() % 6) {
		case 0:
			b[at] ^= (uint8_t)(1u << (next() % 8));
			break;
		case 1:
			b[at] = (uint8_t)next();
			break;
		case 2:
			if (n >= 4) {
				uint32_t v =
				    magic[next() %
					  (sizeof(magic) / sizeof(magic[0]))];

				at = next() % (n - 3);
				memcpy(b + at, &v, 4);
			}
			break;
		case 3:
			n = at + 1; /* truncate */
			break;
		case 4: { /* splice another seed's tail */
			int s = (int)(next() % (uint64_t)nseeds);
			size_t from = seed_len[s] ? next() % seed_len[s] : 0;
			size_t m = seed_len[s] - from;

			if (at + m > MAX_LEN)
				m = MAX_LEN - at;
			memcpy(b + at, seed[s] + from, m);
			n = at + m;
			break;
		}
		default: /* a run of one byte */
			memset(b + at, (int)(next() & 0xff),
			    (n - at) < 16 ? n - at : 16);
		}
	}
	return n;
}

int
main(int argc, char **argv)
{
	double secs, t0 = now();
	unsigned long runs = 0;
	uint8_t *buf;

	if (argc < 3) {
		fprintf(stderr, "usage: replay SECONDS DIR...\n");
		return 2;
	}
	secs = atof(argv[1]);
	for (int i = 2; i < argc; i++)
		load(argv[i]);
	if (nseeds == 0) {
		fprintf(stderr, "replay: no corpus files\n");
		return 1;
	}
	buf = malloc(MAX_LEN);
	for (int i = 0; i < nseeds; i++, runs++)
		LLVMFuzzerTestOneInput(seed[i], seed_len[i]);
	while (now() - t0 < secs) {
		for (int i = 0; i < 64; i++, runs++) {
			int s = (int)(next() % (uint64_t)nseeds);
			size_t n = seed_len[s];

			memcpy(buf, seed[s], n);
			n = mutate(buf, n);
			LLVMFuzzerTestOneInput(buf, n);
		}
	}
	printf(
	    "replay: %d seeds, %lu runs in %.1f s\n", nseeds, runs, now() - t0);
	free(buf);
	for (int i = 0; i < nseeds; i++)
		free(seed[i]);
	return 0;
}
