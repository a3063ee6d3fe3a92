/*
 * fuzz_text - libFuzzer target: what issue 39 parses (dataset/ds_text.c,
 * ds_label_list.c, dataset.c's manifest line, util/jsonstr.c).
 *
 * The input is given to each parser in turn:
 *   - as a .json member: ds_text_json's caption field "caption" (valid
 *     UTF-8 of at most DS_TEXT_MAX bytes on success, and written back by
 *     json_str_put, jansson reads the same bytes again), and
 *     ds_labels_json's "tags" with three class names (sorted, distinct
 *     indexes within their bounds, or a stated return);
 *   - as a .txt caption (ds_text_from): taken as it is when it is valid
 *     UTF-8 (utf8_valid agrees) and short enough, else a reason;
 *   - as an image path: ds_sidecar_name gives the same name with .txt
 *     after its last dot, or a stated return;
 *   - as a manifest line (up to its first newline) with and without
 *     text = txt: a relative path with no ".." and no tab (with text), a
 *     label in range, a caption of valid UTF-8 or a reason; or a message.
 * Never a crash, a leak or an abort().
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "dataset/ds_tar_int.h"
#include "dataset/ds_text.h"
#include "util/jsonstr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A caption written as JSON reads back as the same bytes. */
static void
round_trip(const char *s, size_t n)
{
	size_t len = json_str_len(s, n);
	char *out = malloc(len ? len : 1);
	json_error_t je;
	json_t *v;

	if (out == NULL)
		abort();
	if (json_str_put(out, s, n) != out + len)
		abort();
	v = json_loadb(out, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
	if (v == NULL || !json_is_string(v) || json_string_length(v) != n ||
	    memcmp(json_string_value(v), s, n) != 0)
		abort();
	json_decref(v);
	free(out);
}

static void
text_json(const char *d, size_t size)
{
	char *out = NULL;
	size_t len = 0;
	int r = ds_text_json(d, size, "caption", &out, &len);

	if (r == 0) {
		if (len > DS_TEXT_MAX || !utf8_valid(out, len) ||
		    out[len] != '\0')
			abort();
		round_trip(out, len);
		free(out);
	} else if (r != -ENOENT && r != -EINVAL && r != -EBADMSG &&
		   r != -ELOOP && r != -ENOTUNIQ && r != -EOVERFLOW &&
		   r != -EFBIG && r != -ENOMEM)
		abort();
}

static void
text_txt(const char *d, size_t size)
{
	struct ds_text tx = {TXT_FILE, NULL};
	const char *bad;
	char *out;
	uint32_t len;

	if (ds_text_from(&tx, true, d, size, &out, &len, &bad) != 0)
		return;
	if ((out == NULL) == (bad == NULL))
		abort();
	if (out != NULL) {
		if (len != size || memcmp(out, d, size) != 0 ||
		    !utf8_valid(d, size) || size > DS_TEXT_MAX)
			abort();
		round_trip(out, len);
		free(out);
	} else if (utf8_valid(d, size) && size <= DS_TEXT_MAX)
		abort();
}

static void
labels(const char *d, size_t size)
{
	static char *const names[] = {"dog", "cat", "sky"};
	struct ds_names nm;
	struct ds_labels out;
	int r;

	if (ds_names_init(&nm, names, 3) != 0)
		return;
	r = ds_labels_json(d, size, "tags", &nm, &out);
	if (r == 0) {
		uint32_t max = out.list ? DS_MAX_MULTI : DS_MAX_LABEL;

		if (!out.list && out.n != 1)
			abort();
		for (uint32_t i = 0; i < out.n; i++)
			if (out.v[i] > max ||
			    (i > 0 && out.v[i] <= out.v[i - 1]))
				abort();
		free(out.v);
	} else if (out.v != NULL ||
		   (r != -ENOENT && r != -EINVAL && r != -ERANGE &&
		       r != -EBADMSG && r != -ELOOP && r != -ENOTUNIQ &&
		       r != -EOVERFLOW && r != -ENOMEM && r != -ENOKEY &&
		       r != -ENODATA && r != -E2BIG))
		abort();
	ds_names_fini(&nm);
}

static void
sidecar(const char *d)
{
	char out[256];
	size_t n = strlen(d);
	int r = ds_sidecar_name(d, "txt", out, sizeof(out));
	const char *dot;

	if (r == -EINVAL || r == -ENAMETOOLONG)
		return;
	if (r != 0 || (dot = strrchr(out, '.')) == NULL ||
	    strcmp(dot, ".txt") != 0 || (size_t)(dot - out) >= n ||
	    memcmp(out, d, (size_t)(dot - out) + 1) != 0 ||
	    strchr(dot, '/') != NULL || strrchr(d, '.') != d + (dot - out))
		abort();
}

static void
manifest(const char *d, size_t size, enum ds_text_mode mode)
{
	struct ds_text tx = {mode, NULL};
	struct ds_mline m;
	char why[128], *line;
	const char *nl = memchr(d, '\n', size);
	size_t n = nl ? (size_t)(nl - d) : size;
	bool nomem;

	if ((line = malloc(n + 1)) == NULL)
		abort();
	memcpy(line, d, n);
	line[n] = '\0';
	if (ds_manifest_line(line, n, &tx, &m, &nomem, why, sizeof(why)) ==
	    NULL) {
		if (m.path[0] == '\0' || m.path[0] == '/' ||
		    ds_has_dotdot(m.path) || m.label < 0 ||
		    m.label > DS_MAX_LABEL ||
		    (mode != TXT_NONE && strchr(m.path, '\t') != NULL))
			abort();
		if (mode == TXT_NONE && (m.text != NULL || m.bad != NULL))
			abort();
		if (mode != TXT_NONE && !nomem &&
		    ((m.text == NULL) == (m.bad == NULL) ||
			(m.text != NULL && !utf8_valid(m.text, m.tlen))))
			abort();
		free(m.text);
	}
	free(line);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *d;

	if (size > DS_TEXT_MAX + 16)
		return 0;
	if ((d = malloc(size + 1)) == NULL)
		abort();
	memcpy(d, data, size);
	d[size] = '\0';
	text_json(d, size);
	text_txt(d, size);
	labels(d, size);
	sidecar(d);
	manifest(d, size, TXT_NONE);
	manifest(d, size, TXT_FILE);
	free(d);
	return 0;
}
