/*
 * config_layout.c - the model (core/): the config of `feedfs PATH
 * MOUNTPOINT` without a config file (cfg_default, see config.h): what PATH
 * is laid out as, and the default jobs over it.  Under config.c's cfg_new
 * (config_int.h); nothing of the config calls it.
 *
 * The layouts, and the jobs they give (issue 36):
 *   - ROOT whose subdirectories are train/ and val/ (or validation/, and
 *     maybe test/, nothing else): torchvision's ImageNet layout, and a
 *     Hugging Face snapshot's.  Job train from ROOT/train, job val from
 *     ROOT/val;
 *   - a class tree (ImageFolder): job train from it, and job val from the
 *     val/ beside it when it is called train;
 *   - a folder of .tar files and no subdirectory, or one .tar file:
 *     WebDataset shards, job train from them, labels from .cls when the
 *     members have one (label = auto);
 *   and ROOT's train/ and val/ may each be a class tree or a folder of
 *     shards.
 * A val job only reads a split of its own: never the training images.
 * Its class folders must be among train's (its labels then go by name,
 * as train's: classes = the class folders of train/), else there is no
 * val job.  What was taken, and why there is no val job when there is
 * none, is one line in cfg->layout, which the mount and --check say.
 * Only directory listings are read here (the scan comes later).
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/config_int.h"

/* What a directory holds, as far as the layout goes. */
struct dirinfo {
	char **dirs; /* its subdirectories (links followed), sorted */
	size_t ndirs;
	size_t ntars; /* .tar files */
};

static int
by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
dirinfo_free(struct dirinfo *d)
{
	for (size_t i = 0; i < d->ndirs; i++)
		free(d->dirs[i]);
	free(d->dirs);
	memset(d, 0, sizeof(*d));
}

static bool
tar_name(const char *name)
{
	size_t n = strlen(name);

	return n > 4 && strcasecmp(name + n - 4, ".tar") == 0;
}

/* The non-hidden subdirectories and .tar files of path; -errno. */
static int
dir_read(const char *path, struct dirinfo *out)
{
	struct dirinfo d = {0};
	struct dirent *de;
	size_t cap = 0;
	DIR *dp;

	if ((dp = opendir(path)) == NULL)
		return -errno;
	while ((de = readdir(dp)) != NULL) {
		struct stat st;

		if (de->d_name[0] == '.' ||
		    fstatat(dirfd(dp), de->d_name, &st, 0) != 0)
			continue;
		if (S_ISREG(st.st_mode) && tar_name(de->d_name))
			d.ntars++;
		if (!S_ISDIR(st.st_mode))
			continue;
		if (d.ndirs == cap) {
			char **v;

			cap = cap ? 2 * cap : 64;
			if (cap > CFG_MAX_CLASSES ||
			    (v = realloc(d.dirs, cap * sizeof(*v))) == NULL)
				goto nomem;
			d.dirs = v;
		}
		if ((d.dirs[d.ndirs] = strdup(de->d_name)) == NULL)
			goto nomem;
		d.ndirs++;
	}
	closedir(dp);
	if (d.ndirs > 1)
		qsort(d.dirs, d.ndirs, sizeof(*d.dirs), by_name);
	*out = d;
	return 0;
nomem:
	closedir(dp);
	dirinfo_free(&d);
	return -ENOMEM;
}

/* A folder of shards: .tar files, no subdirectory. */
static bool
is_shards(const struct dirinfo *d)
{
	return d->ndirs == 0 && d->ntars > 0;
}

bool
cfg_is_tar(const char *path)
{
	char hdr[512];
	struct stat st;
	ssize_t n;
	int fd;

	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return false;
	if (tar_name(path))
		return true;
	/* ustar's magic (POSIX "ustar\0", GNU "ustar  "), at 257. */
	if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
		return false;
	n = pread(fd, hdr, sizeof(hdr), 0);
	close(fd);
	return n == (ssize_t)sizeof(hdr) && memcmp(hdr + 257, "ustar", 5) == 0;
}

/* Is the ROOT of torchvision's layout: train/ and splits alone? */
static bool
is_split_root(const struct dirinfo *d)
{
	static const char *const splits[] = {
	    "train", "val", "validation", "test"};
	bool train = false;

	for (size_t i = 0; i < d->ndirs; i++) {
		size_t k;

		for (k = 0; k < 4; k++)
			if (strcmp(d->dirs[i], splits[k]) == 0)
				break;
		if (k == 4)
			return false;
		train |= k == 0;
	}
	return train;
}

/* dir/name (malloc'd), or NULL. */
static char *
path_join(const char *dir, const char *name)
{
	char *s;

	if (asprintf(&s, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", name) < 0)
		return NULL;
	return s;
}

/* Dataset i of c: name, and the tree or the shards at path. */
static int
set_dataset(
    struct cfg *c, size_t i, const char *name, const char *path, bool shards)
{
	struct cfg_dataset *d = &c->datasets[i];

	if ((d->name = strdup(name)) == NULL)
		return -ENOMEM;
	if (!shards)
		return (d->root = strdup(path)) ? 0 : -ENOMEM;
	if ((d->label = strdup("auto")) == NULL)
		return -ENOMEM;
	if (cfg_is_tar(path))
		d->shards = strdup(path);
	else
		d->shards = path_join(path, "*.tar");
	return d->shards ? 0 : -ENOMEM;
}

/*
 * The val split beside or below the train split (of info ti) is vi: may
 * it be the val job's?  A tree's class folders must be among train's;
 * shards go with shards.  NULL: yes (the classes of both are then
 * train's class folders); else why not (a constant, or why).
 */
static const char *
val_fits(
    const struct dirinfo *ti, const struct dirinfo *vi, char *why, size_t len)
{
	size_t k = 0, n = 0, used;

	if (is_shards(ti) != is_shards(vi))
		return "it is not laid out as train is (a class tree and a "
		       "folder of shards)";
	if (is_shards(ti))
		return NULL;
	used = (size_t)snprintf(why, len, "its class folders ");
	for (size_t i = 0; i < vi->ndirs && used < len; i++) {
		while (k < ti->ndirs && strcmp(ti->dirs[k], vi->dirs[i]) < 0)
			k++;
		if (k < ti->ndirs && strcmp(ti->dirs[k], vi->dirs[i]) == 0)
			continue;
		if (n++ < 3)
			used += (size_t)snprintf(why + used, len - used,
			    "%s%.64s", n > 1 ? ", " : "", vi->dirs[i]);
	}
	if (n == 0)
		return NULL;
	if (used < len)
		snprintf(why + used, len - used,
		    "%s%.0zu%s are not train's: its labels would not be "
		    "train's",
		    n > 3 ? " and " : "", n > 3 ? n - 3 : 0,
		    n > 3 ? " more" : "");
	return why;
}

/* The class folders of ti as the class list of dataset i (by name). */
static int
set_classes(
    struct cfg *c, size_t i, const struct dirinfo *ti, const char *train)
{
	struct cfg_dataset *d = &c->datasets[i];

	if (asprintf(&d->classes, "(the class folders of %s)", train) < 0) {
		d->classes = NULL;
		return -ENOMEM;
	}
	if ((d->class_names = calloc(ti->ndirs, sizeof(char *))) == NULL)
		return -ENOMEM;
	for (size_t k = 0; k < ti->ndirs; k++) {
		if ((d->class_names[k] = strdup(ti->dirs[k])) == NULL)
			return -ENOMEM;
		d->nclass_names++;
	}
	return 0;
}

/* The jobs train and (nval 1) val of DESIGN.md over datasets 0 and 1. */
static int
default_jobs(struct cfg *c, size_t nval)
{
	char msg[512];

	if ((c->jobs = calloc(1 + nval, sizeof(*c->jobs))) == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < 1 + nval; i++) {
		struct cfg_job *j = &c->jobs[i];

		cfg_job_defaults(j);
		c->njobs++;
		j->dataset_index = i;
		if (!(j->name = strdup(i == 0 ? "train" : "val")) ||
		    !(j->dataset = strdup(c->datasets[i].name)) ||
		    !(j->pipeline = strdup(i == 0 ? DEFAULT_TRAIN_PIPELINE
						  : DEFAULT_VAL_PIPELINE)))
			return -ENOMEM;
		if (xf_pipeline_parse(j->pipeline, &j->pl, msg, sizeof(msg)) !=
		    0)
			return -ENOMEM; /* the defaults parse: only memory */
		j->pl->max_pixels = j->max_pixels;
		if (i == 1) {
			j->shuffle = false;
			j->epochs = 1;
		}
	}
	return 0;
}

/* A count of shards, "N tar shards" into buf. */
static const char *
shards_text(const struct dirinfo *d, char *buf, size_t len)
{
	snprintf(
	    buf, len, " (%zu tar shard%s)", d->ntars, d->ntars == 1 ? "" : "s");
	return buf;
}

/*
 * The layout of path (absolute): c's datasets, jobs and layout line.
 * -ENOMEM, or -errno of reading path.
 */
static int
lay_out(struct cfg *c, const char *path, char *err, size_t errlen)
{
	struct dirinfo pi = {0}, ti = {0}, vi = {0};
	char *train = NULL, *val = NULL, *parent = NULL, why[256], a[64], b[64],
	     from[PATH_MAX + 96];
	const char *no = NULL, *slash;
	bool tar = cfg_is_tar(path), root = false;
	int r;

	if (!tar && (r = dir_read(path, &pi)) != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(-r));
		return r;
	}
	if (!tar && is_split_root(&pi)) {
		/* ROOT/train and ROOT/val (or ROOT/validation). */
		root = true;
		if ((train = path_join(path, "train")) == NULL)
			goto nomem;
		for (int k = 0; k < 2 && val == NULL; k++)
			for (size_t i = 0; i < pi.ndirs; i++)
				if (strcmp(pi.dirs[i],
					k == 0 ? "val" : "validation") == 0) {
					if ((val = path_join(
						 path, pi.dirs[i])) == NULL)
						goto nomem;
					break;
				}
		if ((r = dir_read(train, &ti)) != 0) {
			snprintf(err, errlen, "%s: %s", train, strerror(-r));
			goto out;
		}
	} else {
		if ((train = strdup(path)) == NULL)
			goto nomem;
		if (!tar)
			ti = pi, memset(&pi, 0, sizeof(pi));
		else
			ti.ntars = 1;
		slash = strrchr(path, '/');
		if (!tar && !is_shards(&ti) && slash != NULL &&
		    strcmp(slash + 1, "train") == 0) {
			/* ROOT/train: the val/ beside it. */
			if ((parent = strndup(path,
				 slash == path ? 1 : (size_t)(slash - path))) ==
			    NULL)
				goto nomem;
			for (int k = 0; k < 2 && val == NULL; k++) {
				struct stat st;

				if ((val = path_join(parent,
					 k == 0 ? "val" : "validation")) ==
				    NULL)
					goto nomem;
				if (stat(val, &st) != 0 ||
				    !S_ISDIR(st.st_mode)) {
					free(val);
					val = NULL;
				}
			}
		}
	}
	if (val != NULL && dir_read(val, &vi) != 0)
		no = "it cannot be read";
	else if (val != NULL)
		no = val_fits(&ti, &vi, why, sizeof(why));
	c->ndatasets = val != NULL && no == NULL ? 2 : 1;
	if ((c->datasets = calloc(c->ndatasets, sizeof(*c->datasets))) == NULL)
		goto nomem;
	if ((r = set_dataset(c, 0, "train", train, tar || is_shards(&ti))) != 0)
		goto out;
	if (c->ndatasets == 2 &&
	    ((r = set_dataset(c, 1, "val", val, is_shards(&vi))) != 0 ||
		(!is_shards(&ti) &&
		    ((r = set_classes(c, 0, &ti, train)) != 0 ||
			(r = set_classes(c, 1, &ti, train)) != 0))))
		goto out;
	if ((r = default_jobs(c, c->ndatasets - 1)) != 0)
		goto out;
	a[0] = b[0] = '\0';
	if (is_shards(&ti))
		shards_text(&ti, a, sizeof(a));
	if (c->ndatasets == 2 && is_shards(&vi))
		shards_text(&vi, b, sizeof(b));
	c->layout_warn = c->ndatasets == 1;
	if (root)
		snprintf(from, sizeof(from), "from %s%s", train, a);
	else if (tar)
		snprintf(from, sizeof(from), "from this tar shard");
	else
		snprintf(from, sizeof(from), "from it%s", a);
	if (c->ndatasets == 2)
		r = asprintf(&c->layout,
		    "%s: %sjob train %s, job val from %s%s%s", path,
		    root ? "torchvision's layout: " : "", from, val, b,
		    root ? "" : ", the val/ beside it");
	else if (val != NULL)
		r = asprintf(&c->layout,
		    "%s: job train %s; no val job: %s is not taken: %s", path,
		    from, val, no);
	else if (tar || is_shards(&ti))
		r = asprintf(&c->layout,
		    "%s: job train %s, labels from .cls when the members "
		    "have one; no val job: %s is one split (for a val job, put "
		    "the splits' shards in ROOT/train/ and ROOT/val/ and give "
		    "ROOT, or write a config)",
		    path, from, tar ? "a shard" : "a folder of shards");
	else
		r = asprintf(&c->layout,
		    "%s: job train %s; no val job: %s (for one, give the "
		    "folder "
		    "that holds train/ and val/, torchvision's layout, or "
		    "write "
		    "a config)",
		    path, from,
		    root ? "no val/ beside train/" : "no val/ beside it");
	if (r < 0) {
		c->layout = NULL;
		goto nomem;
	}
	r = 0;
	goto out;
nomem:
	r = -ENOMEM;
	snprintf(err, errlen, "out of memory");
out:
	dirinfo_free(&pi);
	dirinfo_free(&ti);
	dirinfo_free(&vi);
	free(train);
	free(val);
	free(parent);
	return r;
}

int
cfg_default_trees(const char *train, const char *val, struct cfg **out,
    char *err, size_t errlen)
{
	struct cfg *c = cfg_new(train);
	int r = -ENOMEM;

	if (c == NULL)
		goto out;
	c->ndatasets = val != NULL ? 2 : 1;
	if ((c->datasets = calloc(c->ndatasets, sizeof(*c->datasets))) ==
		NULL ||
	    (r = set_dataset(c, 0, "train", train, false)) != 0 ||
	    (val != NULL && (r = set_dataset(c, 1, "val", val, false)) != 0) ||
	    (r = default_jobs(c, c->ndatasets - 1)) != 0)
		goto out;
	*out = c;
	return 0;
out:
	cfg_free(c);
	snprintf(err, errlen, "out of memory");
	return r;
}

int
cfg_default(const char *path, struct cfg **out, char *err, size_t errlen)
{
	struct cfg *c = cfg_new(path);
	char *abs;
	int r;

	if (c == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* Its real path, as the scan's root is (ROOT/train's val/ is the
	 * one beside the real train/). */
	if ((abs = realpath(path, NULL)) == NULL) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-r));
		cfg_free(c);
		return r;
	}
	r = lay_out(c, abs, err, errlen);
	free(abs);
	if (r != 0) {
		if (r == -ENOMEM)
			snprintf(err, errlen, "out of memory");
		cfg_free(c);
		return r;
	}
	*out = c;
	return 0;
}
