/*
 * owner.c - layer: owner (above the store; under srv.c, client.c and
 * handle.c).  Who may own and who may serve a shared cache directory:
 *
 *   - the directory's checks, the same in every role (cache_private_dir:
 *     owned by this user, writable by nobody else), so a client never
 *     talks to a store that another user controls;
 *   - the lease: RocksDB's fcntl lock on dir/LOCK says who holds the store
 *     (its pid, from /proc/locks: see owner_holder),
 *     and dir/open.lock (flock) serializes the attempts to take it;
 *   - the sockets: listening (replacing a stale one) and connecting by a
 *     deadline;
 *   - every peer: SO_PEERCRED's uid is ours on both sides, and a client
 *     talks only to the process that holds the lease.
 */
#include <sys/file.h>
#include <sys/sysmacros.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/share_int.h"

int
owner_check_dir(const char *dir, char *err, size_t errlen)
{
	return cache_private_dir(dir, err, errlen);
}

int
owner_open_lock(const char *dir, int wait_ms)
{
	char path[4200];
	uint64_t until = wire_now_ns() + (uint64_t)wait_ms * 1000000u;
	int fd, e;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, OPEN_LOCK) >=
	    sizeof(path))
		return -ENAMETOOLONG;
	if ((fd = open(path,
		 O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
		 0600)) < 0)
		return -errno;
	for (;;) {
		struct timespec ts = {0, 20 * 1000000};

		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return fd;
		e = errno;
		if (e != EWOULDBLOCK && e != EINTR) {
			close(fd);
			return -e;
		}
		if (wire_now_ns() >= until) {
			close(fd);
			return -ETIMEDOUT;
		}
		nanosleep(&ts, NULL);
	}
}

long
owner_holder(const char *dir)
{
	char path[4200], line[256];
	struct stat st;
	long pid = 0;
	FILE *f;

	/*
	 * Not by fcntl(F_GETLK) on a descriptor of dir/LOCK: closing any
	 * descriptor of a file drops this process's POSIX locks on it, and
	 * this process may hold the store.  stat(2) opens nothing; the
	 * kernel's table of locks names the holder.
	 */
	if ((size_t)snprintf(path, sizeof(path), "%s/LOCK", dir) >=
	    sizeof(path))
		return -ENAMETOOLONG;
	if (stat(path, &st) != 0)
		return errno == ENOENT ? 0 : -errno;
	if ((f = fopen("/proc/locks", "re")) == NULL)
		return -errno;
	while (pid == 0 && fgets(line, sizeof(line), f) != NULL) {
		unsigned maj, min;
		unsigned long long ino;
		long p;
		char kind[16];

		/* "1: POSIX  ADVISORY  WRITE 5208 08:01:1234 0 EOF"; a
		 * waiter's line has "->" after the number. */
		if (sscanf(line, "%*d: %15s %*s %*s %ld %x:%x:%llu", kind, &p,
			&maj, &min, &ino) != 5)
			continue;
		if (ino == (unsigned long long)st.st_ino &&
		    maj == major(st.st_dev) && minor(st.st_dev) == min)
			pid = p > 0 ? p : -EPERM; /* an OFD lock: no pid */
	}
	fclose(f);
	return pid;
}

int
owner_stopped(long pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -ESRCH;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -ESRCH;
	buf[n] = '\0';
	/* "PID (COMM) STATE ...": COMM may hold spaces and parentheses. */
	if ((p = strrchr(buf, ')')) == NULL || p[1] != ' ')
		return -ESRCH;
	if (p[2] == 'Z' || p[2] == 'X')
		return -ESRCH;
	return p[2] == 'T' || p[2] == 't';
}

static int
sock_addr(const char *dir, const char *name, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if ((size_t)snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/%s", dir,
		name) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	return 0;
}

int
owner_listen(const char *dir, const char *name, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd, r;

	if (sock_addr(dir, name, &sa) != 0) {
		snprintf(err, errlen, "%.200s/%s: path too long for a socket",
		    dir, name);
		return -ENAMETOOLONG;
	}
	if (lstat(sa.sun_path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket",
			    sa.sun_path);
			return -EEXIST;
		}
		unlink(sa.sun_path); /* a killed owner's: we hold the lease */
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(fd, SRV_CONN_MAX) != 0) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", sa.sun_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return r;
	}
	return fd;
}

int
owner_peer_ok(int fd, long pid, long *peer)
{
	struct ucred cr;
	socklen_t cl = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0)
		return -errno;
	if (cr.uid != geteuid() || (pid > 0 && (long)cr.pid != pid))
		return -EPERM;
	if (peer != NULL)
		*peer = (long)cr.pid;
	return 0;
}

int
owner_connect(const char *dir, const char *name, long pid, uint64_t deadline)
{
	struct sockaddr_un sa;
	int fd, e;

	if ((e = sock_addr(dir, name, &sa)) != 0)
		return e;
	if ((fd = socket(
		 AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
		return -errno;
	/*
	 * A unix socket whose backlog is full (an owner that does not
	 * accept: stopped, or flooded) answers EAGAIN at once: try again
	 * until the deadline.
	 */
	while (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		struct timespec ts = {0, 5 * 1000000};

		if (errno == EINTR)
			continue;
		if (errno == EINPROGRESS) {
			struct pollfd p = {fd, POLLOUT, 0};
			uint64_t now = wire_now_ns();
			int err = 0;
			socklen_t el = sizeof(err);

			if (now >= deadline ||
			    poll(&p, 1,
				(int)((deadline - now) / 1000000) + 1) <= 0) {
				e = -ETIMEDOUT;
				goto fail;
			}
			if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) !=
				0 ||
			    err != 0) {
				e = err != 0 ? -err : -errno;
				goto fail;
			}
			break;
		}
		if (errno != EAGAIN) {
			e = -errno;
			goto fail;
		}
		if (wire_now_ns() >= deadline) {
			e = -ETIMEDOUT;
			goto fail;
		}
		nanosleep(&ts, NULL);
	}
	if ((e = owner_peer_ok(fd, pid, NULL)) != 0)
		goto fail;
	return fd;
fail:
	close(fd);
	return e;
}
