/*
 * client.c - layer: client (above owner.c and wire.c; under handle.c).
 * A mount's connections to the owner of a shared cache directory.
 *
 * A new connection is made only to the process that holds the store's
 * lease (owner_holder), of our user (owner_connect checks SO_PEERCRED),
 * after the directory's checks (owner_check_dir), within HELLO_TIMEOUT_MS
 * for connect and HELLO; the HELLO reply tells the owner's put limit.
 * Every request has one deadline (RPC_TIMEOUT_MS) for sending it and
 * reading its reply, and every reply goes through its decoder (wire.h): a
 * GET's envelope must be of the key asked for, else a miss, counted.
 *
 * When a request fails, the lease tells what happened:
 *   - nobody holds the store: -ENOTCONN, the handle may take it over;
 *   - its holder is stopped (state T): the breaker opens;
 *   - its holder runs (a slow owner): this request is a miss, nothing more;
 *   - no new connection can be made to a running holder: the breaker opens.
 * While the breaker is open every request misses at once.  It stays open
 * RPC_TIMEOUT_MS, doubling up to BREAKER_MAX_MS while it fails again; past
 * that time one thread (single flight) probes with a new connection while
 * the others go on missing, and closes the breaker when the probe works.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/share_int.h"

struct client {
	char dir[4096];
	struct share_self *self;
	cache_log_fn say;

	pthread_mutex_t lock; /* protects the rest but the atomics */
	int idle[POOL_MAX];
	int nidle;
	long owner; /* the pid of the last HELLO's owner, 0 none */
	uint64_t open_until, open_ms; /* the breaker: closed when open_ms 0 */
	bool probing, said_stopped, said_gone, said_dir;

	atomic_uint_least64_t put_limit, size_bound;
	atomic_uint_least64_t bytes_read, bytes_written, insert_failures;
	atomic_uint_least64_t invalid, dropped;

	/* The owner's cache_error, once it said its store is off. */
	atomic_bool failed;
	char err[256]; /* written under lock, before failed is set */
};

static void
say(struct client *cl, bool warn, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (cl->say == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cl->say(warn, msg);
}

/* Close the idle connections; lock held. */
static void
pool_flush_locked(struct client *cl)
{
	while (cl->nidle > 0)
		close(cl->idle[--cl->nidle]);
}

static void
breaker_open(struct client *cl, long pid, bool stopped)
{
	bool tell;

	pthread_mutex_lock(&cl->lock);
	cl->open_ms = cl->open_ms == 0			 ? RPC_TIMEOUT_MS
		      : cl->open_ms * 2 > BREAKER_MAX_MS ? BREAKER_MAX_MS
							 : cl->open_ms * 2;
	cl->open_until = wire_now_ns() + cl->open_ms * 1000000u;
	pool_flush_locked(cl);
	tell = stopped && !cl->said_stopped;
	if (stopped)
		cl->said_stopped = true;
	pthread_mutex_unlock(&cl->lock);
	if (tell)
		say(cl, true,
		    "the owner of %s (pid %ld) is stopped: reads miss the "
		    "cache "
		    "until it runs again",
		    cl->dir, pid);
}

/* The lease: who holds the store now, and in what state. */
enum holder_state { HOLDER_NONE, HOLDER_RUNNING, HOLDER_STOPPED, HOLDER_BAD };

static enum holder_state
holder_state(struct client *cl, long *pid)
{
	long h = owner_holder(cl->dir);
	int st;

	*pid = h;
	if (h == 0)
		return HOLDER_NONE;
	if (h < 0)
		return HOLDER_BAD;
	if ((st = owner_stopped(h)) < 0)
		return HOLDER_NONE; /* gone since: its lock with it */
	return st ? HOLDER_STOPPED : HOLDER_RUNNING;
}

/* Nobody holds the store: say so once per owner lost, -ENOTCONN. */
static int
owner_gone(struct client *cl)
{
	long was;
	bool tell;

	pthread_mutex_lock(&cl->lock);
	pool_flush_locked(cl);
	was = cl->owner;
	tell = was != 0 && !cl->said_gone;
	cl->said_gone = true;
	pthread_mutex_unlock(&cl->lock);
	if (tell)
		say(cl, true,
		    "the owner of %s (pid %ld) went away; reads miss the cache "
		    "until a new owner serves it",
		    cl->dir, was);
	return -ENOTCONN;
}

/* A new connection, HELLO done: the fd, or -errno (as a request's). */
static int
conn_new(struct client *cl)
{
	uint64_t deadline =
	    wire_now_ns() + (uint64_t)HELLO_TIMEOUT_MS * 1000000u;
	size_t llen = strnlen(cl->self->label, WIRE_LABEL_MAX);
	uint8_t hb[WIRE_REQ_HDR], ver[4], rb[WIRE_REP_HDR],
	    body[WIRE_HELLO_REP];
	struct iovec iov[3] = {
	    {hb, sizeof(hb)}, {ver, sizeof(ver)}, {cl->self->label, llen}};
	struct wire_rep_hdr rep;
	struct wire_hello_rep hr;
	char why[512];
	long pid;
	bool changed;
	int fd, e;

	if (owner_check_dir(cl->dir, why, sizeof(why)) != 0) {
		bool tell;

		/* Changed since open (a chmod): refused, said once. */
		pthread_mutex_lock(&cl->lock);
		tell = !cl->said_dir;
		cl->said_dir = true;
		pthread_mutex_unlock(&cl->lock);
		if (tell)
			say(cl, true, "%s; reads miss the cache", why);
		return -EACCES;
	}
	switch (holder_state(cl, &pid)) {
	case HOLDER_NONE:
		return owner_gone(cl);
	case HOLDER_STOPPED:
		breaker_open(cl, pid, true);
		return -ENOENT;
	case HOLDER_BAD:
		breaker_open(cl, pid, false);
		return -ENOENT;
	case HOLDER_RUNNING:
		break;
	}
	if ((fd = owner_connect(cl->dir, DATA_NAME, pid, deadline)) < 0) {
		breaker_open(cl, pid, owner_stopped(pid) == 1);
		return -ENOENT;
	}
	wire_set_bufs(fd);
	wire_enc_req_hdr(hb, WIRE_HELLO, (uint32_t)(4 + llen),
	    atomic_load(&cl->self->hits), atomic_load(&cl->self->misses));
	codec_put_le32(ver, WIRE_VERSION);
	if ((e = wire_send(fd, iov, 3, deadline)) != 0 ||
	    (e = wire_read(fd, rb, sizeof(rb), deadline)) != 0 ||
	    (e = wire_dec_rep_hdr(rb, WIRE_HELLO, 0, &rep)) != 0 ||
	    (e = rep.status) != 0 ||
	    (e = wire_read(fd, body, sizeof(body), deadline)) != 0 ||
	    (e = wire_dec_hello_rep(body, sizeof(body), &hr)) != 0 ||
	    (e = (long)hr.pid == pid ? 0 : -EPERM) != 0) {
		close(fd);
		breaker_open(cl, pid, owner_stopped(pid) == 1);
		return -ENOENT;
	}
	atomic_store(&cl->put_limit, hr.put_limit);
	atomic_store(&cl->size_bound, hr.size_bound);
	pthread_mutex_lock(&cl->lock);
	changed = cl->owner != pid || cl->said_gone;
	if (cl->owner != pid) {
		/* A new owner: what the old one said of its store is void. */
		pool_flush_locked(cl);
		atomic_store(&cl->failed, false);
		cl->err[0] = '\0';
	}
	cl->owner = pid;
	cl->said_gone = cl->said_stopped = false;
	cl->open_ms = 0;
	cl->open_until = 0;
	pthread_mutex_unlock(&cl->lock);
	if (changed)
		say(cl, false,
		    "attached to the cache in %s, owned by feedfs pid %ld",
		    cl->dir, pid);
	return fd;
}

/* A connection: fd (*pooled: an idle one), or -errno as a request's. */
static int
conn_get(struct client *cl, bool *pooled)
{
	uint64_t now = wire_now_ns();
	int fd;

	pthread_mutex_lock(&cl->lock);
	if (cl->open_ms != 0) {
		/* The breaker is open: miss, or probe (one thread). */
		if (now < cl->open_until || cl->probing) {
			pthread_mutex_unlock(&cl->lock);
			return -ENOENT;
		}
		cl->probing = true;
		pthread_mutex_unlock(&cl->lock);
		fd = conn_new(cl);
		pthread_mutex_lock(&cl->lock);
		cl->probing = false;
		pthread_mutex_unlock(&cl->lock);
		*pooled = false;
		return fd;
	}
	if (cl->nidle > 0) {
		fd = cl->idle[--cl->nidle];
		pthread_mutex_unlock(&cl->lock);
		*pooled = true;
		return fd;
	}
	pthread_mutex_unlock(&cl->lock);
	*pooled = false;
	return conn_new(cl);
}

static void
conn_put(struct client *cl, int fd)
{
	pthread_mutex_lock(&cl->lock);
	if (cl->nidle < POOL_MAX && cl->open_ms == 0) {
		cl->idle[cl->nidle++] = fd;
		fd = -1;
	}
	pthread_mutex_unlock(&cl->lock);
	if (fd >= 0)
		close(fd);
}

/*
 * What a failed request (e, on an established connection) means: the
 * owner gone (-ENOTCONN), stopped (the breaker), or slow (a miss).
 */
static int
request_failed(struct client *cl, int e)
{
	long pid;

	(void)e;
	switch (holder_state(cl, &pid)) {
	case HOLDER_NONE:
		return owner_gone(cl);
	case HOLDER_STOPPED:
		breaker_open(cl, pid, true);
		return -ENOENT;
	case HOLDER_BAD:
		breaker_open(cl, pid, false);
		return -ENOENT;
	default:
		return -ENOENT; /* alive and slow, or it dropped us: a miss */
	}
}

/*
 * Send a request of op (body: n iovecs) and, want, read its reply header
 * into *rep; the body is left on *fdp.  0 (*fdp open when want), or
 * -ENOENT / -ENOTCONN as the requests return.
 */
static int
rpc(struct client *cl, uint32_t op, const struct iovec *body, int n, bool want,
    struct wire_rep_hdr *rep, int *fdp, uint64_t *deadline)
{
	uint8_t hb[WIRE_REQ_HDR], rb[WIRE_REP_HDR];
	struct iovec iov[5];
	uint32_t len = 0;
	bool pooled;
	int fd, e;

	for (int i = 0; i < n; i++)
		len += (uint32_t)body[i].iov_len;
	for (int attempt = 0; attempt < 2; attempt++) {
		if ((fd = conn_get(cl, &pooled)) < 0)
			return fd;
		*deadline = wire_now_ns() + (uint64_t)RPC_TIMEOUT_MS * 1000000u;
		wire_enc_req_hdr(hb, op, len, atomic_load(&cl->self->hits),
		    atomic_load(&cl->self->misses));
		iov[0] = (struct iovec){hb, sizeof(hb)};
		for (int i = 0; i < n; i++)
			iov[i + 1] = body[i];
		if ((e = wire_send(fd, iov, n + 1, *deadline)) == 0 && !want) {
			conn_put(cl, fd);
			return 0;
		}
		if (e == 0 &&
		    (e = wire_read(fd, rb, sizeof(rb), *deadline)) == 0 &&
		    (e = wire_dec_rep_hdr(
			 rb, op, atomic_load(&cl->put_limit), rep)) == 0) {
			*fdp = fd;
			return 0;
		}
		close(fd);
		/* An idle connection the owner closed: once more, anew. */
		if (pooled && (e == -ECONNRESET || e == -EPIPE))
			continue;
		return request_failed(cl, e);
	}
	return -ENOENT;
}

/* The reply's body was read in full (e 0): keep fd; else drop it. */
static void
rpc_done(struct client *cl, int fd, int e)
{
	if (e == 0)
		conn_put(cl, fd);
	else
		close(fd);
}

int
client_get(
    struct client *cl, const uint8_t key[CACHE_KEY_LEN], struct cache_val *v)
{
	struct iovec b = {(void *)key, CACHE_KEY_LEN};
	struct wire_rep_hdr rep;
	struct cache_val got;
	uint64_t deadline;
	uint8_t *buf;
	int fd, e;

	if ((e = rpc(cl, WIRE_GET, &b, 1, true, &rep, &fd, &deadline)) != 0)
		return e;
	if (rep.status != 0) {
		rpc_done(cl, fd, 0);
		if (rep.status == -EIO && !atomic_load(&cl->failed)) {
			struct wire_stats ws;

			(void)client_owner_stats(cl, &ws); /* why it is off */
		}
		return -ENOENT;
	}
	if ((buf = malloc(rep.len)) == NULL) {
		rpc_done(cl, fd, -ENOMEM); /* the body is unread */
		return -ENOENT;
	}
	if ((e = wire_read(fd, buf, rep.len, deadline)) != 0) {
		free(buf);
		close(fd);
		return request_failed(cl, e);
	}
	rpc_done(cl, fd, 0);
	if (wire_dec_get_rep(buf, rep.len, key, &got) != 0) {
		atomic_fetch_add(&cl->invalid, 1);
		free(buf);
		return -ENOENT;
	}
	memmove(buf, buf + CODEC_ENV_HDR, got.len);
	got.data = buf;
	*v = got;
	atomic_fetch_add(&cl->bytes_read, got.len);
	return 0;
}

int
client_put(struct client *cl, const uint8_t key[CACHE_KEY_LEN],
    const struct cache_val *v)
{
	const char *prefix = v->prefix != NULL ? v->prefix : "";
	size_t plen = strlen(prefix);
	uint8_t plb[4], env[CODEC_ENV_HDR];
	struct iovec b[4] = {{plb, sizeof(plb)}, {(void *)prefix, plen},
	    {env, sizeof(env)}, {v->data, v->len}};
	struct wire_rep_hdr rep;
	uint64_t deadline, limit = atomic_load(&cl->put_limit);
	int fd, e;

	if (limit == 0) { /* no HELLO yet: learn the owner's limit */
		if ((e = client_attach(cl)) != 0) {
			atomic_fetch_add(&cl->insert_failures, 1);
			return e;
		}
		limit = atomic_load(&cl->put_limit);
	}
	if (plen > WIRE_PREFIX_MAX || v->len > limit) {
		atomic_fetch_add(&cl->dropped, 1);
		return -EFBIG;
	}
	codec_put_le32(plb, (uint32_t)plen);
	codec_env_seal(env, key, v);
	if ((e = rpc(cl, WIRE_PUT, b, 4, false, &rep, &fd, &deadline)) != 0) {
		atomic_fetch_add(&cl->insert_failures, 1);
		return e;
	}
	atomic_fetch_add(&cl->bytes_written, v->len);
	return 0;
}

int
client_get_digest(struct client *cl, const char *path, const struct stat *st,
    uint8_t digest[32])
{
	size_t plen = strlen(path);
	uint8_t sb[WIRE_STAT_LEN], d[32];
	struct iovec b[2] = {{sb, sizeof(sb)}, {(void *)path, plen}};
	struct wire_rep_hdr rep;
	uint64_t deadline;
	int fd, e;

	if (plen == 0 || plen > WIRE_PATH_MAX)
		return -ENOENT;
	wire_enc_stat(st, sb);
	if ((e = rpc(cl, WIRE_GET_DIGEST, b, 2, true, &rep, &fd, &deadline)) !=
	    0)
		return e;
	if (rep.status != 0) {
		rpc_done(cl, fd, 0);
		return -ENOENT;
	}
	if ((e = wire_read(fd, d, rep.len, deadline)) != 0) {
		close(fd);
		return request_failed(cl, e);
	}
	rpc_done(cl, fd, 0);
	return wire_dec_digest_rep(d, rep.len, digest) == 0 ? 0 : -ENOENT;
}

int
client_put_digest(struct client *cl, const char *path, const struct stat *st,
    const uint8_t digest[32])
{
	size_t plen = strlen(path);
	uint8_t sb[WIRE_STAT_LEN];
	struct iovec b[3] = {
	    {sb, sizeof(sb)}, {(void *)digest, 32}, {(void *)path, plen}};
	struct wire_rep_hdr rep;
	uint64_t deadline;
	int fd;

	if (plen == 0 || plen > WIRE_PATH_MAX)
		return -ENAMETOOLONG;
	wire_enc_stat(st, sb);
	return rpc(cl, WIRE_PUT_DIGEST, b, 3, false, &rep, &fd, &deadline);
}

int
client_owner_stats(struct client *cl, struct wire_stats *ws)
{
	uint8_t b[WIRE_STATS_FIXED + WIRE_ERR_MAX];
	struct wire_rep_hdr rep;
	uint64_t deadline;
	int fd, e;

	if ((e = rpc(cl, WIRE_STATS, NULL, 0, true, &rep, &fd, &deadline)) != 0)
		return e;
	if (rep.status != 0) {
		rpc_done(cl, fd, 0);
		return -ENOENT;
	}
	if ((e = wire_read(fd, b, rep.len, deadline)) != 0) {
		close(fd);
		return request_failed(cl, e);
	}
	rpc_done(cl, fd, 0);
	if (wire_dec_stats_rep(b, rep.len, ws) != 0)
		return -ENOENT;
	if (ws->disabled && ws->err[0] != '\0') {
		pthread_mutex_lock(&cl->lock);
		if (!atomic_load(&cl->failed)) {
			snprintf(cl->err, sizeof(cl->err),
			    "%.200s (the owner's)", ws->err);
			atomic_store(&cl->failed, true);
		}
		pthread_mutex_unlock(&cl->lock);
	}
	return 0;
}

int
client_attach(struct client *cl)
{
	bool pooled;
	int fd = conn_get(cl, &pooled);

	if (fd < 0)
		return fd;
	conn_put(cl, fd);
	return 0;
}

const char *
client_error(struct client *cl)
{
	return atomic_load(&cl->failed) ? cl->err : NULL;
}

void
client_counts(struct client *cl, struct client_stats *st)
{
	st->bytes_read = atomic_load(&cl->bytes_read);
	st->bytes_written = atomic_load(&cl->bytes_written);
	st->insert_failures = atomic_load(&cl->insert_failures);
	st->invalid = atomic_load(&cl->invalid);
	st->dropped = atomic_load(&cl->dropped);
}

uint64_t
client_owner_bound(struct client *cl)
{
	return atomic_load(&cl->size_bound);
}

int
client_new(const char *dir, struct share_self *self, cache_log_fn logfn,
    struct client **out)
{
	struct client *cl;

	if ((cl = calloc(1, sizeof(*cl))) == NULL)
		return -ENOMEM;
	snprintf(cl->dir, sizeof(cl->dir), "%s", dir);
	cl->self = self;
	cl->say = logfn;
	pthread_mutex_init(&cl->lock, NULL);
	*out = cl;
	return 0;
}

void
client_free(struct client *cl)
{
	if (cl == NULL)
		return;
	pthread_mutex_lock(&cl->lock);
	pool_flush_locked(cl);
	pthread_mutex_unlock(&cl->lock);
	pthread_mutex_destroy(&cl->lock);
	free(cl);
}

/* feedfs-cache stats: the owner's table of mounts (no HELLO: not one). */
int
cache_mounts(const char *dir, char **text)
{
	uint64_t deadline =
	    wire_now_ns() + (uint64_t)RPC_TIMEOUT_MS * 5 * 1000000u;
	uint8_t hb[WIRE_REQ_HDR], rb[WIRE_REP_HDR];
	struct iovec iov = {hb, sizeof(hb)};
	struct wire_rep_hdr rep;
	char why[512], *t = NULL;
	long pid;
	int fd, e;

	if (owner_check_dir(dir, why, sizeof(why)) != 0)
		return -EACCES;
	if ((pid = owner_holder(dir)) <= 0)
		return pid == 0 ? -ECONNREFUSED : (int)pid;
	if ((fd = owner_connect(dir, DATA_NAME, pid, deadline)) < 0)
		return fd;
	wire_enc_req_hdr(hb, WIRE_MOUNTS, 0, 0, 0);
	if ((e = wire_send(fd, &iov, 1, deadline)) != 0 ||
	    (e = wire_read(fd, rb, sizeof(rb), deadline)) != 0 ||
	    (e = wire_dec_rep_hdr(rb, WIRE_MOUNTS, 0, &rep)) != 0)
		goto out;
	if (rep.status != 0) {
		e = rep.status;
		goto out;
	}
	if ((t = malloc(rep.len + 1)) == NULL) {
		e = -ENOMEM;
		goto out;
	}
	if ((e = wire_read(fd, t, rep.len, deadline)) != 0)
		goto out;
	t[rep.len] = '\0';
	*text = t; /* transferred */
	t = NULL;
out:
	free(t);
	close(fd);
	return e;
}
