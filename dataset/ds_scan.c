/*
 * ds_scan.c - layer: dataset/ (the datasets), the ImageFolder backend (under
 * dataset.c; calls ds_scan_entry.c, ds_safeopen.c, ds_skipped.c and
 * ds_common.c).  The ImageFolder scan of a dataset's root (see
 * dataset.h).
 *
 * The scan reads directories only (readdir's d_type, fstatat where it is
 * unknown or a symlink), never the files, and sorts once at the end, so
 * 1.3M files (ImageNet) take about as long as listing them.
 *
 * Symbolic links are followed as torchvision's ImageFolder follows them,
 * to files and to directories, class directories included, inside the
 * root and out of it; ds_scan_entry.c says which are not, and why (issue
 * 12 item 9: the daemon may run as root over a dataset others can
 * write; issue 36: links out of the root are how hub snapshots, DVC,
 * git-annex and class subsets are laid out).  A sample reached through a
 * link keeps its path (the link's) and gets the resolved one as
 * open_path, so that ds_sample_open follows no link.  Directories are
 * bounded against link fans (a chain of directories each linking twice
 * to the next would take exponential time): the real tree is read once,
 * and a directory reached through a link (or below one) is read at most
 * once more in each class, whichever link reaches it first in the order
 * of names; a link back into its own ancestry, the root included, is
 * skipped.  So the scan is linear in the size of the tree, and the
 * samples do not depend on readdir's order.  Everything it leaves out is
 * counted (ds_left_add): files not images by their name, files beside
 * the class folders, hidden entries in class folders (at the root, a
 * hidden entry such as .git is a tool's, not the dataset's, and is not
 * counted), FIFOs and devices, and the links not followed.  An unreadable
 * directory of the tree is an error.  A class directory without images
 * stays a class (labels do not move).
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset/ds_scan_int.h"

/* A subdirectory to read once its parent is listed. */
struct subdir {
	char *name;
	char *target;	/* where a link leads (struct ent_to); NULL: none */
	uint32_t guard; /* of what it holds (struct ent_to) */
};

static int
by_path(const void *a, const void *b)
{
	const struct ds_sample *x = a, *y = b;

	return strcmp(x->path, y->path);
}

static int
by_subdir(const void *a, const void *b)
{
	const struct subdir *x = a, *y = b;

	return strcmp(x->name, y->name);
}

/* Append a sample (path and open_path, which may be NULL, are taken). */
static int
add_sample(
    struct scan *s, char *path, char *open_path, int64_t label, uint32_t guard)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 4096;
		struct ds_sample *v = realloc(s->v, cap * sizeof(*v));

		if (v == NULL) {
			free(path);
			free(open_path);
			return -ENOMEM;
		}
		s->v = v;
		s->cap = cap;
	}
	memset(&s->v[s->n], 0, sizeof(s->v[s->n]));
	s->v[s->n].path = path;		  /* transferred */
	s->v[s->n].open_path = open_path; /* transferred */
	s->v[s->n].label = label;
	s->v[s->n].guard = guard;
	s->n++;
	if (s->progress != NULL && s->n % DS_PROGRESS_EVERY == 0)
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

/* Append "/" name to the path in buf (of size len; just name when it
 * is empty); -ENAMETOOLONG, buf unchanged. */
static int
append(char *buf, size_t len, const char *name)
{
	size_t n = strlen(buf), nlen = strlen(name);

	if (n + 1 + nlen >= len)
		return -ENAMETOOLONG;
	if (n > 0)
		buf[n++] = '/';
	memcpy(buf + n, name, nlen + 1);
	return 0;
}

static int scan_dir(struct scan *s, int fd, int64_t label, bool linked);

/*
 * Read subdirectory sd of directory fd (s->rel, s->phys): a real one by
 * name, a link's target from the root (or from "/", out of it) through
 * no further link.  s->rel, s->phys and s->guard are as they were on
 * return.  (Nothing of PATH_MAX on the stack: the recursion is as deep
 * as the tree.)
 */
static int
scan_sub(
    struct scan *s, int fd, const struct subdir *sd, int64_t label, bool linked)
{
	size_t rlen = strlen(s->rel), plen = strlen(s->phys);
	uint32_t guard = s->guard;
	char *saved = NULL;
	int sub, r;

	if (sd->target != NULL) {
		if ((saved = strdup(s->phys)) == NULL) {
			snprintf(s->err, s->errlen, "%s", strerror(ENOMEM));
			return -ENOMEM;
		}
		s->phys[0] = '\0';
	}
	if ((r = append(s->rel, sizeof(s->rel), sd->name)) != 0 ||
	    (r = append(s->phys, sizeof(s->phys),
		 sd->target ? sd->target : sd->name)) != 0)
		goto out;
	if (sd->target != NULL && sd->target[0] == '/')
		sub = ds_open_beneath(s->slashfd, sd->target + 1,
		    O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	else if (sd->target != NULL)
		sub = ds_open_beneath(
		    s->rootfd, sd->target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	else
		sub = openat(fd, sd->name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0) {
		r = -errno;
		goto out;
	}
	s->guard = sd->guard;
	r = scan_dir(s, sub, label, linked || sd->target != NULL);
	s->guard = guard;
	if (r != 0) {
		/* scan_dir's message stands */
		s->rel[rlen] = '\0';
		goto restore;
	}
out:
	s->rel[rlen] = '\0';
	if (r != 0)
		r = scan_error(s, sd->name, r);
restore:
	if (saved != NULL) {
		memcpy(s->phys, saved, strlen(saved) + 1);
		free(saved);
	} else
		s->phys[plen] = '\0';
	return r;
}

/* "dir/name" (malloc'd), dir of dlen bytes; NULL: out of memory. */
static char *
join(const char *dir, size_t dlen, const char *name)
{
	size_t nlen = strlen(name);
	char *p = malloc(dlen + 1 + nlen + 1);

	if (p != NULL) {
		memcpy(p, dir, dlen);
		p[dlen] = '/';
		memcpy(p + dlen + 1, name, nlen + 1);
	}
	return p;
}

/* Add image name of the directory being read as a sample. */
static int
take_file(struct scan *s, const char *name, struct ent_to *to, int64_t label)
{
	size_t len = strlen(s->rel);
	char *path, *open_path = to->target;

	to->target = NULL;
	if ((path = join(s->rel, len, name)) == NULL) {
		free(open_path);
		return -ENOMEM;
	}
	if (open_path == NULL && strcmp(s->rel, s->phys) != 0 &&
	    (open_path = join(s->phys, strlen(s->phys), name)) == NULL) {
		free(path);
		return -ENOMEM;
	}
	if (open_path != NULL && strcmp(open_path, path) == 0) {
		free(open_path);
		open_path = NULL;
	}
	return add_sample(s, path, open_path, label, to->guard);
}

/*
 * Add the image files at any depth under fd (taken), s->rel, with label;
 * linked: reached through a link.  Subdirectories are read after the
 * listing, in the order of their names.
 */
static int
scan_dir(struct scan *s, int fd, int64_t label, bool linked)
{
	size_t len = strlen(s->rel), nsub = 0, subcap = 0;
	struct subdir *subs = NULL;
	struct dirent *de;
	bool skip;
	DIR *d;
	int r;

	if ((r = ds_scan_push_dir(s, fd, linked, &skip)) != 0 || skip) {
		close(fd);
		return r != 0 ? scan_error(s, NULL, r) : 0;
	}
	if ((d = fdopendir(fd)) == NULL) {
		r = scan_error(s, NULL, -errno);
		close(fd);
		goto out;
	}
	for (;;) {
		struct ent_to to;
		const char *name;
		int t;

		errno = 0;
		if ((de = readdir(d)) == NULL) {
			r = errno ? -errno : 0;
			if (r != 0)
				scan_error(s, NULL, r);
			break;
		}
		name = de->d_name;
		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			continue;
		if (len + 1 + strlen(name) >= sizeof(s->rel)) {
			r = scan_error(s, name, -ENAMETOOLONG);
			break;
		}
		if (name[0] == '.') {
			if ((r = ds_left_add(s->ds, s->rel, name,
				 DS_LEFT_HIDDEN, NULL, 0)) != 0)
				break;
			continue;
		}
		if ((t = ds_scan_entry(s, dirfd(d), de, &to)) < 0) {
			r = t;
			break;
		}
		if (t == ENT_FILE && ds_is_image_name(name)) {
			if ((r = take_file(s, name, &to, label)) != 0)
				break;
		} else if (t == ENT_DIR) {
			if (nsub == subcap) {
				size_t cap = subcap ? 2 * subcap : 16;
				struct subdir *v =
				    realloc(subs, cap * sizeof(*v));

				if (v == NULL) {
					free(to.target);
					r = -ENOMEM;
					break;
				}
				subs = v;
				subcap = cap;
			}
			subs[nsub].target = to.target;
			subs[nsub].guard = to.guard;
			if ((subs[nsub].name = strdup(name)) == NULL) {
				free(to.target);
				r = -ENOMEM;
				break;
			}
			nsub++;
		} else {
			free(to.target);
			if (t == ENT_FILE &&
			    (r = ds_left_add(s->ds, s->rel, name, DS_LEFT_NAME,
				 NULL, 0)) != 0)
				break;
		}
	}
	if (r == 0 && nsub > 0)
		qsort(subs, nsub, sizeof(*subs), by_subdir);
	for (size_t i = 0; r == 0 && i < nsub; i++)
		r = scan_sub(s, dirfd(d), &subs[i], label, linked);
	for (size_t i = 0; i < nsub; i++) {
		free(subs[i].name);
		free(subs[i].target);
	}
	free(subs);
	closedir(d);
out:
	s->depth--;
	if (r == -ENOMEM)
		snprintf(s->err, s->errlen, "%s", strerror(ENOMEM));
	return r;
}

static void
free_subdirs(struct subdir *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].target);
	}
	free(v);
}

/*
 * The class directories of root (fd, s->rel and s->phys empty), sorted by
 * name, hidden ones and links not followed left out.
 */
static int
list_classes(struct scan *s, int fd, struct subdir **out, size_t *nout)
{
	struct subdir *v = NULL, *nv;
	size_t n = 0, cap = 0;
	struct dirent *de;
	struct ent_to to;
	DIR *d;
	int r = 0, dfd, t;

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
		if (de->d_name[0] == '.')
			continue;
		if ((t = ds_scan_entry(s, fd, de, &to)) < 0) {
			r = t;
			break;
		}
		if (t != ENT_DIR) {
			free(to.target);
			if (t == ENT_FILE &&
			    (r = ds_left_add(s->ds, "", de->d_name,
				 DS_LEFT_ROOT, NULL, 0)) != 0)
				break;
			continue;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			if ((nv = realloc(v, cap * sizeof(*v))) == NULL) {
				free(to.target);
				r = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[n].target = to.target;
		v[n].guard = to.guard;
		if ((v[n].name = strdup(de->d_name)) == NULL) {
			free(to.target);
			r = -ENOMEM;
			break;
		}
		n++;
	}
	closedir(d);
	if (r != 0) {
		if (r == -ENOMEM)
			snprintf(s->err, s->errlen, "%s", strerror(ENOMEM));
		free_subdirs(v, n);
		return r;
	}
	if (n > 0)
		qsort(v, n, sizeof(*v), by_subdir);
	*out = v;
	*nout = n;
	return 0;
}

static int
scan_tree(struct scan *s, struct dataset *ds)
{
	struct subdir *cls = NULL;
	size_t ncls = 0;
	int fd, r;
	bool skip;

	fd = open(ds->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return scan_error(s, NULL, -errno);
	s->rootfd = fd;
	/* The root is the first ancestor of every class directory. */
	if ((r = ds_scan_push_dir(s, fd, false, &skip)) != 0) {
		r = scan_error(s, NULL, r);
		goto out;
	}
	if ((r = list_classes(s, fd, &cls, &ncls)) != 0)
		goto out;
	if (ncls > 0 &&
	    (ds->classes = calloc(ncls, sizeof(*ds->classes))) == NULL) {
		snprintf(s->err, s->errlen, "%s", strerror(ENOMEM));
		r = -ENOMEM;
		goto out;
	}
	ds->nclasses = ncls;
	for (size_t i = 0; i < ncls; i++)
		ds->classes[i] = cls[i].name; /* transferred below */
	for (size_t i = 0; i < ncls; i++) {
		s->rel[0] = s->phys[0] = '\0';
		s->depth = 1; /* the root */
		/* Each class reads what its links reach, as torchvision's
		 * does (a class subset of links into one tree). */
		if (s->linked.used != NULL)
			memset(s->linked.used, 0,
			    s->linked.cap * sizeof(*s->linked.used));
		s->linked.n = 0;
		if ((r = scan_sub(s, fd, &cls[i], (int64_t)i, false)) != 0)
			goto out;
	}
out:
	for (size_t i = 0; i < ncls; i++) {
		if (ds->classes == NULL)
			free(cls[i].name);
		free(cls[i].target);
	}
	free(cls);
	close(fd);
	s->rootfd = -1;
	return r;
}

int
ds_scan(struct dataset *ds, const char *root, ds_progress_fn progress,
    void *arg, char *err, size_t errlen)
{
	struct scan s = {0};
	int r;

	s.progress = progress;
	s.arg = arg;
	s.root = root;
	s.err = err;
	s.errlen = errlen;
	s.realroot = ds->root;
	s.rootlen = strcmp(ds->root, "/") == 0 ? 0 : strlen(ds->root);
	s.rootfd = -1;
	s.ds = ds;
	s.guarded = ds_guard_active();
	if ((s.slashfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		r = scan_error(&s, NULL, -errno);
		goto out;
	}
	if ((r = scan_tree(&s, ds)) != 0) {
		ds_free_samples(s.v, s.n);
		goto out;
	}
	if (s.n == 0) {
		char skipped[512];

		ds_skipped_text(ds, skipped, sizeof(skipped));
		snprintf(err, errlen,
		    "no JPEG or PNG images found under %s%s%s%s", root,
		    skipped[0] ? " (skipped: " : "", skipped,
		    skipped[0] ? ")" : "");
		r = -ENOENT;
		free(s.v);
		goto out;
	}
	qsort(s.v, s.n, sizeof(*s.v), by_path);
	ds->samples = s.v; /* transferred */
	ds->n = s.n;
out:
	if (s.slashfd >= 0)
		close(s.slashfd);
	free(s.up);
	free(s.linked.v);
	free(s.linked.used);
	return r;
}
