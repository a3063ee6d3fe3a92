/*
 * registry.c - cache/ (the store), layer store (under options.c; calls
 * nothing).  The node's registry of caches (core/node.h): a directory
 * root made 1777, where each cache with cache_size = auto leaves one
 * entry, "DEV.UID.INO" (its filesystem, its user, its directory), owned
 * by its user, holding its path, touched at each open.  Counting a
 * filesystem's entries tells how many users share the node's bound
 * there, and how many caches this user has among them.
 *
 * A user can only make entries that are theirs (sticky: nor remove
 * others'): an entry counts only when its owner is the uid its name says,
 * and a user counts once however many entries they make.  An entry
 * untouched for CACHE_REGISTRY_STALE_DAYS is a cache nobody uses; an
 * entry of this user whose directory is gone is removed.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache_int.h"

/* The users counted, at most (a directory of more says "at least"). */
#define REG_MAX_USERS 4096

/* Whether this user's entry name (at reg) still names a directory of
 * ours with its inode. */
static bool
mine_alive(int reg, const char *name, unsigned long ino)
{
	char path[4097];
	struct stat st;
	ssize_t n;
	int fd;

	if ((fd = openat(reg, name,
		 O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)) < 0)
		return false;
	n = read(fd, path, sizeof(path) - 1);
	close(fd);
	if (n <= 0)
		return false;
	path[n] = '\0';
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode) &&
	       st.st_ino == ino && st.st_uid == geteuid();
}

int
cache_registry_count(const char *reg_path, int dfd, const char *dir,
    unsigned *users, unsigned *mine, char *err, size_t errlen)
{
	uid_t *seen;
	char name[96];
	struct stat rs, ds, es;
	struct dirent *de;
	unsigned nseen = 0, nmine = 0;
	time_t now = time(NULL);
	DIR *d;
	int reg, fd = -1;

	reg = open(reg_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (reg < 0 || fstat(reg, &rs) != 0) {
		snprintf(err, errlen, "%s: %s", reg_path, strerror(errno));
		if (reg >= 0)
			close(reg);
		return -errno;
	}
	if (rs.st_uid != 0 || (rs.st_mode & S_ISVTX) == 0) {
		snprintf(err, errlen,
		    "%s is not root's with the sticky bit (uid %lu, mode "
		    "%04o; expected root's, 1777): its entries are not counted",
		    reg_path, (unsigned long)rs.st_uid,
		    (unsigned)(rs.st_mode & 07777));
		close(reg);
		return -EACCES;
	}
	if (fstat(dfd, &ds) != 0) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		close(reg);
		return -errno;
	}
	/* This cache's entry, made or touched (a failure: not counted). */
	snprintf(name, sizeof(name), "%" PRIx64 ".%lu.%lu", (uint64_t)ds.st_dev,
	    (unsigned long)geteuid(), (unsigned long)ds.st_ino);
	if ((fd = openat(reg, name,
		 O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK |
		     O_TRUNC,
		 0644)) >= 0) {
		(void)!write(fd, dir, strlen(dir));
		(void)futimens(fd, NULL);
		close(fd);
	}
	if ((seen = calloc(REG_MAX_USERS, sizeof(*seen))) == NULL ||
	    (fd = dup(reg)) < 0 || (d = fdopendir(fd)) == NULL) {
		int r = seen ? -errno : -ENOMEM;

		snprintf(err, errlen, "%s: %s", reg_path, strerror(-r));
		if (seen && fd >= 0)
			close(fd);
		free(seen);
		close(reg);
		return r;
	}
	while ((de = readdir(d)) != NULL) {
		uint64_t dev;
		unsigned long uid, ino;
		int end = 0;
		unsigned i;

		if (sscanf(de->d_name, "%" SCNx64 ".%lu.%lu%n", &dev, &uid,
			&ino, &end) != 3 ||
		    de->d_name[end] != '\0' || dev != (uint64_t)ds.st_dev ||
		    fstatat(reg, de->d_name, &es, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(es.st_mode) || es.st_uid != (uid_t)uid ||
		    now - es.st_mtime > CACHE_REGISTRY_STALE_DAYS * 86400L)
			continue;
		if (es.st_uid == geteuid()) {
			if (ino != (unsigned long)ds.st_ino &&
			    !mine_alive(reg, de->d_name, ino)) {
				unlinkat(reg, de->d_name, 0); /* gone */
				continue;
			}
			nmine++;
		}
		for (i = 0; i < nseen && seen[i] != es.st_uid; i++)
			;
		if (i == nseen && nseen < REG_MAX_USERS)
			seen[nseen++] = es.st_uid;
	}
	closedir(d);
	close(reg);
	free(seen);
	/* Our own entry, if it could not be made, counts all the same. */
	if (nmine == 0) {
		nmine = 1;
		nseen++;
	}
	*users = nseen;
	*mine = nmine;
	return 0;
}
