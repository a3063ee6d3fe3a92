/*
 * metrics.c - fs/ (the FUSE glue), under main.c: the HTTP listener of
 * -o metrics= (metrics.h): one thread, poll over non-blocking sockets,
 * the request head read by util/http_req.c, .feedfs/stats's text sent
 * with a mount label on every series.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "engine/feed.h"
#include "fs/metrics.h"
#include "util/http_req.h"
#include "util/clock.h"
#include "util/log.h"

struct mconn {
	int fd;		/* -1: a free slot */
	uint64_t since; /* accepted, ms of CLOCK_MONOTONIC */
	char in[FS_METRICS_HEAD_MAX];
	size_t inlen;
	char *out; /* the response, once the head is read */
	size_t outlen, outoff;
	bool draining; /* sent, write side shut: what the client still
			  sends is read and dropped, so that a close does
			  not reset the answer away */
};

struct fs_metrics {
	int lfd, wake[2];
	pthread_t th;
	bool started;
	struct feed *feed;
	char *label; /* mount="..." */
	char where[INET6_ADDRSTRLEN + 300];
	struct mconn c[FS_METRICS_CONNS]; /* the thread's alone */
};

/* spec's host and port: "H:P", "[H]:P", "P" (127.0.0.1). */
static int
split(const char *spec, char *host, size_t hlen, const char **port)
{
	const char *colon = strrchr(spec, ':');

	if (colon == NULL) {
		snprintf(host, hlen, "127.0.0.1");
		*port = spec;
	} else if (spec[0] == '[') {
		if (colon < spec + 2 || colon[-1] != ']' ||
		    (size_t)(colon - spec - 2) >= hlen)
			return -EINVAL;
		memcpy(host, spec + 1, (size_t)(colon - spec - 2));
		host[colon - spec - 2] = '\0';
		*port = colon + 1;
	} else {
		if ((size_t)(colon - spec) >= hlen || colon == spec)
			return -EINVAL;
		memcpy(host, spec, (size_t)(colon - spec));
		host[colon - spec] = '\0';
		*port = colon + 1;
	}
	for (const char *p = *port; *p; p++)
		if (*p < '0' || *p > '9')
			return -EINVAL;
	return **port ? 0 : -EINVAL;
}

int
fs_metrics_open(
    const char *spec, struct fs_metrics **out, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
			    .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
			*ai = NULL;
	struct fs_metrics *m;
	char host[256], addr[INET6_ADDRSTRLEN + 256];
	const char *port;
	int r, one = 1;

	if (split(spec, host, sizeof(host), &port) != 0) {
		snprintf(err, errlen,
		    "-o metrics=%s: expected HOST:PORT, [IPV6]:PORT or PORT "
		    "(e.g. 127.0.0.1:9464)",
		    spec);
		return -EINVAL;
	}
	if ((r = getaddrinfo(host, port, &hints, &ai)) != 0) {
		snprintf(
		    err, errlen, "-o metrics=%s: %s", spec, gai_strerror(r));
		return -EINVAL;
	}
	if ((m = calloc(1, sizeof(*m))) == NULL) {
		freeaddrinfo(ai);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	m->wake[0] = m->wake[1] = -1;
	for (size_t i = 0; i < FS_METRICS_CONNS; i++)
		m->c[i].fd = -1;
	m->lfd = socket(
	    ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (m->lfd < 0 ||
	    setsockopt(m->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) !=
		0 ||
	    bind(m->lfd, ai->ai_addr, ai->ai_addrlen) != 0 ||
	    listen(m->lfd, 16) != 0) {
		r = -errno;
		snprintf(err, errlen, "-o metrics=%s: %s", spec, strerror(-r));
		freeaddrinfo(ai);
		fs_metrics_free(m);
		return r;
	}
	if (getnameinfo(ai->ai_addr, ai->ai_addrlen, addr, sizeof(addr), NULL,
		0, NI_NUMERICHOST) != 0)
		snprintf(addr, sizeof(addr), "%s", host);
	snprintf(m->where, sizeof(m->where),
	    ai->ai_family == AF_INET6 ? "[%s]:%s" : "%s:%s", addr, port);
	freeaddrinfo(ai);
	*out = m;
	return 0;
}

static void
conn_close(struct mconn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->out);
	c->fd = -1;
	c->out = NULL;
	c->inlen = c->outlen = c->outoff = 0;
	c->draining = false;
}

/*
 * text with label inserted first in every series' labels: "a 1" becomes
 * "a{L} 1", "a{x=\"y\"} 1" becomes "a{L,x=\"y\"} 1"; comments and empty
 * lines as they are.  Malloc'd, or NULL.
 */
static char *
labelled(const char *text, size_t len, const char *label, size_t *outlen)
{
	size_t lines = 1, ll = strlen(label), n = 0;
	char *out;

	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	if ((out = malloc(len + lines * (ll + 3) + 1)) == NULL)
		return NULL;
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(text + i, '\n', len - i);
		size_t e = nl ? (size_t)(nl - text) + 1 : len, k = i;

		if (text[i] != '#' && text[i] != '\n') {
			while (k < e && text[k] != '{' && text[k] != ' ')
				k++;
			memcpy(out + n, text + i, k - i);
			n += k - i;
			out[n++] = '{';
			memcpy(out + n, label, ll);
			n += ll;
			if (k < e && text[k] == '{') {
				k++;
				if (k < e && text[k] != '}')
					out[n++] = ',';
			} else
				out[n++] = '}';
		}
		memcpy(out + n, text + k, e - k);
		n += e - k;
		i = e;
	}
	out[n] = '\0';
	*outlen = n;
	return out;
}

/* The answer to the head just read (status < 0: http_req_parse's). */
static void
respond(struct fs_metrics *m, struct mconn *c, int status,
    const struct http_req *req)
{
	static const char *const reason[] = {[200] = "OK",
	    [400] = "Bad Request",
	    [404] = "Not Found",
	    [405] = "Method Not Allowed",
	    [414] = "URI Too Long",
	    [431] = "Request Header Fields Too Large",
	    [500] = "Internal Server Error",
	    [505] = "HTTP Version Not Supported"};
	const char *text = NULL;
	char *owned = NULL, *body = NULL, head[256];
	size_t len = 0, blen = 0;
	bool head_only = false;
	int hl;

	if (status == 0) {
		head_only = strcmp(req->method, "HEAD") == 0;
		if (!head_only && strcmp(req->method, "GET") != 0)
			status = 405;
		else if (strcmp(req->path, "/metrics") != 0 &&
			 strcmp(req->path, "/") != 0)
			status = 404;
		else if (feed_text(m->feed, FT_STATS, 0, &text, &len, &owned) !=
			     0 ||
			 (body = labelled(text, len, m->label, &blen)) == NULL)
			status = 500;
		else
			status = 200;
		feed_text_free(m->feed, owned);
	} else
		status = -status;
	hl = snprintf(head, sizeof(head),
	    "HTTP/1.1 %d %s\r\n%sContent-Length: %zu\r\n"
	    "Connection: close\r\n\r\n",
	    status, reason[status],
	    status == 200   ? "Content-Type: text/plain; version=0.0.4; "
			      "charset=utf-8\r\n"
	    : status == 405 ? "Allow: GET, HEAD\r\n"
			    : "",
	    blen);
	if (head_only || status != 200)
		blen = 0;
	if ((c->out = malloc((size_t)hl + blen)) == NULL) {
		free(body);
		conn_close(c);
		return;
	}
	memcpy(c->out, head, (size_t)hl);
	if (blen)
		memcpy(c->out + hl, body, blen);
	free(body);
	c->outlen = (size_t)hl + blen;
	c->outoff = 0;
}

static void
on_read(struct fs_metrics *m, struct mconn *c)
{
	struct http_req req;
	ssize_t n;
	int r;

	n = recv(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen, 0);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		conn_close(c);
		return;
	}
	if (n < 0)
		return;
	c->inlen += (size_t)n;
	r = http_req_parse(c->in, c->inlen, sizeof(c->in), &req);
	if (r != 0)
		respond(m, c, r > 0 ? 0 : r, &req);
}

static void
on_write(struct mconn *c)
{
	ssize_t n = send(
	    c->fd, c->out + c->outoff, c->outlen - c->outoff, MSG_NOSIGNAL);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0)
		conn_close(c);
	else if ((c->outoff += (size_t)n) == c->outlen) {
		/* One request a connection: the client's EOF ends it. */
		shutdown(c->fd, SHUT_WR);
		c->draining = true;
	}
}

static void
on_drain(struct mconn *c)
{
	char junk[4096];
	ssize_t n = recv(c->fd, junk, sizeof(junk), 0);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		conn_close(c);
}

/* New connections, each in a free slot, else in the oldest one's. */
static void
on_accept(struct fs_metrics *m, uint64_t now)
{
	int fd;

	for (int k = 0;
	     k < FS_METRICS_CONNS && (fd = accept4(m->lfd, NULL, NULL,
					  SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;
	     k++) {
		struct mconn *slot = NULL;

		for (size_t i = 0; i < FS_METRICS_CONNS; i++)
			if (m->c[i].fd < 0) {
				slot = &m->c[i];
				break;
			} else if (slot == NULL || m->c[i].since < slot->since)
				slot = &m->c[i];
		conn_close(slot);
		slot->fd = fd;
		slot->since = now;
	}
}

static void *
serve(void *arg)
{
	struct fs_metrics *m = arg;
	struct pollfd pfd[2 + FS_METRICS_CONNS];

	for (;;) {
		uint64_t now = ff_mono_ms();
		int timeout = -1, n = 2;
		struct mconn *at[FS_METRICS_CONNS];

		pfd[0] = (struct pollfd){m->wake[0], POLLIN, 0};
		pfd[1] = (struct pollfd){m->lfd, POLLIN, 0};
		for (size_t i = 0; i < FS_METRICS_CONNS; i++) {
			struct mconn *c = &m->c[i];
			uint64_t end = c->since + FS_METRICS_DEADLINE_MS;

			if (c->fd < 0)
				continue;
			if (now >= end) { /* slow, silent, or not reading */
				conn_close(c);
				continue;
			}
			if (timeout < 0 || end - now < (uint64_t)timeout)
				timeout = (int)(end - now);
			at[n - 2] = c;
			pfd[n++] = (struct pollfd){c->fd,
			    (short)(c->out && !c->draining ? POLLOUT : POLLIN),
			    0};
		}
		if (poll(pfd, (nfds_t)n, timeout) < 0 && errno != EINTR)
			break;
		if (pfd[0].revents)
			break;
		for (int i = 2; i < n; i++) {
			if (pfd[i].revents == 0)
				continue;
			if (at[i - 2]->draining)
				on_drain(at[i - 2]);
			else if (at[i - 2]->out)
				on_write(at[i - 2]);
			else
				on_read(m, at[i - 2]);
		}
		if (pfd[1].revents & POLLIN)
			on_accept(m, ff_mono_ms());
	}
	return NULL;
}

int
fs_metrics_start(struct fs_metrics *m, struct feed *feed, const char *mnt)
{
	size_t n = 0, len = strlen(mnt);
	int r;

	m->feed = feed;
	if ((m->label = malloc(2 * len + 16)) == NULL)
		return -ENOMEM;
	n = (size_t)sprintf(m->label, "mount=\"");
	for (const char *s = mnt; *s; s++) {
		if (*s == '"' || *s == '\\' || *s == '\n')
			m->label[n++] = '\\';
		m->label[n++] = *s == '\n' ? 'n' : *s;
	}
	strcpy(m->label + n, "\"");
	if (pipe2(m->wake, O_CLOEXEC) != 0)
		return -errno;
	if ((r = pthread_create(&m->th, NULL, serve, m)) != 0)
		return -r;
	m->started = true;
	log_info("metrics at http://%s/metrics", m->where);
	return 0;
}

void
fs_metrics_free(struct fs_metrics *m)
{
	if (m == NULL)
		return;
	if (m->started) {
		(void)!write(m->wake[1], "x", 1);
		pthread_join(m->th, NULL);
	}
	for (size_t i = 0; i < FS_METRICS_CONNS; i++)
		conn_close(&m->c[i]);
	for (int i = 0; i < 2; i++)
		if (m->wake[i] >= 0)
			close(m->wake[i]);
	if (m->lfd >= 0)
		close(m->lfd);
	free(m->label);
	free(m);
}
