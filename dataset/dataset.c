/*
 * dataset.c - layer: dataset index, the top (calls its backends ds_scan.c
 * and ds_tar.c, and ds_common.c under them all; none calls back up).  The
 * index of a dataset's samples: an ImageFolder scan (ds_scan.c), a
 * manifest, or tar shards (ds_tar.c), sorted by relative path, and the
 * config's view of them (ds_open_cfg, classes = FILE); ds_safeopen.c
 * opens the samples.
 *
 * Manifest entries are taken as they are, except that a path must not be
 * absolute or have a ".." component: whether the files exist is found out
 * when they are read.
 */
#include <sys/stat.h>

#include <ctype.h>
#include <limits.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "core/config.h"
#include "core/ds_int.h"
#include "core/remote.h"

#define MAX_LABEL ((1 << 24) - 1) /* bounds the class list a manifest makes */

struct mline {
	char *path;
	int64_t label;
	size_t line;
};

static int
by_mpath(const void *a, const void *b)
{
	const struct mline *x = a, *y = b;

	return strcmp(x->path, y->path);
}

/* Parse "path<TAB>label" in line (changed in place): 0 or an error text. */
static const char *
parse_line(char *line, char **path, int64_t *label, char *why, size_t len)
{
	char *tab = strrchr(line, '\t'), *end, *l;
	long long v;

	if (tab == NULL)
		return "expected \"relative/path<TAB>label\"";
	*tab = '\0';
	l = tab + 1;
	if (line[0] == '\0')
		return "empty path";
	if (line[0] == '/')
		return "path must be relative to the dataset root";
	if (ds_has_dotdot(line))
		return "path must not have a '..' component (it would leave "
		       "the dataset root)";
	errno = 0;
	v = strtoll(l, &end, 10);
	while (end != l && (*end == ' ' || *end == '\t'))
		end++;
	if (end == l || *end != '\0' ||
	    !(isdigit((unsigned char)*l) || *l == '-' || *l == '+') ||
	    errno == ERANGE) {
		snprintf(why, len, "bad label '%s'", l);
		return why;
	}
	if (v < 0) {
		snprintf(why, len, "negative label %lld", v);
		return why;
	}
	if (v > MAX_LABEL) {
		snprintf(why, len, "label %lld too large (at most %d)", v,
		    MAX_LABEL);
		return why;
	}
	*path = line;
	*label = v;
	return NULL;
}

static int
read_manifest(const char *manifest, struct dataset *ds, ds_progress_fn progress,
    void *arg, char *err, size_t errlen)
{
	struct mline *m = NULL, *nm;
	size_t n = 0, cap = 0, lineno = 0, linecap = 0;
	char *line = NULL, why[128];
	int64_t maxlabel = -1;
	ssize_t len;
	FILE *f;
	int r = 0;

	if ((f = fopen(manifest, "r")) == NULL) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", manifest, strerror(-r));
		return r;
	}
	while ((len = getline(&line, &linecap, f)) >= 0) {
		const char *msg;
		char *path;
		int64_t label;

		lineno++;
		while (
		    len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (len == 0 || line[0] == '#' ||
		    strspn(line, " \t") == (size_t)len)
			continue;
		if ((msg = parse_line(line, &path, &label, why, sizeof(why))) !=
		    NULL) {
			snprintf(
			    err, errlen, "%s:%zu: %s", manifest, lineno, msg);
			r = -EINVAL;
			goto out;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 4096;
			if ((nm = realloc(m, cap * sizeof(*m))) == NULL) {
				r = -ENOMEM;
				goto out;
			}
			m = nm;
		}
		if ((m[n].path = strdup(path)) == NULL) {
			r = -ENOMEM;
			goto out;
		}
		m[n].label = label;
		m[n].line = lineno;
		n++;
		if (label > maxlabel)
			maxlabel = label;
		if (progress != NULL && n % DS_PROGRESS_EVERY == 0)
			progress(n, arg);
	}
	if (ferror(f)) {
		r = -EIO;
		snprintf(err, errlen, "%s: %s", manifest, strerror(EIO));
		goto out;
	}
	if (n == 0) {
		snprintf(err, errlen, "%s: no samples", manifest);
		r = -EINVAL;
		goto out;
	}
	qsort(m, n, sizeof(*m), by_mpath);
	for (size_t i = 1; i < n; i++) {
		if (strcmp(m[i - 1].path, m[i].path) != 0)
			continue;
		size_t a = m[i - 1].line, b = m[i].line;

		snprintf(err, errlen,
		    "%s:%zu: duplicate path '%s' (also on line %zu)", manifest,
		    a > b ? a : b, m[i].path, a > b ? b : a);
		r = -EINVAL;
		goto out;
	}
	if ((ds->samples = calloc(n, sizeof(*ds->samples))) == NULL ||
	    (ds->classes = calloc(
		 (size_t)maxlabel + 1, sizeof(*ds->classes))) == NULL) {
		r = -ENOMEM;
		goto out;
	}
	ds->nclasses = (size_t)maxlabel + 1;
	for (size_t i = 0; i < ds->nclasses; i++) {
		char num[24];

		snprintf(num, sizeof(num), "%zu", i);
		if ((ds->classes[i] = strdup(num)) == NULL) {
			r = -ENOMEM;
			goto out;
		}
	}
	for (size_t i = 0; i < n; i++) {
		ds->samples[i].path = m[i].path; /* transferred */
		ds->samples[i].label = m[i].label;
		m[i].path = NULL;
	}
	ds->n = n;
out:
	if (r == -ENOMEM)
		snprintf(err, errlen, "%s", strerror(ENOMEM));
	for (size_t i = 0; i < n; i++)
		free(m[i].path);
	free(m);
	free(line);
	fclose(f);
	return r;
}

int
ds_open(const char *name, const char *root, const char *manifest,
    ds_progress_fn progress, void *arg, struct dataset **out, char *err,
    size_t errlen)
{
	struct dataset *ds;
	struct stat st;
	int r;

	if ((ds = calloc(1, sizeof(*ds))) == NULL ||
	    (ds->name = strdup(name ? name : "")) == NULL) {
		r = -ENOMEM;
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		goto fail;
	}
	if ((ds->root = realpath(root, NULL)) == NULL ||
	    stat(ds->root, &st) != 0) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", root, strerror(-r));
		goto fail;
	}
	if (!S_ISDIR(st.st_mode)) {
		r = -ENOTDIR;
		snprintf(err, errlen, "%s: %s", root, strerror(ENOTDIR));
		goto fail;
	}
	ds->manifest = manifest != NULL;
	if (manifest != NULL)
		r = read_manifest(manifest, ds, progress, arg, err, errlen);
	else
		r = ds_scan(ds, root, progress, arg, err, errlen);
	if (r != 0)
		goto fail;
	*out = ds;
	return 0;
fail:
	ds_free(ds);
	return r;
}

/* The index of name in the class list v (n names), or -1. */
static int64_t
class_index(char *const *v, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], name) == 0)
			return (int64_t)i;
	return -1;
}

/*
 * The class list of d (classes = FILE) over ds: the classes become the
 * list's names, in its order.  An ImageFolder's class directories are
 * mapped by name (one not in the list is an error); the integer labels of
 * a manifest or of shards are indexes into the list (a manifest's label
 * past its end is an error, a shard member's makes a sample that fails).
 */
static int
apply_classes(const struct cfg_dataset *d, struct dataset *ds, char *err,
    size_t errlen)
{
	size_t n = d->nclass_names;
	int64_t *map = NULL;
	char **names;

	if ((names = calloc(n, sizeof(*names))) == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if ((names[i] = strdup(d->class_names[i])) == NULL)
			goto nomem;
	if (!ds->manifest && ds->nshards == 0) {
		if ((map = calloc(ds->nclasses ? ds->nclasses : 1,
			 sizeof(*map))) == NULL)
			goto nomem;
		for (size_t c = 0; c < ds->nclasses; c++) {
			if ((map[c] = class_index(names, n, ds->classes[c])) <
			    0) {
				snprintf(err, errlen,
				    "%s/%s: class directory not in classes %s",
				    ds->root, ds->classes[c], d->classes);
				goto fail;
			}
		}
		for (size_t i = 0; i < ds->n; i++)
			if (ds->samples[i].label >= 0 &&
			    (size_t)ds->samples[i].label < ds->nclasses)
				ds->samples[i].label =
				    map[ds->samples[i].label];
	} else {
		for (size_t i = 0; i < ds->n; i++) {
			struct ds_sample *x = &ds->samples[i];

			if (x->label < 0 || (uint64_t)x->label < n ||
			    x->bad != NULL)
				continue;
			if (ds->nshards > 0) {
				x->bad = "its label is past the end of the "
					 "classes list";
				continue;
			}
			snprintf(err, errlen,
			    "%s/%s: label %" PRId64 " is past the end of "
			    "classes %s (%zu names)",
			    ds->root, x->path, x->label, d->classes, n);
			goto fail;
		}
	}
	free(map);
	for (size_t i = 0; ds->classes != NULL && i < ds->nclasses; i++)
		free(ds->classes[i]);
	free(ds->classes);
	ds->classes = names; /* transferred */
	ds->nclasses = n;
	return 0;
nomem:
	snprintf(err, errlen, "%s", strerror(ENOMEM));
	free(map);
	cfg_classes_free(names, n);
	return -ENOMEM;
fail:
	free(map);
	cfg_classes_free(names, n);
	return -EINVAL;
}

int
ds_open_cfg(const struct cfg_dataset *d, int index_fd, ds_progress_fn progress,
    void *arg, struct dataset **out, char *err, size_t errlen)
{
	struct dataset *ds;
	int r;

	if (d->shards == NULL)
		r = ds_open(d->name, d->root, d->manifest, progress, arg, &ds,
		    err, errlen);
	else {
		struct remote_opts ro = {d->s3_endpoint, d->s3_region,
		    d->s3_path_style == 0 ? -1 : d->s3_path_style == 2,
		    d->ca_file, d->remote_timeout * 1000,
		    (uint32_t)d->remote_retries};

		r = ds_open_shards_remote(d->name, d->shards, d->label, &ro,
		    index_fd, progress, arg, &ds, err, errlen);
	}
	if (r != 0)
		return r;
	if (d->class_names != NULL &&
	    (r = apply_classes(d, ds, err, errlen)) != 0) {
		ds_free(ds);
		return r;
	}
	*out = ds;
	return 0;
}

int
ds_index_open(const struct cfg *c, char *why, size_t whylen)
{
	bool shards = false;
	char err[4600];
	int fd;

	why[0] = '\0';
	for (size_t i = 0; i < c->ndatasets; i++)
		shards |= c->datasets[i].shards != NULL;
	/* The cache off, nothing is kept under cache_dir: not the index. */
	if (!shards || c->mount.cache_size == 0 || c->mount.cache_dir == NULL)
		return -1;
	if ((fd = cache_index_open(
		 c->mount.cache_dir, true, err, sizeof(err))) < 0) {
		snprintf(why, whylen,
		    "shard index refused: %s; shards are indexed again at "
		    "every start",
		    err);
		return -1;
	}
	return fd;
}

int
ds_sample_name(const struct dataset *ds, size_t id, char *buf, size_t len)
{
	if (id >= ds->n)
		return -EINVAL;
	if ((size_t)snprintf(buf, len, "%s/%s",
		strcmp(ds->root, "/") == 0 ? "" : ds->root,
		ds->samples[id].path) >= len)
		return -ENAMETOOLONG;
	return 0;
}

int
ds_sample_stat(const struct dataset *ds, size_t id, struct stat *st)
{
	char path[PATH_MAX];
	int r;

	if (id >= ds->n)
		return -EINVAL;
	if (ds->robjs != NULL) {
		/* A remote shard: its size and ETag (ds_remote.c). */
		*st = ds->shards[ds->samples[id].shard].st;
		return 0;
	}
	if (ds->nshards > 0)
		return stat(ds->shards[ds->samples[id].shard].path, st) == 0
			   ? 0
			   : -errno;
	if ((r = ds_sample_name(ds, id, path, sizeof(path))) != 0)
		return r;
	return stat(path, st) == 0 ? 0 : -errno;
}
