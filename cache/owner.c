/*
 * owner.c - cache/ (the store), layer owner (above the store; under srv.c,
 * client.c and handle.c).  Who may own and who may serve a shared cache
 * directory:
 *
 *   - the directory's checks, the same in every role (cache_private_dir:
 *     owned by this user, writable by nobody else), so a client never
 *     talks to a store that another user controls;
 *   - the lease: RocksDB's fcntl lock on dir/LOCK says whether the store
 *     is held (F_OFD_GETLK: see owner_lease), and dir/open.lock (flock)
 *     serializes the attempts to take it;
 *   - the lease token: a holder that serves writes 16 random bytes to
 *     dir/owner.id once it holds the store, and says them in its HELLO;
 *   - the sockets: listening (replacing a stale one) and connecting by a
 *     deadline;
 *   - every peer: SO_PEERCRED's uid is ours on both sides, and a client
 *     talks only to the process that holds the lease.
 *
 * Identity across PID namespaces (containers, pods sharing a hostPath
 * cache_dir): the kernel names a lock's holder, and SO_PEERCRED a peer,
 * by its pid in the caller's namespace, 0 when it is not visible there.
 * Where the holder is visible, the peer must be that pid.  Everywhere the
 * peer must say the token that dir/owner.id holds (the file is in the
 * 0700 directory: only this user reads it), which only the process that
 * took the lease wrote.  Whether the holder is stopped is read in /proc
 * only where /proc's pids are this namespace's (owner_proc_is_ours);
 * elsewhere a stopped owner is a late one (client.c's breaker).
 */
#include <sys/file.h>
#include <sys/sysmacros.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <sys/random.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
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

/*
 * The lease is asked of the kernel by F_OFD_GETLK on a descriptor of
 * dir/LOCK, which sees a lock whoever holds it: a process of another PID
 * namespace (which /proc/locks leaves out of a proc of another namespace),
 * on any file system (/proc/locks names a btrfs subvolume's file by the
 * superblock's device, stat(2) by the subvolume's).  But closing any
 * descriptor of a file drops this process's POSIX locks on it, and this
 * process may hold the store (RocksDB's lock is one): so the descriptors
 * are kept, one per file (device and inode), for the life of the process,
 * and never closed.  A store moved aside and made anew has a new LOCK: a
 * new descriptor (a handful per process at most).
 */
struct lease_fd {
	dev_t dev;
	ino_t ino;
	int fd;
	struct lease_fd *next;
};
static struct lease_fd *lease_fds;
static pthread_mutex_t lease_lock = PTHREAD_MUTEX_INITIALIZER;

/* The kept descriptor of path (a regular file): it, or -errno. */
static int
lease_fd(const char *path)
{
	struct lease_fd *l;
	struct stat st, fst;
	int fd;

	if (lstat(path, &st) != 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EPERM; /* a FIFO or a link is nobody's lease */
	pthread_mutex_lock(&lease_lock);
	for (l = lease_fds; l != NULL; l = l->next)
		if (l->dev == st.st_dev && l->ino == st.st_ino) {
			fd = l->fd;
			pthread_mutex_unlock(&lease_lock);
			return fd;
		}
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		fd = -errno;
		goto out;
	}
	if (fstat(fd, &fst) != 0 || !S_ISREG(fst.st_mode)) {
		close(fd); /* replaced since by what holds no lock of ours */
		fd = -EPERM;
		goto out;
	}
	/* Kept as the file it opened (replaced since the lstat: that one). */
	if ((l = calloc(1, sizeof(*l))) == NULL) {
		fd = -ENOMEM; /* the descriptor is kept all the same */
		goto out;
	}
	l->dev = fst.st_dev;
	l->ino = fst.st_ino;
	l->fd = fd;
	l->next = lease_fds;
	lease_fds = l;
out:
	pthread_mutex_unlock(&lease_lock);
	return fd;
}

int
owner_lease(const char *dir, long *pid)
{
	struct flock fl = {0};
	char path[4200];
	int fd;

	*pid = 0;
	if ((size_t)snprintf(path, sizeof(path), "%s/LOCK", dir) >=
	    sizeof(path))
		return -ENAMETOOLONG;
	if ((fd = lease_fd(path)) < 0)
		return fd == -ENOENT ? 0 : fd;
	/*
	 * An OFD lock and a traditional one conflict even within one
	 * process: a store this process holds is seen held too.
	 */
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	if (fcntl(fd, F_OFD_GETLK, &fl) != 0)
		return -errno;
	if (fl.l_type == F_UNLCK)
		return 0;
	/* In this process's PID namespace: 0 where not visible from it,
	 * -1 for an OFD lock's holder. */
	*pid = fl.l_pid > 0 ? (long)fl.l_pid : 0;
	return 1;
}

/*
 * Whether the pids of /proc are this process's namespace's: /proc/self
 * names getpid().  Not so under `unshare --pid --fork` without a proc of
 * its own, nor across a pod's containers.
 */
bool
owner_proc_is_ours(void)
{
	char buf[32];
	ssize_t n = readlink("/proc/self", buf, sizeof(buf) - 1);

	if (n <= 0)
		return false;
	buf[n] = '\0';
	return strtol(buf, NULL, 10) == (long)getpid();
}

static int
token_path(const char *dir, const char *name, char *path, size_t len)
{
	return (size_t)snprintf(path, len, "%s/%s", dir, name) >= len
		   ? -ENAMETOOLONG
		   : 0;
}

int
owner_write_token(const char *dir, uint8_t tok[OWNER_TOKEN_LEN])
{
	char path[4200], tmpp[4200], hex[2 * OWNER_TOKEN_LEN + 2];
	int fd, e = 0;

	if (getrandom(tok, OWNER_TOKEN_LEN, 0) != OWNER_TOKEN_LEN)
		return -errno;
	for (int i = 0; i < OWNER_TOKEN_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", tok[i]);
	hex[2 * OWNER_TOKEN_LEN] = '\n';
	if ((e = token_path(dir, OWNER_ID, path, sizeof(path))) != 0 ||
	    (e = token_path(dir, OWNER_ID ".new", tmpp, sizeof(tmpp))) != 0)
		return e;
	unlink(tmpp); /* a crashed holder's */
	if ((fd = open(tmpp,
		 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) <
	    0)
		return -errno;
	if (write(fd, hex, 2 * OWNER_TOKEN_LEN + 1) != 2 * OWNER_TOKEN_LEN + 1)
		e = errno ? -errno : -EIO;
	if (close(fd) != 0 && e == 0)
		e = -errno;
	if (e == 0 && rename(tmpp, path) != 0)
		e = -errno;
	if (e != 0)
		unlink(tmpp);
	return e;
}

int
owner_read_token(const char *dir, uint8_t tok[OWNER_TOKEN_LEN])
{
	char path[4200], hex[2 * OWNER_TOKEN_LEN + 2];
	struct stat st;
	ssize_t n;
	int fd, e;

	if ((e = token_path(dir, OWNER_ID, path, sizeof(path))) != 0)
		return e;
	/* A FIFO or a link there is not the holder's: refused, no wait. */
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) <
	    0)
		return -errno;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid()) {
		close(fd);
		return -EPERM;
	}
	n = read(fd, hex, sizeof(hex));
	close(fd);
	if (n != 2 * OWNER_TOKEN_LEN + 1 || hex[2 * OWNER_TOKEN_LEN] != '\n')
		return -EPROTO;
	for (int i = 0; i < OWNER_TOKEN_LEN; i++) {
		unsigned x;

		if (sscanf(hex + 2 * i, "%2x", &x) != 1)
			return -EPROTO;
		tok[i] = (uint8_t)x;
	}
	return 0;
}

int
owner_stopped(long pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	/* A pid of this namespace names nothing in another one's proc. */
	if (!owner_proc_is_ours())
		return 0;
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
	    listen(fd, SOMAXCONN) != 0) {
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
	if (cr.uid != geteuid())
		return -EPERM;
	/* The holder's pid where it is visible (both in this process's
	 * namespace); the token says the rest. */
	if (pid > 0 && (long)cr.pid != pid)
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
