/*
 * fuzz_names - libFuzzer target: the mount's name parser (engine/ns.c).
 *
 * The input is a file name.  Besides not crashing, a name that parses
 * must be the canonical spelling of what it parsed to: printing the parsed
 * numbers back with ns's own printers gives the same name (only canonical
 * names resolve).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ns.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[4200], back[4200];
	uint32_t r, w, e, v;
	uint64_t b;
	enum batch_kind k;

	if (size >= sizeof(name))
		return 0;
	memcpy(name, data, size);
	name[size] = '\0';
	if (ns_parse_rank(name, &r, &w)) {
		if (w < 1 || w > FEED_MAX_WORLD || r >= w)
			abort();
		ns_rank_name(back, sizeof(back), r, w);
		if (strcmp(back, name) != 0)
			abort();
	}
	if (ns_parse_epoch(name, &e)) {
		ns_epoch_name(back, sizeof(back), e);
		if (strcmp(back, name) != 0)
			abort();
	}
	if (ns_parse_batch(name, &b, &k)) {
		if ((unsigned)k >= BK_COUNT)
			abort();
		ns_batch_name(back, sizeof(back), b, k);
		if (strcmp(back, name) != 0)
			abort();
	}
	if (ns_parse_view_batch(name, &b, &v)) {
		if (v < 1 || v >= CFG_MAX_VIEWS)
			abort();
		ns_view_batch_name(back, sizeof(back), b, v);
		if (strcmp(back, name) != 0)
			abort();
	}
	return 0;
}
