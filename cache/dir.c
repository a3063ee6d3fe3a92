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
 * mkdir(path, 0700), where slash is the '/' before path's last component
 * (NULL: none, the parent is the working directory); as root, never in
 * a directory of another user: /home/alice/.cache made root's 0700 would
 * break ~/.cache for every program of hers.  0, or -errno with err.
 */
static int
mkdir_own(char *path, char *slash, char *err, size_t errlen)
{
	struct stat st;
	int r = 0;

	if (geteuid() == 0 && access(path, F_OK) != 0) {
		if (slash == NULL)
			r = stat(".", &st);
		else if (slash == path)
			r = stat("/", &st);
		else {
			*slash = '\0';
			r = stat(path, &st);
			*slash = '/';
		}
		if (r == 0 && st.st_uid != 0) {
			snprintf(err, errlen,
			    "%s: its parent belongs to uid %lu, and feedfs, as "
			    "root, makes no directory in another user's (make "
			    "it as that user, or mount for them: -o uid=)",
			    path, (unsigned long)st.st_uid);
			return -EACCES;
		}
	}
	if (mkdir(path, 0700) != 0 && errno != EEXIST) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-r));
		return r;
	}
	return 0;
}

/* mkdir -p of dir: the directories it makes are 0700 (mkdir_own). */
static int
mkdir_parents(const char *dir, char *err, size_t errlen)
{
	char buf[4096], *prev;
	size_t len = strlen(dir);

	if (len == 0 || len >= sizeof(buf)) {
		snprintf(err, errlen, "%s: %s", dir, strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	memcpy(buf, dir, len + 1);
	prev = buf[0] == '/' ? buf : NULL;
	for (char *p = buf + 1;; p++) {
		char c = *p;
		int r;

		if (c != '/' && c != '\0')
			continue;
		*p = '\0';
		r = mkdir_own(buf, prev, err, errlen);
		*p = c;
		if (r != 0 || c == '\0')
			return r;
		prev = p;
	}
}

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

int
cache_dir_open(const char *dir, bool create, char *err, size_t errlen)
{
	int fd, r;

	if (dir == NULL || dir[0] == '\0') {
		snprintf(err, errlen, "no cache directory");
		return -EINVAL;
	}
	if (create && (r = mkdir_parents(dir, err, errlen)) != 0)
		return r;
	if ((fd = open_dir_at(AT_FDCWD, dir, dir, err, errlen)) < 0)
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
