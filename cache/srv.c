/*
 * srv.c - cache/ (the store), layer server (above putq.c, owner.c, wire.c
 * and the store; under handle.c).  The owner's side of the shared cache:
 * dir/data.sock; the put queue and the maintenance thread are putq.c's
 * (srv_int.h).
 *
 *   - An accept thread admits peers of this user (owner_peer_ok), at most
 *     srv_opts' conns connections at once: past it, a new one is answered
 *     -EBUSY (wire.h) and closed, so that the client knows the owner
 *     runs and is full, not failed.
 *   - A thread per connection reads one frame at a time (wire.h: one
 *     decoder per message, a cap per op) by a deadline (SRV_REQ_MS from
 *     its first byte, more for a large body, whose buffer grows with what
 *     arrives rather than with what the header claims); a connection
 *     that has not said HELLO within SRV_HELLO_MS, or says nothing for
 *     SRV_IDLE_MS, is closed.  It answers GETs, digest lookups, STATS and
 *     MOUNTS itself.
 *   - PUT and PUT_DIGEST go to a bounded queue (SRV_QUEUE_MAX entries)
 *     drained by one put thread, so a GET never waits behind a write;
 *     the bytes of the queued puts and of the bodies being read share
 *     one bound, srv_opts' share_mem (taken from the mount's `memory`):
 *     a body is counted before it is read, and a PUT that does not fit
 *     is read into a small buffer, dropped and counted (the connection
 *     goes on); the other ops' bodies (at most 8 KB) are counted always;
 *     the put thread evicts as any putting thread does (admission, the
 *     size check), and the queue fills meanwhile.
 *   - One maintenance thread checks the store's size and evicts and
 *     compacts (cache_maintain) for the request threads, whose only
 *     write (a hit's refresh) wakes it (srv_maint_wake) instead.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/srv_int.h"

static int
reply(
    int fd, int status, const void *a, size_t alen, const void *b, size_t blen)
{
	uint8_t h[WIRE_REP_HDR];
	struct iovec iov[3] = {
	    {h, sizeof(h)}, {(void *)a, alen}, {(void *)b, blen}};

	wire_enc_rep_hdr(h, status, (uint32_t)(alen + blen));
	return wire_send(
	    fd, iov, 3, wire_now_ns() + (uint64_t)SRV_REQ_MS * 1000000u);
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
		ok = n < WIRE_MOUNTS_MAX - 512 &&
		     mounts_line(&t, &cap, &n, (long)m->pid, "client", m->hits,
			 m->misses, m->label);
	if (t == NULL) {
		return NULL;
	}
	*len = n;
	return t;
}

/* Register a connection of pid as a mount (HELLO); srv.lock held. */
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
		if (llen > 0)
			memcpy(m->label, label, llen);
		for (size_t i = 0; i < llen; i++)
			if (m->label[i] == '\n' || m->label[i] == '\t')
				m->label[i] = ' ';
		m->next = s->mounts;
		s->mounts = m;
	}
	m->nconn++;
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

static int
serve_hello(struct srv_conn *cn, const uint8_t *body, size_t len)
{
	struct cache_srv *s = cn->s;
	struct wire_hello h;
	struct wire_hello_rep hr = {WIRE_VERSION, (uint32_t)getpid(),
	    s->put_limit, s->c->size_bound, {0}};
	uint8_t b[WIRE_HELLO_REP];
	long pid;

	if (cn->hello || wire_dec_hello(body, len, &h) != 0 ||
	    h.version != WIRE_VERSION || owner_peer_ok(cn->fd, 0, &pid) != 0)
		return -EPROTO;
	cn->pid = (pid_t)pid;
	cn->hello = true;
	pthread_mutex_lock(&s->lock);
	mount_add(s, cn->pid, h.label, h.label_len);
	pthread_mutex_unlock(&s->lock);
	memcpy(hr.token, s->o.token, sizeof(hr.token));
	wire_enc_hello_rep(b, &hr);
	return reply(cn->fd, 0, b, sizeof(b), NULL, 0);
}

static int
serve_get(struct srv_conn *cn, const uint8_t *body, size_t len)
{
	struct cache_srv *s = cn->s;
	const uint8_t *key;
	uint8_t hdr[CODEC_ENV_HDR];
	struct cache_val v;
	int r;

	if (wire_dec_get(body, len, &key) != 0)
		return -EPROTO;
	if (cache_get(s->c, key, &v) != 0) {
		/* -EIO: a miss, and the store is off (STATS: why). */
		return reply(cn->fd, cache_error(s->c) ? -EIO : -ENOENT, NULL,
		    0, NULL, 0);
	}
	if (v.len > s->put_limit) { /* put by an owner with a larger bound */
		free(v.data);
		return reply(cn->fd, -ENOENT, NULL, 0, NULL, 0);
	}
	codec_env_seal(hdr, key, &v);
	r = reply(cn->fd, 0, hdr, sizeof(hdr), v.data, v.len);
	free(v.data);
	return r;
}

/* PUT and PUT_DIGEST: checked now, done by the put thread; no reply. */
static int
serve_put(struct srv_conn *cn, uint32_t op, uint8_t **body, size_t len)
{
	struct put_item *it;
	int r;

	if ((it = calloc(1, sizeof(*it))) == NULL)
		return -ENOMEM;
	r = op == WIRE_PUT
		? wire_dec_put(*body, len, cn->s->put_limit, &it->put)
		: wire_dec_put_digest(*body, len, &it->dig);
	if (r != 0) {
		free(it);
		return r;
	}
	it->op = op;
	it->body = *body; /* transferred, and its share of share_mem */
	it->len = len;
	*body = NULL;
	cn->held = 0;
	srv_enqueue(cn->s, it);
	return 0;
}

static int
serve_get_digest(struct srv_conn *cn, const uint8_t *body, size_t len)
{
	struct wire_digest_req d;
	char path[WIRE_PATH_MAX + 1];
	uint8_t dig[32];

	if (wire_dec_get_digest(body, len, &d) != 0)
		return -EPROTO;
	memcpy(path, d.path, d.path_len);
	path[d.path_len] = '\0';
	if (cache_get_digest(cn->s->c, path, &d.st, dig) == 0)
		return reply(cn->fd, 0, dig, sizeof(dig), NULL, 0);
	return reply(cn->fd, -ENOENT, NULL, 0, NULL, 0);
}

static int
serve_stats(struct srv_conn *cn)
{
	struct cache_srv *s = cn->s;
	struct cache_stats cs;
	struct wire_stats ws = {0};
	uint8_t b[WIRE_STATS_FIXED];
	const char *e;
	size_t elen;

	cache_get_stats(s->c, &cs);
	ws.hits = cs.hits;
	ws.misses = cs.misses;
	ws.bytes_read = cs.bytes_read;
	ws.bytes_written = cs.bytes_written;
	ws.insert_failures = cs.insert_failures;
	ws.disk_bytes = cs.disk_bytes;
	ws.dropped = atomic_load(&s->dropped);
	ws.disabled = cs.disabled;
	ws.inserts = cs.inserts;
	ws.denied = cs.denied;
	ws.evictions = cs.evictions;
	ws.refreshes = cs.refreshes;
	ws.oversize = cs.oversize;
	ws.entries = cs.entries;
	ws.used_bytes = cs.used_bytes;
	ws.admit_bytes = cs.admit_bytes;
	wire_enc_stats(b, &ws);
	e = cache_error(s->c);
	elen = e != NULL ? strnlen(e, WIRE_ERR_MAX) : 0;
	return reply(cn->fd, 0, b, sizeof(b), e, elen);
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

/*
 * Read a body of len bytes by deadline into a buffer that grows with what
 * arrives (a header alone cannot make us allocate its length): 0 and
 * *out (malloc'd), or -errno.
 */
static int
read_body(int fd, size_t len, uint64_t deadline, uint8_t **out)
{
	size_t cap = len < (64u << 10) ? len : (64u << 10), got = 0;
	uint8_t *b = malloc(cap ? cap : 1), *nb;
	int r;

	if (b == NULL)
		return -ENOMEM;
	while (got < len) {
		size_t want = len - got;

		if (got == cap) {
			cap = cap * 2 < len ? cap * 2 : len;
			if ((nb = realloc(b, cap)) == NULL) {
				free(b);
				return -ENOMEM;
			}
			b = nb;
		}
		if (want > cap - got)
			want = cap - got;
		if ((r = wire_read(fd, b + got, want, deadline)) != 0) {
			free(b);
			return r;
		}
		got += want;
	}
	*out = b;
	return 0;
}

/* Read and drop len bytes (a PUT over share_mem): 0 or -errno. */
static int
skip_body(int fd, size_t len, uint64_t deadline)
{
	uint8_t b[16384];

	while (len > 0) {
		size_t k = len < sizeof(b) ? len : sizeof(b);
		int r = wire_read(fd, b, k, deadline);

		if (r != 0)
			return r;
		len -= k;
	}
	return 0;
}

/* Serve one request on conn: 0 to go on, else the connection ends. */
static int
serve_one(struct srv_conn *cn)
{
	struct cache_srv *s = cn->s;
	uint64_t deadline = wire_now_ns() + (uint64_t)SRV_REQ_MS * 1000000u;
	uint8_t hb[WIRE_REQ_HDR], *body = NULL;
	struct wire_req_hdr h;
	int r;

	if ((r = wire_read(cn->fd, hb, sizeof(hb), deadline)) != 0)
		return r;
	/* HELLO first, once; STATS and MOUNTS (feedfs-cache) need none. */
	if (wire_dec_req_hdr(hb, s->put_limit, &h) != 0 ||
	    (!cn->hello && h.op != WIRE_HELLO && h.op != WIRE_STATS &&
		h.op != WIRE_MOUNTS))
		return -EPROTO;
	/* A large body gets time at 32 MB/s at least. */
	deadline += (uint64_t)h.len * 30;
	if (h.len > 0 && !srv_mem_take(s, h.op, h.len)) {
		atomic_fetch_add(&s->dropped, 1);
		return skip_body(cn->fd, h.len, deadline);
	}
	cn->held = h.len;
	if (h.len > 0 && (r = read_body(cn->fd, h.len, deadline, &body)) != 0) {
		srv_mem_give(s, cn->held);
		cn->held = 0;
		return r;
	}
	if (cn->hello) {
		pthread_mutex_lock(&s->lock);
		for (struct mount_ent *m = s->mounts; m != NULL; m = m->next)
			if (m->pid == cn->pid) {
				m->hits = h.hits;
				m->misses = h.misses;
			}
		pthread_mutex_unlock(&s->lock);
	}
	switch (h.op) {
	case WIRE_HELLO:
		r = serve_hello(cn, body, h.len);
		break;
	case WIRE_GET:
		r = serve_get(cn, body, h.len);
		break;
	case WIRE_PUT:
	case WIRE_PUT_DIGEST:
		r = serve_put(cn, h.op, &body, h.len);
		break;
	case WIRE_GET_DIGEST:
		r = serve_get_digest(cn, body, h.len);
		break;
	case WIRE_STATS:
		r = serve_stats(cn);
		break;
	case WIRE_MOUNTS:
		r = serve_mounts(cn);
		break;
	default:
		r = -EPROTO;
	}
	free(body);
	srv_mem_give(s, cn->held); /* 0 for a PUT that went to the queue */
	cn->held = 0;
	return r;
}

static void *
conn_thread(void *arg)
{
	struct srv_conn *cn = arg;
	struct cache_srv *s = cn->s;

	cache_no_evict = true; /* a refresh on a hit: the maintenance thread */
	while (!atomic_load(&s->stopping)) {
		struct pollfd p = {cn->fd, POLLIN, 0};
		int ms = !cn->hello ? SRV_HELLO_MS : SRV_IDLE_MS;
		int r = poll(&p, 1, ms);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || serve_one(cn) != 0)
			break;
	}
	if (cn->hello) {
		pthread_mutex_lock(&s->lock);
		mount_drop(s, cn->pid);
		pthread_mutex_unlock(&s->lock);
	}
	shutdown(cn->fd, SHUT_RDWR);
	atomic_store(&cn->done, true);
	return NULL;
}

/* Join and free the connections that ended (all: every one); srv.lock
 * held. */
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
		s->nconns--;
	}
}

static void *
accept_thread(void *arg)
{
	struct cache_srv *s = arg;

	while (!atomic_load(&s->stopping)) {
		struct srv_conn *cn;
		int fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOMEM || errno == ENOBUFS) {
				usleep(10000);
				continue;
			}
			break; /* shut down by srv_stop */
		}
		/* The 0700 directory keeps others out; this says so again. */
		if (owner_peer_ok(fd, 0, NULL) != 0 ||
		    (cn = calloc(1, sizeof(*cn))) == NULL) {
			close(fd);
			continue;
		}
		cn->s = s;
		cn->fd = fd;
		wire_set_bufs(fd);
		pthread_mutex_lock(&s->lock);
		reap(s, false);
		if (s->nconns >= (int)s->o.conns ||
		    pthread_create(&cn->thread, NULL, conn_thread, cn) != 0) {
			uint8_t b[WIRE_REP_HDR];

			pthread_mutex_unlock(&s->lock);
			atomic_fetch_add(&s->refused, 1);
			/*
			 * Busy, not failed: the answer to the HELLO it sent
			 * (an empty socket buffer takes 8 bytes at once).
			 */
			wire_enc_rep_hdr(b, -EBUSY, 0);
			(void)send(
			    fd, b, sizeof(b), MSG_DONTWAIT | MSG_NOSIGNAL);
			close(fd);
			free(cn);
			continue;
		}
		cn->next = s->conns;
		s->conns = cn;
		s->nconns++;
		pthread_mutex_unlock(&s->lock);
	}
	return NULL;
}

void
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
	/* What was queued is stored, then the store evicts for itself. */
	pthread_mutex_lock(&s->qlock);
	s->qstop = true;
	s->mstop = true;
	pthread_cond_broadcast(&s->qcond);
	pthread_cond_broadcast(&s->mcond);
	pthread_mutex_unlock(&s->qlock);
	pthread_join(s->put_thread, NULL);
	pthread_join(s->maint_thread, NULL);
	s->c->maint_wake = NULL;
	s->c->maint_arg = NULL;
	while (s->mounts != NULL) {
		struct mount_ent *m = s->mounts;

		s->mounts = m->next;
		free(m);
	}
	pthread_cond_destroy(&s->qcond);
	pthread_cond_destroy(&s->mcond);
	pthread_mutex_destroy(&s->qlock);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

int
srv_start(struct cache *c, const struct share_self *self, const char *dir,
    const struct srv_opts *o, struct cache_srv **out, char *err, size_t errlen)
{
	struct cache_srv *s;
	int r, started = 0;

	if ((s = calloc(1, sizeof(*s))) == NULL) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	s->c = c;
	s->self = self;
	s->o = *o;
	if (s->o.conns == 0)
		s->o.conns = CACHE_CONNS_DEFAULT;
	if (s->o.share_mem == 0)
		s->o.share_mem = CACHE_SHARE_MEM_DEFAULT;
	s->put_limit = c->size_bound / 4 < WIRE_PUT_LIMIT_MAX
			   ? c->size_bound / 4
			   : WIRE_PUT_LIMIT_MAX;
	s->qtail = &s->qhead;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->qlock, NULL);
	pthread_cond_init(&s->qcond, NULL);
	pthread_cond_init(&s->mcond, NULL);
	snprintf(s->path, sizeof(s->path), "%s/%s", dir, DATA_NAME);
	if ((s->fd = owner_listen(dir, DATA_NAME, err, errlen)) < 0) {
		r = s->fd;
		goto fail;
	}
	if ((r = -pthread_create(&s->put_thread, NULL, srv_put_thread, s)) != 0)
		goto fail_fd;
	started = 1;
	if ((r = -pthread_create(
		 &s->maint_thread, NULL, srv_maint_thread, s)) != 0)
		goto fail_fd;
	started = 2;
	c->maint_arg = s;
	c->maint_wake = srv_maint_wake;
	if ((r = -pthread_create(&s->thread, NULL, accept_thread, s)) != 0)
		goto fail_fd;
	*out = s;
	return 0;
fail_fd:
	snprintf(err, errlen, "%s: %s", s->path, strerror(-r));
	close(s->fd);
	unlink(s->path);
	pthread_mutex_lock(&s->qlock);
	s->qstop = s->mstop = true;
	pthread_cond_broadcast(&s->qcond);
	pthread_cond_broadcast(&s->mcond);
	pthread_mutex_unlock(&s->qlock);
	if (started >= 1)
		pthread_join(s->put_thread, NULL);
	if (started >= 2)
		pthread_join(s->maint_thread, NULL);
	c->maint_wake = NULL;
	c->maint_arg = NULL;
fail:
	pthread_cond_destroy(&s->qcond);
	pthread_cond_destroy(&s->mcond);
	pthread_mutex_destroy(&s->qlock);
	pthread_mutex_destroy(&s->lock);
	free(s);
	return r;
}
