/*
 * dataset.c - the index of a dataset's samples: an ImageFolder scan or a
 * manifest, sorted by relative path.
 *
 * The scan reads directories only (readdir's d_type, fstatat where it is
 * unknown or a symlink), never the files, and sorts once at the end, so
 * 1.3M files (ImageNet) take about as long as listing them.  Symbolic links
 * are followed, to files and to directories, also out of the root; a link
 * that points back into its own ancestry, the root included, is skipped
 * (so a link to the root does not list every class again under one).  A broken link is skipped; an unreadable
 * directory is an error.  A class directory without images stays a class
 * (labels do not move).  Manifest entries are taken as they are: whether
 * the files exist is found out when they are read.
 */
#include <sys/stat.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/dataset.h"

#define PROGRESS_EVERY 1000
#define MAX_LABEL ((1 << 24) - 1) /* bounds the class list a manifest makes */

struct ancestor {
	dev_t dev;
	ino_t ino;
};

struct scan {
	struct ds_sample *v;
	size_t n, cap;
	ds_progress_fn progress;
	void *arg;
	const char *root;    /* as given, for messages */
	char rel[PATH_MAX];  /* path of the directory being read, from root */
	struct ancestor *up; /* the directories from the class dir down */
	size_t depth, upcap;
	char *err;
	size_t errlen;
};

static int
by_path(const void *a, const void *b)
{
	const struct ds_sample *x = a, *y = b;

	return strcmp(x->path, y->path);
}

static int
by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool
is_jpeg(const char *name)
{
	size_t n = strlen(name);

	return (n > 4 && strcasecmp(name + n - 4, ".jpg") == 0) ||
	       (n > 5 && strcasecmp(name + n - 5, ".jpeg") == 0);
}

static void
free_samples(struct ds_sample *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].path);
	free(v);
}

/* Append a sample (path is taken). */
static int
add_sample(struct scan *s, char *path, int64_t label)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 4096;
		struct ds_sample *v = realloc(s->v, cap * sizeof(*v));

		if (v == NULL) {
			free(path);
			return -ENOMEM;
		}
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n].path = path; /* transferred */
	s->v[s->n].label = label;
	s->n++;
	if (s->progress != NULL && s->n % PROGRESS_EVERY == 0)
		s->progress(s->n, s->arg);
	return 0;
}

/* "ROOT/REL/NAME: strerror(-r)" into the error text; returns r. */
static int
scan_error(struct scan *s, const char *name, int r)
{
	snprintf(s->err, s->errlen, "%s%s%s%s%s: %s", s->root,
	    s->rel[0] ? "/" : "", s->rel, name ? "/" : "", name ? name : "",
	    strerror(-r));
	return r;
}

/*
 * The type of entry de of directory fd: DT_DIR, DT_REG or DT_UNKNOWN
 * (anything else, or a broken link), symlinks followed.
 */
static int
entry_type(int fd, const struct dirent *de)
{
	struct stat st;

	if (de->d_type == DT_DIR || de->d_type == DT_REG)
		return de->d_type;
	if (de->d_type != DT_LNK && de->d_type != DT_UNKNOWN)
		return DT_UNKNOWN;
	if (fstatat(fd, de->d_name, &st, 0) != 0)
		return DT_UNKNOWN;
	return S_ISDIR(st.st_mode)   ? DT_DIR
	       : S_ISREG(st.st_mode) ? DT_REG
				     : DT_UNKNOWN;
}

/* Is the directory open as fd one of the ones being read?  Else push it. */
static int
push_dir(struct scan *s, int fd, bool *loop)
{
	struct stat st;

	*loop = false;
	if (fstat(fd, &st) != 0)
		return -errno;
	for (size_t i = 0; i < s->depth; i++)
		if (s->up[i].dev == st.st_dev && s->up[i].ino == st.st_ino) {
			*loop = true;
			return 0;
		}
	if (s->depth == s->upcap) {
		size_t cap = s->upcap ? s->upcap * 2 : 16;
		struct ancestor *up = realloc(s->up, cap * sizeof(*up));

		if (up == NULL)
			return -ENOMEM;
		s->up = up;
		s->upcap = cap;
	}
	s->up[s->depth].dev = st.st_dev;
	s->up[s->depth].ino = st.st_ino;
	s->depth++;
	return 0;
}

/* Add the JPEG files at any depth under fd (taken), s->rel, with label. */
static int
scan_dir(struct scan *s, int fd, int64_t label)
{
	size_t len = strlen(s->rel);
	struct dirent *de;
	bool loop;
	DIR *d;
	int r;

	if ((r = push_dir(s, fd, &loop)) != 0 || loop) {
		close(fd);
		return r != 0 ? scan_error(s, NULL, r) : 0;
	}
	if ((d = fdopendir(fd)) == NULL) {
		r = scan_error(s, NULL, -errno);
		close(fd);
		goto out;
	}
	for (;;) {
		const char *name;
		size_t nlen;
		char *path;
		int t, sub;

		errno = 0;
		if ((de = readdir(d)) == NULL) {
			r = errno ? -errno : 0;
			if (r != 0)
				scan_error(s, NULL, r);
			break;
		}
		name = de->d_name;
		if (name[0] == '.')
			continue;
		t = entry_type(dirfd(d), de);
		nlen = strlen(name);
		if (len + 1 + nlen >= sizeof(s->rel)) {
			r = scan_error(s, name, -ENAMETOOLONG);
			break;
		}
		if (t == DT_REG && is_jpeg(name)) {
			if ((path = malloc(len + 1 + nlen + 1)) == NULL) {
				r = -ENOMEM;
				break;
			}
			memcpy(path, s->rel, len);
			path[len] = '/';
			memcpy(path + len + 1, name, nlen + 1);
			if ((r = add_sample(s, path, label)) != 0)
				break;
		} else if (t == DT_DIR) {
			sub = openat(
			    dirfd(d), name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (sub < 0) {
				r = scan_error(s, name, -errno);
				break;
			}
			s->rel[len] = '/';
			memcpy(s->rel + len + 1, name, nlen + 1);
			r = scan_dir(s, sub, label);
			s->rel[len] = '\0';
			if (r != 0)
				break;
		}
	}
	closedir(d);
out:
	s->depth--;
	if (r == -ENOMEM)
		snprintf(s->err, s->errlen, "%s", strerror(ENOMEM));
	return r;
}

/* The class directories of root (fd): sorted names, hidden ones left out. */
static int
list_classes(struct scan *s, int fd, char ***out, size_t *nout)
{
	char **v = NULL, **nv;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;
	int r = 0, dfd;

	if ((dfd = dup(fd)) < 0 || (d = fdopendir(dfd)) == NULL) {
		r = -errno;
		if (dfd >= 0)
			close(dfd);
		return scan_error(s, NULL, r);
	}
	for (;;) {
		errno = 0;
		if ((de = readdir(d)) == NULL) {
			if (errno != 0)
				r = scan_error(s, NULL, -errno);
			break;
		}
		if (de->d_name[0] == '.' || entry_type(fd, de) != DT_DIR)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			if ((nv = realloc(v, cap * sizeof(*v))) == NULL) {
				r = -ENOMEM;
				break;
			}
			v = nv;
		}
		if ((v[n] = strdup(de->d_name)) == NULL) {
			r = -ENOMEM;
			break;
		}
		n++;
	}
	closedir(d);
	if (r != 0) {
		if (r == -ENOMEM)
			snprintf(s->err, s->errlen, "%s", strerror(ENOMEM));
		while (n > 0)
			free(v[--n]);
		free(v);
		return r;
	}
	if (n > 0)
		qsort(v, n, sizeof(*v), by_name);
	*out = v;
	*nout = n;
	return 0;
}

static int
scan_tree(struct scan *s, struct dataset *ds)
{
	int fd, sub, r;
	bool loop;

	fd = open(ds->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return scan_error(s, NULL, -errno);
	/* The root is the first ancestor of every class directory. */
	if ((r = push_dir(s, fd, &loop)) != 0) {
		r = scan_error(s, NULL, r);
		goto out;
	}
	if ((r = list_classes(s, fd, &ds->classes, &ds->nclasses)) != 0)
		goto out;
	for (size_t i = 0; i < ds->nclasses; i++) {
		const char *name = ds->classes[i];

		if (strlen(name) >= sizeof(s->rel)) {
			r = scan_error(s, name, -ENAMETOOLONG);
			goto out;
		}
		s->rel[0] = '\0';
		sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (sub < 0) {
			r = scan_error(s, name, -errno);
			goto out;
		}
		memcpy(s->rel, name, strlen(name) + 1);
		s->depth = 1; /* the root */
		if ((r = scan_dir(s, sub, (int64_t)i)) != 0)
			goto out;
	}
out:
	close(fd);
	return r;
}

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
read_manifest(const char *manifest, struct scan *s, struct dataset *ds)
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
		snprintf(s->err, s->errlen, "%s: %s", manifest, strerror(-r));
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
			snprintf(s->err, s->errlen, "%s:%zu: %s", manifest,
			    lineno, msg);
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
		if (s->progress != NULL && n % PROGRESS_EVERY == 0)
			s->progress(n, s->arg);
	}
	if (ferror(f)) {
		r = -EIO;
		snprintf(s->err, s->errlen, "%s: %s", manifest, strerror(EIO));
		goto out;
	}
	if (n == 0) {
		snprintf(s->err, s->errlen, "%s: no samples", manifest);
		r = -EINVAL;
		goto out;
	}
	qsort(m, n, sizeof(*m), by_mpath);
	for (size_t i = 1; i < n; i++) {
		if (strcmp(m[i - 1].path, m[i].path) != 0)
			continue;
		size_t a = m[i - 1].line, b = m[i].line;

		snprintf(s->err, s->errlen,
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
		snprintf(s->err, s->errlen, "%s", strerror(ENOMEM));
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
	struct scan s = {0};
	struct dataset *ds;
	struct stat st;
	int r;

	s.progress = progress;
	s.arg = arg;
	s.root = root;
	s.err = err;
	s.errlen = errlen;
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
	if (manifest != NULL) {
		if ((r = read_manifest(manifest, &s, ds)) != 0)
			goto fail;
	} else {
		if ((r = scan_tree(&s, ds)) != 0) {
			free_samples(s.v, s.n);
			goto fail;
		}
		if (s.n == 0) {
			snprintf(
			    err, errlen, "no JPEG images found under %s", root);
			r = -ENOENT;
			free(s.v);
			goto fail;
		}
		qsort(s.v, s.n, sizeof(*s.v), by_path);
		ds->samples = s.v; /* transferred */
		ds->n = s.n;
	}
	free(s.up);
	*out = ds;
	return 0;
fail:
	free(s.up);
	ds_free(ds);
	return r;
}

void
ds_free(struct dataset *ds)
{
	if (ds == NULL)
		return;
	free_samples(ds->samples, ds->n);
	for (size_t i = 0; ds->classes != NULL && i < ds->nclasses; i++)
		free(ds->classes[i]);
	free(ds->classes);
	free(ds->root);
	free(ds->name);
	free(ds);
}
