/*
 * names.c - the canonical names of the mount (see names.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fs/names.h"

/*
 * Parse the decimal number at *s made of at least `width` digits, in its
 * canonical form (zero padded to width, no extra leading zeros).
 */
static bool
parse_num(const char **s, int width, uint64_t *out)
{
	const char *p = *s;
	uint64_t v = 0;
	int n = 0;
	char buf[32];

	while (*p >= '0' && *p <= '9') {
		if (v > (UINT64_MAX - 9) / 10 || ++n > 20)
			return false;
		v = v * 10 + (uint64_t)(*p++ - '0');
	}
	if (n == 0)
		return false;
	if (snprintf(buf, sizeof(buf), "%0*" PRIu64, width, v) != n ||
	    strncmp(buf, *s, (size_t)n) != 0)
		return false;
	*s = p;
	*out = v;
	return true;
}

bool
fs_parse_rank(const char *name, uint32_t *rank, uint32_t *world)
{
	uint64_t r, w;

	if (strncmp(name, "rank-", 5) != 0)
		return false;
	name += 5;
	if (!parse_num(&name, 1, &r) || strncmp(name, "-of-", 4) != 0)
		return false;
	name += 4;
	if (!parse_num(&name, 1, &w) || *name != '\0')
		return false;
	if (w < 1 || w > FEED_MAX_WORLD || r >= w)
		return false;
	*rank = (uint32_t)r;
	*world = (uint32_t)w;
	return true;
}

bool
fs_parse_epoch(const char *name, uint32_t *epoch)
{
	uint64_t e;

	if (strncmp(name, "epoch-", 6) != 0)
		return false;
	name += 6;
	if (!parse_num(&name, 4, &e) || *name != '\0' || e > UINT32_MAX)
		return false;
	*epoch = (uint32_t)e;
	return true;
}

bool
fs_parse_batch(const char *name, uint64_t *batch, enum batch_kind *kind)
{
	if (strncmp(name, "batch-", 6) != 0)
		return false;
	name += 6;
	if (!parse_num(&name, 6, batch))
		return false;
	if (strcmp(name, ".npy") == 0)
		*kind = BK_IMAGES;
	else if (strcmp(name, ".labels.npy") == 0)
		*kind = BK_LABELS;
	else if (strcmp(name, ".ids.npy") == 0)
		*kind = BK_IDS;
	else if (strcmp(name, ".cuda") == 0)
		*kind = BK_CUDA; /* only in jobs with gpu = on */
	else
		return false;
	return true;
}
