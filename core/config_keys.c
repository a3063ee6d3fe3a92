/*
 * config_keys.c - the model (core/): the table of config keys and the
 * parsing of their values (see config.h).  Every key of every section is one row of keys[]: the
 * field it sets, the kind of value, its bounds and the words of the message
 * for a bad one.  The parser (config.c) and -o (cfg_set_mount) go through
 * it, so a key added here is parsed, checked for duplicates, listed in
 * "unknown key" messages and accepted by -o (a [mount] key) at once.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cache/cluster.h"
#include "cache/format.h"
#include "core/config_int.h"

#define MAX_THREADS 1024
#define MAX_READAHEAD 1024
#define MAX_BATCH_SIZE (1u << 20)
#define MAX_EPOCHS 10000 /* epoch-NNNN: four digits */
#define MIN_MEMORY (16u << 20)
#define MAX_IDLE_TRIM 86400 /* a day */

static const char *const dtype_names[] = {"uint8", "float16", "float32", NULL};
static const char *const layout_names[] = {"HWC", "CHW", NULL};
static const char *const order_names[] = {"strict", "relaxed", NULL};
static const char *const on_error_names[] = {"fail", "substitute", NULL};
static const char *const path_style_names[] = {"auto", "no", "yes", NULL};
/* A K_COUNT with names: that word sets CFG_COUNT_AUTO. */
static const char *const auto_word[] = {"auto", NULL};

#define M(f) offsetof(struct cfg_mount, f)
#define D(f) offsetof(struct cfg_dataset, f)
#define J(f) offsetof(struct cfg_job, f)
static const struct key keys[] = {
    {SEC_MOUNT, "cache_dir", K_PATH, M(cache_dir), -1, 0, 0, NULL,
	"a directory"},
    {SEC_MOUNT, "cache_size", K_SIZE, M(cache_size), -1, MIN_MEMORY,
	K_SIZE_ZERO | K_SIZE_AUTO, NULL,
	"auto, or like 500G or 512M; 0 for no cache, else at least 16M"},
    {SEC_MOUNT, "cache_stale", K_COUNT, M(cache_stale), -1, 0, UINT64_MAX,
	NULL, "a count of seconds (0: any entry may make room)"},
    {SEC_MOUNT, "threads", K_COUNT, M(threads), -1, 0, MAX_THREADS, NULL,
	"a count from 0 to 1024 (0 = two per CPU the process may use)"},
    {SEC_MOUNT, "memory", K_SIZE, M(memory), M(memory_line), MIN_MEMORY, 0,
	NULL,
	"like 2G or 512M; at least 16M"},
    {SEC_MOUNT, "readahead", K_COUNT, M(readahead), -1, 0, MAX_READAHEAD, NULL,
	"a count from 0 to 1024"},
    {SEC_MOUNT, "gpu_memory", K_SIZE, M(gpu_memory), -1, MIN_MEMORY, 0, NULL,
	"like 1G or 512M; at least 16M"},
    {SEC_MOUNT, "idle_trim", K_COUNT, M(idle_trim), -1, 0, MAX_IDLE_TRIM, NULL,
	"a count of seconds from 0 to 86400 (0: never)"},
    {SEC_MOUNT, "cluster", K_SERVERS, M(cluster), -1, 0, 0, NULL,
	"HOST:PORT[,HOST:PORT...]"},
    {SEC_MOUNT, "cluster_auth", K_PATH, M(cluster_auth), -1, 0, 0, NULL,
	"a file"},
    {SEC_MOUNT, "cluster_secret", K_PATH, M(cluster_secret), -1, 0, 0, NULL,
	"a file"},
    {SEC_MOUNT, "cluster_batches", K_BOOL, M(cluster_batches), -1, 0, 0, NULL,
	"yes or no"},
    {SEC_MOUNT, "cluster_batch_wait", K_COUNT, M(cluster_batch_wait), -1, 0,
	3600, auto_word, "auto or a count of seconds from 0 to 3600"},
    {SEC_DATASET, "root", K_PATH, D(root), -1, 0, 0, NULL, "a directory"},
    {SEC_DATASET, "manifest", K_PATH, D(manifest), -1, 0, 0, NULL, "a file"},
    {SEC_DATASET, "shards", K_PATH, D(shards), -1, 0, 0, NULL,
	"a glob of tar files or a file listing them"},
    {SEC_DATASET, "label", K_STR, D(label), -1, 0, 0, NULL,
	"cls, json:KEY or none"},
    {SEC_DATASET, "text", K_STR, D(text), D(text_line), 0, 0, NULL,
	"txt, json:KEY or none"},
    {SEC_DATASET, "s3_endpoint", K_STR, D(s3_endpoint), -1, 0, 0, NULL,
	"a URL like https://minio.example:9000"},
    {SEC_DATASET, "s3_region", K_STR, D(s3_region), -1, 0, 0, NULL,
	"a region like eu-west-1"},
    {SEC_DATASET, "s3_path_style", K_ENUM, D(s3_path_style), -1, 0, 0,
	path_style_names, NULL},
    {SEC_DATASET, "ca_file", K_PATH, D(ca_file), -1, 0, 0, NULL,
	"a file of PEM certificates"},
    {SEC_DATASET, "remote_timeout", K_COUNT, D(remote_timeout), -1, 1, 3600,
	NULL, "a count of seconds from 1 to 3600"},
    {SEC_DATASET, "remote_retries", K_COUNT, D(remote_retries), -1, 0, 20,
	NULL, "a count from 0 to 20"},
    {SEC_DATASET, "remote_fill", K_BOOL, D(remote_fill), -1, 0, 0, NULL,
	"yes or no"},
    {SEC_DATASET, "classes", K_PATH, D(classes), D(classes_line), 0, 0, NULL,
	"a file of class names, one a line"},
    {SEC_JOB, "dataset", K_STR, J(dataset), J(dataset_line), 0, 0, NULL,
	"a dataset name"},
    {SEC_JOB, "mixture", K_STR, J(mixture), J(mixture_line), 0, 0, NULL,
	"weighted datasets, like web:0.7 curated:0.3"},
    {SEC_JOB, "mixture_schedule", K_STR, J(mixture_schedule), J(schedule_line),
	0, 0, NULL, "steps EPOCH:NAME:W,NAME:W, like 10:web:0.5,curated:0.5"},
    {SEC_JOB, "epoch_samples", K_COUNT, J(epoch_samples), J(epoch_samples_line),
	1, UINT32_MAX, NULL, "a count from 1 to 4294967295"},
    {SEC_JOB, "batch_size", K_COUNT, J(batch_size), J(batch_size_line), 1,
	MAX_BATCH_SIZE, NULL, "a count from 1 to 1048576"},
    {SEC_JOB, "epochs", K_COUNT, J(epochs), -1, 1, MAX_EPOCHS, NULL,
	"a count from 1 to 10000"},
    {SEC_JOB, "seed", K_COUNT, J(seed), -1, 0, UINT64_MAX, NULL,
	"an unsigned 64-bit integer"},
    {SEC_JOB, "shuffle", K_BOOL, J(shuffle), -1, 0, 0, NULL, "yes or no"},
    {SEC_JOB, "drop_last", K_BOOL, J(drop_last), -1, 0, 0, NULL, "yes or no"},
    {SEC_JOB, "order", K_ENUM, J(order), -1, 0, 0, order_names, NULL},
    {SEC_JOB, "pipeline", K_STR, J(pipeline), J(pipeline_line), 0, 0, NULL,
	"a pipeline"},
    {SEC_JOB, "dtype", K_ENUM, J(dtype), -1, 0, 0, dtype_names, NULL},
    {SEC_JOB, "layout", K_ENUM, J(layout), -1, 0, 0, layout_names, NULL},
    {SEC_JOB, "on_error", K_ENUM, J(on_error), -1, 0, 0, on_error_names, NULL},
    {SEC_JOB, "gpu", K_BOOL, J(gpu), -1, 0, 0, NULL, "yes or no"},
    {SEC_JOB, "max_pixels", K_COUNT, J(max_pixels), -1, 1, UINT64_MAX, NULL,
	"a count of pixels from 1 up"},
    {SEC_JOB, "cache_format", K_CACHEFMT, J(cache_format), -1, 0, 0, NULL,
	"raw, lossless or jpeg(Q) with Q from 1 to 100"},
    {SEC_JOB, "resolution", K_RES, J(res), J(res_line), 0, 0, NULL,
	"LO..HI @ epochs E0..E1, like 160..192 @ epochs 0..13"},
    {SEC_JOB, "shuffle_seed", K_COUNT, J(shuffle_seed), J(shuffle_seed_line), 0,
	UINT64_MAX, NULL, "an unsigned 64-bit integer"},
    {SEC_JOB, "aug_seed", K_COUNT, J(aug_seed), J(aug_seed_line), 0, UINT64_MAX,
	NULL, "an unsigned 64-bit integer"},
    {SEC_JOB, "views", K_COUNT, J(views), J(views_line), 1, CFG_MAX_VIEWS, NULL,
	"a count from 1 to 64"},
};
#undef M
#undef D
#undef J
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

int
cfg_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "KMGT";
	char *end;
	double v;
	uint64_t mul = 1;
	const char *u;

	while (isspace((unsigned char)*s))
		s++;
	if (!isdigit((unsigned char)*s) && *s != '.')
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || v < 0)
		return -EINVAL;
	if (*end && (u = strchr(units, toupper((unsigned char)*end))) != NULL) {
		mul = 1ull << (10 * (u - units + 1));
		end++;
		if (*end == 'i' || *end == 'I')
			end++;
		if (*end == 'B' || *end == 'b')
			end++;
	} else if (*end == 'B' || *end == 'b')
		end++;
	while (isspace((unsigned char)*end))
		end++;
	if (*end != '\0')
		return -EINVAL;
	v *= (double)mul;
	if (v >= 18446744073709551616.0)
		return -EINVAL;
	*out = (uint64_t)v;
	return 0;
}

int
cfg_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"yes", "true", "on", "1"};
	static const char *const no[] = {"no", "false", "off", "0"};

	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

/* An unsigned decimal in [lo, hi]. */
static int
parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

char *
cfg_join_path(const char *dir, const char *path)
{
	char cwd[PATH_MAX], *s;

	if (path[0] == '/')
		return strdup(path);
	if (dir == NULL) {
		if (getcwd(cwd, sizeof(cwd)) == NULL)
			return NULL;
		dir = cwd;
	}
	if (asprintf(&s, "%s/%s", dir, path) < 0)
		return NULL;
	return s;
}

const struct key *
cfg_find_key(int sec, const char *name, size_t len)
{
	for (size_t i = 0; i < NKEYS; i++)
		if ((int)keys[i].sec == sec && strlen(keys[i].name) == len &&
		    strncmp(keys[i].name, name, len) == 0)
			return &keys[i];
	return NULL;
}

const struct key *
cfg_key_at(int sec, size_t k)
{
	for (size_t i = 0; i < NKEYS; i++)
		if ((int)keys[i].sec == sec && k-- == 0)
			return &keys[i];
	return NULL;
}

unsigned
cfg_key_index(const struct key *k)
{
	return (unsigned)(k - keys);
}

bool
cfg_is_mount_key(const char *key, size_t len)
{
	return cfg_find_key(SEC_MOUNT, key, len) != NULL;
}

/* The [job] keys -o takes: the default jobs' own (not their dataset or
 * pipeline: a pipeline has commas, which -o splits at). */
static const char *const job_opts[] = {"batch_size", "epochs", "seed",
    "shuffle", "drop_last", "order", "dtype", "layout", "on_error", "gpu",
    "max_pixels", "cache_format", "shuffle_seed", "aug_seed", NULL};

static const char *
job_opt_key(const char *key, size_t len)
{
	const char *dot = memchr(key, '.', len);

	if (dot != NULL) {
		len -= (size_t)(dot + 1 - key);
		key = dot + 1;
	}
	for (size_t i = 0; job_opts[i]; i++)
		if (strlen(job_opts[i]) == len &&
		    strncmp(job_opts[i], key, len) == 0)
			return job_opts[i];
	return NULL;
}

bool
cfg_is_job_opt(const char *key, size_t len)
{
	return job_opt_key(key, len) != NULL;
}


/* "a, b or c" of the keys of sec (or of the names of an enum). */
static void
list_words(const char *const *words, size_t n, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s",
		    i == 0	 ? ""
		    : i + 1 == n ? " or "
				 : ", ",
		    words[i]);
}

void
cfg_list_words(const char *const *words, size_t n, char *buf, size_t len)
{
	list_words(words, n, buf, len);
}

const char *const *
cfg_job_opt_names(void)
{
	return job_opts;
}

void
cfg_list_keys(int sec, char *buf, size_t len)
{
	const char *words[NKEYS];
	size_t n = 0;

	for (size_t i = 0; i < NKEYS; i++)
		if ((int)keys[i].sec == sec)
			words[n++] = keys[i].name;
	list_words(words, n, buf, len);
}

int
cfg_set_key(const struct key *k, void *base, const char *dir, const char *val,
    char *msg, size_t len)
{
	void *field = (char *)base + k->off;
	uint64_t v;
	bool b;
	int e;

	switch (k->type) {
	case K_PATH:
	case K_STR: {
		char *s;

		if (val[0] == '\0') {
			snprintf(msg, len, "%s: empty %s", k->name,
			    k->type == K_PATH ? "path" : "value");
			return -EINVAL;
		}
		/* shards = a URL: kept as it is, not a path. */
		s = k->type == K_PATH && !(k->sec == SEC_DATASET &&
					     strcmp(k->name, "shards") == 0 &&
					     strstr(val, "://") != NULL)
			? cfg_join_path(dir, val)
			: strdup(val);
		if (s == NULL)
			return -ENOMEM;
		free(*(char **)field);
		*(char **)field = s;
		return 0;
	}
	case K_SERVERS: {
		char why[256];
		char *s = NULL;

		/* Empty: no cluster (-o cluster= turns the config's off). */
		if (val[0] != '\0') {
			if (cluster_check_servers(val, why, sizeof(why)) != 0) {
				snprintf(msg, len, "%s: %s (expected %s)",
				    k->name, why, k->what);
				return -EINVAL;
			}
			if ((s = strdup(val)) == NULL)
				return -ENOMEM;
		}
		free(*(char **)field);
		*(char **)field = s;
		return 0;
	}
	case K_SIZE:
		if ((k->hi & K_SIZE_AUTO) && strcmp(val, "auto") == 0) {
			*(uint64_t *)field = CFG_SIZE_AUTO;
			return 0;
		}
		if (cfg_parse_size(val, &v) != 0 || v == CFG_SIZE_AUTO) {
			snprintf(msg, len, "%s: '%s' is not a size (%s)",
			    k->name, val, k->what);
			return -EINVAL;
		}
		if (v < k->lo && !(v == 0 && (k->hi & K_SIZE_ZERO))) {
			snprintf(msg, len, "%s: %s is too small (%s)", k->name,
			    val, k->what);
			return -EINVAL;
		}
		*(uint64_t *)field = v;
		return 0;
	case K_COUNT:
		if (k->names != NULL && strcmp(val, k->names[0]) == 0) {
			*(uint64_t *)field = CFG_COUNT_AUTO;
			return 0;
		}
		if (parse_uint(val, k->lo, k->hi, &v) != 0) {
			snprintf(msg, len, "%s: '%s' is not %s", k->name, val,
			    k->what);
			return -EINVAL;
		}
		*(uint64_t *)field = v;
		return 0;
	case K_BOOL:
		if (cfg_parse_bool(val, &b) != 0) {
			snprintf(msg, len, "%s: '%s' is not %s", k->name, val,
			    k->what);
			return -EINVAL;
		}
		*(bool *)field = b;
		return 0;
	case K_CACHEFMT:
		if (cache_fmt_parse(val, (uint32_t *)field) != 0) {
			snprintf(msg, len, "%s: '%s' is not %s", k->name, val,
			    k->what);
			return -EINVAL;
		}
		return 0;
	case K_RES: {
		char why[256];

		if (cfg_parse_res(
			val, (struct cfg_res *)field, why, sizeof(why)) != 0) {
			snprintf(msg, len, "%s: '%s': %s (expected %s)",
			    k->name, val, why, k->what);
			return -EINVAL;
		}
		return 0;
	}
	case K_ENUM:
		for (e = 0; k->names[e]; e++)
			if (strcasecmp(val, k->names[e]) == 0) {
				*(int *)field = e;
				return 0;
			}
		{
			char words[256];

			list_words(k->names, (size_t)e, words, sizeof(words));
			snprintf(msg, len, "%s: '%s' is not %s", k->name, val,
			    words);
		}
		return -EINVAL;
	}
	return -EINVAL;
}

void
cfg_job_defaults(struct cfg_job *j)
{
	j->batch_size = 256;
	j->epochs = 90;
	j->seed = 42;
	j->shuffle = true;
	j->drop_last = false;
	j->order = CFG_ORDER_STRICT;
	j->dtype = XF_FLOAT32;
	j->layout = XF_CHW;
	j->on_error = CFG_ON_ERROR_FAIL;
	j->gpu = false;
	j->max_pixels = XF_DEFAULT_MAX_PIXELS;
	j->cache_format = CACHE_FMT_ENC(CACHE_FMT_RAW, 0);
	j->views = 1;
}

char *
cfg_default_cache_dir(void)
{
	const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	const struct passwd *pw;
	char *out;

	if (geteuid() == 0)
		return strdup(CFG_DEFAULT_CACHE_DIR);
	/* The XDG Base Directory rule: a relative value is ignored. */
	if (x != NULL && x[0] == '/')
		return asprintf(&out, "%s/feedfs", x) < 0 ? NULL : out;
	if ((home == NULL || home[0] != '/') &&
	    (pw = getpwuid(geteuid())) != NULL)
		home = pw->pw_dir;
	if (home == NULL || home[0] != '/')
		return strdup(CFG_DEFAULT_CACHE_DIR); /* refused, and said */
	return asprintf(&out, "%s/.cache/feedfs", strcmp(home, "/") ? home : "") <
		       0
		   ? NULL
		   : out;
}

int
cfg_mount_defaults(struct cfg_mount *m)
{
	m->cache_size = CFG_SIZE_AUTO; /* half the disk's free space */
	m->cache_stale = 86400;
	m->threads = 0;
	m->memory = CFG_MEMORY_DEFAULT_MAX; /* until cfg_fit */
	m->readahead = 4;
	m->gpu_memory = 1ull << 30;
	m->cluster_batches = true;
	m->cluster_batch_wait = CFG_COUNT_AUTO;
	m->idle_trim = 60;
	return (m->cache_dir = cfg_default_cache_dir()) ? 0 : -ENOMEM;
}

int
cfg_set_mount(
    struct cfg *c, const char *key, const char *value, char *err, size_t errlen)
{
	const struct key *k = cfg_find_key(SEC_MOUNT, key, strlen(key));
	char msg[512];
	int r;

	if (k == NULL) {
		snprintf(err, errlen, "-o %s: not a [mount] key", key);
		return -ENOENT;
	}
	/* Relative paths in -o are taken from the working directory. */
	if ((r = cfg_set_key(k, &c->mount, NULL, value, msg, sizeof(msg))) ==
	    -EINVAL)
		snprintf(err, errlen, "-o %s=%s: %s", key, value, msg);
	else if (r == 0 && k->line_off >= 0) /* given, on no line: -o */
		*(int *)((char *)&c->mount + k->line_off) = -1;
	else if (r == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	return r;
}

int
cfg_set_job(
    struct cfg *c, const char *key, const char *value, char *err, size_t errlen)
{
	const char *name = job_opt_key(key, strlen(key)),
		   *dot = strchr(key, '.');
	const struct key *k;
	char msg[512];
	size_t set = 0;
	int r;

	if (name == NULL ||
	    (k = cfg_find_key(SEC_JOB, name, strlen(name))) == NULL) {
		snprintf(err, errlen, "-o %s: not a [job] key -o takes", key);
		return -ENOENT;
	}
	for (size_t i = 0; i < c->njobs; i++) {
		struct cfg_job *j = &c->jobs[i];

		if (dot != NULL &&
		    (strlen(j->name) != (size_t)(dot - key) ||
			strncmp(j->name, key, (size_t)(dot - key)) != 0))
			continue;
		if ((r = cfg_set_key(k, j, NULL, value, msg, sizeof(msg))) !=
			0 ||
		    (r = xf_check_output(j->pl, j->dtype, msg, sizeof(msg))) !=
			0) {
			if (r == -ENOMEM)
				snprintf(err, errlen, "out of memory");
			else
				snprintf(err, errlen, "-o %s=%s: job %s: %s",
				    key, value, j->name, msg);
			return r;
		}
		j->pl->max_pixels = j->max_pixels;
		if (k->line_off >= 0) /* given, on no line: -o */
			*(int *)((char *)j + k->line_off) = -1;
		set++;
	}
	if (set == 0) {
		snprintf(err, errlen, "-o %s=%s: no job %.*s (the jobs are",
		    key, value, (int)(dot - key), key);
		for (size_t i = 0; i < c->njobs; i++)
			snprintf(err + strlen(err), errlen - strlen(err), " %s",
			    c->jobs[i].name);
		snprintf(err + strlen(err), errlen - strlen(err), ")");
		return -ENOENT;
	}
	return 0;
}

const char *
cfg_dtype_name(enum xf_dtype d)
{
	return dtype_names[d];
}

const char *
cfg_layout_name(enum xf_layout l)
{
	return layout_names[l];
}

const char *
cfg_order_name(enum cfg_order o)
{
	return order_names[o];
}

const char *
cfg_on_error_name(enum cfg_on_error e)
{
	return on_error_names[e];
}
