/*
 * ds_text.c - layer: dataset index (calls ds_tar_walk.c's ds_tm_why,
 * util/jsonstr.c and jansson).  A sample's caption (see ds_text.h): the
 * text = setting, the caption from the bytes of the member or sidecar
 * that holds it, and the name of an image's sidecar.
 *
 * A caption is served as it is: the bytes of a .txt (a trailing newline
 * stays), or a .json's string field as JSON decodes it.  It must be valid
 * UTF-8 (RFC 3629): anything else makes its sample fail when made, as a
 * missing caption does, so that on_error decides and errors.tsv says why;
 * it is never repaired (a U+FFFD in place of a byte would train on text
 * nobody wrote).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "dataset/ds_tar_int.h"
#include "dataset/ds_text.h"
#include "util/jsonstr.h"

int
ds_text_parse(const char *text, struct ds_text *tx, char *err, size_t errlen)
{
	tx->key = NULL;
	if (text == NULL || strcmp(text, "none") == 0)
		tx->mode = TXT_NONE;
	else if (strcmp(text, "txt") == 0)
		tx->mode = TXT_FILE;
	else if (strncmp(text, "json:", 5) == 0 && text[5] != '\0') {
		tx->mode = TXT_JSON;
		tx->key = text + 5;
	} else {
		snprintf(err, errlen,
		    "text '%s': expected txt, json:KEY or none", text);
		return -EINVAL;
	}
	return 0;
}

const char *
ds_text_ext(const struct ds_text *tx)
{
	return tx->mode == TXT_FILE   ? "txt"
	       : tx->mode == TXT_JSON ? "json"
				      : NULL;
}

int
ds_text_json(const char *s, size_t n, const char *key, char **out, size_t *len)
{
	json_t *doc, *val;
	int r;

	if ((r = ds_json_key(s, n, JSON_ALLOW_NUL, key, &doc, &val)) != 0)
		goto out;
	if (!json_is_string(val))
		r = -EINVAL;
	else if (json_string_length(val) > DS_TEXT_MAX)
		r = -EFBIG;
	else {
		size_t k = json_string_length(val);

		if ((*out = malloc(k + 1)) == NULL)
			r = -ENOMEM;
		else {
			memcpy(*out, json_string_value(val), k);
			(*out)[k] = '\0';
			*len = k;
		}
	}
out:
	json_decref(doc);
	return r;
}

/* Why a .json's caption field cannot be had (r of ds_text_json). */
static const char *
json_why(int r, bool member)
{
	switch (r) {
	case -ENOENT:
		return member ? "the .json member has no such text key"
			      : "its .json sidecar has no such text key";
	case -EINVAL:
		return member ? "the .json member's text field is not a string"
			      : "its .json sidecar's text field is not a "
				"string";
	case -EFBIG:
		return member ? "the .json member's text is over 64 KiB"
			      : "its .json sidecar's text is over 64 KiB";
	case -ELOOP:
		return member ? "the .json member is nested too deep"
			      : "its .json sidecar is nested too deep";
	case -ENOTUNIQ:
		return member
			   ? "the .json member has a key twice in one object"
			   : "its .json sidecar has a key twice in one object";
	case -EOVERFLOW:
		return member ? "the .json member has a number out of range"
			      : "its .json sidecar has a number out of range";
	default:
		return member ? "the .json member is not a JSON object in "
				"UTF-8"
			      : "its .json sidecar is not a JSON object in "
				"UTF-8";
	}
}

int
ds_text_from(const struct ds_text *tx, bool member, const char *s, size_t n,
    char **out, uint32_t *len, const char **bad)
{
	size_t k;
	int r;

	*out = NULL;
	*bad = NULL;
	if (tx->mode == TXT_JSON) {
		if ((r = ds_text_json(s, n, tx->key, out, &k)) == -ENOMEM)
			return r;
		if (r != 0) {
			*bad = json_why(r, member);
			return 0;
		}
		*len = (uint32_t)k; /* jansson checked its UTF-8 */
		return 0;
	}
	if (n > DS_TEXT_MAX) {
		*bad = member ? "the .txt member is over 64 KiB"
			      : "its .txt sidecar is over 64 KiB";
		return 0;
	}
	if (!utf8_valid(s, n)) {
		*bad = member ? "the .txt member is not valid UTF-8"
			      : "its .txt sidecar is not valid UTF-8";
		return 0;
	}
	if ((*out = malloc(n + 1)) == NULL)
		return -ENOMEM;
	memcpy(*out, s, n);
	(*out)[n] = '\0';
	*len = (uint32_t)n;
	return 0;
}

int
ds_text_of(const struct ds_text *tx, const struct tar_member *m, size_t count,
    char **out, uint32_t *len, const char **bad)
{
	bool json = tx->mode == TXT_JSON;

	*out = NULL;
	*bad = NULL;
	if (tx->mode == TXT_NONE)
		return 0;
	if (count == 0)
		*bad = json ? "no .json member (text = json:KEY)"
			    : "no .txt member (text = txt)";
	else if (count > 1)
		*bad =
		    json ? "duplicate .json members" : "duplicate .txt members";
	else if (m->kind != TM_FILE)
		*bad = ds_tm_why(m->kind);
	else if (!m->has_data)
		*bad = json ? "the .json member is over 64 KiB"
			    : "the .txt member is over 64 KiB";
	if (*bad != NULL)
		return 0;
	return ds_text_from(tx, true, m->data, m->dlen, out, len, bad);
}

int
ds_sidecar_name(const char *path, const char *ext, char *out, size_t len)
{
	const char *base = strrchr(path, '/'), *dot;
	size_t stem;

	base = base ? base + 1 : path;
	if ((dot = strrchr(base, '.')) == NULL || dot == base)
		return -EINVAL;
	stem = (size_t)(dot - path) + 1; /* the dot kept */
	if (stem + strlen(ext) + 1 > len)
		return -ENAMETOOLONG;
	memcpy(out, path, stem);
	memcpy(out + stem, ext, strlen(ext) + 1);
	return 0;
}
