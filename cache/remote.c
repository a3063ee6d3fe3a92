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
 * The frames, and the lock order: remote_int.h.  The owner's side:
 * remote_srv.c.
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
 */
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/remote_int.h"

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
	if (remote_srv_start(c, r, r->dir, &r->srv, msg, sizeof(msg)) != 0)
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

	if ((e = remote_data_addr(r->dir, &sa)) != 0)
		return e;
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	remote_set_bufs(fd);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		e = -errno;
		goto fail;
	}
	if ((e = remote_send(r, fd, OP_HELLO, &b, 1)) != 0 ||
	    (e = remote_read_full(fd, &rep, sizeof(rep))) != 0)
		goto fail;
	if (rep.status != 0 || rep.len != sizeof(pid)) {
		e = -EPROTO;
		goto fail;
	}
	if ((e = remote_read_full(fd, &pid, sizeof(pid))) != 0)
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
	if ((e = remote_send(r, fd, op, body, nbody)) != 0 ||
	    (e = remote_read_full(fd, rep, sizeof(*rep))) != 0 ||
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
	if ((e = remote_send(r, fd, op, body, nbody)) != 0) {
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
	if ((e = remote_read_full(fd, ws, sizeof(*ws))) == 0)
		e = remote_read_full(fd, why, n);
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
	if (rep.len < sizeof(wv) ||
	    (e = remote_read_full(fd, &wv, sizeof(wv))) != 0 ||
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
	if ((e = remote_read_full(fd, data, wv.len)) != 0) {
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
	struct wire_val wv = {v->w, v->h, v->c, v->dtype,
	    (uint32_t)strlen(prefix), v->enc, v->len};
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
	remote_stat_to_wire(st, &ws);
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
	e = remote_read_full(fd, d, sizeof(d));
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
	remote_stat_to_wire(st, &ws);
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
	remote_srv_stop(r->srv);
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
