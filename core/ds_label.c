/*
 * ds_label.c - layer: dataset index, tar shard backend (calls only
 * ds_tar_walk.c's ds_tm_why).  A sample's label from its .cls member (integer
 * text) or its .json member (label = json:KEY), or why it has none: the sample
 * then fails when read, and on_error decides.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/ds_tar_int.h"

/* See ds_tar_int.h. */
int
ds_label_int(const char *s, size_t n, int64_t *v)
{
	size_t i = 0;
	bool neg = false;
	int64_t x = 0;

	while (i < n && isspace((unsigned char)s[i]))
		i++;
	if (i < n && (s[i] == '-' || s[i] == '+'))
		neg = s[i++] == '-';
	if (i == n || !isdigit((unsigned char)s[i]))
		return -EINVAL;
	for (; i < n && isdigit((unsigned char)s[i]); i++) {
		if (x > DS_MAX_LABEL)
			return -ERANGE;
		x = x * 10 + (s[i] - '0');
	}
	while (i < n && isspace((unsigned char)s[i]))
		i++;
	if (i != n)
		return -EINVAL;
	if (neg || x > DS_MAX_LABEL)
		return -ERANGE;
	*v = x;
	return 0;
}

/* JSON: skip a string at *i (on its quote); false if malformed. */
static bool
js_string(const char *s, size_t n, size_t *i, size_t *start, size_t *end)
{
	size_t k = *i + 1;

	*start = k;
	for (; k < n && s[k] != '"'; k++)
		if (s[k] == '\\' && ++k >= n)
			return false;
	if (k >= n)
		return false;
	*end = k;
	*i = k + 1;
	return true;
}

static void
js_ws(const char *s, size_t n, size_t *i)
{
	while (*i < n && isspace((unsigned char)s[*i]))
		(*i)++;
}

/* Skip a value (any type, nesting counted, strings respected). */
static bool
js_skip(const char *s, size_t n, size_t *i)
{
	size_t depth = 0, a, b;

	js_ws(s, n, i);
	do {
		if (*i >= n)
			return false;
		switch (s[*i]) {
		case '"':
			if (!js_string(s, n, i, &a, &b))
				return false;
			break;
		case '{':
		case '[':
			depth++;
			(*i)++;
			break;
		case '}':
		case ']':
			if (depth == 0)
				return false;
			depth--;
			(*i)++;
			break;
		default:
			if (depth == 0) {
				while (*i < n && s[*i] != ',' && s[*i] != '}' &&
				       s[*i] != ']')
					(*i)++;
				return true;
			}
			(*i)++;
		}
	} while (depth > 0);
	return true;
}

/* See ds_tar_int.h. */
int
ds_label_json(const char *s, size_t n, const char *key, int64_t *v)
{
	size_t i = 0, a, b, klen = strlen(key);

	js_ws(s, n, &i);
	if (i >= n || s[i++] != '{')
		return -EINVAL;
	for (;;) {
		js_ws(s, n, &i);
		if (i < n && s[i] == '}')
			return -ENOENT;
		if (i >= n || s[i] != '"' || !js_string(s, n, &i, &a, &b))
			return -EINVAL;
		js_ws(s, n, &i);
		if (i >= n || s[i++] != ':')
			return -EINVAL;
		js_ws(s, n, &i);
		if (b - a == klen && memcmp(s + a, key, klen) == 0) {
			size_t e = i;

			if (i < n && s[i] == '"') {
				if (!js_string(s, n, &e, &a, &b))
					return -EINVAL;
				return ds_label_int(s + a, b - a, v);
			}
			while (e < n && s[e] != ',' && s[e] != '}')
				e++;
			return ds_label_int(s + i, e - i, v);
		}
		if (!js_skip(s, n, &i))
			return -EINVAL;
		js_ws(s, n, &i);
		if (i < n && s[i] == ',') {
			i++;
			continue;
		}
		return i < n && s[i] == '}' ? -ENOENT : -EINVAL;
	}
}

int
ds_label_parse(const char *label, struct ds_label *lb, char *err, size_t errlen)
{
	lb->key = NULL;
	if (label == NULL || strcmp(label, "cls") == 0)
		lb->mode = LBL_CLS;
	else if (strcmp(label, "none") == 0)
		lb->mode = LBL_NONE;
	else if (strncmp(label, "json:", 5) == 0 && label[5] != '\0') {
		lb->mode = LBL_JSON;
		lb->key = label + 5;
	} else {
		snprintf(err, errlen,
		    "label '%s': expected cls, json:KEY or none", label);
		return -EINVAL;
	}
	return 0;
}

const char *
ds_label_ext(const struct ds_label *lb)
{
	return lb->mode == LBL_CLS    ? "cls"
	       : lb->mode == LBL_JSON ? "json"
				      : NULL;
}

int
ds_label_of(const struct ds_label *lb, const struct tar_member *lm,
    size_t count, int64_t *label, const char **bad)
{
	bool cls = lb->mode == LBL_CLS;
	int r;

	*label = -1;
	*bad = NULL;
	if (lb->mode == LBL_NONE)
		return 0;
	if (count == 0)
		*bad = cls ? "no .cls member" : "no .json member";
	else if (count > 1)
		*bad =
		    cls ? "duplicate .cls members" : "duplicate .json members";
	else if (lm->kind != TM_FILE)
		*bad = ds_tm_why(lm->kind);
	else if (!lm->has_data)
		*bad = "label member larger than 64 KiB";
	if (*bad != NULL)
		return 0;
	if (cls)
		r = ds_label_int(lm->data, lm->dlen, label);
	else
		r = ds_label_json(lm->data, lm->dlen, lb->key, label);
	if (r == -ENOENT)
		*bad = "the .json member has no such key";
	else if (r == -ERANGE)
		*bad = "label out of range (0 to 16777215)";
	else if (r != 0)
		*bad = cls ? "a .cls member that is not an integer"
			   : "a .json label that is not an integer";
	if (*bad != NULL)
		*label = -1;
	return 0;
}
