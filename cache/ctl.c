/*
 * ctl.c - cache/ (the store), layer server (beside srv.c; owner.c makes
 * and checks its socket; calls admin.c's cache_admin_run).  The control
 * socket of a cache that a feedfs holds (see cache.h).
 *
 * RocksDB lets one process write a store, so feedfs-cache asks the daemon
 * that holds it to evict, clear, compact or flush: one thread accepts on
 * dir/control.sock and runs one request per connection.  A request is one
 * line of at most CTL_LINE bytes; so is the reply.
 *
 * Nothing a client does holds the thread: it reads the connections it
 * has (at most CTL_MAX_CONN; more wait in the listen backlog) with one
 * poll(2), without blocking, and each connection has one deadline for its
 * whole request line, CTL_DEADLINE_MS from its accept, after which it is
 * closed unanswered; the reply is sent without blocking (a client that
 * reads nothing loses it).  A peer whose SO_PEERCRED uid is not our
 * effective uid is closed unread.  The thread waits only on a request it
 * runs (a compaction may take a while); cache_ctl_stop wakes it through
 * a pipe and joins it, so it never waits on a client.
 *
 * The socket lives in the cache directory, which cache_open made private
 * (0700, this user's): that, not the socket's own mode, keeps other users
 * out, so nothing here changes a mode by path; and both ends check the
 * other's credentials (owner.c: our user, and for feedfs-cache, the
 * process that holds the store).
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/share_int.h"

#define CTL_NAME "control.sock"
#define CTL_LINE 4096
#define CTL_DEADLINE_MS 2000 /* for a client to send its whole line */
#define CTL_MAX_CONN 8	     /* connections read at once */

/* A connection being read: its line so far, and its deadline. */
struct ctl_conn {
	int fd; /* -1: free */
	size_t n;
	uint64_t deadline; /* ms, CLOCK_MONOTONIC */
	char buf[CTL_LINE];
};

struct cache_ctl {
	struct cache *c;
	int fd;	     /* listening */
	int wake[2]; /* cache_ctl_stop writes to wake[1] */
	pthread_t thread;
	struct ctl_conn conn[CTL_MAX_CONN];
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

static uint64_t
now_ms(void)
{
	return wire_now_ns() / 1000000;
}

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

/* Answer conn's complete line (NUL-terminated in buf) and close it. */
static void
ctl_answer(struct cache_ctl *ctl, struct ctl_conn *cn)
{
	char reply[CTL_LINE];
	size_t len;

	cache_admin_run(ctl->c, cn->buf, reply, sizeof(reply) - 1);
	len = strlen(reply);
	reply[len++] = '\n';
	/* One send, never waiting: the reply fits an empty socket buffer. */
	(void)send(cn->fd, reply, len, MSG_DONTWAIT | MSG_NOSIGNAL);
}

static void
ctl_close(struct ctl_conn *cn)
{
	if (cn->fd >= 0)
		close(cn->fd);
	cn->fd = -1;
	cn->n = 0;
}

/* Read what conn has; answer it once its line is whole. */
static void
ctl_read(struct cache_ctl *ctl, struct ctl_conn *cn)
{
	ssize_t r = read(cn->fd, cn->buf + cn->n, sizeof(cn->buf) - 1 - cn->n);
	char *nl;

	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r <= 0) { /* a line without its newline at EOF is whole too */
		if (r == 0 && cn->n > 0) {
			cn->buf[cn->n] = '\0';
			ctl_answer(ctl, cn);
		}
		ctl_close(cn);
		return;
	}
	cn->n += (size_t)r;
	cn->buf[cn->n] = '\0';
	if ((nl = memchr(cn->buf, '\n', cn->n)) != NULL) {
		*nl = '\0';
		ctl_answer(ctl, cn);
		ctl_close(cn);
	} else if (cn->n == sizeof(cn->buf) - 1) {
		static const char msg[] = "error request too long\n";

		(void)send(
		    cn->fd, msg, sizeof(msg) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
		ctl_close(cn);
	}
}

/* Accept one connection into a free slot (there is one). */
static void
ctl_accept(struct cache_ctl *ctl)
{
	int fd = accept4(ctl->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0)
		return;
	if (owner_peer_ok(fd, 0, NULL) != 0) { /* not our user */
		close(fd);
		return;
	}
	for (int i = 0; i < CTL_MAX_CONN; i++)
		if (ctl->conn[i].fd < 0) {
			ctl->conn[i].fd = fd;
			ctl->conn[i].n = 0;
			ctl->conn[i].deadline = now_ms() + CTL_DEADLINE_MS;
			return;
		}
	close(fd); /* not reached: the caller polls only with a free slot */
}

static void *
ctl_thread(void *arg)
{
	struct cache_ctl *ctl = arg;
	struct pollfd p[2 + CTL_MAX_CONN];

	for (;;) {
		uint64_t now = now_ms(), next = UINT64_MAX;
		int nfree = 0, timeout;

		p[0] = (struct pollfd){ctl->wake[0], POLLIN, 0};
		for (int i = 0; i < CTL_MAX_CONN; i++) {
			struct ctl_conn *cn = &ctl->conn[i];

			if (cn->fd >= 0 && cn->deadline <= now)
				ctl_close(cn); /* too slow: unanswered */
			if (cn->fd < 0) {
				nfree++;
				p[2 + i] = (struct pollfd){-1, 0, 0};
				continue;
			}
			if (cn->deadline < next)
				next = cn->deadline;
			p[2 + i] = (struct pollfd){cn->fd, POLLIN, 0};
		}
		/* Full: new connections wait in the backlog. */
		p[1] = (struct pollfd){nfree > 0 ? ctl->fd : -1, POLLIN, 0};
		timeout = next == UINT64_MAX ? -1 : (int)(next - now);
		if (poll(p, 2 + CTL_MAX_CONN, timeout) < 0 && errno != EINTR)
			break;
		if (p[0].revents != 0)
			break; /* cache_ctl_stop */
		for (int i = 0; i < CTL_MAX_CONN; i++)
			if (p[2 + i].fd >= 0 && p[2 + i].revents != 0)
				ctl_read(ctl, &ctl->conn[i]);
		if (p[1].revents & POLLIN)
			ctl_accept(ctl);
	}
	for (int i = 0; i < CTL_MAX_CONN; i++)
		ctl_close(&ctl->conn[i]);
	return NULL;
}

int
cache_ctl_start(struct cache *c, const char *dir, struct cache_ctl **out,
    char *err, size_t errlen)
{
	struct cache_ctl *ctl;
	struct sockaddr_un sa;
	int r;

	if ((ctl = calloc(1, sizeof(*ctl))) == NULL) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	ctl->c = c;
	ctl->fd = ctl->wake[0] = ctl->wake[1] = -1;
	for (int i = 0; i < CTL_MAX_CONN; i++)
		ctl->conn[i].fd = -1;
	if (pipe2(ctl->wake, O_CLOEXEC) != 0) {
		r = -errno;
		snprintf(err, errlen, "pipe: %s", strerror(-r));
		goto fail;
	}
	if ((r = ctl_addr(dir, &sa)) != 0) {
		snprintf(err, errlen, "%s/%s: path too long for a socket", dir,
		    CTL_NAME);
		goto fail;
	}
	snprintf(ctl->path, sizeof(ctl->path), "%s", sa.sun_path);
	/* owner.c: a stale socket replaced, anything else refused. */
	if ((ctl->fd = owner_listen(dir, CTL_NAME, err, errlen)) < 0) {
		r = ctl->fd;
		goto fail;
	}
	if ((r = pthread_create(&ctl->thread, NULL, ctl_thread, ctl)) != 0) {
		snprintf(err, errlen, "%s: %s", ctl->path, strerror(r));
		unlink(ctl->path);
		r = -r;
		goto fail;
	}
	*out = ctl;
	return 0;
fail:
	if (ctl->fd >= 0)
		close(ctl->fd);
	if (ctl->wake[0] >= 0) {
		close(ctl->wake[0]);
		close(ctl->wake[1]);
	}
	free(ctl);
	return r;
}

void
cache_ctl_stop(struct cache_ctl *ctl)
{
	if (ctl == NULL)
		return;
	/* The thread waits on no client: it wakes at once (or when the
	 * request it runs is done). */
	while (write(ctl->wake[1], "x", 1) < 0 && errno == EINTR)
		;
	pthread_join(ctl->thread, NULL);
	close(ctl->fd);
	close(ctl->wake[0]);
	close(ctl->wake[1]);
	unlink(ctl->path);
	free(ctl);
}

/* Wait for events on fd until the deadline: 0, or -ETIMEDOUT. */
static int
wait_fd(int fd, short events, uint64_t deadline)
{
	for (;;) {
		uint64_t now = now_ms();
		struct pollfd p = {fd, events, 0};
		int r;

		if (now >= deadline)
			return -ETIMEDOUT;
		r = poll(&p, 1, (int)(deadline - now));
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

int
cache_ctl_request(
    const char *dir, const char *req, char *reply, size_t len, int timeout_ms)
{
	uint64_t deadline =
	    now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 1);
	size_t n = 0, rl = strlen(req);
	char *out = NULL;
	long holder;
	int fd, r;

	/* owner.c: only to the process that holds the store, of our user. */
	if ((r = owner_lease(dir, &holder)) <= 0)
		return r == 0 ? -ECONNREFUSED : r;
	if (len == 0 || (out = malloc(rl + 1)) == NULL)
		return -ENOMEM;
	memcpy(out, req, rl);
	out[rl++] = '\n';
	/* A full backlog (a stopped owner) is retried to the deadline. */
	if ((fd = owner_connect(dir, CTL_NAME, holder,
		 wire_now_ns() + (uint64_t)timeout_ms * 1000000u)) < 0) {
		free(out);
		return fd;
	}
	for (size_t off = 0; off < rl;) {
		ssize_t w = send(fd, out + off, rl - off, MSG_NOSIGNAL);

		if (w > 0) {
			off += (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR) {
			r = -errno;
			goto out;
		}
		if ((r = wait_fd(fd, POLLOUT, deadline)) != 0)
			goto out;
	}
	/* The reply: one line, to the deadline (a compaction counts too). */
	for (;;) {
		ssize_t got;

		if (n + 1 >= len) {
			r = -EMSGSIZE;
			break;
		}
		got = read(fd, reply + n, len - 1 - n);
		if (got > 0) {
			char *nl;

			n += (size_t)got;
			reply[n] = '\0';
			if ((nl = memchr(reply, '\n', n)) != NULL) {
				*nl = '\0';
				r = 0;
				break;
			}
			continue;
		}
		if (got == 0) { /* closed unanswered (or a partial line) */
			r = -EIO;
			break;
		}
		if (errno != EAGAIN && errno != EINTR) {
			r = -errno;
			break;
		}
		if ((r = wait_fd(fd, POLLIN, deadline)) != 0)
			break;
	}
out:
	close(fd);
	free(out);
	return r;
}
