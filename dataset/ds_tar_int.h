/*
 * ds_tar_int.h - layer: dataset/ (the datasets), tar shard backend.  What the
 * files of the tar shard reader share, below ds_tar.c (ds_open_shards and
 * ds_member_read, which calls the others):
 *
 *   ds_tar_walk.c    the header walk (ds_tar_scan: ds_int.h), which calls
 *                    none of the others;
 *   ds_tar_index.c   the kept index: encode, parse, load, store (the
 *                    encode and parse: ds_int.h), calls ds_tar_walk.c;
 *   ds_shard_list.c  the shard paths of a glob or a list file;
 *   ds_label.c       a sample's label from its .cls or .json member;
 *   ds_label_list.c  its labels as a list (multi-label), class names.
 *
 * All of them call ds_common.c (ds_int.h) and nothing above.  Not for use
 * outside dataset/ds_*.c, the tests and fuzz/.
 */
#ifndef FEEDFS_DS_TAR_INT_H
#define FEEDFS_DS_TAR_INT_H

#include <sys/stat.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataset/ds_int.h"

/* .cls, .json and .txt members up to this size are read for labels and
 * captions (the walk keeps their text; a kept index holding more is
 * malformed). */
#define TAR_LABEL_MAX (64u << 10)
/* The largest label (a class index): bounds the class list. */
#define DS_MAX_LABEL ((1 << 24) - 1)

/* ---- the header walk (ds_tar_walk.c) ---- */

/* Why a scan stopped short (enum tar_status), for the log; NULL: it did
 * not. */
const char *ds_ts_why(unsigned status);

/* The extension of a member name as WebDataset sees it: after the first
 * dot of the last component, its key being the keylen bytes before that
 * dot (NULL: no key, not part of a sample). */
const char *ds_tar_member_ext(const char *name, size_t *keylen);

/* Whether a member of that extension is a sample's image (jpg, jpeg,
 * png, webp, in any case). */
bool ds_tar_is_image_ext(const char *ext);

/* ---- the kept index (ds_tar_index.c) ---- */

/*
 * Whether a shard is the one that was indexed: the same size, inode,
 * device, mtime and ctime.  One test for the kept index (at open) and for
 * every read (ds_member_read).
 */
bool ds_shard_same(const struct stat *a, const struct stat *b);

/*
 * Index the shard at path (whose stat is st): the index kept in the
 * directory index_fd (-1: none) if it matches st, else a scan, which is
 * then kept, unless it met a read error.  *scanned says which.  0, or
 * -errno with err ("shard PATH: why").
 */
int ds_tar_index_shard(const char *path, const struct stat *st, int index_fd,
    struct tar_index *ix, bool *scanned, char *err, size_t errlen);

/*
 * The kept index of the shard named path (a remote shard's display URL)
 * in index_fd (-1: none), if it is there, whole and of st: 0, else
 * -errno.  ds_tar_index_keep keeps ix there, unless it met a read error
 * (failures only cost a scan later).  A remote shard's st is made of its
 * size and version (ds_remote.c).
 */
int ds_tar_index_load(int index_fd, const char *path, const struct stat *st,
    struct tar_index *ix);
void ds_tar_index_keep(int index_fd, const char *path, const struct stat *st,
    const struct tar_index *ix);

/* ---- the shard list (ds_shard_list.c) ---- */

/*
 * The shard paths of spec (a glob, a path ending in .tar, else a list
 * file): absolute, real, sorted, unique, at least one.  *out (each path
 * and the array malloc'd) and *n on success; else -errno with err.
 */
int ds_shard_paths(
    const char *spec, char ***out, size_t *n, char *err, size_t errlen);

/* The longest directory holding each of the n sorted paths v: "/" at
 * least.  malloc'd; NULL: out of memory. */
char *ds_shard_common_dir(char **v, size_t n);

/* ---- labels (ds_label.c) ---- */

enum ds_label_mode { LBL_NONE, LBL_CLS, LBL_JSON };

/* A dataset's label = setting. */
struct ds_label {
	enum ds_label_mode mode;
	const char *key; /* json:KEY: KEY, inside the string parsed */
};

/*
 * Parse label = (NULL: cls): "cls", "none", "json:KEY" or "auto" (cls
 * here; ds_open_shards makes it none when no sample has a .cls member).
 * 0, or -EINVAL with err.  lb->key points into label.
 */
int ds_label_parse(
    const char *label, struct ds_label *lb, char *err, size_t errlen);

/* The extension of the member that holds the label: "cls", "json", or
 * NULL (label = none). */
const char *ds_label_ext(const struct ds_label *lb);

/*
 * A sample's label: lm is its label member (ds_label_ext; NULL when it
 * has none) and count how many it has.  *label is the label, or -1 with
 * *bad saying why not (a static string: the sample fails when read).  0,
 * or -ENOMEM.
 */
int ds_label_of(const struct ds_label *lb, const struct tar_member *lm,
    size_t count, int64_t *label, const char **bad);
/* Its *bad for a sample without a .cls member (label = cls or auto). */
#define DS_NO_CLS "no .cls member"

/*
 * The integer text of a .cls member (spaces around allowed): 0, -EINVAL
 * (not an integer), -ERANGE (negative or above DS_MAX_LABEL).
 */
int ds_label_int(const char *s, size_t n, int64_t *v);

/*
 * The integer field key of the top-level JSON object in s[0..n) (a
 * number, or a string holding one as ds_label_int reads it), parsed by
 * jansson (ds_label.c says the limits).  0, -ENOENT (no such key),
 * -EINVAL (not an integer), -ERANGE (negative or above DS_MAX_LABEL),
 * -EBADMSG (not JSON, or not an object), -ELOOP (nested too deep),
 * -ENOTUNIQ (a key twice in one object), -EOVERFLOW (a number beyond 64
 * bits), -ENOMEM.
 */
int ds_label_json(const char *s, size_t n, const char *key, int64_t *v);

/*
 * The JSON object s (n bytes; a key twice refused; jansson's flags added)
 * parsed, and its member key: 0 with *val, or -ENOMEM, -ELOOP (too deep),
 * -ENOTUNIQ, -EOVERFLOW (an integer beyond 64 bits), -EBADMSG (not JSON,
 * or not an object), -ENOENT (no such key).  *doc is the caller's to
 * json_decref whatever the return (NULL when nothing parsed).  For
 * ds_label_json, ds_labels_json and ds_text_json.
 */
struct json_t;
int ds_json_key(const char *s, size_t n, size_t flags, const char *key,
    struct json_t **doc, struct json_t **val);

/* ---- multi-label and class names (ds_label_list.c) ---- */

/* The largest class index in a list (multi-hot): bounds a row's length. */
#define DS_MAX_MULTI ((1 << 20) - 1)

/* The names of classes = FILE, by which a .json label may name a class:
 * class i is v[i]; by_name, their indexes sorted by name, for lookup. */
struct ds_names {
	char *const *v;
	size_t n;
	uint32_t *by_name;
};
/* Index v[0..n) (not copied: it must outlive nm).  0 or -ENOMEM. */
int ds_names_init(struct ds_names *nm, char *const *v, size_t n);
void ds_names_fini(struct ds_names *nm);

/* A sample's labels: one (list false), or a list of class indexes. */
struct ds_labels {
	bool list;
	uint32_t n;
	uint32_t *v; /* malloc'd: n class indexes, sorted, distinct */
};

/*
 * The labels of field key of the top-level JSON object in s[0..n),
 * parsed as ds_label_json parses: an integer, or a string holding one,
 * or (with names) a class name, whose label is its index in names; or a
 * list of such (then at most DS_MAX_MULTI each; duplicates count once;
 * empty allowed).  out->v malloc'd on success.  0, the returns of
 * ds_label_json, and -ENOKEY (a name not in names), -ENODATA (a name, and
 * no names given), -E2BIG (an index in a list above DS_MAX_MULTI).
 */
int ds_labels_json(const char *s, size_t n, const char *key,
    const struct ds_names *names, struct ds_labels *out);

/*
 * ds_label_of for every label mode, with lists: out set (out->v
 * malloc'd), or out->v NULL and *bad why not.  0, or -ENOMEM.
 */
int ds_labels_of(const struct ds_label *lb, const struct tar_member *lm,
    size_t count, const struct ds_names *names, struct ds_labels *out,
    const char **bad);

/*
 * The classes of a multi-label dataset (ds->multi set: a sample has a
 * list): every good sample's labels become a list (a single label a list
 * of one, bad past DS_MAX_MULTI; ds_sample.label -1), and the classes
 * "0".."K-1", K the largest index + 1 (a multi-hot row's columns are
 * the indexes themselves).  0 or -ENOMEM.
 */
int ds_multi_classes(struct dataset *ds);

#endif
