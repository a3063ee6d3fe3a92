/*
 * fuzz_names - libFuzzer target: the mount's name parser (fs/names.c).
 *
 * The input is a file name.  Besides not crashing, a name that parses
 * must be the canonical spelling of what it parsed to: printing the parsed
 * numbers back gives the same name (only canonical names resolve).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ns.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const sfx[] = { ".npy", ".labels.npy", ".ids.npy",
		".cuda" };
	char name[4200], back[4200];
	uint32_t r, w, e;
	uint64_t b;
	enum batch_kind k;

	if (size >= sizeof(name))
		return 0;
	memcpy(name, data, size);
	name[size] = '\0';
	if (ns_parse_rank(name, &r, &w)) {
		if (w < 1 || w > FEED_MAX_WORLD || r >= w)
			abort();
		snprintf(back, sizeof(back), "rank-%" PRIu32 "-of-%" PRIu32, r,
		    w);
		if (strcmp(back, name) != 0)
			abort();
	}
	if (ns_parse_epoch(name, &e)) {
		snprintf(back, sizeof(back), "epoch-%04" PRIu32, e);
		if (strcmp(back, name) != 0)
			abort();
	}
	if (ns_parse_batch(name, &b, &k)) {
		if ((unsigned)k > BK_CUDA)
			abort();
		snprintf(back, sizeof(back), "batch-%06" PRIu64 "%s", b,
		    sfx[k]);
		if (strcmp(back, name) != 0)
			abort();
	}
	return 0;
}
