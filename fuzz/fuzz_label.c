/*
 * fuzz_label - libFuzzer target: a tar shard sample's label
 * (dataset/ds_label.c): the .json member parsed by jansson, and the .cls
 * text.
 *
 * The input is a label member's bytes, given as the walk gives them (at
 * most TAR_LABEL_MAX, NUL after them).  ds_label_json for the keys
 * "label" and "a" must give one of its stated returns, a label in range
 * on success; ds_label_of (label = json:label and cls) must give a label
 * in range and no reason, or -1 and a reason, never a crash.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dataset/ds_tar_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A label that ds_label_* may give. */
static void
check_label(int r, int64_t v)
{
	switch (r) {
	case 0:
		if (v < 0 || v > DS_MAX_LABEL)
			abort();
		break;
	case -ENOENT:
	case -EINVAL:
	case -ERANGE:
	case -EBADMSG:
	case -ELOOP:
	case -ENOTUNIQ:
	case -EOVERFLOW:
	case -ENOMEM:
		break;
	default:
		abort(); /* not a stated return */
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const keys[] = {"label", "a"};
	struct ds_label lb[2] = {{LBL_JSON, "label"}, {LBL_CLS, NULL}};
	char name[] = "k.json";
	struct tar_member m;
	const char *bad;
	int64_t v;
	char *d;
	int r;

	if (size > TAR_LABEL_MAX)
		return 0; /* the walk keeps no more */
	if ((d = malloc(size + 1)) == NULL)
		abort();
	memcpy(d, data, size);
	d[size] = '\0';
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		v = -1;
		r = ds_label_json(d, size, keys[i], &v);
		check_label(r, v);
	}
	v = -1;
	r = ds_label_int(d, size, &v);
	check_label(r, v);
	memset(&m, 0, sizeof(m));
	m.name = name;
	m.kind = TM_FILE;
	m.size = size;
	m.has_data = true;
	m.data = d;
	m.dlen = (uint32_t)size;
	for (size_t i = 0; i < 2; i++) {
		if (ds_label_of(&lb[i], &m, 1, &v, &bad) != 0)
			continue; /* out of memory */
		if (bad == NULL ? v < 0 || v > DS_MAX_LABEL : v != -1)
			abort();
	}
	free(d);
	return 0;
}
