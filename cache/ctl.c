/*
 * ctl.c - the control socket of a cache that a feedfs holds (see cache.h).
 *
 * RocksDB lets one process write a store, so feedfs-cache asks the daemon
 * that holds it to evict, clear, compact or flush: one thread accepts on
 * dir/control.sock and runs one request per connection, in turn.  A
 * request is one line of at most CTL_LINE bytes; so is the reply.
 *
 * Layer: server (beside srv.c; owner.c makes and checks its socket).  The
 * socket lives in the cache directory, which cache_open made private
 * (0700, this user's): that, not the socket's own mode, keeps other users
 * out, so nothing here changes a mode by path; and both ends check the
 * other's credentials (owner.c: our user, and for feedfs-cache, the
 * process that holds the store).  cache_ctl_stop wakes the thread with
 * shutdown(2) on the listening socket and joins it.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/share_int.h"

#define CTL_NAME "control.sock"
#define CTL_LINE 4096
#define CTL_TIMEOUT_MS 5000 /* for a client to send its line */

struct cache_ctl {
	struct cache *c;
	int fd;
	atomic_bool stopping;
	pthread_t thread;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

static int
ctl_addr(const char *dir, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if ((size_t)snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/%s", dir,
		CTL_NAME) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	return 0;
}

/* Read one line (without its newline) into buf; -1 on error or timeout. */
static int
read_line(int fd, char *buf, size_t len, int timeout_ms)
{
	size_t n = 0;

	while (n + 1 < len) {
		struct pollfd p = {fd, POLLIN, 0};

		if (poll(&p, 1, timeout_ms) <= 0)
			return -1;
		if (read(fd, buf + n, 1) <= 0)
			return n > 0 ? (buf[n] = '\0', 0) : -1;
		if (buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = '\0';
	return 0;
}

static void
write_all(int fd, const char *s, size_t len)
{
	while (len > 0) {
		ssize_t r = write(fd, s, len);

		if (r <= 0)
			return;
		s += r;
		len -= (size_t)r;
	}
}

static void *
ctl_thread(void *arg)
{
	struct cache_ctl *ctl = arg;
	char req[CTL_LINE], reply[CTL_LINE];

	while (!atomic_load(&ctl->stopping)) {
		int fd = accept(ctl->fd, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			break; /* shut down by cache_ctl_stop */
		}
		if (owner_peer_ok(fd, 0, NULL) != 0) { /* not our user */
			close(fd);
			continue;
		}
		if (read_line(fd, req, sizeof(req), CTL_TIMEOUT_MS) == 0) {
			cache_admin_run(ctl->c, req, reply, sizeof(reply) - 1);
			strcat(reply, "\n");
			write_all(fd, reply, strlen(reply));
		}
		close(fd);
	}
	return NULL;
}

int
cache_ctl_start(struct cache *c, const char *dir, struct cache_ctl **out,
    char *err, size_t errlen)
{
	struct cache_ctl *ctl;
	struct sockaddr_un sa;
	int r;

	if (ctl_addr(dir, &sa) != 0) {
		snprintf(err, errlen, "%s/%s: path too long for a socket", dir,
		    CTL_NAME);
		return -ENAMETOOLONG;
	}
	if ((ctl = calloc(1, sizeof(*ctl))) == NULL) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	ctl->c = c;
	snprintf(ctl->path, sizeof(ctl->path), "%s", sa.sun_path);
	/* owner.c: a stale socket replaced, anything else refused. */
	if ((ctl->fd = owner_listen(dir, CTL_NAME, err, errlen)) < 0) {
		r = ctl->fd;
		goto fail;
	}
	if ((r = pthread_create(&ctl->thread, NULL, ctl_thread, ctl)) != 0) {
		errno = r;
		goto fail_errno;
	}
	*out = ctl;
	return 0;
fail_errno:
	r = -errno;
	snprintf(err, errlen, "%s: %s", sa.sun_path, strerror(errno));
fail:
	if (ctl->fd >= 0)
		close(ctl->fd);
	free(ctl);
	return r;
}

void
cache_ctl_stop(struct cache_ctl *ctl)
{
	if (ctl == NULL)
		return;
	atomic_store(&ctl->stopping, true);
	shutdown(ctl->fd, SHUT_RDWR);
	pthread_join(ctl->thread, NULL);
	close(ctl->fd);
	unlink(ctl->path);
	free(ctl);
}

int
cache_ctl_request(const char *dir, const char *req, char *reply, size_t len)
{
	long holder;
	int fd, r;

	/* owner.c: only to the process that holds the store, of our user. */
	if ((holder = owner_holder(dir)) <= 0)
		return holder == 0 ? -ECONNREFUSED : (int)holder;
	if ((fd = owner_connect(dir, CTL_NAME, holder,
		 wire_now_ns() + (uint64_t)CTL_TIMEOUT_MS * 1000000u)) < 0)
		return fd;
	{
		int fl = fcntl(fd, F_GETFL);

		(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK); /* as before */
	}
	write_all(fd, req, strlen(req));
	write_all(fd, "\n", 1);
	/* Compactions of a large cache take a while: no timeout here. */
	r = read_line(fd, reply, len, -1) == 0 ? 0 : -EIO;
	close(fd);
	return r;
}
