/*
 * remote_wire.c - the frames of the shared cache's data socket (see
 * remote_int.h): reading and sending them whole, and the fixed parts that
 * cross it.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cache/remote_int.h"

int
remote_data_addr(const char *dir, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if ((size_t)snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/%s", dir,
		DATA_NAME) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	return 0;
}

/* Read exactly len bytes: 0, or -errno (-ECONNRESET at end of file). */
int
remote_read_full(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = recv(fd, p, len, 0);

		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Send every iovec (modified); never raises SIGPIPE. */
int
remote_send_iov(int fd, struct iovec *iov, int n)
{
	struct msghdr mh = {0};

	mh.msg_iov = iov;
	mh.msg_iovlen = (size_t)n;
	while (mh.msg_iovlen > 0) {
		ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		}
		while (mh.msg_iovlen > 0 && (size_t)w >= mh.msg_iov->iov_len) {
			w -= (ssize_t)mh.msg_iov->iov_len;
			mh.msg_iov++;
			mh.msg_iovlen--;
		}
		if (mh.msg_iovlen > 0) {
			mh.msg_iov->iov_base =
			    (uint8_t *)mh.msg_iov->iov_base + w;
			mh.msg_iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

/*
 * Room for a whole value in the socket: with the default (about 200 KB) a
 * 270 KB reply takes two wakeups of each side.
 */
void
remote_set_bufs(int fd)
{
	int sz = SOCK_BUF;

	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
}

void
remote_stat_from_wire(const struct wire_stat *w, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_size = (off_t)w->size;
	st->st_mtim.tv_sec = (time_t)w->mtime_sec;
	st->st_mtim.tv_nsec = (long)w->mtime_nsec;
	st->st_ctim.tv_sec = (time_t)w->ctime_sec;
	st->st_ctim.tv_nsec = (long)w->ctime_nsec;
	st->st_ino = (ino_t)w->ino;
	st->st_dev = (dev_t)w->dev;
}

void
remote_stat_to_wire(const struct stat *st, struct wire_stat *w)
{
	w->size = (uint64_t)st->st_size;
	w->mtime_sec = (uint64_t)st->st_mtim.tv_sec;
	w->mtime_nsec = (uint64_t)st->st_mtim.tv_nsec;
	w->ctime_sec = (uint64_t)st->st_ctim.tv_sec;
	w->ctime_nsec = (uint64_t)st->st_ctim.tv_nsec;
	w->ino = (uint64_t)st->st_ino;
	w->dev = (uint64_t)st->st_dev;
}

int
remote_send(
    struct cache_remote *r, int fd, uint32_t op, struct iovec *body, int nbody)
{
	struct req_hdr h = {
	    op, 0, atomic_load(&r->hits), atomic_load(&r->misses)};
	struct iovec iov[5];

	iov[0].iov_base = &h;
	iov[0].iov_len = sizeof(h);
	for (int i = 0; i < nbody && i < 4; i++) {
		iov[i + 1] = body[i];
		h.len += (uint32_t)body[i].iov_len;
	}
	return remote_send_iov(fd, iov, 1 + (nbody < 4 ? nbody : 4));
}
