/*
 * ds_label_list.c - layer: dataset index, tar shard backend (calls
 * ds_label.c and ds_tar_walk.c's ds_tm_why, and jansson).  A sample's
 * labels where label = json:KEY may hold a list (multi-label: OpenImages,
 * COCO categories, tagging sets) or name its classes (with classes =
 * FILE), or why it has none: the sample then fails when made, and
 * on_error decides.  An index out of range is never dropped silently.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "dataset/ds_tar_int.h"

#define DS_STR_(x) #x
#define DS_STR(x) DS_STR_(x)

static int
by_name(const void *a, const void *b)
{
	return strcmp(**(char *const *const *)a, **(char *const *const *)b);
}

int
ds_names_init(struct ds_names *nm, char *const *v, size_t n)
{
	char *const **p;

	nm->v = v;
	nm->n = n;
	nm->by_name = NULL;
	if ((p = malloc((n ? n : 1) * sizeof(*p))) == NULL ||
	    (nm->by_name = malloc((n ? n : 1) * sizeof(uint32_t))) == NULL) {
		free(p);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		p[i] = &v[i];
	qsort(p, n, sizeof(*p), by_name);
	for (size_t i = 0; i < n; i++)
		nm->by_name[i] = (uint32_t)(p[i] - v);
	free(p);
	return 0;
}

void
ds_names_fini(struct ds_names *nm)
{
	free(nm->by_name);
	nm->by_name = NULL;
}

/* The index of name (len bytes) in names, or -1. */
static int64_t
name_index(const struct ds_names *nm, const char *name, size_t len)
{
	size_t lo = 0, hi = nm->n;

	if (strlen(name) != len)
		return -1; /* a NUL inside: no class is named so */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(nm->v[nm->by_name[mid]], name);

		if (c == 0)
			return nm->by_name[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* One label value (not a list): its index into *v; -ERANGE past max. */
static int
one_label(const json_t *val, const struct ds_names *nm, int64_t max, int64_t *v)
{
	int r;

	if (json_is_integer(val)) {
		json_int_t x = json_integer_value(val);

		if (x < 0 || x > max)
			return -ERANGE;
		*v = (int64_t)x;
		return 0;
	}
	if (!json_is_string(val))
		return -EINVAL;
	r = ds_label_int(json_string_value(val), json_string_length(val), v);
	if (r == -EINVAL) {
		/* Not an integer: a class name. */
		if (nm == NULL)
			return -ENODATA;
		if ((*v = name_index(nm, json_string_value(val),
			 json_string_length(val))) < 0)
			return -ENOKEY;
		r = 0;
	}
	return r == 0 && *v > max ? -ERANGE : r;
}

static int
by_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int
ds_labels_json(const char *s, size_t n, const char *key,
    const struct ds_names *names, struct ds_labels *out)
{
	json_t *doc, *val;
	int64_t x;
	int r;

	out->list = false;
	out->n = 0;
	out->v = NULL;
	if ((r = ds_json_key(s, n, 0, key, &doc, &val)) != 0)
		goto out;
	if (!json_is_array(val)) {
		if ((r = one_label(val, names, DS_MAX_LABEL, &x)) == 0) {
			if ((out->v = malloc(sizeof(uint32_t))) == NULL)
				r = -ENOMEM;
			else {
				out->v[0] = (uint32_t)x;
				out->n = 1;
			}
		}
	} else {
		size_t k = json_array_size(val), m = 0;

		out->list = true;
		if ((out->v = malloc((k ? k : 1) * sizeof(uint32_t))) == NULL)
			r = -ENOMEM;
		for (size_t i = 0; r == 0 && i < k; i++)
			if ((r = one_label(json_array_get(val, i), names,
				 DS_MAX_MULTI, &x)) == 0)
				out->v[m++] = (uint32_t)x;
			else if (r == -ERANGE)
				r = -E2BIG;
		if (r == 0) {
			qsort(out->v, m, sizeof(uint32_t), by_u32);
			out->n = 0;
			for (size_t i = 0; i < m; i++)
				if (out->n == 0 ||
				    out->v[out->n - 1] != out->v[i])
					out->v[out->n++] = out->v[i];
		}
	}
out:
	if (r != 0) {
		free(out->v);
		out->v = NULL;
		out->n = 0;
	}
	json_decref(doc);
	return r;
}

int
ds_labels_of(const struct ds_label *lb, const struct tar_member *lm,
    size_t count, const struct ds_names *names, struct ds_labels *out,
    const char **bad)
{
	int64_t label;
	int r;

	out->list = false;
	out->n = 0;
	out->v = NULL;
	*bad = NULL;
	if (lb->mode != LBL_JSON) {
		/* .cls, or none: one label, as ds_label_of gives it. */
		if ((r = ds_label_of(lb, lm, count, &label, bad)) != 0 ||
		    *bad != NULL || lb->mode == LBL_NONE)
			return r;
		if ((out->v = malloc(sizeof(uint32_t))) == NULL)
			return -ENOMEM;
		out->v[0] = (uint32_t)label;
		out->n = 1;
		return 0;
	}
	if (count == 0)
		*bad = "no .json member";
	else if (count > 1)
		*bad = "duplicate .json members";
	else if (lm->kind != TM_FILE)
		*bad = ds_tm_why(lm->kind);
	else if (!lm->has_data)
		*bad = "label member larger than 64 KiB";
	if (*bad != NULL)
		return 0;
	r = ds_labels_json(lm->data, lm->dlen, lb->key, names, out);
	switch (r) {
	case 0:
	case -ENOMEM:
		return r;
	case -ENOENT:
		*bad = "the .json member has no such key";
		break;
	case -ERANGE:
		*bad = "label out of range (0 to 16777215)";
		break;
	case -E2BIG:
		*bad = "a label of a list out of range (0 to 1048575)";
		break;
	case -ENOKEY:
		*bad = "a label names a class that is not in classes = FILE";
		break;
	case -ENODATA:
		*bad = "a label is a class name, but the dataset has no "
		       "classes = FILE";
		break;
	case -EBADMSG:
		*bad = "the .json member is not a JSON object";
		break;
	case -ELOOP:
		*bad = "the .json member is nested deeper than " DS_STR(
		    JSON_PARSER_MAX_DEPTH) " levels";
		break;
	case -ENOTUNIQ:
		*bad = "the .json member has a key twice in one object";
		break;
	case -EOVERFLOW:
		*bad = "the .json member has a number out of range";
		break;
	default:
		*bad = "a .json label that is not an integer, a class name or "
		       "a list of them";
		break;
	}
	return 0;
}

int
ds_multi_classes(struct dataset *ds)
{
	uint32_t k = 0;

	for (size_t i = 0; i < ds->n; i++) {
		struct ds_sample *s = &ds->samples[i];

		if (s->bad != NULL)
			continue;
		if (s->labels == NULL) {
			if (s->label < 0 || s->label > DS_MAX_MULTI) {
				s->bad = "label out of range for a multi-label "
					 "dataset (0 to 1048575)";
				free(s->text);
				s->text = NULL;
				s->label = -1;
				continue;
			}
			if ((s->labels = malloc(2 * sizeof(uint32_t))) == NULL)
				return -ENOMEM;
			s->labels[0] = 1;
			s->labels[1] = (uint32_t)s->label;
		}
		s->label = -1;
		if (s->labels[0] > 0 && s->labels[s->labels[0]] + 1 > k)
			k = s->labels[s->labels[0]] + 1;
	}
	if ((ds->classes = calloc(k ? k : 1, sizeof(char *))) == NULL)
		return -ENOMEM;
	for (uint32_t c = 0; c < k; c++) {
		char num[16];

		snprintf(num, sizeof(num), "%" PRIu32, c);
		if ((ds->classes[c] = strdup(num)) == NULL)
			return -ENOMEM;
		ds->nclasses = c + 1;
	}
	return 0;
}
