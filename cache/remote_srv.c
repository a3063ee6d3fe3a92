/*
 * remote_srv.c - the owner's side of the shared cache (see remote.c):
 * dir/data.sock, one thread per client connection, a function per kind
 * of request, and the table of the mounts that use the store.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/remote_int.h"

struct mount_ent {
	pid_t pid;
	int nconn;
	uint64_t hits, misses;
	char label[256];
	struct mount_ent *next;
};

struct srv_conn {
	struct cache_srv *s;
	int fd;
	pid_t pid; /* 0 until HELLO */
	atomic_bool done;
	pthread_t thread;
	struct srv_conn *next;
};

struct cache_srv {
	struct cache *c;	   /* the store, held by this process */
	struct cache_remote *self; /* this mount's own counters and label */
	int fd;
	atomic_bool stopping;
	pthread_t thread;
	pthread_mutex_t lock; /* protects conns and mounts */
	struct srv_conn *conns;
	struct mount_ent *mounts;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

static int
reply(
    int fd, int status, const void *a, size_t alen, const void *b, size_t blen)
{
	struct rep_hdr h = {status, (uint32_t)(alen + blen)};
	struct iovec iov[3] = {
	    {&h, sizeof(h)}, {(void *)a, alen}, {(void *)b, blen}};

	return remote_send_iov(fd, iov, 3);
}

/* Append a line of the mounts table to *t (cap, n); false: out of memory. */
static bool
mounts_line(char **t, size_t *cap, size_t *n, long pid, const char *role,
    uint64_t hits, uint64_t misses, const char *label)
{
	char line[512];
	int l = snprintf(line, sizeof(line),
	    "%ld\t%s\t%" PRIu64 "\t%" PRIu64 "\t%s\n", pid, role, hits, misses,
	    label);

	if (l < 0)
		return true;
	if ((size_t)l >= sizeof(line))
		l = (int)sizeof(line) - 1;
	if (*n + (size_t)l + 1 > *cap) {
		size_t nc = 2 * (*n + (size_t)l + 1);
		char *nt = realloc(*t, nc);

		if (nt == NULL)
			return false;
		*t = nt;
		*cap = nc;
	}
	memcpy(*t + *n, line, (size_t)l);
	*n += (size_t)l;
	return true;
}

/* The mounts table as text, the owner first; srv.lock held. */
static char *
mounts_text(struct cache_srv *s, size_t *len)
{
	size_t cap = 0, n = 0;
	char *t = NULL;
	bool ok = mounts_line(&t, &cap, &n, (long)getpid(), "owner",
	    atomic_load(&s->self->hits), atomic_load(&s->self->misses),
	    s->self->label);

	for (struct mount_ent *m = s->mounts; ok && m != NULL; m = m->next)
		ok = mounts_line(&t, &cap, &n, (long)m->pid, "client", m->hits,
		    m->misses, m->label);
	if (!ok || t == NULL) {
		free(t);
		return NULL;
	}
	*len = n;
	return t;
}

/* Register conn's pid as a mount (HELLO); srv.lock held. */
static void
mount_add(struct cache_srv *s, pid_t pid, const char *label, size_t llen)
{
	struct mount_ent *m;

	for (m = s->mounts; m != NULL; m = m->next)
		if (m->pid == pid)
			break;
	if (m == NULL) {
		if ((m = calloc(1, sizeof(*m))) == NULL)
			return;
		m->pid = pid;
		if (llen >= sizeof(m->label))
			llen = sizeof(m->label) - 1;
		memcpy(m->label, label, llen);
		for (size_t i = 0; i < llen; i++)
			if (m->label[i] == '\n' || m->label[i] == '\t')
				m->label[i] = ' ';
		m->next = s->mounts;
		s->mounts = m;
	}
	m->nconn++;
}

static struct mount_ent *
mount_find(struct cache_srv *s, pid_t pid)
{
	for (struct mount_ent *m = s->mounts; m != NULL; m = m->next)
		if (m->pid == pid)
			return m;
	return NULL;
}

/* srv.lock held: a mount whose last connection closed is gone. */
static void
mount_drop(struct cache_srv *s, pid_t pid)
{
	for (struct mount_ent **p = &s->mounts; *p != NULL; p = &(*p)->next)
		if ((*p)->pid == pid) {
			struct mount_ent *m = *p;

			if (--m->nconn <= 0) {
				*p = m->next;
				free(m);
			}
			return;
		}
}

/* HELLO: who the client is (its pid, from the socket) and its label. */
static int
serve_hello(struct srv_conn *cn, const uint8_t *body, size_t len)
{
	struct cache_srv *s = cn->s;
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	uint32_t me = (uint32_t)getpid();

	if (cn->pid != 0 ||
	    getsockopt(cn->fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0)
		return -EPROTO;
	cn->pid = cr.pid;
	pthread_mutex_lock(&s->lock);
	mount_add(s, cr.pid, (const char *)body, len);
	pthread_mutex_unlock(&s->lock);
	return reply(cn->fd, 0, &me, sizeof(me), NULL, 0);
}

static int
serve_get(struct srv_conn *cn, const uint8_t *body, size_t len)
{
	struct cache_srv *s = cn->s;
	struct cache_val v;
	struct wire_val wv = {0};
	int r;

	if (len != CACHE_KEY_LEN)
		return -EPROTO;
	if (cache_get(s->c, body, &v) != 0) {
		/* -EIO: a miss, and the store is off (STATS: why). */
		return reply(cn->fd, cache_error(s->c) ? -EIO : -ENOENT, NULL,
		    0, NULL, 0);
	}
	wv.w = v.w;
	wv.h = v.h;
	wv.c = v.c;
	wv.dtype = v.dtype;
	wv.enc = v.enc;
	wv.len = v.len;
	r = reply(cn->fd, 0, &wv, sizeof(wv), v.data, v.len);
	free(v.data);
	return r;
}

static int
serve_put(struct srv_conn *cn, uint8_t *body, size_t len)
{
	struct wire_val wv;
	struct cache_val v = {0};
	char *prefix;

	if (len < CACHE_KEY_LEN + sizeof(wv))
		return -EPROTO;
	memcpy(&wv, body + CACHE_KEY_LEN, sizeof(wv));
	if ((uint64_t)CACHE_KEY_LEN + sizeof(wv) + wv.prefix_len + wv.len !=
	    len)
		return -EPROTO;
	prefix = (char *)body + CACHE_KEY_LEN + sizeof(wv);
	if ((prefix = strndup(prefix, wv.prefix_len)) == NULL)
		return -ENOMEM;
	v.w = wv.w;
	v.h = wv.h;
	v.c = wv.c;
	v.dtype = wv.dtype;
	v.enc = wv.enc;
	v.len = wv.len;
	v.data = body + CACHE_KEY_LEN + sizeof(wv) + wv.prefix_len;
	v.prefix = prefix;
	/*
	 * No reply: the client's worker need not wait for RocksDB's write
	 * (or an eviction it sets off); its next request on this connection
	 * waits in the socket meanwhile.
	 */
	cache_put(cn->s->c, body, &v);
	free(prefix);
	return 0;
}

/*
 * A digest request's stat into *st and its path (after fixed bytes) into
 * *pathp, for the caller to free: 0, -EPROTO or -ENOMEM.
 */
static int
digest_args(const uint8_t *body, size_t len, size_t fixed, struct stat *st,
    char **pathp)
{
	struct wire_stat ws;

	if (len < fixed)
		return -EPROTO;
	memcpy(&ws, body, sizeof(ws));
	remote_stat_from_wire(&ws, st);
	if ((*pathp = strndup((const char *)body + fixed, len - fixed)) == NULL)
		return -ENOMEM;
	return 0;
}

static int
serve_get_digest(struct srv_conn *cn, const uint8_t *body, size_t len)
{
	struct stat st;
	uint8_t d[32];
	char *path;
	int r;

	if ((r = digest_args(
		 body, len, sizeof(struct wire_stat), &st, &path)) != 0)
		return r;
	if (cache_get_digest(cn->s->c, path, &st, d) == 0)
		r = reply(cn->fd, 0, d, sizeof(d), NULL, 0);
	else
		r = reply(cn->fd, -ENOENT, NULL, 0, NULL, 0);
	free(path);
	return r;
}

/* No reply, as PUT. */
static int
serve_put_digest(struct srv_conn *cn, const uint8_t *body, size_t len)
{
	struct stat st;
	char *path;
	int r;

	if ((r = digest_args(
		 body, len, sizeof(struct wire_stat) + 32, &st, &path)) != 0)
		return r;
	cache_put_digest(cn->s->c, path, &st, body + sizeof(struct wire_stat));
	free(path);
	return 0;
}

static int
serve_stats(struct srv_conn *cn)
{
	struct cache_stats cs;
	struct wire_stats ws = {0};
	const char *e;

	cache_get_stats(cn->s->c, &cs);
	ws.hits = cs.hits;
	ws.misses = cs.misses;
	ws.bytes_read = cs.bytes_read;
	ws.bytes_written = cs.bytes_written;
	ws.insert_failures = cs.insert_failures;
	ws.disk_bytes = cs.disk_bytes;
	ws.disabled = cs.disabled;
	e = cache_error(cn->s->c);
	return reply(cn->fd, 0, &ws, sizeof(ws), e, e ? strlen(e) : 0);
}

static int
serve_mounts(struct srv_conn *cn)
{
	struct cache_srv *s = cn->s;
	size_t len = 0;
	char *t;
	int r;

	pthread_mutex_lock(&s->lock);
	t = mounts_text(s, &len);
	pthread_mutex_unlock(&s->lock);
	r = t == NULL ? reply(cn->fd, -ENOMEM, NULL, 0, NULL, 0)
		      : reply(cn->fd, 0, t, len, NULL, 0);
	free(t);
	return r;
}

/* Serve one request on conn: 0 to go on, else the connection ends. */
static int
serve_one(struct srv_conn *cn)
{
	struct cache_srv *s = cn->s;
	struct req_hdr h;
	uint8_t *body = NULL;
	int r;

	if ((r = remote_read_full(cn->fd, &h, sizeof(h))) != 0)
		return r;
	if (h.len > FRAME_MAX || (h.len > 0 && (body = malloc(h.len)) == NULL))
		return -ENOMEM;
	if ((r = remote_read_full(cn->fd, body, h.len)) != 0)
		goto out;
	if (cn->pid != 0) {
		struct mount_ent *m;

		pthread_mutex_lock(&s->lock);
		if ((m = mount_find(s, cn->pid)) != NULL) {
			m->hits = h.hits;
			m->misses = h.misses;
		}
		pthread_mutex_unlock(&s->lock);
	}
	switch (h.op) {
	case OP_HELLO:
		r = serve_hello(cn, body, h.len);
		break;
	case OP_GET:
		r = serve_get(cn, body, h.len);
		break;
	case OP_PUT:
		r = serve_put(cn, body, h.len);
		break;
	case OP_GET_DIGEST:
		r = serve_get_digest(cn, body, h.len);
		break;
	case OP_PUT_DIGEST:
		r = serve_put_digest(cn, body, h.len);
		break;
	case OP_STATS:
		r = serve_stats(cn);
		break;
	case OP_MOUNTS:
		r = serve_mounts(cn);
		break;
	default:
		r = -EPROTO;
	}
out:
	free(body);
	return r;
}

static void *
conn_thread(void *arg)
{
	struct srv_conn *cn = arg;

	while (!atomic_load(&cn->s->stopping) && serve_one(cn) == 0)
		;
	if (cn->pid != 0) {
		pthread_mutex_lock(&cn->s->lock);
		mount_drop(cn->s, cn->pid);
		pthread_mutex_unlock(&cn->s->lock);
	}
	atomic_store(&cn->done, true);
	return NULL;
}

/* Join and free the connections that ended; srv.lock held. */
static void
reap(struct cache_srv *s, bool all)
{
	struct srv_conn **p = &s->conns;

	while (*p != NULL) {
		struct srv_conn *cn = *p;

		if (!all && !atomic_load(&cn->done)) {
			p = &cn->next;
			continue;
		}
		*p = cn->next;
		pthread_join(cn->thread, NULL);
		close(cn->fd);
		free(cn);
	}
}

static void *
accept_thread(void *arg)
{
	struct cache_srv *s = arg;

	while (!atomic_load(&s->stopping)) {
		struct srv_conn *cn;
		struct ucred cr;
		socklen_t cl = sizeof(cr);
		int fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOMEM) {
				usleep(10000);
				continue;
			}
			break; /* shut down by remote_srv_stop */
		}
		/* The 0700 directory keeps others out; this says so again. */
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 ||
		    cr.uid != geteuid() ||
		    (cn = calloc(1, sizeof(*cn))) == NULL) {
			close(fd);
			continue;
		}
		cn->s = s;
		cn->fd = fd;
		remote_set_bufs(fd);
		pthread_mutex_lock(&s->lock);
		reap(s, false);
		if (pthread_create(&cn->thread, NULL, conn_thread, cn) != 0) {
			pthread_mutex_unlock(&s->lock);
			close(fd);
			free(cn);
			continue;
		}
		cn->next = s->conns;
		s->conns = cn;
		pthread_mutex_unlock(&s->lock);
	}
	return NULL;
}

void
remote_srv_stop(struct cache_srv *s)
{
	if (s == NULL)
		return;
	atomic_store(&s->stopping, true);
	shutdown(s->fd, SHUT_RDWR);
	pthread_join(s->thread, NULL);
	close(s->fd);
	unlink(s->path);
	pthread_mutex_lock(&s->lock);
	for (struct srv_conn *cn = s->conns; cn != NULL; cn = cn->next)
		shutdown(cn->fd, SHUT_RDWR);
	pthread_mutex_unlock(&s->lock);
	/* The threads take srv.lock to leave: join them unlocked. */
	for (;;) {
		struct srv_conn *cn;

		pthread_mutex_lock(&s->lock);
		if ((cn = s->conns) != NULL)
			s->conns = cn->next;
		pthread_mutex_unlock(&s->lock);
		if (cn == NULL)
			break;
		pthread_join(cn->thread, NULL);
		close(cn->fd);
		free(cn);
	}
	while (s->mounts != NULL) {
		struct mount_ent *m = s->mounts;

		s->mounts = m->next;
		free(m);
	}
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/*
 * Listen on dir/data.sock for c, a store this process holds.  A socket
 * left there by a killed owner is replaced: holding the store's lock
 * proves that no live feedfs serves it.
 */
int
remote_srv_start(struct cache *c, struct cache_remote *self, const char *dir,
    struct cache_srv **out, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	struct cache_srv *s;
	struct stat st;
	int r;

	if (remote_data_addr(dir, &sa) != 0) {
		snprintf(err, errlen, "%.200s/%s: path too long for a socket",
		    dir, DATA_NAME);
		return -ENAMETOOLONG;
	}
	if (lstat(sa.sun_path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket",
			    sa.sun_path);
			return -EEXIST;
		}
		unlink(sa.sun_path);
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	s->c = c;
	s->self = self;
	pthread_mutex_init(&s->lock, NULL);
	snprintf(s->path, sizeof(s->path), "%s", sa.sun_path);
	if ((s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(s->fd, 64) != 0) {
		r = -errno;
		goto fail;
	}
	if ((r = pthread_create(&s->thread, NULL, accept_thread, s)) != 0) {
		unlink(s->path);
		r = -r;
		goto fail;
	}
	*out = s;
	return 0;
fail:
	snprintf(err, errlen, "%s: %s", sa.sun_path, strerror(-r));
	if (s->fd >= 0)
		close(s->fd);
	pthread_mutex_destroy(&s->lock);
	free(s);
	return r;
}

/* feedfs-cache stats: the owner's table of mounts. */
int
cache_mounts(const char *dir, char **text)
{
	struct timeval tv = {RPC_TIMEOUT_MS / 1000, 0};
	struct req_hdr h = {OP_MOUNTS, 0, 0, 0};
	struct iovec iov = {&h, sizeof(h)};
	struct sockaddr_un sa;
	struct rep_hdr rep;
	char *t = NULL;
	int fd, e;

	if ((e = remote_data_addr(dir, &sa)) != 0)
		return e;
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		e = -errno;
		goto out;
	}
	if ((e = remote_send_iov(fd, &iov, 1)) != 0 ||
	    (e = remote_read_full(fd, &rep, sizeof(rep))) != 0)
		goto out;
	if (rep.status != 0 || rep.len > (1u << 24)) {
		e = rep.status != 0 ? rep.status : -EPROTO;
		goto out;
	}
	if ((t = malloc(rep.len + 1)) == NULL) {
		e = -ENOMEM;
		goto out;
	}
	if ((e = remote_read_full(fd, t, rep.len)) != 0)
		goto out;
	t[rep.len] = '\0';
	*text = t; /* transferred */
	t = NULL;
out:
	free(t);
	close(fd);
	return e;
}
