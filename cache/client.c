/*
 * client.c - cache/ (the store), layer client (above breaker.c, owner.c
 * and wire.c; under handle.c).  A mount's connections to the owner of a
 * shared cache directory.
 *
 * A new connection is made only to the process that holds the store's
 * lease (owner_lease), of our user (owner_connect checks SO_PEERCRED, and
 * the holder's pid where it is visible), after the directory's checks
 * (owner_check_dir), within HELLO_TIMEOUT_MS for connect and HELLO; the
 * HELLO reply tells the owner's put limit and the lease token, which
 * must be the one in dir/owner.id (owner.c): else the owner cannot be
 * verified, said once, and the breaker opens.
 *
 * Connections: at most conns (client_new: the mount's workers and
 * POOL_EXTRA), each kept idle after its request.  A caller that finds
 * none idle makes one while under that cap; past it, or while the owner
 * said it is busy (at its own cap: -EBUSY to a HELLO, said once), it
 * waits for one of ours up to HELLO_TIMEOUT_MS, or misses.  A busy owner
 * is never a failed one: it opens no breaker.
 * Every request has one deadline (RPC_TIMEOUT_MS) for sending it and
 * reading its reply, and every reply goes through its decoder (wire.h): a
 * GET's envelope must be of the key asked for, else a miss, counted.
 *
 * When a request fails, the lease tells what happened, and the breaker
 * may open: breaker.c.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/client_int.h"

/* Close a connection taken by conn_get (not pooled again). */
static void
conn_drop(struct client *cl, int fd)
{
	close(fd);
	pthread_mutex_lock(&cl->lock);
	cl->nopen--;
	pthread_cond_signal(&cl->freed);
	pthread_mutex_unlock(&cl->lock);
}

/*
 * The owner's format, as dir/format says (cache.h): an owner of another
 * format than this build's is not used: 0, or -ENOENT (a miss) and
 * cache_error says why, from the first time it is seen.
 */
static int
format_ok(struct client *cl)
{
	int v = cache_dir_format(cl->dir);

	if (v == 0 || v == CACHE_FORMAT_VERSION) {
		atomic_store(&cl->dir_format, 0);
		return 0;
	}
	pthread_mutex_lock(&cl->lock);
	if (atomic_load(&cl->dir_format) != (unsigned)v) {
		snprintf(cl->err, sizeof(cl->err),
		    "the cache's owner is a feedfs of cache format %d, %s "
		    "than this one's (%d): reads miss the cache%s",
		    v, v > CACHE_FORMAT_VERSION ? "newer" : "older",
		    CACHE_FORMAT_VERSION,
		    v > CACHE_FORMAT_VERSION
			? "; use the newer feedfs, or another cache_dir for "
			  "this one"
			: " until it goes (this feedfs then takes the cache "
			  "over and moves the old store aside)");
		atomic_store(&cl->failed, true);
		atomic_store(&cl->dir_format, (unsigned)v);
	}
	pthread_mutex_unlock(&cl->lock);
	return -ENOENT;
}

/*
 * A new connection, HELLO done: the fd, or -errno (as a request's;
 * -EBUSY: the owner runs and is at its cap).  probe: the breaker's probe.
 */
static int
conn_new(struct client *cl, bool probe)
{
	uint64_t deadline =
	    wire_now_ns() + (uint64_t)HELLO_TIMEOUT_MS * 1000000u;
	size_t llen = strnlen(cl->self->label, WIRE_LABEL_MAX);
	uint8_t hb[WIRE_REQ_HDR], ver[4], rb[WIRE_REP_HDR],
	    body[WIRE_HELLO_REP], tok[OWNER_TOKEN_LEN];
	struct iovec iov[3] = {
	    {hb, sizeof(hb)}, {ver, sizeof(ver)}, {cl->self->label, llen}};
	struct wire_rep_hdr rep;
	struct wire_hello_rep hr;
	char why[512];
	long pid, shown;
	bool changed, tell;
	int fd, e, se, re;

	if (owner_check_dir(cl->dir, why, sizeof(why)) != 0) {
		/* Changed since open (a chmod): refused, said once. */
		pthread_mutex_lock(&cl->lock);
		tell = !cl->said_dir;
		cl->said_dir = true;
		pthread_mutex_unlock(&cl->lock);
		if (tell)
			client_say(cl, true, "%s; reads miss the cache", why);
		return -EACCES;
	}
	switch (client_holder_state(cl, &pid)) {
	case HOLDER_NONE:
		return client_owner_gone(cl);
	case HOLDER_STOPPED:
		client_breaker_open(cl, pid, true, probe, RPC_TIMEOUT_MS);
		return -ENOENT;
	case HOLDER_BAD:
		client_breaker_open(cl, pid, false, probe, RPC_TIMEOUT_MS);
		return -ENOENT;
	case HOLDER_RUNNING:
	case HOLDER_UNSEEN:
		break;
	}
	if ((e = format_ok(cl)) != 0)
		return e;
	if ((fd = owner_connect(cl->dir, DATA_NAME, pid, deadline)) < 0) {
		/*
		 * A holder that runs but has no socket yet (it is taking
		 * over) is tried again soon; one that does not accept, or
		 * is not who serves, is a failed owner.
		 */
		bool starting = fd == -ECONNREFUSED || fd == -ENOENT;

		client_breaker_open(cl, pid, client_stopped(pid), probe,
		    starting ? BREAKER_START_MS : RPC_TIMEOUT_MS);
		return -ENOENT;
	}
	wire_set_bufs(fd);
	wire_enc_req_hdr(hb, WIRE_HELLO, (uint32_t)(4 + llen),
	    atomic_load(&cl->self->hits), atomic_load(&cl->self->misses));
	codec_put_le32(ver, WIRE_VERSION);
	/*
	 * An owner at its cap answers -EBUSY and closes, maybe before our
	 * HELLO is sent: its answer is read whatever the send said.
	 */
	se = wire_send(fd, iov, 3, deadline);
	re = se == 0 || se == -EPIPE || se == -ECONNRESET
		 ? wire_read(fd, rb, sizeof(rb), deadline)
		 : se;
	if (re == 0 && wire_dec_rep_hdr(rb, WIRE_HELLO, 0, &rep) == 0 &&
	    rep.status == -EBUSY) {
		close(fd);
		client_owner_busy(cl);
		return -EBUSY;
	}
	if ((e = se) != 0 || (e = re) != 0 ||
	    (e = wire_dec_rep_hdr(rb, WIRE_HELLO, 0, &rep)) != 0 ||
	    (e = rep.status) != 0 ||
	    (e = wire_read(fd, body, sizeof(body), deadline)) != 0 ||
	    (e = wire_dec_hello_rep(body, sizeof(body), &hr)) != 0) {
		close(fd);
		client_breaker_open(
		    cl, pid, client_stopped(pid), probe, RPC_TIMEOUT_MS);
		return -ENOENT;
	}
	/*
	 * The lease token: the peer is the holder (where its pid could be
	 * compared, owner_connect did).
	 */
	if (owner_read_token(cl->dir, tok) != 0 ||
	    memcmp(tok, hr.token, sizeof(tok)) != 0) {
		close(fd);
		pthread_mutex_lock(&cl->lock);
		tell = !cl->said_unverified;
		cl->said_unverified = true;
		pthread_mutex_unlock(&cl->lock);
		if (tell)
			client_say(cl, true,
			    "the process serving %s/%s does not show the lease "
			    "token of %s/%s: it cannot be verified as the "
			    "owner, and reads miss the cache",
			    cl->dir, DATA_NAME, cl->dir, OWNER_ID);
		client_breaker_open(cl, pid, false, probe, RPC_TIMEOUT_MS);
		return -ENOENT;
	}
	atomic_store(&cl->put_limit, hr.put_limit);
	atomic_store(&cl->size_bound, hr.size_bound);
	/* The pid for the log: as this process sees it, else the owner's
	 * own (in its namespace). */
	shown = pid > 0 ? pid : (long)hr.pid;
	pthread_mutex_lock(&cl->lock);
	changed = !cl->attached || cl->said_gone ||
		  memcmp(cl->token, tok, sizeof(tok)) != 0;
	if (cl->attached && memcmp(cl->token, tok, sizeof(tok)) != 0) {
		/* A new owner: what the old one said of its store is void. */
		client_pool_flush_locked(cl);
		atomic_store(&cl->failed, false);
		cl->err[0] = '\0';
	}
	memcpy(cl->token, tok, sizeof(tok));
	cl->attached = true;
	cl->owner = shown;
	cl->said_gone = cl->said_stopped = cl->said_unverified = false;
	cl->open_ms = 0;
	cl->open_until = 0;
	pthread_mutex_unlock(&cl->lock);
	if (changed && pid > 0)
		client_say(cl, false,
		    "attached to the cache in %s, owned by feedfs pid %ld",
		    cl->dir, shown);
	else if (changed)
		client_say(cl, false,
		    "attached to the cache in %s, owned by feedfs pid %ld of "
		    "another PID namespace",
		    cl->dir, shown);
	return fd;
}

/*
 * A connection: fd (*pooled: an idle one), or -errno as a request's.
 * Past the cap of connections, or while the owner is busy, a caller
 * waits for one of ours up to HELLO_TIMEOUT_MS, else misses.
 */
static int
conn_get(struct client *cl, bool *pooled)
{
	uint64_t now = wire_now_ns();
	uint64_t until = now + (uint64_t)HELLO_TIMEOUT_MS * 1000000u;
	int fd;

	*pooled = false;
	pthread_mutex_lock(&cl->lock);
	if (cl->open_ms != 0) {
		/* The breaker is open: miss, or probe (one thread). */
		if (now < cl->open_until || cl->probing) {
			pthread_mutex_unlock(&cl->lock);
			return -ENOENT;
		}
		cl->probing = true;
		cl->nopen++;
		pthread_mutex_unlock(&cl->lock);
		fd = conn_new(cl, true);
		pthread_mutex_lock(&cl->lock);
		cl->probing = false;
		if (fd < 0) {
			cl->nopen--;
			pthread_cond_signal(&cl->freed);
		}
		pthread_mutex_unlock(&cl->lock);
		return fd == -EBUSY ? -ENOENT : fd;
	}
	for (;;) {
		struct timespec ts;

		if (cl->nidle > 0) {
			fd = cl->idle[--cl->nidle];
			pthread_mutex_unlock(&cl->lock);
			*pooled = true;
			return fd;
		}
		if (cl->open_ms != 0)
			break; /* opened meanwhile */
		if (cl->nopen < cl->pool_max && now >= cl->busy_until) {
			cl->nopen++;
			pthread_mutex_unlock(&cl->lock);
			fd = conn_new(cl, false);
			if (fd >= 0)
				return fd;
			pthread_mutex_lock(&cl->lock);
			cl->nopen--;
			pthread_cond_signal(&cl->freed);
			if (fd != -EBUSY) {
				pthread_mutex_unlock(&cl->lock);
				return fd;
			}
			now = wire_now_ns();
			continue; /* busy: wait for one of ours */
		}
		if (cl->nopen == 0 || now >= until)
			break;
		/* CLOCK_REALTIME for the condition's wait: a bound, no more. */
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (long)((until - now) % 1000000000u);
		ts.tv_sec += (time_t)((until - now) / 1000000000u) +
			     ts.tv_nsec / 1000000000;
		ts.tv_nsec %= 1000000000;
		pthread_cond_timedwait(&cl->freed, &cl->lock, &ts);
		now = wire_now_ns();
	}
	pthread_mutex_unlock(&cl->lock);
	return -ENOENT;
}

static void
conn_put(struct client *cl, int fd)
{
	pthread_mutex_lock(&cl->lock);
	if (cl->nidle < cl->pool_max && cl->open_ms == 0) {
		cl->idle[cl->nidle++] = fd;
		fd = -1;
	} else
		cl->nopen--;
	pthread_cond_signal(&cl->freed);
	pthread_mutex_unlock(&cl->lock);
	if (fd >= 0)
		close(fd);
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
			client_note_answer(cl);
			return 0;
		}
		conn_drop(cl, fd);
		/* An idle connection the owner closed: once more, anew. */
		if (pooled && (e == -ECONNRESET || e == -EPIPE))
			continue;
		return client_request_failed(cl, e);
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
		conn_drop(cl, fd);
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
		conn_drop(cl, fd);
		return client_request_failed(cl, e);
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
		conn_drop(cl, fd);
		return client_request_failed(cl, e);
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
		conn_drop(cl, fd);
		return client_request_failed(cl, e);
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

uint32_t
client_dir_format(struct client *cl)
{
	return atomic_load(&cl->dir_format);
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
    unsigned conns, struct client **out)
{
	struct client *cl;

	if (conns == 0)
		conns = POOL_DEFAULT;
	if ((cl = calloc(1, sizeof(*cl))) == NULL ||
	    (cl->idle = calloc(conns, sizeof(int))) == NULL) {
		free(cl);
		return -ENOMEM;
	}
	cl->pool_max = (int)conns;
	snprintf(cl->dir, sizeof(cl->dir), "%s", dir);
	cl->self = self;
	cl->say = logfn;
	pthread_mutex_init(&cl->lock, NULL);
	pthread_cond_init(&cl->freed, NULL);
	*out = cl;
	return 0;
}

void
client_free(struct client *cl)
{
	if (cl == NULL)
		return;
	pthread_mutex_lock(&cl->lock);
	client_pool_flush_locked(cl);
	pthread_mutex_unlock(&cl->lock);
	pthread_cond_destroy(&cl->freed);
	pthread_mutex_destroy(&cl->lock);
	free(cl->idle);
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
	if ((e = owner_lease(dir, &pid)) <= 0)
		return e == 0 ? -ECONNREFUSED : e;
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
