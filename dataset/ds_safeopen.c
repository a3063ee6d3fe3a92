/*
 * ds_safeopen.c - layer: dataset/ (the datasets), under dataset.c and the scan
 * (calls ds_guard.c).  Opening a dataset's samples through no symbolic
 * link (ds_sample_open, and ds_sample_prefetch's hint; see dataset.h for
 * the contract): a file a link led to out of the root is opened from
 * "/", and judged again against the link's owner (ds_guard.c).
 */
#include <sys/stat.h>
#include <sys/syscall.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * openat2(2) (Linux 5.6), called by number: its struct open_how and
 * RESOLVE_ flags are a fixed ABI, declared here so that older kernel
 * headers (no <linux/openat2.h>) still build.
 */
#ifdef SYS_openat2
#define HAVE_OPENAT2 1
struct ds_open_how {
	uint64_t flags, mode, resolve;
};
#define DS_RESOLVE_NO_SYMLINKS 0x04
#define DS_RESOLVE_BENEATH 0x08
#endif

#include "dataset/ds_int.h"

/* See ds_int.h. */
int
ds_open_beneath(int dirfd, const char *rel, int flags)
{
	char buf[PATH_MAX], *p, *slash;
	int cur, next, fd, e;
#ifdef HAVE_OPENAT2
	const char *no = getenv("FEEDFS_DS_NO_OPENAT2");

	if (no == NULL || *no == '\0' || strcmp(no, "0") == 0) {
		struct ds_open_how how;

		memset(&how, 0, sizeof(how));
		how.flags = (uint64_t)(flags | O_NOFOLLOW);
		how.resolve = DS_RESOLVE_BENEATH | DS_RESOLVE_NO_SYMLINKS;
		fd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
		/* ENOSYS: before Linux 5.6; EPERM: a seccomp filter. */
		if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
			return fd;
	}
#endif
	if (strlen(rel) >= sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, rel, strlen(rel) + 1);
	cur = dirfd;
	for (p = buf; (slash = strchr(p, '/')) != NULL; p = slash + 1) {
		*slash = '\0';
		if (p[0] == '\0' || strcmp(p, ".") == 0)
			continue;
		if (strcmp(p, "..") == 0) {
			errno = EXDEV;
			next = -1;
		} else
			next = openat(cur, p,
			    O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		e = errno;
		if (cur != dirfd)
			close(cur);
		if (next < 0) {
			errno = e;
			return -1;
		}
		cur = next;
	}
	if (strcmp(p, "..") == 0) {
		errno = EXDEV;
		fd = -1;
	} else
		fd = openat(cur, p, flags | O_NOFOLLOW);
	e = errno;
	if (cur != dirfd)
		close(cur);
	errno = e;
	return fd;
}

/* "ROOT/PATH: why" into err; returns r. */
static int
open_error(const struct dataset *ds, const struct ds_sample *sm, int r,
    const char *why, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s/%s: %s", ds->root, sm->path,
	    why ? why : strerror(-r));
	return r;
}

/* See ds_int.h. */
char *
ds_resolve(const struct dataset *ds, const char *dir, const char *base)
{
	bool top = strcmp(ds->root, "/") == 0;
	char path[PATH_MAX];

	if ((size_t)snprintf(path, sizeof(path), "%s/%s%s%s",
		top ? "" : ds->root, dir, base && dir[0] ? "/" : "",
		base ? base : "") >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	return realpath(path, NULL);
}

/* See ds_int.h. */
size_t
ds_below_root(const struct dataset *ds, const char *path)
{
	size_t n = strcmp(ds->root, "/") == 0 ? 0 : strlen(ds->root);

	if (strncmp(path, ds->root, n) != 0 || path[n] != '/' ||
	    path[n + 1] == '\0')
		return 0;
	return n + 1;
}

/*
 * A manifest's path through links: resolved, and opened (through no link)
 * only if it stays inside the root.  -1 with errno set, ELOOP when it
 * leaves the root.
 */
static int
open_resolved(const struct dataset *ds, int rootfd, const char *rel, int flags)
{
	char *res = ds_resolve(ds, rel, NULL);
	size_t below;
	int fd, e;

	if (res == NULL)
		return -1;
	if ((below = ds_below_root(ds, res)) == 0) {
		free(res);
		errno = ELOOP;
		return -1;
	}
	fd = ds_open_beneath(rootfd, res + below, flags);
	e = errno;
	free(res);
	errno = e;
	return fd;
}

int
ds_sample_open(const struct dataset *ds, size_t id, int *fd, struct stat *st,
    char *err, size_t errlen)
{
	const int flags =
	    O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC;
	const struct ds_sample *sm;
	const char *rel;
	struct stat sb;
	int rootfd, f, fl, r;

	if (id >= ds->n) {
		snprintf(err, errlen, "%s: no sample %zu", ds->root, id);
		return -EINVAL;
	}
	sm = &ds->samples[id];
	rel = sm->open_path ? sm->open_path : sm->path;
	/* Opened per call: a root moved away is reported, not read.  A file
	 * out of the root (a link led there): from "/", through no link. */
	if ((rootfd = open(rel[0] == '/' ? "/" : ds->root,
		 O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return open_error(ds, sm, -errno, NULL, err, errlen);
	f = ds_open_beneath(rootfd, rel[0] == '/' ? rel + 1 : rel, flags);
	if (f < 0 && ds->manifest && (errno == ELOOP || errno == ENOTDIR))
		f = open_resolved(ds, rootfd, sm->path, flags);
	r = f < 0 ? -errno : 0;
	close(rootfd);
	if (r == -ELOOP)
		return open_error(
		    ds, sm, r, "a symbolic link (not followed)", err, errlen);
	if (r == -EXDEV)
		return open_error(
		    ds, sm, r, "path leaves the dataset root", err, errlen);
	if (r != 0)
		return open_error(ds, sm, r, NULL, err, errlen);
	if (fstat(f, &sb) != 0) {
		r = -errno;
		close(f);
		return open_error(ds, sm, r, NULL, err, errlen);
	}
	if (!S_ISREG(sb.st_mode)) {
		close(f);
		return open_error(
		    ds, sm, -EINVAL, "not a regular file", err, errlen);
	}
	if (sm->guard != 0 &&
	    !ds_guard_allows(ds, sm->guard, &sb, ds_has_acl(f, NULL), 4)) {
		char why[256];

		close(f);
		snprintf(why, sizeof(why),
		    "%s: refused: uid %u, who owns the symbolic link that "
		    "leads "
		    "there, may not read it (feedfs reads as root)",
		    rel,
		    sm->guard <= ds->nguards
			? (unsigned)ds->guards[sm->guard - 1].uid
			: 0u);
		return open_error(ds, sm, -EACCES, why, err, errlen);
	}
	/* O_NONBLOCK was for FIFOs and devices; reads of the file block. */
	if ((fl = fcntl(f, F_GETFL)) >= 0)
		(void)fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
	*fd = f;
	*st = sb;
	return 0;
}

void
ds_sample_prefetch(const struct dataset *ds, size_t id)
{
	const struct ds_sample *sm;
	struct stat st;
	char err[8];
	off_t off = 0, len = 0;
	int fd;

	if (id >= ds->n)
		return;
	sm = &ds->samples[id];
	if (ds->robjs != NULL) {
		/* A remote member: a range request ahead (remote_fetch.c). */
		ds_remote_prefetch(ds, id);
		return;
	}
	if (ds->nshards > 0) {
		/* The member's range of its shard; ds_member_read checks the
		 * shard when it reads. */
		if (sm->bad != NULL || sm->shard >= ds->nshards ||
		    (fd = open(ds->shards[sm->shard].path,
			 O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)) < 0)
			return;
		off = (off_t)sm->off;
		len = (off_t)sm->size;
		if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
			close(fd);
			return;
		}
	} else if (ds_sample_open(ds, id, &fd, &st, err, sizeof(err)) != 0)
		return;
	(void)posix_fadvise(fd, off, len, POSIX_FADV_WILLNEED);
	close(fd);
}
