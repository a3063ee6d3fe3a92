/*
 * mountpoint.c - the FUSE glue (fs/, under main.c; calls nothing of
 * ours but the log): what a mountpoint holds before feedfs mounts on it
 * (see mountpoint.h), and the cleanup of a feedfs mount left dead by a
 * crash (issue 36, issue 40).
 *
 * A feedfs killed with -9 or by the OOM killer leaves its mount behind:
 * the kernel aborts the FUSE connection when the last descriptor of it
 * (/dev/fuse) closes, and every access to the mount then fails with
 * ENOTCONN, until someone detaches it.  Whether a feedfs mount is dead is
 * asked of the kernel, in this order, never by touching the mount where
 * a live or stopped daemon would make us wait:
 *   1. /proc/self/mountinfo: a fuse.feedfs mount at the mountpoint, and
 *      its device 0:N (N is its FUSE connection);
 *   2. every process's /dev/fuse descriptors (/proc/PID/fd and fdinfo's
 *      "fuse_connection: N", Linux 6.x): one holding connection N is a
 *      live daemon, or a process that may still serve it: live;
 *   3. statfs(2) of the mountpoint, in a child bounded in time (a
 *      request to a daemon that is stopped would wait): ENOTCONN is
 *      dead, an answer or no answer in time is live.  statfs, not
 *      stat: the kernel answers a stat of the root from its attribute
 *      cache (for up to an hour here) even after the connection died,
 *      while every statfs is a request to the daemon.
 * A dead mount is detached (MNT_DETACH as root; fusermount3 -u -z, as
 * its user) before the new mount; a live one is never touched.
 */
#include <sys/mount.h>
#include <sys/vfs.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs/mountpoint.h"

extern char **environ;

/* How long a child's stat of the mountpoint may take (a bound on a hang,
 * not a measure: a dead mount answers at once). */
#define STAT_WAIT_MS 10000

/* In place: mountinfo's \ooo escapes (spaces and the like) decoded. */
static void
unescape(char *s)
{
	char *d = s;

	for (; *s; s++, d++)
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*d = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				    (s[3] - '0'));
			s += 3;
		} else
			*d = *s;
	*d = '\0';
}

/* The last fuse.feedfs mount at mnt: its FUSE connection (the minor of
 * its device) in *conn.  false: none. */
static bool
feedfs_mount_at(const char *mnt, unsigned *conn)
{
	char line[PATH_MAX + 512], where[PATH_MAX + 1], type[64];
	unsigned maj, min;
	bool found = false;
	FILE *fp;

	if ((fp = fopen("/proc/self/mountinfo", "re")) == NULL)
		return false;
	while (fgets(line, sizeof(line), fp)) {
		const char *dash = strstr(line, " - ");

		if (sscanf(line, "%*d %*d %u:%u %*s %4096s", &maj, &min,
			where) != 3 ||
		    dash == NULL || sscanf(dash + 3, "%63s", type) != 1 ||
		    strcmp(type, "fuse.feedfs") != 0)
			continue;
		unescape(where);
		if (strcmp(where, mnt) == 0) {
			*conn = min; /* the last one is the one on top */
			found = true;
		}
	}
	fclose(fp);
	return found;
}

/*
 * A process other than this one holding FUSE connection conn: its pid,
 * 0 for none, -1 when this kernel does not say which connection a
 * /dev/fuse descriptor is (and none was found).
 */
static long
conn_holder(unsigned conn)
{
	bool told = false;
	long found = 0;
	struct dirent *p;
	DIR *proc;

	if ((proc = opendir("/proc")) == NULL)
		return -1;
	while (found == 0 && (p = readdir(proc)) != NULL) {
		char dir[64], path[PATH_MAX], link[32];
		struct dirent *f;
		DIR *fds;
		long pid = strtol(p->d_name, NULL, 10);

		if (pid <= 0 || pid == (long)getpid())
			continue;
		snprintf(dir, sizeof(dir), "/proc/%ld/fd", pid);
		if ((fds = opendir(dir)) == NULL)
			continue; /* gone, or not ours to look at */
		while (found == 0 && (f = readdir(fds)) != NULL) {
			char line[128];
			ssize_t n;
			FILE *fi;

			if (f->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, f->d_name);
			if ((n = readlink(path, link, sizeof(link) - 1)) < 0)
				continue;
			link[n] = '\0';
			if (strcmp(link, "/dev/fuse") != 0)
				continue;
			snprintf(path, sizeof(path), "/proc/%ld/fdinfo/%s", pid,
			    f->d_name);
			if ((fi = fopen(path, "re")) == NULL)
				continue;
			while (fgets(line, sizeof(line), fi)) {
				unsigned c;

				if (sscanf(line, "fuse_connection: %u", &c) ==
				    1) {
					told = true;
					if (c == conn)
						found = pid;
				}
			}
			fclose(fi);
		}
		closedir(fds);
	}
	closedir(proc);
	return found != 0 ? found : told ? 0 : -1;
}

/* statfs(2) of mnt in a child, at most STAT_WAIT_MS: its errno, 0 for
 * an answer, -ETIMEDOUT for none in time. */
static int
stat_errno(const char *mnt)
{
	struct timespec nap = {0, 20 * 1000 * 1000};
	int status, waited = 0;
	pid_t pid;

	switch (pid = fork()) {
	case -1:
		return -errno;
	case 0: {
		struct statfs sf;

		_exit(statfs(mnt, &sf) == 0	 ? 0
		      : errno > 0 && errno < 256 ? errno
						 : 255);
	}
	default:
		break;
	}
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (waited >= STAT_WAIT_MS) {
			/* A FUSE request waits killably. */
			kill(pid, SIGKILL);
			(void)waitpid(pid, &status, 0);
			return -ETIMEDOUT;
		}
		nanosleep(&nap, NULL);
		waited += 20;
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : -ETIMEDOUT;
}

enum fs_mnt
fs_mnt_state(const char *mnt, char *why, size_t len)
{
	unsigned conn;
	long holder;
	int e;

	why[0] = '\0';
	if (!feedfs_mount_at(mnt, &conn))
		return FS_MNT_FREE;
	if ((holder = conn_holder(conn)) > 0) {
		snprintf(why, len, "process %ld holds its FUSE connection %u",
		    holder, conn);
		return FS_MNT_LIVE;
	}
	if ((e = stat_errno(mnt)) == ENOTCONN) {
		snprintf(why, len,
		    "its mount answers ENOTCONN and %s its FUSE connection %u",
		    holder == 0 ? "no process holds" : "nothing serves", conn);
		return FS_MNT_DEAD;
	}
	if (e == -ETIMEDOUT)
		snprintf(why, len,
		    "it does not answer (a daemon stopped?); its FUSE "
		    "connection is %u",
		    conn);
	else if (e != 0)
		snprintf(why, len, "its mount answers %s", strerror(e));
	return FS_MNT_LIVE;
}

int
fs_mnt_detach(const char *mnt, char *err, size_t len)
{
	char *const argv[] = {(char *)"fusermount3", (char *)"-u", (char *)"-z",
	    (char *)"--", (char *)mnt, NULL};
	int status, r;
	pid_t pid;

	if (geteuid() == 0) {
		if (umount2(mnt, MNT_DETACH) == 0)
			return 0;
		r = -errno;
		snprintf(err, len, "umount2(MNT_DETACH): %s", strerror(-r));
		return r;
	}
	/* A user's mount: fusermount3 (setuid) detaches what its user
	 * mounted. */
	if ((r = posix_spawnp(
		 &pid, "fusermount3", NULL, NULL, argv, environ)) != 0) {
		snprintf(err, len, "fusermount3: %s", strerror(r));
		return -r;
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	snprintf(err, len, "fusermount3 -u -z failed");
	return -EPERM;
}
