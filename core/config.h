/*
 * config.h - the INI config of a mount: [mount], [dataset NAME], [job NAME].
 *
 * cfg_load reads and checks a whole file; every mistake is reported as
 * "FILE:LINE: message" in err and the load fails (-EINVAL), so nothing is
 * mounted from a config with an error in it.  Every value is checked here:
 * sizes, ranges, enums, that a job names a dataset that exists, and that
 * its pipeline parses.  A loaded cfg is immutable.
 */
#ifndef FEEDFS_CONFIG_H
#define FEEDFS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transforms/xf.h"

#define CFG_DEFAULT_CACHE_DIR "/var/cache/feedfs"

enum cfg_order { CFG_ORDER_STRICT, CFG_ORDER_RELAXED };
enum cfg_on_error { CFG_ON_ERROR_FAIL, CFG_ON_ERROR_SUBSTITUTE };

struct cfg_mount {
	char *cache_dir;
	uint64_t cache_size; /* bytes; 0 = no cache */
	unsigned threads;    /* 0 = one per online CPU */
	uint64_t memory;     /* bytes */
	unsigned readahead;  /* batches ahead of each sequential reader */
	uint64_t gpu_memory; /* bytes: the device pool of gpu = on jobs */
};

struct cfg_dataset {
	char *name;
	char *root;     /* absolute */
	char *manifest; /* absolute, or NULL for ImageFolder */
	int line;       /* of the [dataset NAME] header */
};

struct cfg_job {
	char *name;
	char *dataset;
	uint32_t batch_size;
	uint32_t epochs;
	uint64_t seed;
	bool shuffle, drop_last;
	enum cfg_order order;
	char *pipeline;
	enum xf_dtype dtype;
	enum xf_layout layout;
	enum cfg_on_error on_error;
	bool gpu;
	uint64_t max_pixels; /* source images larger than this are refused */
	int line;          /* of the [job NAME] header */
	int pipeline_line; /* of its pipeline key (or the header) */
	int dataset_line;  /* of its dataset key (or the header) */
};

struct cfg {
	char *path; /* the file, as named; "(default)" for cfg_default */
	struct cfg_mount mount;
	struct cfg_dataset *datasets;
	size_t ndatasets;
	struct cfg_job *jobs;
	size_t njobs;
};

/* Load and check a config file. */
int cfg_load(const char *path, struct cfg **out, char *err, size_t errlen);

/*
 * The config of `feedfs DATASET_DIR MOUNTPOINT`: dataset "data" at dir and
 * the jobs "train" and "val" of DESIGN.md (torchvision's ImageNet
 * transforms).
 */
int cfg_default(const char *dir, struct cfg **out, char *err, size_t errlen);

/*
 * Set one [mount] key (from -o KEY=VALUE).  -ENOENT when key is not a
 * [mount] key (the caller may pass it to FUSE), -EINVAL with a message
 * ("-o KEY=VALUE: ...") when the value is bad.
 */
int cfg_set_mount(struct cfg *c, const char *key, const char *value,
    char *err, size_t errlen);

/*
 * "50G", "512M", "4096", "1.5G" (K, M, G, T; powers of 1024; an optional
 * trailing B or iB) to bytes.  -EINVAL on anything else or overflow.
 */
int cfg_parse_size(const char *s, uint64_t *out);

/* Booleans: yes/no, true/false, on/off, 1/0 (any case).  -EINVAL else. */
int cfg_parse_bool(const char *s, bool *out);

void cfg_free(struct cfg *c); /* NULL is fine */

#endif
