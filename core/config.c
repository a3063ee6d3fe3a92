/*
 * config.c - the INI config: parse, check, defaults.
 *
 * The grammar is small: "[section]" or "[section NAME]" headers, "key =
 * value" lines, comments from "#" or ";" at the start of a line or from a
 * "#" that follows a blank inside a value.  Every error stops the load and
 * names the file and line.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"

#define DEFAULT_TRAIN_PIPELINE                                                \
	"decode resize(256) cache random_resized_crop(224) flip(0.5) "        \
	"normalize(imagenet)"
#define DEFAULT_VAL_PIPELINE                                                  \
	"decode resize(256) center_crop(224) cache normalize(imagenet)"

#define MAX_THREADS 1024
#define MAX_READAHEAD 1024
#define MAX_BATCH_SIZE (1u << 20)
#define MAX_EPOCHS 10000 /* epoch-NNNN: four digits */
#define MIN_MEMORY (16u << 20)

enum section { SEC_NONE, SEC_MOUNT, SEC_DATASET, SEC_JOB };

/* Parser state: the file, the line, the section being filled. */
struct parser {
	struct cfg *c;
	const char *dir; /* of the config file, for relative paths */
	int line;
	enum section sec;
	int mount_line;
	unsigned seen; /* keys of the current section already set (bits) */
	char *err;
	size_t errlen;
};

static int
perr(struct parser *p, int line, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(p->err, p->errlen, "%s:%d: %s", p->c->path, line, msg);
	return -EINVAL;
}

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
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };

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

/* dir/path unless path is absolute. */
static char *
join_path(const char *dir, const char *path)
{
	char *s;

	if (path[0] == '/' || dir == NULL)
		return strdup(path);
	if (asprintf(&s, "%s/%s", dir, path) < 0)
		return NULL;
	return s;
}

static void
job_defaults(struct cfg_job *j)
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
}

static int
mount_defaults(struct cfg_mount *m)
{
	m->cache_size = 50ull << 30;
	m->threads = 0;
	m->memory = 2ull << 30;
	m->readahead = 4;
	m->gpu_memory = 1ull << 30;
	return (m->cache_dir = strdup(CFG_DEFAULT_CACHE_DIR)) ? 0 : -ENOMEM;
}

static struct cfg *
cfg_new(const char *path)
{
	struct cfg *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	if (!(c->path = strdup(path)) || mount_defaults(&c->mount) != 0) {
		cfg_free(c);
		return NULL;
	}
	return c;
}

void
cfg_free(struct cfg *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->ndatasets; i++) {
		free(c->datasets[i].name);
		free(c->datasets[i].root);
		free(c->datasets[i].manifest);
	}
	for (size_t i = 0; i < c->njobs; i++) {
		free(c->jobs[i].name);
		free(c->jobs[i].dataset);
		free(c->jobs[i].pipeline);
	}
	free(c->datasets);
	free(c->jobs);
	free(c->mount.cache_dir);
	free(c->path);
	free(c);
}

/*
 * One [mount] key.  Returns -ENOENT for a key that is not one, -EINVAL with
 * msg filled for a bad value.
 */
static int
set_mount(struct cfg_mount *m, const char *dir, const char *key,
    const char *val, char *msg, size_t len)
{
	uint64_t v;

	if (strcmp(key, "cache_dir") == 0) {
		char *s;

		if (val[0] == '\0') {
			snprintf(msg, len, "cache_dir: empty path");
			return -EINVAL;
		}
		if (!(s = join_path(dir, val)))
			return -ENOMEM;
		free(m->cache_dir);
		m->cache_dir = s;
	} else if (strcmp(key, "cache_size") == 0) {
		if (cfg_parse_size(val, &v) != 0) {
			snprintf(msg, len, "cache_size: '%s' is not a size "
			    "(like 50G, 512M or 0)", val);
			return -EINVAL;
		}
		if (v != 0 && v < MIN_MEMORY) {
			snprintf(msg, len, "cache_size: %s is too small "
			    "(0 for no cache, else at least 16M)", val);
			return -EINVAL;
		}
		m->cache_size = v;
	} else if (strcmp(key, "threads") == 0) {
		if (parse_uint(val, 0, MAX_THREADS, &v) != 0) {
			snprintf(msg, len, "threads: '%s' is not a count from "
			    "0 to %d (0 = one per core)", val, MAX_THREADS);
			return -EINVAL;
		}
		m->threads = (unsigned)v;
	} else if (strcmp(key, "memory") == 0) {
		if (cfg_parse_size(val, &v) != 0) {
			snprintf(msg, len, "memory: '%s' is not a size (like "
			    "2G or 512M)", val);
			return -EINVAL;
		}
		if (v < MIN_MEMORY) {
			snprintf(msg, len, "memory: %s is too small (at "
			    "least 16M)", val);
			return -EINVAL;
		}
		m->memory = v;
	} else if (strcmp(key, "readahead") == 0) {
		if (parse_uint(val, 0, MAX_READAHEAD, &v) != 0) {
			snprintf(msg, len, "readahead: '%s' is not a count "
			    "from 0 to %d", val, MAX_READAHEAD);
			return -EINVAL;
		}
		m->readahead = (unsigned)v;
	} else if (strcmp(key, "gpu_memory") == 0) {
		if (cfg_parse_size(val, &v) != 0) {
			snprintf(msg, len, "gpu_memory: '%s' is not a size "
			    "(like 1G or 512M)", val);
			return -EINVAL;
		}
		if (v < MIN_MEMORY) {
			snprintf(msg, len, "gpu_memory: %s is too small (at "
			    "least 16M)", val);
			return -EINVAL;
		}
		m->gpu_memory = v;
	} else
		return -ENOENT;
	return 0;
}

int
cfg_set_mount(struct cfg *c, const char *key, const char *value, char *err,
    size_t errlen)
{
	char msg[512];
	int r;

	/* Relative paths in -o are taken from the working directory. */
	if ((r = set_mount(&c->mount, NULL, key, value, msg, sizeof(msg))) ==
	    -EINVAL)
		snprintf(err, errlen, "-o %s=%s: %s", key, value, msg);
	else if (r == -ENOENT)
		snprintf(err, errlen, "-o %s: not a [mount] key", key);
	else if (r == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	return r;
}

/* Names become directory names in the mount: keep them plain. */
static bool
valid_name(const char *s)
{
	if (s[0] == '\0' || s[0] == '.' || strlen(s) > 128 ||
	    strcmp(s, "README") == 0)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' &&
		    *s != '.')
			return false;
	return true;
}

static int
begin_section(struct parser *p, char *hdr)
{
	struct cfg *c = p->c;
	char *name, *kind = hdr;

	while (isspace((unsigned char)*kind))
		kind++;
	name = kind + strcspn(kind, " \t");
	if (*name) {
		*name++ = '\0';
		while (isspace((unsigned char)*name))
			name++;
		name[strcspn(name, " \t")] = '\0';
	}
	p->seen = 0;
	if (strcmp(kind, "mount") == 0) {
		if (*name)
			return perr(p, p->line, "[mount] takes no name");
		if (p->mount_line)
			return perr(p, p->line, "a second [mount] section "
			    "(the first is at line %d)", p->mount_line);
		p->mount_line = p->line;
		p->sec = SEC_MOUNT;
		return 0;
	}
	if (strcmp(kind, "dataset") != 0 && strcmp(kind, "job") != 0)
		return perr(p, p->line, "unknown section [%s] (expected "
		    "[mount], [dataset NAME] or [job NAME])", kind);
	if (!*name)
		return perr(p, p->line, "[%s] needs a name: [%s NAME]", kind,
		    kind);
	if (!valid_name(name))
		return perr(p, p->line, "'%s' is not a valid name (letters, "
		    "digits, '_', '-', '.', not starting with '.')", name);
	if (strcmp(kind, "dataset") == 0) {
		struct cfg_dataset *d;

		for (size_t i = 0; i < c->ndatasets; i++)
			if (strcmp(c->datasets[i].name, name) == 0)
				return perr(p, p->line, "dataset '%s' is "
				    "already defined at line %d", name,
				    c->datasets[i].line);
		d = realloc(c->datasets, (c->ndatasets + 1) * sizeof(*d));
		if (!d)
			return -ENOMEM;
		c->datasets = d;
		d = &c->datasets[c->ndatasets++];
		memset(d, 0, sizeof(*d));
		d->line = p->line;
		if (!(d->name = strdup(name)))
			return -ENOMEM;
		p->sec = SEC_DATASET;
	} else {
		struct cfg_job *j;

		for (size_t i = 0; i < c->njobs; i++)
			if (strcmp(c->jobs[i].name, name) == 0)
				return perr(p, p->line, "job '%s' is already "
				    "defined at line %d", name,
				    c->jobs[i].line);
		j = realloc(c->jobs, (c->njobs + 1) * sizeof(*j));
		if (!j)
			return -ENOMEM;
		c->jobs = j;
		j = &c->jobs[c->njobs++];
		memset(j, 0, sizeof(*j));
		job_defaults(j);
		j->line = j->pipeline_line = j->dataset_line = p->line;
		if (!(j->name = strdup(name)))
			return -ENOMEM;
		p->sec = SEC_JOB;
	}
	return 0;
}

/* An enum value from its spellings; -1 if none. */
static int
pick(const char *val, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcasecmp(val, names[i]) == 0)
			return (int)i;
	return -1;
}

static int
set_dataset(struct parser *p, const char *key, const char *val)
{
	struct cfg_dataset *d = &p->c->datasets[p->c->ndatasets - 1];
	char **slot;

	if (strcmp(key, "root") == 0)
		slot = &d->root;
	else if (strcmp(key, "manifest") == 0)
		slot = &d->manifest;
	else
		return perr(p, p->line, "unknown key '%s' in [dataset %s] "
		    "(expected root or manifest)", key, d->name);
	if (val[0] == '\0')
		return perr(p, p->line, "%s: empty path", key);
	free(*slot);
	return (*slot = join_path(p->dir, val)) ? 0 : -ENOMEM;
}

static int
set_job(struct parser *p, const char *key, const char *val)
{
	static const char *const dtypes[] = { "uint8", "float16", "float32" };
	static const char *const layouts[] = { "HWC", "CHW" };
	static const char *const orders[] = { "strict", "relaxed" };
	static const char *const onerr[] = { "fail", "substitute" };
	struct cfg_job *j = &p->c->jobs[p->c->njobs - 1];
	uint64_t v;
	int e;

	if (strcmp(key, "dataset") == 0) {
		free(j->dataset);
		j->dataset_line = p->line;
		return (j->dataset = strdup(val)) ? 0 : -ENOMEM;
	} else if (strcmp(key, "pipeline") == 0) {
		free(j->pipeline);
		j->pipeline_line = p->line;
		return (j->pipeline = strdup(val)) ? 0 : -ENOMEM;
	} else if (strcmp(key, "batch_size") == 0) {
		if (parse_uint(val, 1, MAX_BATCH_SIZE, &v) != 0)
			return perr(p, p->line, "batch_size: '%s' is not a "
			    "count from 1 to %u", val, MAX_BATCH_SIZE);
		j->batch_size = (uint32_t)v;
	} else if (strcmp(key, "epochs") == 0) {
		if (parse_uint(val, 1, MAX_EPOCHS, &v) != 0)
			return perr(p, p->line, "epochs: '%s' is not a count "
			    "from 1 to %d", val, MAX_EPOCHS);
		j->epochs = (uint32_t)v;
	} else if (strcmp(key, "seed") == 0) {
		if (parse_uint(val, 0, UINT64_MAX, &v) != 0)
			return perr(p, p->line, "seed: '%s' is not an unsigned "
			    "64-bit integer", val);
		j->seed = v;
	} else if (strcmp(key, "shuffle") == 0 ||
	    strcmp(key, "drop_last") == 0 || strcmp(key, "gpu") == 0) {
		bool b;

		if (cfg_parse_bool(val, &b) != 0)
			return perr(p, p->line, "%s: '%s' is not yes or no",
			    key, val);
		if (key[0] == 's')
			j->shuffle = b;
		else if (key[0] == 'd')
			j->drop_last = b;
		else
			j->gpu = b;
	} else if (strcmp(key, "order") == 0) {
		if ((e = pick(val, orders, 2)) < 0)
			return perr(p, p->line, "order: '%s' is not strict or "
			    "relaxed", val);
		j->order = (enum cfg_order)e;
	} else if (strcmp(key, "dtype") == 0) {
		if ((e = pick(val, dtypes, 3)) < 0)
			return perr(p, p->line, "dtype: '%s' is not uint8, "
			    "float16 or float32", val);
		j->dtype = (enum xf_dtype)e;
	} else if (strcmp(key, "layout") == 0) {
		if ((e = pick(val, layouts, 2)) < 0)
			return perr(p, p->line, "layout: '%s' is not HWC or "
			    "CHW", val);
		j->layout = (enum xf_layout)e;
	} else if (strcmp(key, "on_error") == 0) {
		if ((e = pick(val, onerr, 2)) < 0)
			return perr(p, p->line, "on_error: '%s' is not fail or "
			    "substitute", val);
		j->on_error = (enum cfg_on_error)e;
	} else if (strcmp(key, "max_pixels") == 0) {
		if (parse_uint(val, 1, UINT64_MAX, &v) != 0)
			return perr(p, p->line, "max_pixels: '%s' is not a "
			    "count of pixels from 1 up", val);
		j->max_pixels = v;
	} else
		return perr(p, p->line, "unknown key '%s' in [job %s]", key,
		    j->name);
	return 0;
}

/* Bit of a key within its section, to catch keys given twice. */
static int
key_bit(enum section sec, const char *key)
{
	static const char *const mount[] = { "cache_dir", "cache_size",
		"threads", "memory", "readahead", "gpu_memory" };
	static const char *const dataset[] = { "root", "manifest" };
	static const char *const job[] = { "dataset", "batch_size", "epochs",
		"seed", "shuffle", "drop_last", "order", "pipeline", "dtype",
		"layout", "on_error", "gpu", "max_pixels" };
	const char *const *k = sec == SEC_MOUNT ? mount
	    : sec == SEC_DATASET		    ? dataset
						    : job;
	size_t n = sec == SEC_MOUNT ? 6 : sec == SEC_DATASET ? 2 : 13;

	for (size_t i = 0; i < n; i++)
		if (strcmp(k[i], key) == 0)
			return (int)i;
	return -1;
}

static int
parse_line(struct parser *p, char *s)
{
	char *key, *val, *eq, *e;
	int bit, r;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	if (*s == '\0' || *s == '#' || *s == ';')
		return 0;
	if (*s == '[') {
		char *close = strchr(s, ']');

		if (!close)
			return perr(p, p->line, "section header without ']'");
		for (e = close + 1; *e && isspace((unsigned char)*e); e++)
			;
		if (*e && *e != '#' && *e != ';')
			return perr(p, p->line, "text after the section "
			    "header");
		*close = '\0';
		return begin_section(p, s + 1);
	}
	if ((eq = strchr(s, '=')) == NULL)
		return perr(p, p->line, "expected 'key = value' or "
		    "'[section]'");
	*eq = '\0';
	key = s;
	for (e = eq; e > key && isspace((unsigned char)e[-1]);)
		*--e = '\0';
	val = eq + 1;
	while (isspace((unsigned char)*val))
		val++;
	/* An inline comment starts at a '#' after a blank. */
	for (e = val; *e; e++)
		if (*e == '#' && e > val && isspace((unsigned char)e[-1])) {
			*e = '\0';
			break;
		}
	for (e = val + strlen(val); e > val && isspace((unsigned char)e[-1]);)
		*--e = '\0';
	if (*key == '\0')
		return perr(p, p->line, "a value without a key");
	if (p->sec == SEC_NONE)
		return perr(p, p->line, "key '%s' outside of a section", key);
	if ((bit = key_bit(p->sec, key)) >= 0) {
		if (p->seen & (1u << bit))
			return perr(p, p->line, "key '%s' given twice in this "
			    "section", key);
		p->seen |= 1u << bit;
	}
	if (*val == '\0' && p->sec != SEC_MOUNT)
		return perr(p, p->line, "%s: no value", key);
	switch (p->sec) {
	case SEC_MOUNT: {
		char msg[512];

		r = set_mount(&p->c->mount, p->dir, key, val, msg,
		    sizeof(msg));
		if (r == -ENOENT)
			return perr(p, p->line, "unknown key '%s' in [mount] "
			    "(expected cache_dir, cache_size, threads, memory, "
			    "readahead or gpu_memory)", key);
		if (r == -EINVAL)
			return perr(p, p->line, "%s", msg);
		return r;
	}
	case SEC_DATASET:
		return set_dataset(p, key, val);
	default:
		return set_job(p, key, val);
	}
}

/* Whole-file checks, after every line has been read. */
static int
check_cfg(struct parser *p)
{
	struct cfg *c = p->c;
	char msg[512];

	if (c->ndatasets == 0)
		return perr(p, p->line, "no [dataset NAME] section");
	if (c->njobs == 0)
		return perr(p, p->line, "no [job NAME] section");
	for (size_t i = 0; i < c->ndatasets; i++) {
		struct cfg_dataset *d = &c->datasets[i];

		if (!d->root)
			return perr(p, d->line, "[dataset %s] has no root",
			    d->name);
	}
	for (size_t i = 0; i < c->njobs; i++) {
		struct cfg_job *j = &c->jobs[i];
		struct xf_pipeline *pl;
		size_t k;

		if (!j->dataset) {
			if (c->ndatasets > 1)
				return perr(p, j->line, "[job %s] needs a "
				    "dataset key: this file has %zu datasets",
				    j->name, c->ndatasets);
			if (!(j->dataset = strdup(c->datasets[0].name)))
				return -ENOMEM;
		}
		for (k = 0; k < c->ndatasets; k++)
			if (strcmp(c->datasets[k].name, j->dataset) == 0)
				break;
		if (k == c->ndatasets)
			return perr(p, j->dataset_line, "unknown dataset '%s'",
			    j->dataset);
		if (!j->pipeline && !(j->pipeline = strdup(
					  DEFAULT_TRAIN_PIPELINE)))
			return -ENOMEM;
		if (xf_pipeline_parse(j->pipeline, &pl, msg, sizeof(msg)) != 0)
			return perr(p, j->pipeline_line, "pipeline: %s", msg);
		if (xf_check_output(pl, j->dtype, msg, sizeof(msg)) != 0) {
			xf_pipeline_free(pl);
			return perr(p, j->pipeline_line, "%s", msg);
		}
		xf_pipeline_free(pl);
	}
	return 0;
}

int
cfg_load(const char *path, struct cfg **out, char *err, size_t errlen)
{
	struct parser p = { .err = err, .errlen = errlen };
	char *line = NULL, *dir = NULL, *slash;
	size_t cap = 0;
	ssize_t n;
	FILE *fp;
	int r = 0;

	if ((fp = fopen(path, "r")) == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	if (!(p.c = cfg_new(path)) || !(dir = strdup(path))) {
		r = -ENOMEM;
		goto out;
	}
	if ((slash = strrchr(dir, '/')) != NULL)
		*(slash == dir ? slash + 1 : slash) = '\0';
	else
		strcpy(dir, ".");
	p.dir = dir;
	while ((n = getline(&line, &cap, fp)) >= 0) {
		p.line++;
		if (strlen(line) != (size_t)n) {
			r = perr(&p, p.line, "a NUL byte in the line");
			goto out;
		}
		if ((r = parse_line(&p, line)) != 0)
			goto out;
	}
	if (ferror(fp)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		r = -EIO;
		goto out;
	}
	if (p.line == 0)
		p.line = 1;
	r = check_cfg(&p);
out:
	if (r == -ENOMEM)
		snprintf(err, errlen, "%s: out of memory", path);
	if (r == 0)
		*out = p.c; /* transferred */
	else
		cfg_free(p.c);
	free(line);
	free(dir);
	fclose(fp);
	return r;
}

int
cfg_default(const char *dir, struct cfg **out, char *err, size_t errlen)
{
	struct cfg *c = cfg_new(dir);
	struct cfg_job *j;

	if (!c || !(c->datasets = calloc(1, sizeof(*c->datasets))) ||
	    !(c->jobs = calloc(2, sizeof(*c->jobs))))
		goto nomem;
	c->ndatasets = 1;
	if (!(c->datasets[0].name = strdup("default")) ||
	    !(c->datasets[0].root = strdup(dir)))
		goto nomem;
	for (size_t i = 0; i < 2; i++) {
		j = &c->jobs[i];
		job_defaults(j);
		c->njobs++;
		if (!(j->name = strdup(i == 0 ? "train" : "val")) ||
		    !(j->dataset = strdup("default")) ||
		    !(j->pipeline = strdup(i == 0 ? DEFAULT_TRAIN_PIPELINE
						  : DEFAULT_VAL_PIPELINE)))
			goto nomem;
	}
	c->jobs[1].shuffle = false;
	c->jobs[1].epochs = 1;
	*out = c;
	return 0;
nomem:
	cfg_free(c);
	snprintf(err, errlen, "out of memory");
	return -ENOMEM;
}
