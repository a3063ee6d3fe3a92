/*
 * ds_text.h - layer: dataset index.  A sample's caption (text = txt |
 * json:KEY | none): the setting, its text from a tar member's bytes or a
 * sidecar's, the string field of a .json, and an ImageFolder's sidecars
 * (ds_text.c, ds_sidecar.c), a manifest's line with its third column
 * (dataset.c).  Called by ds_tar.c (members), dataset.c (a manifest's
 * third column, a folder's sidecars); calls ds_common.c,
 * ds_safeopen.c and util/jsonstr.c.  Not for use outside dataset/, the
 * tests and fuzz/.
 */
#ifndef FEEDFS_DS_TEXT_H
#define FEEDFS_DS_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataset/ds_int.h"

/* A caption's most bytes: what the walk keeps of a member (TAR_LABEL_MAX). */
#define DS_TEXT_MAX (64u << 10)

enum ds_text_mode { TXT_NONE, TXT_FILE, TXT_JSON };

/* A dataset's text = setting. */
struct ds_text {
	enum ds_text_mode mode;
	const char *key; /* json:KEY: KEY, inside the string parsed */
};

/*
 * Parse text = (NULL: none): "txt", "none" or "json:KEY".  0, or -EINVAL
 * with err.  tx->key points into text.
 */
int ds_text_parse(
    const char *text, struct ds_text *tx, char *err, size_t errlen);

/* The extension of the member or sidecar that holds the caption: "txt",
 * "json", or NULL (text = none). */
const char *ds_text_ext(const struct ds_text *tx);

/*
 * The string field key of the top-level JSON object in s[0..n), parsed by
 * jansson as ds_label_json parses (a key twice refused; \u0000 allowed):
 * *out (malloc'd, a NUL after its *len bytes).  0, -ENOENT (no such key),
 * -EINVAL (not a string), -EBADMSG (not JSON, or not an object), -ELOOP
 * (nested too deep), -ENOTUNIQ (a key twice in one object), -EOVERFLOW (a
 * number beyond 64 bits), -EFBIG (over DS_TEXT_MAX), -ENOMEM.
 */
int ds_text_json(
    const char *s, size_t n, const char *key, char **out, size_t *len);

/*
 * A caption from the bytes s[0..n) of the file that holds it (a .txt
 * taken as it is, a .json's field as ds_text_json finds it): *out
 * (malloc'd, a NUL after) and *len, or *out NULL and *bad why not (a
 * static string naming the file as a member's or a sidecar's: not valid
 * UTF-8, too long, no such key...).  0, or -ENOMEM.
 */
int ds_text_from(const struct ds_text *tx, bool member, const char *s, size_t n,
    char **out, uint32_t *len, const char **bad);

/*
 * A tar sample's caption: m its member of ds_text_ext's extension (NULL
 * when it has none), count how many it has; as ds_text_from, with *bad
 * for a member missing, twice, too large or not a file.  0, or -ENOMEM.
 */
int ds_text_of(const struct ds_text *tx, const struct tar_member *m,
    size_t count, char **out, uint32_t *len, const char **bad);

/*
 * The sidecar of an image at path (relative, '/'-separated): the same
 * name with ext ("txt", "json") in place of the extension after its last
 * dot, in the same directory ("a/b/img.1.jpg": "a/b/img.1.txt").  0, or
 * -EINVAL (no extension in the last component: no image has none),
 * -ENAMETOOLONG (out of len).
 */
int ds_sidecar_name(const char *path, const char *ext, char *out, size_t len);

/* A manifest line (dataset.c). */
struct ds_mline {
	char *path; /* into the line */
	int64_t label;
	char *text; /* with text: the caption (malloc'd), or NULL with bad */
	uint32_t tlen;
	const char *bad;
};

/*
 * Parse one manifest line of len bytes (a NUL after them; changed in
 * place): "path<TAB>label", or with text = txt (tx)
 * "path<TAB>label<TAB>caption", the path ending at the first tab and the
 * caption the rest of the line as it is (ds_text_from checks it; a line
 * without a third column makes a bad sample).  NULL with *m set, or the
 * message of a line that does not parse (the mount stops: a static
 * string or why).  *nomem when out of memory.
 */
const char *ds_manifest_line(char *line, size_t len, const struct ds_text *tx,
    struct ds_mline *m, bool *nomem, char *why, size_t whylen);

/*
 * The captions of an ImageFolder ds (text = txt or json:KEY): each
 * sample's sidecar read (ds_open_meta says which file), its caption in
 * text and tlen, or bad why not; sidecars used are no longer counted as
 * skipped files.  0, or -errno with err for what stops the mount (out of
 * memory or descriptors, the root unreadable).
 */
int ds_sidecars(
    struct dataset *ds, const struct ds_text *tx, char *err, size_t errlen);

#endif
