/*
 * dir.c - cache/ (the store), layer store (calls nothing of the sharing
 * layer).  Where trust in a cache directory is decided, once, on a
 * descriptor: cache_dir_open opens the directory (the last component not
 * followed), checks what it opened (a directory, this user's, writable by
 * nobody else), and the callers open what lies under it relative to that
 * descriptor (cache_dir_openat: never following a link, never blocking on
 * a FIFO).  The mount's store (open.c), feedfs-cache, feedfs-fill and the
 * shard index (cache_index_open) all start here, so nothing is read or
 * written under a cache_dir before it passed.  And the format file beside
 * the store (cache_dir_format), which says its format to those who do not
 * open it.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache_int.h"

/*
 * The checks of an opened directory fd (named name in messages): ours,
 * writable by nobody else; one that others may read or enter (made by an
 * older feedfs) is made 0700.  0, or -EACCES and why.
 */
static int
check_fd(int fd, const char *name, char *err, size_t errlen)
{
	struct stat st;

	if (fstat(fd, &st) != 0) {
		snprintf(err, errlen, "%s: %s", name, strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s is not a directory", name);
		return -ENOTDIR;
	}
	if (st.st_uid != geteuid()) {
		snprintf(err, errlen,
		    "%s is owned by uid %lu, not by this user (uid %lu): "
		    "refusing a cache that another user controls",
		    name, (unsigned long)st.st_uid, (unsigned long)geteuid());
		return -EACCES;
	}
	if ((st.st_mode & 022) != 0) {
		snprintf(err, errlen,
		    "%s is writable by group or others (mode %04o): refusing "
		    "it (chmod 700 %s)",
		    name, (unsigned)(st.st_mode & 07777), name);
		return -EACCES;
	}
	if ((st.st_mode & 077) != 0)
		(void)fchmod(fd, 0700);
	return 0;
}

/* openat(at, name) as a directory, the last component not followed; the
 * message for a link says so. */
static int
open_dir_at(
    int at, const char *name, const char *shown, char *err, size_t errlen)
{
	struct stat st;
	int fd;

	fd = openat(at, name,
	    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	fd = -errno;
	if ((fd == -ELOOP || fd == -ENOTDIR) &&
	    fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(st.st_mode)) {
		snprintf(err, errlen,
		    "%s is a symbolic link: refusing it (name the directory "
		    "itself)",
		    shown);
		fd = -ELOOP; /* O_DIRECTORY says ENOTDIR */
	} else
		snprintf(err, errlen, "%s: %s", shown, strerror(-fd));
	return fd;
}

/* Symbolic links followed on the way to one cache_dir, at most. */
#define DIR_MAX_LINKS 40

/*
 * Whether a directory on the way to a cache_dir (st, named name) can be
 * trusted with what lies under it: root's or this user's, and writable by
 * nobody else unless sticky (as /tmp: others can neither rename nor
 * remove what is ours in it).  Else whoever may write it could put
 * another directory in the cache_dir's place.  0, or -EACCES and why.
 */
static int
check_parent(const struct stat *st, const char *name, char *err, size_t errlen)
{
	if (st->st_uid != 0 && st->st_uid != geteuid()) {
		snprintf(err, errlen,
		    "%s is owned by uid %lu, not by root or this user (uid "
		    "%lu): it could replace the cache directory under it; "
		    "refusing it",
		    name, (unsigned long)st->st_uid, (unsigned long)geteuid());
		return -EACCES;
	}
	if ((st->st_mode & 022) != 0 && (st->st_mode & S_ISVTX) == 0) {
		snprintf(err, errlen,
		    "%s is writable by group or others and not sticky (mode "
		    "%04o): they could replace the cache directory under it; "
		    "refusing it",
		    name, (unsigned)(st->st_mode & 07777));
		return -EACCES;
	}
	return 0;
}

/* at/name (at a directory's path) into out, for messages. */
static void
join(char *out, size_t len, const char *at, const char *name)
{
	snprintf(out, len, "%s%s%.*s", at, strcmp(at, "/") == 0 ? "" : "/", 255,
	    name);
}

/*
 * The directory holding dir's last component, walked from "/" (a
 * relative dir from the working directory) one component at a time,
 * each checked on its descriptor (check_parent) before the next is
 * opened under it: a symbolic link on the way is followed only when
 * root or this user owns it, and its target walked the same way (at most
 * DIR_MAX_LINKS); with create, a missing directory is made 0700 under
 * its checked parent.  *pfd, and the last component in last
 * (NAME_MAX + 1 bytes); or -errno with err.
 */
static int
open_parent(const char *dir, bool create, int *pfd, char *last, char *err,
    size_t errlen)
{
	char rest[2 * 4096], at[4400], shown[4400], target[4096];
	unsigned links = 0;
	struct stat st;
	int cur = -1, fd, r;

	if (dir[0] != '/' && getcwd(target, sizeof(target)) == NULL) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", dir, strerror(-r));
		return r;
	}
	if ((size_t)snprintf(rest, sizeof(rest), "%s/%s",
		dir[0] == '/' ? "" : target, dir) >= sizeof(rest)) {
		snprintf(err, errlen, "%s: %s", dir, strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
restart: /* rest is an absolute path */
	if (cur >= 0)
		close(cur);
	strcpy(at, "/");
	/* O_PATH on the way: a directory we may pass through but not list
	 * (0711) is enough, as for any path lookup. */
	if ((cur = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    fstat(cur, &st) != 0) {
		r = -errno;
		snprintf(err, errlen, "/: %s", strerror(-r));
		goto fail;
	}
	if ((r = check_parent(&st, "/", err, errlen)) != 0)
		goto fail;
	for (char *p = rest;;) {
		char *name;
		size_t n;
		ssize_t k;

		while (*p == '/')
			p++;
		name = p;
		n = strcspn(p, "/");
		p += n;
		while (*p == '/')
			*p++ = '\0';
		if (n == 0 || n > 255) {
			r = n == 0 ? -EINVAL : -ENAMETOOLONG;
			snprintf(err, errlen, "%s: %s", dir,
			    n == 0 ? "not a name for a cache directory"
				   : strerror(ENAMETOOLONG));
			goto fail;
		}
		if (*p == '\0') { /* the cache_dir itself: the caller's */
			memcpy(last, name, n + 1);
			*pfd = cur;
			return 0;
		}
		join(shown, sizeof(shown), at, name);
		if (fstatat(cur, name, &st, AT_SYMLINK_NOFOLLOW) != 0 &&
		    (errno != ENOENT || !create ||
			(mkdirat(cur, name, 0700) != 0 && errno != EEXIST) ||
			fstatat(cur, name, &st, AT_SYMLINK_NOFOLLOW) != 0)) {
			r = -errno;
			/* the cache_dir named, and the part of it missing */
			if (r == -ENOENT)
				snprintf(err, errlen, "%s: %s (no %s)", dir,
				    strerror(-r), shown);
			else
				snprintf(
				    err, errlen, "%s: %s", shown, strerror(-r));
			goto fail;
		}
		if (S_ISLNK(st.st_mode)) {
			if (st.st_uid != 0 && st.st_uid != geteuid()) {
				snprintf(err, errlen,
				    "%s is a symbolic link owned by uid %lu, "
				    "not by root or this user: refusing to "
				    "follow it to the cache directory",
				    shown, (unsigned long)st.st_uid);
				r = -EACCES;
				goto fail;
			}
			k = readlinkat(cur, name, target, sizeof(target));
			if (++links > DIR_MAX_LINKS || k <= 0 ||
			    (size_t)k >= sizeof(target) ||
			    (size_t)k + 1 + strlen(p) >= sizeof(rest)) {
				r = links > DIR_MAX_LINKS ? -ELOOP
				    : k < 0		  ? -errno
							  : -ENAMETOOLONG;
				snprintf(
				    err, errlen, "%s: %s", shown, strerror(-r));
				goto fail;
			}
			/* Its target, then what followed the link. */
			memmove(rest + k + 1, p, strlen(p) + 1);
			memcpy(rest, target, (size_t)k);
			rest[k] = '/';
			if (rest[0] == '/')
				goto restart;
			p = rest; /* from cur, where the link is */
			continue;
		}
		fd = openat(
		    cur, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) != 0) {
			r = -errno;
			snprintf(err, errlen, "%s: %s", shown, strerror(-r));
			if (fd >= 0)
				close(fd);
			goto fail;
		}
		close(cur);
		cur = fd;
		snprintf(at, sizeof(at), "%s", shown);
		if ((r = check_parent(&st, at, err, errlen)) != 0)
			goto fail;
	}
fail:
	if (cur >= 0)
		close(cur);
	return r;
}

int
cache_dir_open(const char *dir, bool create, char *err, size_t errlen)
{
	char last[256];
	int pfd, fd, r;

	if (dir == NULL || dir[0] == '\0') {
		snprintf(err, errlen, "no cache directory");
		return -EINVAL;
	}
	if ((r = open_parent(dir, create, &pfd, last, err, errlen)) != 0)
		return r;
	if (create && mkdirat(pfd, last, 0700) != 0 && errno != EEXIST) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		close(pfd);
		return r;
	}
	fd = open_dir_at(pfd, last, dir, err, errlen);
	close(pfd);
	if (fd < 0)
		return fd;
	if ((r = check_fd(fd, dir, err, errlen)) != 0) {
		close(fd);
		return r;
	}
	return fd;
}

int
cache_dir_openat(int dfd, const char *name, int flags, mode_t mode)
{
	int fd = openat(dfd, name,
	    flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, mode);

	return fd >= 0 ? fd : -errno;
}

int
cache_dir_entries_ok(int dfd, const char *dir, char *err, size_t errlen)
{
	struct dirent *de;
	struct stat st;
	DIR *d;
	int fd, r = 0;

	if ((fd = dup(dfd)) < 0 || (d = fdopendir(fd)) == NULL) {
		r = -errno;
		if (fd >= 0)
			close(fd);
		snprintf(err, errlen, "%s: %s", dir, strerror(-r));
		return r;
	}
	rewinddir(d);
	while (r == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue; /* gone since: nothing to open */
		if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) ||
		    S_ISSOCK(st.st_mode))
			continue;
		snprintf(err, errlen,
		    "%s/%s is %s, not a file of the store: refusing the "
		    "cache (remove it)",
		    dir, de->d_name,
		    S_ISLNK(st.st_mode)	   ? "a symbolic link"
		    : S_ISFIFO(st.st_mode) ? "a FIFO"
					   : "a device");
		r = -EACCES;
	}
	closedir(d); /* closes the dup */
	return r;
}

int
cache_index_open(const char *dir, bool create, char *err, size_t errlen)
{
	char shown[4200], why[4400];
	int dfd, fd, r;

	if ((dfd = cache_dir_open(dir, create, why, sizeof(why))) < 0) {
		snprintf(err, errlen, "%s", why);
		return dfd;
	}
	snprintf(shown, sizeof(shown), "%s/%s", dir, CACHE_INDEX_DIR);
	if (create && mkdirat(dfd, CACHE_INDEX_DIR, 0700) != 0 &&
	    errno != EEXIST) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", shown, strerror(errno));
		close(dfd);
		return r;
	}
	fd = open_dir_at(dfd, CACHE_INDEX_DIR, shown, why, sizeof(why));
	close(dfd);
	if (fd < 0) {
		snprintf(err, errlen, "%s", why);
		return fd;
	}
	if ((r = check_fd(fd, shown, why, sizeof(why))) != 0) {
		snprintf(err, errlen, "%s", why);
		close(fd);
		return r;
	}
	return fd;
}

/* ---- the format file ---------------------------------------------------- */

/* The decimal version in the format file of dfd: it, or 0. */
static int
read_format(int dfd)
{
	char buf[16];
	struct stat st;
	ssize_t n;
	int fd, v = 0;

	if ((fd = cache_dir_openat(dfd, CACHE_FORMAT_FILE, O_RDONLY, 0)) < 0)
		return 0;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    (n = read(fd, buf, sizeof(buf) - 1)) > 0) {
		buf[n] = '\0';
		for (char *p = buf; *p >= '0' && *p <= '9' && v < 100000; p++)
			v = v * 10 + (*p - '0');
	}
	close(fd);
	return v;
}

int
cache_dir_format(const char *dir)
{
	char err[256];
	int dfd = cache_dir_open(dir, false, err, sizeof(err)), v;

	if (dfd < 0)
		return 0;
	v = read_format(dfd);
	close(dfd);
	return v;
}

void
cache_dir_format_write(int dfd)
{
	char tmp[64], text[16];
	int fd, n;
	bool ok;

	if (read_format(dfd) == CACHE_FORMAT_VERSION)
		return;
	n = snprintf(text, sizeof(text), "%d\n", CACHE_FORMAT_VERSION);
	snprintf(tmp, sizeof(tmp), "%s.%ld", CACHE_FORMAT_FILE, (long)getpid());
	if ((fd = cache_dir_openat(
		 dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600)) < 0)
		return;
	/* Best effort: a full disk leaves the old file (or none). */
	ok = write(fd, text, (size_t)n) == n;
	if (close(fd) != 0 || !ok ||
	    renameat(dfd, tmp, dfd, CACHE_FORMAT_FILE) != 0)
		unlinkat(dfd, tmp, 0);
}
