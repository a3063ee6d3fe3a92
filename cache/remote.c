/*
 * remote.c - one cache for every feedfs of a machine (see cache.h,
 * cache_open_shared).
 *
 * RocksDB lets one process write a store.  The first feedfs to take its
 * lock is the owner: it opens the store and answers the others on
 * dir/data.sock, one thread per connection.  A feedfs that finds the store
 * locked is a client: its struct cache has no RocksDB handle, and
 * cache_get, cache_put and the digest memos become requests on a small
 * pool of connections to the owner.
 *
 * Frames (native byte order: both ends are on one machine):
 *
 *	request	struct req_hdr (op, body length, the client's hit and miss
 *		counts) + body
 *	reply	struct rep_hdr (0 or -errno, body length) + body
 *
 *	HELLO		label			-> u32 owner pid
 *	GET		key[32]			-> struct wire_val + payload
 *						   (-ENOENT: a miss; -EIO: a
 *						   miss, the store is off)
 *	PUT		key[32] wire_val prefix payload	-> no reply
 *	GET_DIGEST	wire_stat path		-> digest[32]
 *	PUT_DIGEST	wire_stat digest[32] path	-> no reply
 *	STATS		(empty)			-> struct wire_stats +
 *						   cache_error's text
 *	MOUNTS		(empty)			-> text, a line a mount
 *
 * Values are copied through the socket (measured in
 * tests/test_cache_remote.c, a 270 KB value on a 2-core VM: a get costs
 * about 85-100 us remote against 30 us local, a copy and two wakeups
 * more; a put is not answered, so it costs the client one send).
 *
 * Failover: a client whose request fails (connection refused, reset, or
 * no answer within RPC_TIMEOUT_MS) counts a miss or drops the put, and
 * one of its threads tries cache_open: the one process that gets the lock
 * becomes the owner and starts both sockets; the others (-EBUSY) wait a
 * backoff (50 ms doubling to 1 s) before they connect again, and meanwhile
 * miss.  A store left by a killed owner recovers as after any crash (no
 * WAL: its unflushed puts are lost, never wrong).
 *
 * Attempts to open the store are serialized across processes by flock on
 * dir/open.lock (RocksDB rotates its LOG before it takes its lock), and a
 * client whose owner merely timed out sees the lock held (cache_probe_lock)
 * without opening anything.
 *
 * Lock order: remote.takeover, then remote.lock; srv.lock is a leaf.
 */
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache_int.h"

#define DATA_NAME "data.sock"
#define OPEN_LOCK "open.lock"
#define POOL_MAX 8	     /* idle connections a client keeps */
#define RPC_TIMEOUT_MS 5000  /* an owner that does not answer is gone */
#define FRAME_MAX (1u << 30) /* no value or path comes near */
#define SOCK_BUF (1 << 20)
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 1000

enum {
	OP_HELLO = 1,
	OP_GET,
	OP_PUT,
	OP_GET_DIGEST,
	OP_PUT_DIGEST,
	OP_STATS,
	OP_MOUNTS,
};

struct req_hdr {
	uint32_t op, len;
	uint64_t hits, misses; /* the client's own, for the mounts table */
};
struct rep_hdr {
	int32_t status;
	uint32_t len;
};
struct wire_val {
	uint32_t w, h, c, dtype;
	uint32_t prefix_len, enc; /* enc: cache_val's (format.h) */
	uint64_t len;
};
struct wire_stat {
	uint64_t size, mtime_sec, mtime_nsec, ctime_sec, ctime_nsec, ino, dev;
};
struct wire_stats {
	uint64_t hits, misses, bytes_read, bytes_written, insert_failures;
	uint64_t disk_bytes;
	uint32_t disabled, pad;
};

/* ---- the owner's server --------------------------------------------- */

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

/* ---- a mount's shared handle ---------------------------------------- */

struct cache_remote {
	char dir[4096];
	char label[256];
	uint64_t size_bound, mem_bound;
	cache_log_fn say;

	/* Set once, when this process owns the store; never unset. */
	_Atomic(struct cache *) local;
	struct cache_srv *srv; /* under takeover; stopped by close */
	struct cache_ctl *ctl;

	pthread_mutex_t takeover; /* one attempt at a time */
	pthread_mutex_t lock;	  /* protects idle, nidle, retry_at, backoff */
	int idle[POOL_MAX];
	int nidle;
	uint64_t retry_at; /* CLOCK_MONOTONIC ns: no connect before */
	uint32_t backoff_ms;
	atomic_bool lost;  /* the owner went away; said once per loss */
	atomic_long owner; /* pid of the owner we talk to, 0 unknown */

	atomic_uint_least64_t hits, misses, bytes_read, bytes_written;
	atomic_uint_least64_t insert_failures;

	/* The owner's cache_error, once it said its store is off. */
	atomic_bool failed;
	char err[256]; /* written once, under lock, before failed is set */
};

static void
say(struct cache_remote *r, bool warn, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (r->say == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r->say(warn, msg);
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int
data_addr(const char *dir, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if ((size_t)snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/%s", dir,
		DATA_NAME) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	return 0;
}

/* Read exactly len bytes: 0, or -errno (-ECONNRESET at end of file). */
static int
read_full(int fd, void *buf, size_t len)
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
static int
send_iov(int fd, struct iovec *iov, int n)
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

static int
reply(
    int fd, int status, const void *a, size_t alen, const void *b, size_t blen)
{
	struct rep_hdr h = {status, (uint32_t)(alen + blen)};
	struct iovec iov[3] = {
	    {&h, sizeof(h)}, {(void *)a, alen}, {(void *)b, blen}};

	return send_iov(fd, iov, 3);
}

/*
 * Room for a whole value in the socket: with the default (about 200 KB) a
 * 270 KB reply takes two wakeups of each side.
 */
static void
set_bufs(int fd)
{
	int sz = SOCK_BUF;

	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
}

static void
stat_from_wire(const struct wire_stat *w, struct stat *st)
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

static void
stat_to_wire(const struct stat *st, struct wire_stat *w)
{
	w->size = (uint64_t)st->st_size;
	w->mtime_sec = (uint64_t)st->st_mtim.tv_sec;
	w->mtime_nsec = (uint64_t)st->st_mtim.tv_nsec;
	w->ctime_sec = (uint64_t)st->st_ctim.tv_sec;
	w->ctime_nsec = (uint64_t)st->st_ctim.tv_nsec;
	w->ino = (uint64_t)st->st_ino;
	w->dev = (uint64_t)st->st_dev;
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

/* Serve one request on conn: 0 to go on, else the connection ends. */
static int
serve_one(struct srv_conn *cn)
{
	struct cache_srv *s = cn->s;
	struct req_hdr h;
	uint8_t *body = NULL;
	int r;

	if ((r = read_full(cn->fd, &h, sizeof(h))) != 0)
		return r;
	if (h.len > FRAME_MAX || (h.len > 0 && (body = malloc(h.len)) == NULL))
		return -ENOMEM;
	if ((r = read_full(cn->fd, body, h.len)) != 0)
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
	case OP_HELLO: {
		struct ucred cr;
		socklen_t cl = sizeof(cr);
		uint32_t me = (uint32_t)getpid();

		if (cn->pid != 0 || getsockopt(cn->fd, SOL_SOCKET, SO_PEERCRED,
					&cr, &cl) != 0) {
			r = -EPROTO;
			break;
		}
		cn->pid = cr.pid;
		pthread_mutex_lock(&s->lock);
		mount_add(s, cr.pid, (const char *)body, h.len);
		pthread_mutex_unlock(&s->lock);
		r = reply(cn->fd, 0, &me, sizeof(me), NULL, 0);
		break;
	}
	case OP_GET: {
		struct cache_val v;
		struct wire_val wv = {0};

		if (h.len != CACHE_KEY_LEN) {
			r = -EPROTO;
			break;
		}
		if (cache_get(s->c, body, &v) != 0) {
			/* -EIO: a miss, and the store is off (STATS: why). */
			r = reply(cn->fd, cache_error(s->c) ? -EIO : -ENOENT,
			    NULL, 0, NULL, 0);
			break;
		}
		wv.w = v.w;
		wv.h = v.h;
		wv.c = v.c;
		wv.dtype = v.dtype;
		wv.enc = v.enc;
		wv.len = v.len;
		r = reply(cn->fd, 0, &wv, sizeof(wv), v.data, v.len);
		free(v.data);
		break;
	}
	case OP_PUT: {
		struct wire_val wv;
		struct cache_val v = {0};
		char *prefix;

		if (h.len < CACHE_KEY_LEN + sizeof(wv)) {
			r = -EPROTO;
			break;
		}
		memcpy(&wv, body + CACHE_KEY_LEN, sizeof(wv));
		if ((uint64_t)CACHE_KEY_LEN + sizeof(wv) + wv.prefix_len +
			wv.len !=
		    h.len) {
			r = -EPROTO;
			break;
		}
		prefix = (char *)body + CACHE_KEY_LEN + sizeof(wv);
		if ((prefix = strndup(prefix, wv.prefix_len)) == NULL) {
			r = -ENOMEM;
			break;
		}
		v.w = wv.w;
		v.h = wv.h;
		v.c = wv.c;
		v.dtype = wv.dtype;
		v.enc = wv.enc;
		v.len = wv.len;
		v.data = body + CACHE_KEY_LEN + sizeof(wv) + wv.prefix_len;
		v.prefix = prefix;
		/*
		 * No reply: the client's worker need not wait for RocksDB's
		 * write (or an eviction it sets off); its next request on
		 * this connection waits in the socket meanwhile.
		 */
		cache_put(s->c, body, &v);
		r = 0;
		free(prefix);
		break;
	}
	case OP_GET_DIGEST:
	case OP_PUT_DIGEST: {
		size_t fixed =
		    sizeof(struct wire_stat) + (h.op == OP_PUT_DIGEST ? 32 : 0);
		struct wire_stat ws;
		struct stat st;
		uint8_t d[32];
		char *path;

		if (h.len < fixed) {
			r = -EPROTO;
			break;
		}
		memcpy(&ws, body, sizeof(ws));
		stat_from_wire(&ws, &st);
		if ((path = strndup((char *)body + fixed, h.len - fixed)) ==
		    NULL) {
			r = -ENOMEM;
			break;
		}
		if (h.op == OP_PUT_DIGEST) /* no reply, as PUT */
			cache_put_digest(s->c, path, &st, body + sizeof(ws));
		else if (cache_get_digest(s->c, path, &st, d) == 0)
			r = reply(cn->fd, 0, d, sizeof(d), NULL, 0);
		else
			r = reply(cn->fd, -ENOENT, NULL, 0, NULL, 0);
		free(path);
		break;
	}
	case OP_STATS: {
		struct cache_stats cs;
		struct wire_stats ws = {0};
		const char *e;

		cache_get_stats(s->c, &cs);
		ws.hits = cs.hits;
		ws.misses = cs.misses;
		ws.bytes_read = cs.bytes_read;
		ws.bytes_written = cs.bytes_written;
		ws.insert_failures = cs.insert_failures;
		ws.disk_bytes = cs.disk_bytes;
		ws.disabled = cs.disabled;
		e = cache_error(s->c);
		r = reply(cn->fd, 0, &ws, sizeof(ws), e, e ? strlen(e) : 0);
		break;
	}
	case OP_MOUNTS: {
		size_t len = 0;
		char *t;

		pthread_mutex_lock(&s->lock);
		t = mounts_text(s, &len);
		pthread_mutex_unlock(&s->lock);
		r = t == NULL ? reply(cn->fd, -ENOMEM, NULL, 0, NULL, 0)
			      : reply(cn->fd, 0, t, len, NULL, 0);
		free(t);
		break;
	}
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
			break; /* shut down by srv_stop */
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
		set_bufs(fd);
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

static void
srv_stop(struct cache_srv *s)
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
static int
srv_start(struct cache *c, struct cache_remote *self, const char *dir,
    struct cache_srv **out, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	struct cache_srv *s;
	struct stat st;
	int r;

	if (data_addr(dir, &sa) != 0) {
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

/* ---- the client side ------------------------------------------------- */

/* Close the idle connections (to an owner that went away). */
static void
pool_flush(struct cache_remote *r)
{
	pthread_mutex_lock(&r->lock);
	while (r->nidle > 0)
		close(r->idle[--r->nidle]);
	pthread_mutex_unlock(&r->lock);
}

/*
 * dir/open.lock, flock'ed: one process at a time tries to open the store.
 * RocksDB rotates its info log (LOG) before it takes its lock, so two
 * opens at once can fail for that instead of -EBUSY.  -1 when dir is not
 * there yet (cache_open makes it) or cannot be locked now (wait false).
 */
static int
open_lock(const char *dir, bool wait)
{
	char path[4200];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, OPEN_LOCK);
	if ((fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600)) <
	    0)
		return -1;
	while (flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0) {
		if (errno != EINTR) {
			close(fd);
			return -1;
		}
	}
	return fd;
}

/*
 * Become the owner: take the store (cache_open) and start both sockets.
 * Called with takeover held.  0 when this process owns it now; -EBUSY
 * when another one does or is taking it.  wait: for another process that
 * is opening the store (at start), rather than count it as the owner.
 */
static int
become_owner(struct cache_remote *r, bool wait, char *err, size_t errlen)
{
	struct cache *c;
	char msg[1024];
	int e, lk;

	if ((lk = open_lock(r->dir, wait)) < 0 && !wait &&
	    errno == EWOULDBLOCK) {
		snprintf(err, errlen, "another feedfs is opening %s", r->dir);
		return -EBUSY;
	}
	/* A live owner that was slow to answer: leave its LOG alone. */
	if (cache_probe_lock(r->dir, err, errlen) == -EBUSY)
		e = -EBUSY;
	else
		e = cache_open(
		    r->dir, r->size_bound, r->mem_bound, &c, err, errlen);
	if (lk >= 0)
		close(lk); /* the store's own lock holds from here */
	if (e != 0)
		return e;
	if (cache_note(c) != NULL)
		say(r, true, "%s", cache_note(c));
	if (cache_ctl_start(c, r->dir, &r->ctl, msg, sizeof(msg)) != 0)
		say(r, true, "no control socket for feedfs-cache: %s", msg);
	if (srv_start(c, r, r->dir, &r->srv, msg, sizeof(msg)) != 0)
		say(r, true, "other mounts cannot attach: %s", msg);
	atomic_store(&r->local, c);
	return 0;
}

/*
 * The owner did not answer: close what led to it, and try to take its
 * place.  One thread tries; the others go on missing meanwhile.
 */
static void
owner_lost(struct cache_remote *r)
{
	char err[1024];
	uint64_t backoff;
	int e;

	pool_flush(r);
	if (pthread_mutex_trylock(&r->takeover) != 0)
		return;
	if (atomic_load(&r->local) != NULL) {
		pthread_mutex_unlock(&r->takeover);
		return;
	}
	if (!atomic_exchange(&r->lost, true) && atomic_load(&r->owner) != 0)
		say(r, true,
		    "the owner of %s (pid %ld) went away; reads miss the cache "
		    "until a new owner serves it",
		    r->dir, (long)atomic_load(&r->owner));
	if ((e = become_owner(r, false, err, sizeof(err))) == 0) {
		say(r, false,
		    "this feedfs (pid %ld) is the owner of %s now, serving "
		    "the other mounts on %s/%s",
		    (long)getpid(), r->dir, r->dir, DATA_NAME);
		pthread_mutex_unlock(&r->takeover);
		return;
	}
	if (e != -EBUSY)
		say(r, true, "cannot take over %s: %s", r->dir, err);
	pthread_mutex_lock(&r->lock);
	backoff = r->backoff_ms;
	r->retry_at = now_ns() + backoff * 1000000u;
	r->backoff_ms = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
						     : (uint32_t)backoff * 2;
	pthread_mutex_unlock(&r->lock);
	pthread_mutex_unlock(&r->takeover);
}

static int
rpc_send(
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
	return send_iov(fd, iov, 1 + (nbody < 4 ? nbody : 4));
}

/* A new connection to the owner, HELLO done: fd, or -errno. */
static int
conn_new(struct cache_remote *r)
{
	struct timeval tv = {
	    RPC_TIMEOUT_MS / 1000, (RPC_TIMEOUT_MS % 1000) * 1000};
	struct sockaddr_un sa;
	struct iovec b = {r->label, strlen(r->label)};
	struct rep_hdr rep;
	uint32_t pid;
	bool was_lost;
	int fd, e;

	if ((e = data_addr(r->dir, &sa)) != 0)
		return e;
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	set_bufs(fd);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		e = -errno;
		goto fail;
	}
	if ((e = rpc_send(r, fd, OP_HELLO, &b, 1)) != 0 ||
	    (e = read_full(fd, &rep, sizeof(rep))) != 0)
		goto fail;
	if (rep.status != 0 || rep.len != sizeof(pid)) {
		e = -EPROTO;
		goto fail;
	}
	if ((e = read_full(fd, &pid, sizeof(pid))) != 0)
		goto fail;
	was_lost = atomic_exchange(&r->lost, false);
	if (atomic_exchange(&r->owner, (long)pid) != (long)pid || was_lost)
		say(r, false,
		    "attached to the cache in %s, owned by feedfs "
		    "pid %ld",
		    r->dir, (long)pid);
	pthread_mutex_lock(&r->lock);
	r->backoff_ms = BACKOFF_MIN_MS;
	pthread_mutex_unlock(&r->lock);
	return fd;
fail:
	close(fd);
	return e;
}

/* A connection to the owner: fd, or -errno (the owner is gone: miss). */
static int
conn_get(struct cache_remote *r)
{
	int fd = -1, e;

	pthread_mutex_lock(&r->lock);
	if (r->nidle > 0)
		fd = r->idle[--r->nidle];
	else if (now_ns() < r->retry_at) {
		pthread_mutex_unlock(&r->lock);
		return -EAGAIN;
	}
	pthread_mutex_unlock(&r->lock);
	if (fd >= 0)
		return fd;
	if ((e = conn_new(r)) < 0)
		owner_lost(r);
	return e;
}

static void
conn_put(struct cache_remote *r, int fd)
{
	pthread_mutex_lock(&r->lock);
	if (r->nidle < POOL_MAX) {
		r->idle[r->nidle++] = fd;
		fd = -1;
	}
	pthread_mutex_unlock(&r->lock);
	if (fd >= 0)
		close(fd);
}

/*
 * One request: send op and body, read the reply's header into *rep and
 * its body into a (alen bytes, the rest is left to the caller through
 * *fdp).  Returns 0 with *fdp open, or -errno (the connection is closed
 * and, unless the pool was merely waiting, the owner counted lost).
 */
static int
rpc(struct cache_remote *r, uint32_t op, struct iovec *body, int nbody,
    struct rep_hdr *rep, int *fdp)
{
	int fd, e;

	if ((fd = conn_get(r)) < 0)
		return fd;
	if ((e = rpc_send(r, fd, op, body, nbody)) != 0 ||
	    (e = read_full(fd, rep, sizeof(*rep))) != 0 ||
	    (rep->len > FRAME_MAX && (e = -EPROTO) != 0)) {
		close(fd);
		owner_lost(r);
		return e;
	}
	*fdp = fd;
	return 0;
}

/* A request that has no reply (PUT, PUT_DIGEST): 0 or -errno. */
static int
send_only(struct cache_remote *r, uint32_t op, struct iovec *body, int nbody)
{
	int fd, e;

	if ((fd = conn_get(r)) < 0)
		return fd;
	if ((e = rpc_send(r, fd, op, body, nbody)) != 0) {
		close(fd);
		owner_lost(r);
		return e;
	}
	conn_put(r, fd);
	return 0;
}

/* The reply's body was read in full: keep fd; else drop it. */
static void
rpc_done(struct cache_remote *r, int fd, int e)
{
	if (e == 0) {
		conn_put(r, fd);
		return;
	}
	close(fd);
	owner_lost(r);
}

static struct cache *
local_of(struct cache *c)
{
	return atomic_load(&c->remote->local);
}

/*
 * The owner's STATS; when its store is off, its reason is kept (once) for
 * cache_error.  0 or -errno.
 */
static int
owner_stats(struct cache_remote *r, struct wire_stats *ws)
{
	struct rep_hdr rep;
	char why[sizeof(r->err)];
	size_t n;
	int fd, e;

	if ((e = rpc(r, OP_STATS, NULL, 0, &rep, &fd)) != 0)
		return e;
	if (rep.status != 0 || rep.len < sizeof(*ws) ||
	    rep.len - sizeof(*ws) >= sizeof(why)) {
		rpc_done(r, fd, -EPROTO);
		return -EPROTO;
	}
	n = rep.len - sizeof(*ws);
	if ((e = read_full(fd, ws, sizeof(*ws))) == 0)
		e = read_full(fd, why, n);
	rpc_done(r, fd, e);
	if (e != 0)
		return e;
	why[n] = '\0';
	if (ws->disabled && n > 0) {
		pthread_mutex_lock(&r->lock);
		if (!atomic_load(&r->failed)) {
			snprintf(r->err, sizeof(r->err), "%.200s (the owner's)",
			    why);
			atomic_store(&r->failed, true);
		}
		pthread_mutex_unlock(&r->lock);
	}
	return 0;
}

int
cache_remote_get(
    struct cache *c, const uint8_t key[CACHE_KEY_LEN], struct cache_val *v)
{
	struct cache_remote *r = c->remote;
	struct cache *l = local_of(c);
	struct iovec b = {(void *)key, CACHE_KEY_LEN};
	struct wire_val wv;
	struct rep_hdr rep;
	void *data;
	int fd, e;

	if (l != NULL) {
		if ((e = cache_get(l, key, v)) == 0)
			atomic_fetch_add(&r->bytes_read, v->len);
		goto count;
	}
	if (cache_is_zero(key, CACHE_KEY_LEN) ||
	    rpc(r, OP_GET, &b, 1, &rep, &fd) != 0) {
		e = -ENOENT;
		goto count;
	}
	if (rep.status != 0) {
		rpc_done(r, fd, rep.len == 0 ? 0 : -EPROTO);
		if (rep.status == -EIO && !atomic_load(&r->failed)) {
			struct wire_stats ws;

			(void)owner_stats(r, &ws); /* why, for cache_error */
		}
		e = -ENOENT;
		goto count;
	}
	if (rep.len < sizeof(wv) || (e = read_full(fd, &wv, sizeof(wv))) != 0 ||
	    wv.len != rep.len - sizeof(wv)) {
		rpc_done(r, fd, -EPROTO);
		e = -ENOENT;
		goto count;
	}
	if ((data = malloc(wv.len ? wv.len : 1)) == NULL) {
		rpc_done(r, fd, -ENOMEM); /* the body is still unread */
		e = -ENOENT;
		goto count;
	}
	if ((e = read_full(fd, data, wv.len)) != 0) {
		free(data);
		rpc_done(r, fd, e);
		e = -ENOENT;
		goto count;
	}
	rpc_done(r, fd, 0);
	v->w = wv.w;
	v->h = wv.h;
	v->c = wv.c;
	v->dtype = wv.dtype;
	v->enc = wv.enc;
	v->len = wv.len;
	v->data = data;
	v->prefix = NULL;
	atomic_fetch_add(&r->bytes_read, wv.len);
count:
	atomic_fetch_add(e == 0 ? &r->hits : &r->misses, 1);
	return e;
}

void
cache_remote_put(struct cache *c, const uint8_t key[CACHE_KEY_LEN],
    const struct cache_val *v)
{
	struct cache_remote *r = c->remote;
	struct cache *l = local_of(c);
	const char *prefix = v->prefix != NULL ? v->prefix : "";
	struct wire_val wv = {
	    v->w, v->h, v->c, v->dtype, (uint32_t)strlen(prefix), v->enc, v->len};
	struct iovec b[4] = {{(void *)key, CACHE_KEY_LEN}, {&wv, sizeof(wv)},
	    {(void *)prefix, wv.prefix_len}, {v->data, v->len}};

	if (l != NULL) {
		cache_put(l, key, v);
		atomic_fetch_add(&r->bytes_written, v->len);
		return;
	}
	if (cache_is_zero(key, CACHE_KEY_LEN))
		return;
	if (v->len > FRAME_MAX / 2 || send_only(r, OP_PUT, b, 4) != 0) {
		atomic_fetch_add(&r->insert_failures, 1);
		return;
	}
	atomic_fetch_add(&r->bytes_written, v->len);
}

int
cache_remote_get_digest(struct cache *c, const char *path,
    const struct stat *st, uint8_t digest[32])
{
	struct cache_remote *r = c->remote;
	struct cache *l = local_of(c);
	struct wire_stat ws;
	struct iovec b[2] = {{&ws, sizeof(ws)}, {(void *)path, strlen(path)}};
	struct rep_hdr rep;
	uint8_t d[32];
	int fd, e;

	if (l != NULL)
		return cache_get_digest(l, path, st, digest);
	stat_to_wire(st, &ws);
	if (rpc(r, OP_GET_DIGEST, b, 2, &rep, &fd) != 0)
		return -ENOENT;
	if (rep.status != 0) {
		rpc_done(r, fd, rep.len == 0 ? 0 : -EPROTO);
		return -ENOENT;
	}
	if (rep.len != sizeof(d)) {
		rpc_done(r, fd, -EPROTO);
		return -ENOENT;
	}
	e = read_full(fd, d, sizeof(d));
	rpc_done(r, fd, e);
	if (e != 0)
		return -ENOENT;
	memcpy(digest, d, sizeof(d));
	return 0;
}

void
cache_remote_put_digest(struct cache *c, const char *path,
    const struct stat *st, const uint8_t digest[32])
{
	struct cache_remote *r = c->remote;
	struct cache *l = local_of(c);
	struct wire_stat ws;
	struct iovec b[3] = {{&ws, sizeof(ws)}, {(void *)digest, 32},
	    {(void *)path, strlen(path)}};

	if (l != NULL) {
		cache_put_digest(l, path, st, digest);
		return;
	}
	if (cache_is_zero(digest, 32))
		return;
	stat_to_wire(st, &ws);
	(void)send_only(r, OP_PUT_DIGEST, b, 3);
}

void
cache_remote_get_stats(struct cache *c, struct cache_stats *st)
{
	struct cache_remote *r = c->remote;
	struct cache *l = local_of(c);
	struct wire_stats ws;

	memset(st, 0, sizeof(*st));
	if (l != NULL) {
		cache_get_stats(l, st);
	} else if (owner_stats(r, &ws) == 0) {
		st->disk_bytes = ws.disk_bytes;
		st->disabled = ws.disabled != 0;
	}
	/* This mount's own lookups, not the store's (all mounts'). */
	st->hits = atomic_load(&r->hits);
	st->misses = atomic_load(&r->misses);
	st->bytes_read = atomic_load(&r->bytes_read);
	st->bytes_written = atomic_load(&r->bytes_written);
	st->insert_failures += atomic_load(&r->insert_failures);
}

const char *
cache_remote_error(struct cache *c)
{
	struct cache *l = local_of(c);

	if (l != NULL)
		return cache_error(l);
	return atomic_load(&c->remote->failed) ? c->remote->err : NULL;
}

const char *
cache_remote_note(struct cache *c)
{
	struct cache *l = local_of(c);

	return l != NULL ? cache_note(l) : NULL;
}

void
cache_remote_close(struct cache *c)
{
	struct cache_remote *r = c->remote;
	struct cache *l;

	/* The sockets go before the store, so no new owner races them. */
	pthread_mutex_lock(&r->takeover);
	srv_stop(r->srv);
	cache_ctl_stop(r->ctl);
	l = atomic_load(&r->local);
	pthread_mutex_unlock(&r->takeover);
	if (l != NULL)
		cache_close(l);
	pool_flush(r);
	pthread_mutex_destroy(&r->lock);
	pthread_mutex_destroy(&r->takeover);
	free(r);
	pthread_mutex_destroy(&c->errlock);
	free(c);
}

bool
cache_is_owner(struct cache *c)
{
	return c != NULL && (c->remote == NULL || local_of(c) != NULL);
}

/* The mount point from the command line: feedfs's last argument. */
static void
default_label(char *buf, size_t len)
{
	char cmd[8192], *last = NULL;
	ssize_t n;
	int fd;

	buf[0] = '\0';
	if ((fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC)) < 0)
		return;
	n = read(fd, cmd, sizeof(cmd) - 1);
	close(fd);
	if (n <= 0)
		return;
	cmd[n] = '\0';
	for (char *p = cmd; p < cmd + n; p += strlen(p) + 1)
		if (*p != '\0')
			last = p;
	if (last != NULL && last != cmd)
		snprintf(buf, len, "%s", last);
}

int
cache_open_shared(const char *dir, uint64_t size_bound, uint64_t mem_bound,
    const char *label, cache_log_fn logfn, struct cache **out, char *err,
    size_t errlen)
{
	struct cache_remote *r;
	struct cache *c;
	int fd, e;

	if ((c = calloc(1, sizeof(*c))) == NULL ||
	    (r = calloc(1, sizeof(*r))) == NULL) {
		free(c);
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	pthread_mutex_init(&c->errlock, NULL);
	c->remote = r;
	snprintf(r->dir, sizeof(r->dir), "%s", dir);
	if (label != NULL)
		snprintf(r->label, sizeof(r->label), "%s", label);
	else
		default_label(r->label, sizeof(r->label));
	r->size_bound = size_bound;
	r->mem_bound = mem_bound;
	r->say = logfn;
	r->backoff_ms = BACKOFF_MIN_MS;
	pthread_mutex_init(&r->takeover, NULL);
	pthread_mutex_init(&r->lock, NULL);

	pthread_mutex_lock(&r->takeover);
	e = become_owner(r, true, err, errlen);
	pthread_mutex_unlock(&r->takeover);
	if (e == 0) {
		say(r, false,
		    "this feedfs (pid %ld) owns the cache in %s; other mounts "
		    "attach through %s/%s",
		    (long)getpid(), dir, dir, DATA_NAME);
		*out = c;
		return 0;
	}
	if (e != -EBUSY) {
		pthread_mutex_destroy(&r->lock);
		pthread_mutex_destroy(&r->takeover);
		free(r);
		pthread_mutex_destroy(&c->errlock);
		free(c);
		return e;
	}
	/* Another feedfs holds it: attach (it logs who). */
	say(r, false, "%s is held by another feedfs: using it through %s/%s",
	    dir, dir, DATA_NAME);
	if ((fd = conn_get(r)) >= 0)
		conn_put(r, fd);
	*out = c;
	return 0;
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

	if ((e = data_addr(dir, &sa)) != 0)
		return e;
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		e = -errno;
		goto out;
	}
	if ((e = send_iov(fd, &iov, 1)) != 0 ||
	    (e = read_full(fd, &rep, sizeof(rep))) != 0)
		goto out;
	if (rep.status != 0 || rep.len > (1u << 24)) {
		e = rep.status != 0 ? rep.status : -EPROTO;
		goto out;
	}
	if ((t = malloc(rep.len + 1)) == NULL) {
		e = -ENOMEM;
		goto out;
	}
	if ((e = read_full(fd, t, rep.len)) != 0)
		goto out;
	t[rep.len] = '\0';
	*text = t; /* transferred */
	t = NULL;
out:
	free(t);
	close(fd);
	return e;
}
