/*
 * dataset.c - the dataset index's top.  Layer: dataset/ (the datasets); calls
 * its backends ds_scan.c and ds_tar.c, and ds_common.c under them all; none
 * calls back up.  The index of a dataset's samples: an ImageFolder scan
 * (ds_scan.c), a manifest, or tar shards (ds_tar.c), sorted by relative path;
 * ds_safeopen.c opens the samples.  The config's view of a dataset (classes =
 * FILE, the kept shard index) is the model's: core/dsopen.c.
 *
 * Manifest entries are taken as they are, except that a path must not be
 * absolute or have a ".." component: whether the files exist is found out
 * when they are read.  With text = txt a line has a third column, the
 * caption (ds_open_meta); an ImageFolder's captions are its sidecars
 * (ds_sidecar.c).
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

#include "dataset/ds_int.h"
#include "dataset/ds_text.h"
#include "dataset/remote/remote.h"

#define MAX_LABEL ((1 << 24) - 1) /* bounds the class list a manifest makes */

struct mline {
	struct ds_mline d; /* path strdup'd */
	size_t line;
};

static int
by_mpath(const void *a, const void *b)
{
	const struct mline *x = a, *y = b;

	return strcmp(x->d.path, y->d.path);
}

/*
 * Parse "path<TAB>label" in line (changed in place): 0 or an error text.
 * With caption set, "path<TAB>label<TAB>caption": the path ends at the
 * first tab, and *caption is the rest of the line after the second (NULL
 * when there is none).
 */
static const char *
parse_line(char *line, char **path, int64_t *label, char **caption, char *why,
    size_t len)
{
	char *tab = strrchr(line, '\t'), *end, *l;
	long long v;

	if (caption != NULL) {
		*caption = NULL;
		if ((tab = strchr(line, '\t')) != NULL &&
		    (end = strchr(tab + 1, '\t')) != NULL) {
			*end = '\0';
			*caption = end + 1;
		}
	}
	if (tab == NULL)
		return caption ? "expected \"relative/path<TAB>label<TAB>"
				 "caption\""
			       : "expected \"relative/path<TAB>label\"";
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

/* See ds_text.h. */
const char *
ds_manifest_line(char *line, size_t len, const struct ds_text *tx,
    struct ds_mline *m, bool *nomem, char *why, size_t whylen)
{
	char *cap = NULL;
	const char *msg;

	memset(m, 0, sizeof(*m));
	*nomem = false;
	if ((msg = parse_line(line, &m->path, &m->label,
		 tx->mode != TXT_NONE ? &cap : NULL, why, whylen)) != NULL)
		return msg;
	if (tx->mode == TXT_NONE)
		return NULL;
	if (cap == NULL) {
		m->bad = "no caption: its manifest line has no third column";
		return NULL;
	}
	/* The caption: the rest of the line, as it is (NULs included). */
	*nomem = ds_text_from(tx, false, cap, (size_t)(line + len - cap),
		     &m->text, &m->tlen, &m->bad) != 0;
	return NULL;
}

static int
read_manifest(const char *manifest, const struct ds_text *tx,
    struct dataset *ds, ds_progress_fn progress, void *arg, char *err,
    size_t errlen)
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
		struct ds_mline d;
		bool nomem;

		lineno++;
		while (
		    len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (len == 0 || line[0] == '#' ||
		    strspn(line, " \t") == (size_t)len)
			continue;
		if ((msg = ds_manifest_line(line, (size_t)len, tx, &d, &nomem,
			 why, sizeof(why))) != NULL) {
			snprintf(
			    err, errlen, "%s:%zu: %s", manifest, lineno, msg);
			r = -EINVAL;
			goto out;
		}
		if (nomem) {
			r = -ENOMEM;
			goto out;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 4096;
			if ((nm = realloc(m, cap * sizeof(*m))) == NULL) {
				free(d.text);
				r = -ENOMEM;
				goto out;
			}
			m = nm;
		}
		m[n].d = d;
		m[n].line = lineno;
		if ((m[n].d.path = strdup(d.path)) == NULL) {
			free(d.text);
			r = -ENOMEM;
			goto out;
		}
		n++;
		if (d.label > maxlabel)
			maxlabel = d.label;
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
		if (strcmp(m[i - 1].d.path, m[i].d.path) != 0)
			continue;
		size_t a = m[i - 1].line, b = m[i].line;

		snprintf(err, errlen,
		    "%s:%zu: duplicate path '%s' (also on line %zu)", manifest,
		    a > b ? a : b, m[i].d.path, a > b ? b : a);
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
		struct ds_sample *x = &ds->samples[i];

		x->path = m[i].d.path; /* transferred */
		x->label = m[i].d.label;
		x->text = m[i].d.text; /* transferred */
		x->tlen = m[i].d.tlen;
		x->bad = m[i].d.bad;
		m[i].d.path = m[i].d.text = NULL;
	}
	ds->n = n;
out:
	if (r == -ENOMEM)
		snprintf(err, errlen, "%s", strerror(ENOMEM));
	for (size_t i = 0; i < n; i++) {
		free(m[i].d.path);
		free(m[i].d.text);
	}
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
	return ds_open_meta(
	    name, root, manifest, NULL, progress, arg, out, err, errlen);
}

int
ds_open_meta(const char *name, const char *root, const char *manifest,
    const struct ds_meta *meta, ds_progress_fn progress, void *arg,
    struct dataset **out, char *err, size_t errlen)
{
	struct dataset *ds;
	struct ds_text tx;
	struct stat st;
	int r;

	if ((r = ds_text_parse(meta ? meta->text : NULL, &tx, err, errlen)) !=
	    0)
		return r;
	if (manifest != NULL && tx.mode == TXT_JSON) {
		snprintf(err, errlen,
		    "%s: text = json:KEY: a manifest's caption is its third "
		    "column (text = txt)",
		    manifest);
		return -EINVAL;
	}
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
	ds->text = tx.mode != TXT_NONE;
	if (manifest != NULL)
		r = read_manifest(
		    manifest, &tx, ds, progress, arg, err, errlen);
	else if ((r = ds_scan(ds, root, progress, arg, err, errlen)) == 0)
		r = ds_sidecars(ds, &tx, err, errlen);
	if (r != 0)
		goto fail;
	*out = ds;
	return 0;
fail:
	ds_free(ds);
	return r;
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
