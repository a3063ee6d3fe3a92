/*
 * ds_scan.c - layer: dataset/ (the datasets), the ImageFolder backend (under
 * dataset.c; calls ds_safeopen.c, ds_skipped.c and ds_common.c).  The
 * ImageFolder scan of a dataset's root (see dataset.h).
 *
 * The scan reads directories only (readdir's d_type, fstatat where it is
 * unknown or a symlink), never the files, and sorts once at the end, so
 * 1.3M files (ImageNet) take about as long as listing them.
 *
 * Symbolic links (issue 12 item 9: the daemon runs as root, and the
 * dataset may be writable by others) are followed, to files and to
 * directories, class directories included, only where realpath() of the
 * link stays inside realpath(root); links leading out of the root, broken
 * links and loops are skipped.  A sample reached through a link keeps its
 * path (the link's) and gets the resolved one as open_path, so that
 * ds_sample_open follows no link.  Directories are bounded against link
 * fans (a chain of directories each linking twice to the next would take
 * exponential time): the real tree is read once, and a directory reached
 * through a link (or below one) is read at most once more over the whole
 * scan, whichever link reaches it first in the order of names; a link back
 * into its own ancestry, the root included, is skipped.  So the scan is
 * linear in the size of the tree, and the samples do not depend on
 * readdir's order.  An unreadable directory is an error.  A class
 * directory without images stays a class (labels do not move).
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
#include <strings.h>
#include <unistd.h>

#include "dataset/ds_int.h"

struct dirid {
	dev_t dev;
	ino_t ino;
};

/* The directories read through links: an open-addressing hash set. */
struct dirset {
	struct dirid *v;
	bool *used;
	size_t cap, n;
};

struct scan {
	struct ds_sample *v;
	size_t n, cap;
	ds_progress_fn progress;
	void *arg;
	const char *root;     /* as given, for messages */
	const char *realroot; /* realpath of root */
	size_t rootlen;	      /* of realroot; 0 when it is "/" */
	char rel[PATH_MAX];   /* path of the directory being read, from root */
	char phys[PATH_MAX];  /* the same through no link (rel if none) */
	struct dirid *up;     /* the directories from the root down */
	size_t depth, upcap;
	struct dirset linked; /* directories read through a link */
	struct dataset *ds;   /* its skipped files are counted */
	int rootfd;	      /* the root, open */
	char *err;
	size_t errlen;
};

/* A subdirectory to read once its parent is listed. */
struct subdir {
	char *name;
	char *target; /* a link's target, relative to the root; NULL: none */
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

/*
 * The names the scan takes as images: .jpg, .jpeg, .png and .webp, any
 * case.  The decoder goes by the magic bytes, not by this name.
 */
static bool
is_image(const char *name)
{
	size_t n = strlen(name);

	return (n > 4 && strcasecmp(name + n - 4, ".jpg") == 0) ||
	       (n > 5 && strcasecmp(name + n - 5, ".jpeg") == 0) ||
	       (n > 4 && strcasecmp(name + n - 4, ".png") == 0) ||
	       (n > 5 && strcasecmp(name + n - 5, ".webp") == 0);
}

/* Append a sample (path and open_path, which may be NULL, are taken). */
static int
add_sample(struct scan *s, char *path, char *open_path, int64_t label)
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
	s->v[s->n].path = path;		  /* transferred */
	s->v[s->n].open_path = open_path; /* transferred */
	s->v[s->n].label = label;
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

static size_t
dirid_hash(const struct dirid *d, size_t cap)
{
	uint64_t h = (uint64_t)d->ino * 0x9e3779b97f4a7c15ULL ^
		     (uint64_t)d->dev * 0xbf58476d1ce4e5b9ULL;

	return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

/* Add d to the set: 1 if it was there, 0 if added, -ENOMEM. */
static int
dirset_add(struct dirset *set, const struct dirid *d)
{
	size_t i;

	if (2 * (set->n + 1) > set->cap) {
		struct dirset big = {0};

		big.cap = set->cap ? 2 * set->cap : 64;
		big.v = malloc(big.cap * sizeof(*big.v));
		big.used = calloc(big.cap, sizeof(*big.used));
		if (big.v == NULL || big.used == NULL) {
			free(big.v);
			free(big.used);
			return -ENOMEM;
		}
		for (size_t k = 0; k < set->cap; k++)
			if (set->used[k])
				(void)dirset_add(&big, &set->v[k]);
		free(set->v);
		free(set->used);
		*set = big;
	}
	for (i = dirid_hash(d, set->cap); set->used[i];
	     i = (i + 1) & (set->cap - 1))
		if (set->v[i].dev == d->dev && set->v[i].ino == d->ino)
			return 1;
	set->used[i] = true;
	set->v[i] = *d;
	set->n++;
	return 0;
}

/*
 * realpath of ROOT/PHYS/NAME (a link in directory s->phys) when it stays
 * inside the root and is not the root itself: *target gets it, relative
 * to the root (malloc'd).  Returns DT_DIR or DT_REG, or DT_UNKNOWN when
 * the link is to be skipped (broken, a loop, out of the root, anything
 * but a file or a directory).
 */
static int
resolve_link(struct scan *s, const char *name, char **target)
{
	char path[PATH_MAX], *res;
	struct stat st;
	size_t n;
	int t = DT_UNKNOWN;

	n = (size_t)snprintf(path, sizeof(path), "%s/%s%s%s",
	    s->rootlen ? s->realroot : "", s->phys, s->phys[0] ? "/" : "",
	    name);
	if (n >= sizeof(path) || (res = realpath(path, NULL)) == NULL)
		return DT_UNKNOWN;
	if (strncmp(res, s->realroot, s->rootlen) == 0 &&
	    res[s->rootlen] == '/' && res[s->rootlen + 1] != '\0' &&
	    stat(res, &st) == 0) {
		t = S_ISDIR(st.st_mode)	  ? DT_DIR
		    : S_ISREG(st.st_mode) ? DT_REG
					  : DT_UNKNOWN;
	}
	if (t != DT_UNKNOWN) {
		memmove(res, res + s->rootlen + 1,
		    strlen(res + s->rootlen + 1) + 1);
		*target = res; /* transferred */
	} else
		free(res);
	return t;
}

/*
 * The type of entry de of directory fd: DT_DIR, DT_REG or DT_UNKNOWN
 * (anything else: skipped).  A symbolic link gets its target's type, and
 * the target in *target (relative to the root), when resolve_link allows
 * it; else *target stays NULL.  -ENOMEM.
 */
static int
entry_type(struct scan *s, int fd, const struct dirent *de, char **target)
{
	struct stat st;

	*target = NULL;
	if (de->d_type == DT_DIR || de->d_type == DT_REG)
		return de->d_type;
	if (de->d_type != DT_LNK && de->d_type != DT_UNKNOWN)
		return DT_UNKNOWN;
	if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return DT_UNKNOWN;
	if (S_ISLNK(st.st_mode))
		return resolve_link(s, de->d_name, target);
	return S_ISDIR(st.st_mode)   ? DT_DIR
	       : S_ISREG(st.st_mode) ? DT_REG
				     : DT_UNKNOWN;
}

/*
 * Is the directory open as fd to be skipped (*skip): one being read (an
 * ancestor), or, read through a link (linked), one already read through
 * one?  Else it is pushed on the ancestors.
 */
static int
push_dir(struct scan *s, int fd, bool linked, bool *skip)
{
	struct dirid id;
	struct stat st;
	int r;

	*skip = false;
	if (fstat(fd, &st) != 0)
		return -errno;
	id.dev = st.st_dev;
	id.ino = st.st_ino;
	for (size_t i = 0; i < s->depth; i++)
		if (s->up[i].dev == id.dev && s->up[i].ino == id.ino) {
			*skip = true;
			return 0;
		}
	if (linked) {
		if ((r = dirset_add(&s->linked, &id)) < 0)
			return r;
		if (r == 1) {
			*skip = true;
			return 0;
		}
	}
	if (s->depth == s->upcap) {
		size_t cap = s->upcap ? s->upcap * 2 : 16;
		struct dirid *up = realloc(s->up, cap * sizeof(*up));

		if (up == NULL)
			return -ENOMEM;
		s->up = up;
		s->upcap = cap;
	}
	s->up[s->depth++] = id;
	return 0;
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
 * name, a link's target from the root through no further link.  s->rel
 * and s->phys are as they were on return.  (Nothing of PATH_MAX on the
 * stack: the recursion is as deep as the tree.)
 */
static int
scan_sub(
    struct scan *s, int fd, const struct subdir *sd, int64_t label, bool linked)
{
	size_t rlen = strlen(s->rel), plen = strlen(s->phys);
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
	if (sd->target != NULL)
		sub = ds_open_beneath(
		    s->rootfd, sd->target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	else
		sub = openat(fd, sd->name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0) {
		r = -errno;
		goto out;
	}
	r = scan_dir(s, sub, label, linked || sd->target != NULL);
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

/*
 * Add the image files (is_image) at any depth under fd (taken), s->rel, with
 * label; linked: reached through a link.  Subdirectories are read after the
 * listing, in the order of their names.
 */
static int
scan_dir(struct scan *s, int fd, int64_t label, bool linked)
{
	size_t len = strlen(s->rel), nsub = 0, subcap = 0;
	bool same = strcmp(s->rel, s->phys) == 0, skip;
	struct subdir *subs = NULL;
	struct dirent *de;
	DIR *d;
	int r;

	if ((r = push_dir(s, fd, linked, &skip)) != 0 || skip) {
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
		char *path, *open_path, *target;
		size_t nlen;
		int t;

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
		if ((t = entry_type(s, dirfd(d), de, &target)) == DT_UNKNOWN)
			continue;
		nlen = strlen(name);
		if (len + 1 + nlen >= sizeof(s->rel)) {
			free(target);
			r = scan_error(s, name, -ENAMETOOLONG);
			break;
		}
		if (t == DT_REG && is_image(name)) {
			open_path = target;
			if ((path = malloc(len + 1 + nlen + 1)) == NULL) {
				free(open_path);
				r = -ENOMEM;
				break;
			}
			memcpy(path, s->rel, len);
			path[len] = '/';
			memcpy(path + len + 1, name, nlen + 1);
			if (open_path == NULL && !same) {
				size_t plen = strlen(s->phys);

				if ((open_path = malloc(plen + 1 + nlen + 1)) ==
				    NULL) {
					free(path);
					r = -ENOMEM;
					break;
				}
				memcpy(open_path, s->phys, plen);
				open_path[plen] = '/';
				memcpy(open_path + plen + 1, name, nlen + 1);
			}
			if (open_path != NULL && strcmp(open_path, path) == 0) {
				free(open_path);
				open_path = NULL;
			}
			if ((r = add_sample(s, path, open_path, label)) != 0)
				break;
		} else if (t == DT_DIR) {
			if (nsub == subcap) {
				size_t cap = subcap ? 2 * subcap : 16;
				struct subdir *v =
				    realloc(subs, cap * sizeof(*v));

				if (v == NULL) {
					free(target);
					r = -ENOMEM;
					break;
				}
				subs = v;
				subcap = cap;
			}
			subs[nsub].target = target;
			if ((subs[nsub].name = strdup(name)) == NULL) {
				free(target);
				r = -ENOMEM;
				break;
			}
			nsub++;
		} else {
			if (t == DT_REG)
				ds_skipped_count(s->ds, name);
			free(target);
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
 * name, hidden ones and links out of the root left out.
 */
static int
list_classes(struct scan *s, int fd, struct subdir **out, size_t *nout)
{
	struct subdir *v = NULL, *nv;
	size_t n = 0, cap = 0;
	struct dirent *de;
	char *target;
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
		if ((t = entry_type(s, fd, de, &target)) != DT_DIR) {
			if (t == DT_REG)
				s->ds->skipped_root++; /* not in a class */
			free(target);
			continue;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			if ((nv = realloc(v, cap * sizeof(*v))) == NULL) {
				free(target);
				r = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[n].target = target;
		if ((v[n].name = strdup(de->d_name)) == NULL) {
			free(target);
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
	if ((r = push_dir(s, fd, false, &skip)) != 0) {
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
	free(s.up);
	free(s.linked.v);
	free(s.linked.used);
	return r;
}
