/*
 * ds_label.c - layer: dataset/ (the datasets), tar shard backend (calls only
 * ds_tar_walk.c's ds_tm_why, and jansson).  A sample's label from its .cls
 * member (integer text) or its .json member (label = json:KEY), or why it
 * has none: the sample then fails when read, and on_error decides.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "dataset/ds_tar_int.h"

#define DS_STR_(x) #x
#define DS_STR(x) DS_STR_(x)

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

/*
 * The .json member is parsed whole by jansson: valid JSON (RFC 8259,
 * UTF-8) whose top level is an object; a key given twice in any object
 * is refused (JSON_REJECT_DUPLICATES: readers disagree on which one wins,
 * and a label must not depend on the reader); nesting is bounded by
 * jansson's JSON_PARSER_MAX_DEPTH (2048 in Debian's); an integer beyond 64 bits
 * fails the parse.  The member itself is at most TAR_LABEL_MAX bytes (the
 * walk reads no more).  Thread-safe (jansson's hash seed is set once,
 * atomically).
 */
int
ds_json_key(const char *s, size_t n, size_t flags, const char *key,
    json_t **doc, json_t **val)
{
	json_error_t je;

	*val = NULL;
	if ((*doc = json_loadb(s, n, JSON_REJECT_DUPLICATES | flags, &je)) ==
	    NULL) {
		switch (json_error_code(&je)) {
		case json_error_out_of_memory:
			return -ENOMEM;
		case json_error_stack_overflow:
			return -ELOOP;
		case json_error_duplicate_key:
			return -ENOTUNIQ;
		case json_error_numeric_overflow:
			return -EOVERFLOW;
		default:
			return -EBADMSG;
		}
	}
	if (!json_is_object(*doc))
		return -EBADMSG;
	if ((*val = json_object_get(*doc, key)) == NULL)
		return -ENOENT;
	return 0;
}

int
ds_label_json(const char *s, size_t n, const char *key, int64_t *v)
{
	json_t *doc, *val;
	int r;

	if ((r = ds_json_key(s, n, 0, key, &doc, &val)) != 0)
		goto out;
	if (json_is_integer(val)) {
		json_int_t x = json_integer_value(val);

		if (x < 0 || x > DS_MAX_LABEL)
			r = -ERANGE;
		else
			*v = (int64_t)x;
	} else if (json_is_string(val))
		r = ds_label_int(
		    json_string_value(val), json_string_length(val), v);
	else
		r = -EINVAL;
out:
	json_decref(doc);
	return r;
}

int
ds_label_parse(const char *label, struct ds_label *lb, char *err, size_t errlen)
{
	lb->key = NULL;
	if (label == NULL || strcmp(label, "cls") == 0 ||
	    strcmp(label, "auto") == 0)
		lb->mode = LBL_CLS;
	else if (strcmp(label, "none") == 0)
		lb->mode = LBL_NONE;
	else if (strncmp(label, "json:", 5) == 0 && label[5] != '\0') {
		lb->mode = LBL_JSON;
		lb->key = label + 5;
	} else {
		snprintf(err, errlen,
		    "label '%s': expected cls, json:KEY, none or auto", label);
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
		*bad = cls ? DS_NO_CLS : "no .json member";
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
	if (r == -ENOMEM)
		return r;
	if (r == -ENOENT)
		*bad = "the .json member has no such key";
	else if (r == -ERANGE)
		*bad = "label out of range (0 to 16777215)";
	else if (r == -EBADMSG)
		*bad = "the .json member is not a JSON object";
	else if (r == -ELOOP)
		*bad = "the .json member is nested deeper than " DS_STR(
		    JSON_PARSER_MAX_DEPTH) " levels";
	else if (r == -ENOTUNIQ)
		*bad = "the .json member has a key twice in one object";
	else if (r == -EOVERFLOW)
		*bad = "the .json member has a number out of range";
	else if (r != 0)
		*bad = cls ? "a .cls member that is not an integer"
			   : "a .json label that is not an integer";
	if (*bad != NULL)
		*label = -1;
	return 0;
}
