/*
 * config_int.h - the model (core/): what the files of the config share,
 * private to them: config.c (the grammar, the sections, cfg_load),
 * config_keys.c (the key table and the values), config_job.c (the checks
 * of a job), config_classes.c (class lists), config_layout.c (the
 * config of a dataset path: cfg_default) and config_opts.c (-o's
 * [dataset] keys and the words of -o's keys).
 */
#ifndef FEEDFS_CONFIG_INT_H
#define FEEDFS_CONFIG_INT_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/config.h"

enum section { SEC_NONE, SEC_MOUNT, SEC_DATASET, SEC_JOB };

enum ktype {
	K_PATH,  /* char *, absolute once set */
	K_STR,   /* char * */
	K_SIZE,  /* uint64_t bytes, cfg_parse_size; lo = least nonzero; hi:
		    K_SIZE_ZERO allows 0, K_SIZE_AUTO `auto` (CFG_SIZE_AUTO) */
	K_COUNT, /* uint64_t in [lo, hi] */
	K_BOOL,  /* bool */
	K_ENUM,  /* an enum (int): index into names */
	K_SERVERS, /* char *, a memcached server list (cluster_check_servers);
		      empty: NULL, no servers */
	K_CACHEFMT, /* uint32_t, cache_fmt_parse: raw | lossless | jpeg(Q) */
	K_RES,      /* struct cfg_res, cfg_parse_res */
};

/* K_SIZE: the values a key allows besides sizes >= lo (its hi). */
#define K_SIZE_ZERO 1u
#define K_SIZE_AUTO 2u

struct key {
	enum section sec;
	const char *name;
	enum ktype type;
	size_t off;     /* of the field in cfg_mount, cfg_dataset or cfg_job */
	long line_off;  /* of an int that gets the key's line, or -1 */
	uint64_t lo, hi;
	const char *const *names; /* K_ENUM */
	const char *what;         /* the expected value, for messages */
};

/*
 * The default jobs (issue 36): train's crops are torchvision's
 * RandomResizedCrop's of the source (shrink keeps up to 512 on the short
 * side, Lanczos, and the crop's box is drawn in the source's pixels; the
 * DCT-scaled decode only for sources of 2048 and more), val is exactly
 * torchvision's Resize(256) CenterCrop(224) (Pillow's full decode).
 */
#define DEFAULT_TRAIN_PIPELINE                                                 \
	"decode(scaled) shrink(512) cache random_resized_crop(224) flip(0.5) " \
	"normalize(imagenet)"
#define DEFAULT_VAL_PIPELINE                                                   \
	"decode resize(256) center_crop(224) cache normalize(imagenet)"

/* Parser state: the file, the line, the section being filled. */
struct parser {
	struct cfg *c;
	const char *dir; /* of the config file (absolute), for relative paths */
	int line;
	enum section sec;
	int mount_line;
	uint64_t seen; /* keys[] of the current section already set (bits) */
	char *err;
	size_t errlen;
};

/*
 * "FILE:LINE: message" (the config's file) into p's err; -EINVAL.  Here,
 * not in config.c, so that the files the parser calls (config_job.c,
 * config_classes.c) do not call back up into it.
 */
static inline int __attribute__((format(printf, 3, 4)))
cfg_perr(struct parser *p, int line, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(p->err, p->errlen, "%s:%d: %s", p->c->path, line, msg);
	return -EINVAL;
}
/*
 * A job's dataset (by name, or the only one) or its mixture, and its
 * parsed pipeline, resolution schedule and views (config_job.c).
 */
int cfg_check_job(struct parser *p, struct cfg_job *j);
/* Read and parse d->classes into d->class_names (config_classes.c). */
int cfg_load_classes(struct parser *p, struct cfg_dataset *d);

/* The key of sec called by the len bytes at name, or NULL. */
const struct key *cfg_find_key(int sec, const char *name, size_t len);
/* Its index in the table (a bit in a section's "seen" set, < 64). */
unsigned cfg_key_index(const struct key *k);
/* "a, b or c": the keys of sec. */
void cfg_list_keys(int sec, char *buf, size_t len);
/* "a, b or c" of n words; the k-th key of sec (NULL past the last); the
 * [job] keys -o takes for the default jobs (NULL-terminated). */
void cfg_list_words(const char *const *words, size_t n, char *buf,
    size_t len);
const struct key *cfg_key_at(int sec, size_t k);
const char *const *cfg_job_opt_names(void);
/*
 * Set the field of key k in the section struct at base from val; dir
 * resolves a relative path (NULL: the working directory).  -EINVAL with
 * msg filled for a bad value, -ENOMEM.
 */
int cfg_set_key(const struct key *k, void *base, const char *dir,
    const char *val, char *msg, size_t len);
/* dir/path unless path is absolute; dir NULL: the working directory. */
char *cfg_join_path(const char *dir, const char *path);
void cfg_job_defaults(struct cfg_job *j);
/* A cfg named path with the [mount] defaults and nothing else (config.c). */
struct cfg *cfg_new(const char *path);
int cfg_mount_defaults(struct cfg_mount *m);

#endif
