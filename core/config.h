/*
 * config.h - the model (core/): the INI config of a mount: [mount],
 * [dataset NAME], [job NAME].
 *
 * cfg_load reads and checks a whole file; every mistake is reported as
 * "FILE:LINE: message" in err and the load fails (-EINVAL), so nothing is
 * mounted from a config with an error in it.  Every value is checked here:
 * sizes, ranges, enums, that a job names a dataset that exists, and that
 * its pipeline parses.  The keys of every section are one table in
 * config_keys.c: it drives parsing, duplicate detection, the "expected ..."
 * lists of error messages and which -o options are ours (cfg_is_mount_key).
 * Paths are absolute once loaded (relative ones are taken from the config
 * file's directory, or from the working directory for -o).  A loaded cfg is
 * immutable.
 */
#ifndef FEEDFS_CONFIG_H
#define FEEDFS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "transforms/xf.h"

/* root's default cache_dir; every other user's: cfg_default_cache_dir. */
#define CFG_DEFAULT_CACHE_DIR "/var/cache/feedfs"
/* A size key's value `auto` (cache_size): UINT64_MAX, as no size parses. */
#define CFG_SIZE_AUTO UINT64_MAX
/* A count key's value `auto` (cluster_batch_wait). */
#define CFG_COUNT_AUTO UINT64_MAX
/* The longest job or dataset name (they are directory names). */
#define CFG_MAX_NAME 128

enum cfg_order { CFG_ORDER_STRICT, CFG_ORDER_RELAXED };
enum cfg_on_error { CFG_ON_ERROR_FAIL, CFG_ON_ERROR_SUBSTITUTE };

struct cfg_mount {
	char *cache_dir;     /* absolute */
	/* bytes; 0 = no cache; CFG_SIZE_AUTO (the default): chosen from the
	 * disk when the cache is opened (cache.h's CACHE_SIZE_AUTO) */
	uint64_t cache_size;
	uint64_t threads;    /* 0 = two per CPU the process may use
				(cfg_threads); cfg_fit sets it at mount */
	uint64_t memory;     /* bytes; unless given, cfg_fit sets it */
	int memory_line;     /* of `memory =`; -1: -o; 0: not given */
	uint64_t readahead;  /* batches ahead of each sequential reader */
	uint64_t gpu_memory; /* bytes: the device pool of gpu = on jobs */
	char *cluster;       /* memcached servers "H:P,...", or NULL */
	char *cluster_auth;  /* absolute: SASL user and password, or NULL */
	char *cluster_secret; /* absolute: the tier's HMAC key, or NULL */
	bool cluster_batches; /* with cluster: finished batches from the tier
				 (batch workers: engine/tier.c) */
	uint64_t cluster_batch_wait; /* seconds a batch a worker holds is
					waited for; CFG_COUNT_AUTO: derived */
	uint64_t cache_stale; /* seconds unused before an entry may go for a
				 new one (0: any entry may) */
	uint64_t idle_trim;   /* seconds without a read before the engine
				 gives back what only speed needs (0: never) */
};

struct cfg_dataset {
	char *name;
	char *root;     /* absolute */
	char *manifest; /* absolute, or NULL for ImageFolder */
	char *shards;   /* WebDataset tar shards: a glob or a list file */
	char *label;    /* with shards: cls | json:KEY | none (NULL: cls) */
	/* captions: txt | json:KEY | none (NULL: none); its line */
	char *text;
	int text_line;
	/* remote shards (dataset/remote/remote.h) */
	char *s3_endpoint;    /* scheme://host[:port], NULL: AWS's */
	char *s3_region;      /* NULL: AWS_REGION, else us-east-1 */
	int s3_path_style;    /* 0 auto (yes with s3_endpoint), 1 no, 2 yes */
	char *ca_file;	      /* absolute, or NULL */
	uint64_t remote_timeout; /* seconds, of one request */
	uint64_t remote_retries; /* after the first try */
	bool remote_fill;	 /* the one pass: prefixes cached as shards are
				    indexed (engine/prefill.c) */
	int line;       /* of the [dataset NAME] header */
	/* classes = FILE (absolute; NULL: none) and its names, read and
	 * checked by cfg_load: class i is line i + 1 (cfg_classes_parse) */
	char *classes;
	int classes_line;
	char **class_names;
	size_t nclass_names;
};

/* A step of a mixture's schedule: weights from epoch on. */
struct cfg_mix_step {
	uint32_t epoch;
	uint64_t *w; /* per source, in millionths (core/mix.h) */
};

/*
 * A resolution schedule (resolution = LO..HI @ epochs E0..E1): FFCV's
 * progressive resizing (its get_resolution).  The output size of epoch e
 * is LO up to E0, HI from E1, and between them
 * round(interp(e, [E0, E1], [LO, HI]) / 32) * 32 (cfg_job_res).
 */
struct cfg_res {
	uint32_t lo, hi, e0, e1;
};

/* A view.K[-L] = TAIL line: views K to L have the pipeline tail TAIL. */
struct cfg_vdef {
	uint32_t lo, hi;
	char *tail;
	int line;
};

/* The most views of a job (views = N). */
#define CFG_MAX_VIEWS 64

struct cfg_job {
	char *name;
	char *dataset;
	size_t dataset_index; /* into cfg.datasets, resolved by the load;
				 a mixture: its first source */
	/*
	 * A mixture (mixture = instead of dataset =): its sources, in the
	 * order of the mixture line, and its weights by epoch: steps[0] is
	 * epoch 0 (the mixture line, or the schedule's step 0), then the
	 * mixture_schedule's steps by increasing epoch.  nsources 0: not a
	 * mixture.
	 */
	char *mixture, *mixture_schedule;
	size_t nsources;
	size_t *source_index; /* into cfg.datasets */
	struct cfg_mix_step *steps;
	size_t nsteps;
	uint64_t epoch_samples; /* 0: the sum of the sources' sizes */
	int mixture_line, schedule_line, epoch_samples_line;
	uint64_t batch_size;
	int batch_size_line; /* of its key; -1: -o; 0: the default */
	uint64_t epochs;
	uint64_t seed;
	bool shuffle, drop_last;
	enum cfg_order order;
	char *pipeline;
	struct xf_pipeline *pl; /* pipeline, parsed once by the load */
	enum xf_dtype dtype;
	enum xf_layout layout;
	enum cfg_on_error on_error;
	bool gpu;
	uint64_t max_pixels; /* bound on every decoded or intermediate image */
	uint32_t cache_format; /* cache/format.h's enc: raw, lossless, jpeg */
	int line;          /* of the [job NAME] header */
	int pipeline_line; /* of its pipeline key (or the header) */
	int dataset_line;  /* of its dataset key (or the header) */
	struct cfg_res res; /* resolution = ...; res_line 0: none */
	int res_line;
	/* The seeds of the shuffle and of the random ops: seed unless
	 * given (their line 0: not given, -1: given by -o);
	 * cfg_job_shuffle_seed, cfg_job_aug_seed. */
	uint64_t shuffle_seed, aug_seed;
	int shuffle_seed_line, aug_seed_line;
	/*
	 * Views (views = N, 1: none): view 0 is the pipeline; view v >= 1
	 * runs the cached prefix and then its own tail: view_pl[v], parsed
	 * by the load from "PREFIX cache TAIL" (view_text[v]), or NULL for
	 * the pipeline's own tail.  vdefs: the view.K[-L] lines as given.
	 */
	uint64_t views;
	int views_line;
	struct cfg_vdef *vdefs;
	size_t nvdefs;
	char **view_text;
	struct xf_pipeline **view_pl;
};

struct cfg {
	char *path; /* the file, as named; the dataset path for cfg_default */
	/* cfg_default: what the path was taken as and which jobs it gives,
	 * one line, said at mount and by --check (layout_warn: a warning:
	 * no val job); NULL for a config file */
	char *layout;
	bool layout_warn;
	struct cfg_mount mount;
	struct cfg_dataset *datasets;
	size_t ndatasets;
	struct cfg_job *jobs;
	size_t njobs;
};

/*
 * A class list (classes = FILE): len bytes of text, one class name a
 * line, class i on line i + 1; a last line without its newline counts, a
 * CR before a newline is dropped.  Refused, as "FNAME:LINE: message": an
 * empty name, a name with a control character or over CFG_MAX_CLASS_NAME
 * bytes, a name twice, a NUL, more than CFG_MAX_CLASSES lines, no line at
 * all.  On success *names (n strdup'd strings, in a calloc'd array:
 * cfg_classes_free) and *n.
 */
#define CFG_MAX_CLASSES (1u << 20)
#define CFG_MAX_CLASS_NAME 1024
int cfg_classes_parse(const char *text, size_t len, const char *fname,
    char ***names, size_t *n, char *err, size_t errlen);
void cfg_classes_free(char **names, size_t n);

/* Whether dataset d has captions (text = txt or json:KEY). */
static inline bool
cfg_dataset_text(const struct cfg_dataset *d)
{
	return d->text != NULL && strcmp(d->text, "none") != 0;
}

/* Load and check a config file. */
int cfg_load(const char *path, struct cfg **out, char *err, size_t errlen);

/*
 * The config of `feedfs PATH MOUNTPOINT` without a config file
 * (config_layout.c): PATH is a dataset directory (a ROOT with train/ and
 * val/, a class tree, a folder of tar shards) or one tar shard; datasets
 * "train" (and "val" when PATH has a val split of its own) and the jobs
 * "train" and "val" of DESIGN.md (torchvision's ImageNet transforms) over
 * them; c->layout says which.  -errno with err when PATH cannot be read.
 */
int cfg_default(const char *path, struct cfg **out, char *err, size_t errlen);
/* Whether path is a tar file (by its name, or ustar's magic): a shard
 * given as the dataset, not a config. */
bool cfg_is_tar(const char *path);
/*
 * The default jobs over the class trees train and (unless NULL) val,
 * taken as they are, nothing read: cfg_default's config of a ROOT with
 * train/ and val/ (for tests and fuzz targets).
 */
int cfg_default_trees(const char *train, const char *val, struct cfg **out,
    char *err, size_t errlen);

/* Whether the len bytes at key name a [mount] key (-o KEY=VALUE is ours). */
bool cfg_is_mount_key(const char *key, size_t len);

/*
 * Set one [mount] key (from -o KEY=VALUE).  -ENOENT when key is not a
 * [mount] key (the caller may pass it to FUSE), -EINVAL with a message
 * ("-o KEY=VALUE: ...") when the value is bad.
 */
int cfg_set_mount(struct cfg *c, const char *key, const char *value,
    char *err, size_t errlen);

/*
 * The [job] keys that -o may set for the default jobs of a mount without
 * a config (cfg_default): KEY=VALUE sets every job, JOB.KEY=VALUE one.
 * cfg_is_job_opt says whether the len bytes at key are such a KEY or
 * JOB.KEY (whatever JOB); cfg_set_job sets one, then checks the job
 * again: -ENOENT (no such key, or no job JOB), -EINVAL, each with a
 * message "-o KEY=VALUE: ...".
 */
bool cfg_is_job_opt(const char *key, size_t len);
int cfg_set_job(struct cfg *c, const char *key, const char *value, char *err,
    size_t errlen);

/*
 * A [dataset] key given with -o (issue 36): cfg_is_dataset_key says
 * whether the len bytes at key are one.  cfg_set_dataset_opt sets label
 * on the tar shards of a dataset path's default config (cfg_default), and
 * text (captions, issue 39) on each of its datasets; every other case is -EINVAL with where the key belongs ("-o KEY=VALUE:
 * ..."): the [dataset NAME] section of the config, or, for a dataset
 * path, a config (a key of remote shards does nothing on local disk).
 * -ENOENT: not a [dataset] key.
 */
bool cfg_is_dataset_key(const char *key, size_t len);
int cfg_set_dataset_opt(struct cfg *c, const char *key, const char *value,
    char *err, size_t errlen);

/*
 * The keys -o takes, in words for "expected ..." messages: the [mount]
 * keys and log, and with jobs (a dataset path's default config) the [job]
 * keys of the default jobs and label.
 */
void cfg_opt_keys(bool jobs, char *buf, size_t len);

/*
 * "50G", "512M", "4096", "1.5G" (K, M, G, T; powers of 1024; an optional
 * trailing B or iB) to bytes.  -EINVAL on anything else or overflow.
 */
int cfg_parse_size(const char *s, uint64_t *out);

/*
 * The preprocessing workers that m asks for: threads, or for 0 two per
 * CPU the process may use (cfg_res_threads; a cold epoch's workers also
 * wait on the source disk, and bench/run measures two per core best).
 * At least 1.
 */
unsigned cfg_threads(const struct cfg_mount *m);

/*
 * The [mount] values that follow what the process is given (res:
 * util/cgroup.h; config_res.c), as feedfs.conf(5) states them.  L is
 * cgroup_mem_bound(res): the cgroup's memory limit or the RAM, the
 * smaller.
 *
 * cfg_memory_default: half of L less CFG_MEMORY_SLACK, at most
 * CFG_MEMORY_DEFAULT_MAX, at least 16M.  cfg_memory_ceiling: L less
 * CFG_MEMORY_KEEP, at least the default: a `memory` above it is lowered
 * to it.  cfg_res_threads: two per CPU of cgroup_cpus(res).
 */
#define CFG_MEMORY_DEFAULT_MAX (2ull << 30)
#define CFG_MEMORY_SLACK (64ull << 20)
#define CFG_MEMORY_KEEP (128ull << 20)
struct cgroup_res;
uint64_t cfg_memory_default(const struct cgroup_res *res);
uint64_t cfg_memory_ceiling(const struct cgroup_res *res);
unsigned cfg_res_threads(const struct cgroup_res *res);
/*
 * Fit c's [mount] to res at mount: threads = 0 becomes cfg_res_threads,
 * memory not given cfg_memory_default, a memory given above
 * cfg_memory_ceiling that ceiling.  info: a line for the log, what was
 * chosen and from what; warn: the line that says memory was lowered
 * ("FILE:LINE: memory = ...: ..."), or "" when it was not.
 */
void cfg_fit(struct cfg *c, const struct cgroup_res *res, char *info,
    size_t ilen, char *warn, size_t wlen);
/* bytes as a size key's value: "512M", "1.5G", "100T", "4096". */
void cfg_size_text(uint64_t bytes, char *buf, size_t len);

/*
 * What a mount of m should warn of as it starts: cluster without
 * cluster_secret, whose values anyone who reaches the servers can plant.
 * A constant text, or NULL when there is nothing to say.
 */
const char *cfg_cluster_warning(const struct cfg_mount *m);

/* Booleans: yes/no, true/false, on/off, 1/0 (any case).  -EINVAL else. */
int cfg_parse_bool(const char *s, bool *out);

/* The canonical spellings of the enums, for info.json and the README. */
const char *cfg_dtype_name(enum xf_dtype d);
const char *cfg_layout_name(enum xf_layout l);
const char *cfg_order_name(enum cfg_order o);
const char *cfg_on_error_name(enum cfg_on_error e);

/*
 * The output size of epoch of a job with a resolution schedule (FFCV's
 * get_resolution: min_res up to start_ramp, max_res from end_ramp, and
 * between them np.interp, then int(np.round(r / 32)) * 32, rounding half
 * to even), or 0 for a job without one.
 */
uint32_t cfg_job_res(const struct cfg_job *j, uint32_t epoch);
/* The seed of a job's shuffle and of its random ops (seed unless set). */
uint64_t cfg_job_shuffle_seed(const struct cfg_job *j);
uint64_t cfg_job_aug_seed(const struct cfg_job *j);
/*
 * "LO..HI @ epochs E0..E1" into *r; -EINVAL with a message (the key's
 * name not included) for anything else: sizes not 32 <= LO <= HI <=
 * 65504, E0 >= E1, epochs over 9999.
 */
int cfg_parse_res(const char *s, struct cfg_res *r, char *msg, size_t len);

void cfg_free(struct cfg *c); /* NULL is fine */

/*
 * The default cache_dir of this process's user (its effective uid):
 * root's CFG_DEFAULT_CACHE_DIR; another user's $XDG_CACHE_HOME/feedfs
 * (an absolute one), else $HOME/.cache/feedfs, else the passwd entry's
 * home's.  Malloc'd; NULL only when out of memory.
 */
char *cfg_default_cache_dir(void);

#endif
