/*
 * ds_scan_entry.c - layer: dataset/ (the datasets), the ImageFolder backend's
 * entries (under ds_scan.c; calls ds_guard.c and ds_skipped.c).  What
 * one directory entry of the scan is, and where a symbolic link leads.
 *
 * Links are followed as torchvision's ImageFolder follows them
 * (os.walk(followlinks=True), then open): to files and directories,
 * inside the root and out of it (a Hugging Face hub snapshot's
 * ../../blobs/HASH, DVC's and git-annex's caches, a class subset made
 * with ln -s).  A link is resolved once here (realpath) and what it
 * leads to is opened later through no link (ds_open_beneath from the
 * root, or from "/" for a target out of the root).  Left out, counted
 * and kept for --check (ds_left_add), never followed:
 *   - a dangling link, and one realpath cannot resolve (a loop of
 *     links: ELOOP; a directory on the way that cannot be searched);
 *   - a link to a directory that holds the root (the root itself, "/",
 *     ".." from a class), or to one being read (its own ancestry): the
 *     tree is walked once, not forever; a directory read already through
 *     a link in the same class is read once (linear in the size of the
 *     tree against link fans: issue 12 item 9);
 *   - a FIFO, socket or device, or a link to one;
 *   - when feedfs can read what others cannot (root), a link out of the
 *     root to what the link's owner may not read, and what a directory
 *     reached through such a link holds that its owner may not read
 *     (ds_guard.c); links made by root are followed.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset/ds_scan_int.h"

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

int
ds_scan_push_dir(struct scan *s, int fd, bool linked, bool *skip)
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
			return ds_left_add(
			    s->ds, s->rel, "", DS_LEFT_LOOP, s->phys, 0);
		}
	if (linked) {
		if ((r = dirset_add(&s->linked, &id)) < 0)
			return r;
		if (r == 1) {
			*skip = true;
			return ds_left_add(
			    s->ds, s->rel, "", DS_LEFT_AGAIN, s->phys, 0);
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

/* The absolute path of entry name of the directory being read, through
 * no link; -ENAMETOOLONG. */
static int
abs_of(const struct scan *s, const char *name, char *buf, size_t len)
{
	size_t n;

	if (s->phys[0] == '/')
		n = (size_t)snprintf(
		    buf, len, "%s%s%s", s->phys, s->phys[1] ? "/" : "", name);
	else
		n = (size_t)snprintf(buf, len, "%s/%s%s%s",
		    s->rootlen ? s->realroot : "", s->phys,
		    s->phys[0] ? "/" : "", name);
	return n < len ? 0 : -ENAMETOOLONG;
}

/* Is path (absolute, resolved) the root or a directory above it? */
static bool
holds_root(const struct scan *s, const char *path)
{
	size_t n = strlen(path);

	if (strcmp(path, "/") == 0)
		return true;
	return strncmp(s->realroot, path, n) == 0 &&
	       (s->realroot[n] == '/' || s->realroot[n] == '\0');
}

/* Left out: entry name of the directory being read. */
static int
left(struct scan *s, const char *name, enum ds_left_why why, const char *target,
    uint32_t uid)
{
	return ds_left_add(s->ds, s->rel, name, why, target, uid);
}

/*
 * Where the link name (lst: its lstat) of directory fd leads, as the
 * header says: ENT_FILE or ENT_DIR with *to set, else ENT_SKIP (left out,
 * counted).  -ENOMEM.
 */
static int
resolve_link(struct scan *s, int fd, const char *name, const struct stat *lst,
    struct ent_to *to)
{
	char path[PATH_MAX], text[PATH_MAX], why[PATH_MAX + 64], *res;
	struct stat st;
	uint32_t g = 0;
	size_t below;
	ssize_t tn;
	int e, r, t;

	if ((tn = readlinkat(fd, name, text, sizeof(text) - 1)) < 0)
		tn = 0;
	text[tn] = '\0';
	if ((r = abs_of(s, name, path, sizeof(path))) != 0)
		return left(s, name, DS_LEFT_UNREACHABLE, strerror(-r), 0);
	if ((res = realpath(path, NULL)) == NULL) {
		e = errno;
		if (e == ENOMEM)
			return -ENOMEM;
		if (e == ENOENT || e == ENOTDIR)
			return left(s, name, DS_LEFT_DANGLING, text, 0);
		if (e == ELOOP)
			return left(s, name, DS_LEFT_LOOP, text, 0);
		snprintf(why, sizeof(why), "%s: %s", text, strerror(e));
		return left(s, name, DS_LEFT_UNREACHABLE, why, 0);
	}
	if (stat(res, &st) != 0) {
		snprintf(why, sizeof(why), "%s: %s", res, strerror(errno));
		r = left(s, name, DS_LEFT_UNREACHABLE, why, 0);
		goto out;
	}
	t = S_ISDIR(st.st_mode)	  ? ENT_DIR
	    : S_ISREG(st.st_mode) ? ENT_FILE
				  : ENT_SKIP;
	if (t == ENT_SKIP) {
		r = left(s, name, DS_LEFT_SPECIAL, res, 0);
		goto out;
	}
	if (t == ENT_DIR && holds_root(s, res)) {
		r = left(s, name, DS_LEFT_LOOP, text, 0);
		goto out;
	}
	if ((below = ds_below_root(s->ds, res)) != 0) {
		/* Inside the root: relative to it. */
		memmove(res, res + below, strlen(res + below) + 1);
	} else {
		/* Out of it: a user's link speaks for that user alone. */
		if (s->guard != 0)
			g = s->guard;
		else if (s->guarded && lst->st_uid != 0 &&
			 (r = ds_guard_of(s->ds, (uint32_t)lst->st_uid, &g)) !=
			     0)
			goto out;
		if (g != 0 && !ds_guard_path(s->ds, g, res)) {
			r = left(s, name, DS_LEFT_REFUSED, res,
			    s->ds->guards[g - 1].uid);
			goto out;
		}
	}
	if (!s->guarded && t == ENT_DIR &&
	    faccessat(AT_FDCWD, path, R_OK | X_OK, AT_EACCESS) != 0) {
		snprintf(why, sizeof(why), "%s: %s", text, strerror(errno));
		r = left(s, name, DS_LEFT_UNREACHABLE, why, 0);
		goto out;
	}
	to->target = res; /* transferred */
	to->guard = g;
	return t;
out:
	free(res);
	return r < 0 ? r : ENT_SKIP;
}

/* A file or directory met in a directory a guarded link led to: may
 * the guard's user have it?  ENT_SKIP (refused, counted) if not. */
static int
guarded_entry(struct scan *s, int fd, const char *name, int t)
{
	char path[PATH_MAX];
	struct stat st;

	if (abs_of(s, name, path, sizeof(path)) != 0 ||
	    fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
	    !ds_guard_allows(s->ds, s->guard, &st, ds_has_acl(-1, path),
		t == ENT_DIR ? 5 : 4)) {
		int r = left(s, name, DS_LEFT_REFUSED, path,
		    s->ds->guards[s->guard - 1].uid);

		return r < 0 ? r : ENT_SKIP;
	}
	return t;
}

int
ds_scan_entry(
    struct scan *s, int fd, const struct dirent *de, struct ent_to *to)
{
	struct stat st;
	int t, r;

	to->target = NULL;
	to->guard = s->guard;
	if (de->d_type == DT_DIR || de->d_type == DT_REG)
		t = de->d_type == DT_DIR ? ENT_DIR : ENT_FILE;
	else if (de->d_type != DT_LNK && de->d_type != DT_UNKNOWN)
		t = ENT_SKIP;
	else if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return ENT_SKIP; /* gone since the listing */
	else if (S_ISLNK(st.st_mode))
		return resolve_link(s, fd, de->d_name, &st, to);
	else
		t = S_ISDIR(st.st_mode)	  ? ENT_DIR
		    : S_ISREG(st.st_mode) ? ENT_FILE
					  : ENT_SKIP;
	if (t == ENT_SKIP) {
		r = left(s, de->d_name, DS_LEFT_SPECIAL, NULL, 0);
		return r < 0 ? r : ENT_SKIP;
	}
	if (s->guard != 0)
		return guarded_entry(s, fd, de->d_name, t);
	return t;
}
