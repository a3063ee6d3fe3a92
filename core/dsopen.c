/*
 * dsopen.c - the model (core/): a dataset as a config section names it
 * (see dsopen.h).  Over the dataset layer and cache/; nothing below it
 * calls it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "core/config.h"
#include "core/dsopen.h"
#include "dataset/remote/remote.h"

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
 * A shard's label comes as the index of its class among the distinct
 * labels (ds_open_shards), whose name is the integer.  A multi-label
 * dataset's lists hold indexes into the list already (a .json's names
 * were looked up in it by the shard index): one past its end makes a
 * sample that fails.
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
	if (ds->multi) {
		/* Multi-label: the lists' indexes are lines of the file. */
		for (size_t i = 0; i < ds->n; i++) {
			struct ds_sample *x = &ds->samples[i];

			if (x->bad != NULL || x->labels == NULL ||
			    x->labels[0] == 0 ||
			    x->labels[x->labels[0]] < (uint64_t)n)
				continue;
			x->bad = "a label of its list is past the end of the "
				 "classes list";
			free(x->labels);
			x->labels = NULL;
			free(x->text);
			x->text = NULL;
		}
	} else if (!ds->manifest && ds->nshards == 0) {
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

			if (ds->nshards > 0 && x->label >= 0 &&
			    (size_t)x->label < ds->nclasses)
				x->label =
				    strtoll(ds->classes[x->label], NULL, 10);
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
	ds->classes_file = true;
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
	return ds_open_cfg_with(
	    d, index_fd, NULL, progress, arg, out, err, errlen);
}

int
ds_open_cfg_with(const struct cfg_dataset *d, int index_fd,
    const struct ds_remote_hooks *hooks, ds_progress_fn progress, void *arg,
    struct dataset **out, char *err, size_t errlen)
{
	struct dataset *ds;
	int r;

	struct ds_meta meta = {
	    d->label, d->text, d->class_names, d->nclass_names};

	if (d->shards == NULL)
		r = ds_open_meta(d->name, d->root, d->manifest, &meta, progress,
		    arg, &ds, err, errlen);
	else {
		struct remote_opts ro = {d->s3_endpoint, d->s3_region,
		    d->s3_path_style == 0 ? -1 : d->s3_path_style == 2,
		    d->ca_file, d->remote_timeout * 1000,
		    (uint32_t)d->remote_retries};

		r = ds_open_shards_remote(d->name, d->shards, &meta, &ro,
		    hooks, index_fd, progress, arg, &ds, err, errlen);
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
