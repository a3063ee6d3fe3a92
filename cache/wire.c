/*
 * wire.c - cache/ (the store), layer wire (under srv.c and client.c; calls
 * codec.c only).  The data socket's frames (see wire.h): encoders, one
 * decoder per message through one bounds-checking cursor, and
 * deadline-bound I/O.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <time.h>

#include "cache/codec.h"
#include "cache/wire.h"

/* A cursor over untrusted bytes: every get checks what remains. */
struct cur {
	const uint8_t *p;
	size_t left;
};

static bool
get_u32(struct cur *c, uint32_t *v)
{
	if (c->left < 4)
		return false;
	*v = codec_get_le32(c->p);
	c->p += 4;
	c->left -= 4;
	return true;
}

static bool
get_u64(struct cur *c, uint64_t *v)
{
	if (c->left < 8)
		return false;
	*v = codec_get_le64(c->p);
	c->p += 8;
	c->left -= 8;
	return true;
}

static bool
get_bytes(struct cur *c, size_t n, const uint8_t **p)
{
	if (c->left < n)
		return false;
	*p = c->p;
	c->p += n;
	c->left -= n;
	return true;
}

/* Text of n bytes within [min, max] holding no NUL. */
static bool
get_text(struct cur *c, size_t n, size_t min, size_t max, const char **s)
{
	const uint8_t *p;

	if (n < min || n > max || !get_bytes(c, n, &p) ||
	    memchr(p, '\0', n) != NULL)
		return false;
	*s = (const char *)p;
	return true;
}

size_t
wire_req_cap(uint32_t op, uint64_t put_limit)
{
	if (put_limit > WIRE_PUT_LIMIT_MAX)
		put_limit = WIRE_PUT_LIMIT_MAX;
	switch (op) {
	case WIRE_HELLO:
		return 4 + WIRE_LABEL_MAX;
	case WIRE_GET:
		return CACHE_KEY_LEN;
	case WIRE_PUT:
		return 4 + WIRE_PREFIX_MAX + CODEC_ENV_HDR + (size_t)put_limit;
	case WIRE_GET_DIGEST:
		return WIRE_STAT_LEN + WIRE_PATH_MAX;
	case WIRE_PUT_DIGEST:
		return WIRE_STAT_LEN + 32 + WIRE_PATH_MAX;
	case WIRE_STATS:
	case WIRE_MOUNTS:
		return 0;
	default:
		return 0;
	}
}

void
wire_enc_req_hdr(uint8_t b[WIRE_REQ_HDR], uint32_t op, uint32_t len,
    uint64_t hits, uint64_t misses)
{
	codec_put_le32(b, op);
	codec_put_le32(b + 4, len);
	codec_put_le64(b + 8, hits);
	codec_put_le64(b + 16, misses);
}

int
wire_dec_req_hdr(
    const uint8_t b[WIRE_REQ_HDR], uint64_t put_limit, struct wire_req_hdr *h)
{
	struct wire_req_hdr t = {codec_get_le32(b), codec_get_le32(b + 4),
	    codec_get_le64(b + 8), codec_get_le64(b + 16)};

	if (t.op < WIRE_HELLO || t.op > WIRE_MOUNTS ||
	    t.len > wire_req_cap(t.op, put_limit))
		return -EPROTO;
	*h = t;
	return 0;
}

int
wire_dec_hello(const uint8_t *b, size_t n, struct wire_hello *out)
{
	struct cur c = {b, n};
	struct wire_hello h;

	if (!get_u32(&c, &h.version) ||
	    !get_text(&c, c.left, 0, WIRE_LABEL_MAX, &h.label))
		return -EPROTO;
	h.label_len = n - 4;
	*out = h;
	return 0;
}

int
wire_dec_get(const uint8_t *b, size_t n, const uint8_t **key)
{
	if (n != CACHE_KEY_LEN)
		return -EPROTO;
	*key = b;
	return 0;
}

int
wire_dec_put(
    const uint8_t *b, size_t n, uint64_t put_limit, struct wire_put *out)
{
	struct cur c = {b, n};
	struct wire_put p;
	uint32_t plen;

	if (!get_u32(&c, &plen) ||
	    !get_text(&c, plen, 0, WIRE_PREFIX_MAX, &p.prefix))
		return -EPROTO;
	p.prefix_len = plen;
	p.env = c.p;
	p.env_len = c.left;
	if (p.env_len < CODEC_ENV_HDR ||
	    p.env_len - CODEC_ENV_HDR > put_limit ||
	    codec_env_open(p.env, p.env_len, NULL, &p.v, NULL) != 0)
		return -EPROTO;
	p.key = p.env + 32;
	p.v.data = (void *)(p.env + CODEC_ENV_HDR);
	p.v.prefix = NULL;
	*out = p;
	return 0;
}

static void
dec_stat(const uint8_t *b, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_size = (off_t)codec_get_le64(b);
	st->st_mtim.tv_sec = (time_t)codec_get_le64(b + 8);
	st->st_mtim.tv_nsec = (long)(codec_get_le64(b + 16) % 1000000000u);
	st->st_ctim.tv_sec = (time_t)codec_get_le64(b + 24);
	st->st_ctim.tv_nsec = (long)(codec_get_le64(b + 32) % 1000000000u);
	st->st_ino = (ino_t)codec_get_le64(b + 40);
	st->st_dev = (dev_t)codec_get_le64(b + 48);
}

/* The same fields in the same order as a digest memo's stat. */
_Static_assert(WIRE_STAT_LEN == CODEC_MEMO_STAT, "a memo's stat");

void
wire_enc_stat(const struct stat *st, uint8_t b[WIRE_STAT_LEN])
{
	codec_memo_stat(st, b);
}

static int
dec_digest_req(
    const uint8_t *b, size_t n, bool put, struct wire_digest_req *out)
{
	struct cur c = {b, n};
	struct wire_digest_req d = {0};
	const uint8_t *st;

	if (!get_bytes(&c, WIRE_STAT_LEN, &st) ||
	    (put && !get_bytes(&c, 32, &d.digest)) ||
	    !get_text(&c, c.left, 1, WIRE_PATH_MAX, &d.path))
		return -EPROTO;
	dec_stat(st, &d.st);
	d.path_len = (size_t)(c.p - (const uint8_t *)d.path);
	*out = d;
	return 0;
}

int
wire_dec_get_digest(const uint8_t *b, size_t n, struct wire_digest_req *out)
{
	return dec_digest_req(b, n, false, out);
}

int
wire_dec_put_digest(const uint8_t *b, size_t n, struct wire_digest_req *out)
{
	return dec_digest_req(b, n, true, out);
}

void
wire_enc_rep_hdr(uint8_t b[WIRE_REP_HDR], int32_t status, uint32_t len)
{
	codec_put_le32(b, (uint32_t)status);
	codec_put_le32(b + 4, len);
}

int
wire_dec_rep_hdr(const uint8_t b[WIRE_REP_HDR], uint32_t op, uint64_t put_limit,
    struct wire_rep_hdr *h)
{
	struct wire_rep_hdr t = {
	    (int32_t)codec_get_le32(b), codec_get_le32(b + 4)};
	uint64_t min, max;

	if (put_limit > WIRE_PUT_LIMIT_MAX)
		put_limit = WIRE_PUT_LIMIT_MAX;
	if (t.status > 0 || t.status < -4095 || (t.status != 0 && t.len != 0))
		return -EPROTO;
	if (t.status != 0) {
		*h = t;
		return 0;
	}
	switch (op) {
	case WIRE_HELLO:
		min = max = WIRE_HELLO_REP;
		break;
	case WIRE_GET:
		min = CODEC_ENV_HDR;
		max = CODEC_ENV_HDR + put_limit;
		break;
	case WIRE_GET_DIGEST:
		min = max = 32;
		break;
	case WIRE_STATS:
		min = WIRE_STATS_FIXED;
		max = WIRE_STATS_FIXED + WIRE_ERR_MAX;
		break;
	case WIRE_MOUNTS:
		min = 0;
		max = WIRE_MOUNTS_MAX;
		break;
	default: /* PUT, PUT_DIGEST: no reply */
		return -EPROTO;
	}
	if (t.len < min || t.len > max)
		return -EPROTO;
	*h = t;
	return 0;
}

void
wire_enc_hello_rep(uint8_t b[WIRE_HELLO_REP], const struct wire_hello_rep *h)
{
	codec_put_le32(b, h->version);
	codec_put_le32(b + 4, h->pid);
	codec_put_le64(b + 8, h->put_limit);
	codec_put_le64(b + 16, h->size_bound);
	memcpy(b + 24, h->token, WIRE_TOKEN_LEN);
}

int
wire_dec_hello_rep(const uint8_t *b, size_t n, struct wire_hello_rep *out)
{
	struct cur c = {b, n};
	struct wire_hello_rep h;
	const uint8_t *tok;

	if (!get_u32(&c, &h.version) || !get_u32(&c, &h.pid) ||
	    !get_u64(&c, &h.put_limit) || !get_u64(&c, &h.size_bound) ||
	    !get_bytes(&c, WIRE_TOKEN_LEN, &tok) || c.left != 0 ||
	    h.version != WIRE_VERSION || h.pid == 0 ||
	    h.pid > (uint32_t)INT32_MAX || h.put_limit > WIRE_PUT_LIMIT_MAX)
		return -EPROTO;
	memcpy(h.token, tok, WIRE_TOKEN_LEN);
	*out = h;
	return 0;
}

int
wire_dec_get_rep(const uint8_t *b, size_t n, const uint8_t key[CACHE_KEY_LEN],
    struct cache_val *out)
{
	struct cache_val v;

	if (codec_env_open(b, n, key, &v, NULL) != 0)
		return -EBADMSG;
	v.data = (void *)(b + CODEC_ENV_HDR);
	v.prefix = NULL;
	*out = v;
	return 0;
}

int
wire_dec_digest_rep(const uint8_t *b, size_t n, uint8_t digest[32])
{
	if (n != 32)
		return -EPROTO;
	memcpy(digest, b, 32);
	return 0;
}

void
wire_enc_stats(uint8_t b[WIRE_STATS_FIXED], const struct wire_stats *s)
{
	const uint64_t f[7] = {s->hits, s->misses, s->bytes_read,
	    s->bytes_written, s->insert_failures, s->disk_bytes, s->dropped};
	const uint64_t g[8] = {s->inserts, s->denied, s->evictions,
	    s->refreshes, s->oversize, s->entries, s->used_bytes,
	    s->admit_bytes};

	for (int i = 0; i < 7; i++)
		codec_put_le64(b + 8 * i, f[i]);
	codec_put_le32(b + 56, s->disabled);
	for (int i = 0; i < 8; i++)
		codec_put_le64(b + 60 + 8 * i, g[i]);
}

int
wire_dec_stats_rep(const uint8_t *b, size_t n, struct wire_stats *out)
{
	struct cur c = {b, n};
	struct wire_stats s = {0};
	const char *err;
	uint64_t *f[7] = {&s.hits, &s.misses, &s.bytes_read, &s.bytes_written,
	    &s.insert_failures, &s.disk_bytes, &s.dropped};
	uint64_t *g[8] = {&s.inserts, &s.denied, &s.evictions, &s.refreshes,
	    &s.oversize, &s.entries, &s.used_bytes, &s.admit_bytes};

	for (int i = 0; i < 7; i++)
		if (!get_u64(&c, f[i]))
			return -EPROTO;
	if (!get_u32(&c, &s.disabled) || s.disabled > 1)
		return -EPROTO;
	for (int i = 0; i < 8; i++)
		if (!get_u64(&c, g[i]))
			return -EPROTO;
	if (!get_text(&c, c.left, 0, WIRE_ERR_MAX, &err))
		return -EPROTO;
	memcpy(s.err, err, n - WIRE_STATS_FIXED);
	s.err[n - WIRE_STATS_FIXED] = '\0';
	*out = s;
	return 0;
}

uint64_t
wire_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Wait for ev on fd until deadline: 0, or -ETIMEDOUT / -errno. */
static int
wait_fd(int fd, short ev, uint64_t deadline)
{
	for (;;) {
		struct pollfd p = {fd, ev, 0};
		uint64_t now = wire_now_ns();
		int ms, r;

		if (now >= deadline)
			return -ETIMEDOUT;
		ms = (int)((deadline - now + 999999) / 1000000);
		if ((r = poll(&p, 1, ms)) > 0)
			return 0; /* ready, or an error the next call reports */
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

int
wire_read(int fd, void *buf, size_t len, uint64_t deadline)
{
	uint8_t *p = buf;
	int e;

	while (len > 0) {
		ssize_t n = recv(fd, p, len, MSG_DONTWAIT);

		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -errno;
			if ((e = wait_fd(fd, POLLIN, deadline)) != 0)
				return e;
			continue;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
wire_send(int fd, struct iovec *iov, int n, uint64_t deadline)
{
	struct msghdr mh = {0};
	int e;

	mh.msg_iov = iov;
	mh.msg_iovlen = (size_t)n;
	while (mh.msg_iovlen > 0 && mh.msg_iov->iov_len == 0) {
		mh.msg_iov++;
		mh.msg_iovlen--;
	}
	while (mh.msg_iovlen > 0) {
		ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -errno;
			if ((e = wait_fd(fd, POLLOUT, deadline)) != 0)
				return e;
			continue;
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
wire_set_bufs(int fd)
{
	int sz = 1 << 20;

	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
}
