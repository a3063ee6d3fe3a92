/*
 * cluster.c - the cluster cache tier: preprocessed values in memcached,
 * through libmemcached (see cluster.h for the layout and the contract).
 *
 * Head item value:
 *
 *	0  magic "FFCL"
 *	4  version (u16 LE), 0 (u16)
 *	8  total length (u64 LE)
 *	16 chunk count (u32 LE): 0 when the value follows the header
 *	20 chunk size (u32 LE): bytes per chunk item, the last one shorter
 *	24 XXH3-64 of the whole value (u64 LE)
 *	32 the value, when the chunk count is 0
 *
 * Lock order: none.  The counters are atomics; errlock guards only the
 * error text.
 */
#include <sys/stat.h>

#include <ctype.h>
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

#include <libmemcached/memcached.h>
#include <libmemcachedutil-1.0/pool.h>
#include <xxhash.h>

#include "cache/cluster.h"

#define HDR_MAGIC "FFCL"
#define HDR_VERSION 1
#define HDR_LEN 32
#define KEY_PREFIX "ffc1:"
/* "ffc1:" + 64 hex + "#" + chunk number + NUL */
#define MKEY_MAX (sizeof(KEY_PREFIX) + 2 * CLUSTER_KEY_LEN + 16)
#define DEFAULT_ITEM_MAX (1024u * 1024)
/* Room in an item for memcached's item header, the key and the CAS. */
#define ITEM_HEADROOM 1024u
#define MIN_CHUNK (64u * 1024)
#define AUTH_MAX 4096

#define CONNECT_TIMEOUT_MS 250
#define POLL_TIMEOUT_MS 500
#define FAILURE_LIMIT 1

struct cluster {
	memcached_st *master; /* the template the pool clones */
	memcached_pool_st *pool;
	size_t chunk; /* value bytes per item */

	_Atomic uint64_t hits, misses, errors, bytes_in, bytes_out, puts,
	    put_errors, skipped_large, bad_checksum, missing_chunks;

	pthread_mutex_t errlock;
	char first[256];      /* the first failure; guarded by errlock */
	char errtext[256];    /* the latest; guarded by errlock */
	atomic_bool failed;   /* a failure happened */
	atomic_bool reported; /* cluster_error_once said it */
};

/* ---- the server list -------------------------------------------------- */

struct server {
	char host[256];
	unsigned port;
};

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static int
host_char(int ch)
{
	return isalnum(ch) || ch == '.' || ch == '-' || ch == '_';
}

/* Parse one "HOST:PORT" of n bytes at s into sv. */
static int
parse_one(const char *s, size_t n, int idx, struct server *sv, char *err,
    size_t errlen)
{
	const char *colon, *h, *p;
	size_t hlen, i;
	unsigned long port;
	char *end;
	char buf[300];

	if (n >= sizeof(buf)) {
		set_err(err, errlen, "server %d: too long", idx);
		return -EINVAL;
	}
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (buf[0] == '[') {
		/* [IPv6]:port */
		if ((colon = strchr(buf, ']')) == NULL) {
			set_err(err, errlen, "server %d (\"%s\"): no ']'", idx,
			    buf);
			return -EINVAL;
		}
		h = buf + 1;
		hlen = colon - h;
		for (i = 0; i < hlen; i++)
			if (!isxdigit((unsigned char)h[i]) && h[i] != ':' &&
			    h[i] != '.') {
				set_err(err, errlen,
				    "server %d (\"%s\"): bad IPv6 address", idx,
				    buf);
				return -EINVAL;
			}
		colon++;
		if (*colon != ':') {
			set_err(err, errlen, "server %d (\"%s\"): no port", idx,
			    buf);
			return -EINVAL;
		}
	} else {
		h = buf;
		if ((colon = strrchr(buf, ':')) == NULL) {
			set_err(err, errlen,
			    "server %d (\"%s\"): no port (HOST:PORT)", idx,
			    buf);
			return -EINVAL;
		}
		hlen = colon - h;
		for (i = 0; i < hlen; i++)
			if (!host_char((unsigned char)h[i])) {
				set_err(err, errlen,
				    "server %d (\"%s\"): bad character in "
				    "host name",
				    idx, buf);
				return -EINVAL;
			}
	}
	if (hlen == 0) {
		set_err(err, errlen, "server %d (\"%s\"): no host", idx, buf);
		return -EINVAL;
	}
	p = colon + 1;
	errno = 0;
	port = strtoul(p, &end, 10);
	if (*p == '\0' || !isdigit((unsigned char)*p) || *end != '\0' ||
	    errno != 0 || port == 0 || port > 65535) {
		set_err(err, errlen,
		    "server %d (\"%s\"): port must be 1..65535", idx, buf);
		return -EINVAL;
	}
	memcpy(sv->host, h, hlen);
	sv->host[hlen] = '\0';
	sv->port = (unsigned)port;
	return 0;
}

/* Parse servers into sv[CLUSTER_MAX_SERVERS]; *n servers. */
static int
parse_servers(
    const char *servers, struct server *sv, int *n, char *err, size_t errlen)
{
	const char *s, *e, *a, *b;
	int i, k, r;

	if (servers == NULL || *servers == '\0') {
		set_err(err, errlen, "no servers");
		return -EINVAL;
	}
	k = 0;
	for (s = servers;; s = e + 1) {
		if ((e = strchr(s, ',')) == NULL)
			e = s + strlen(s);
		a = s;
		b = e;
		while (a < b && (*a == ' ' || *a == '\t'))
			a++;
		while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
			b--;
		if (a == b) {
			set_err(err, errlen, "server %d: empty", k + 1);
			return -EINVAL;
		}
		if (k == CLUSTER_MAX_SERVERS) {
			set_err(err, errlen, "more than %d servers",
			    CLUSTER_MAX_SERVERS);
			return -EINVAL;
		}
		if ((r = parse_one(a, b - a, k + 1, &sv[k], err, errlen)) != 0)
			return r;
		for (i = 0; i < k; i++)
			if (sv[i].port == sv[k].port &&
			    strcasecmp(sv[i].host, sv[k].host) == 0) {
				set_err(err, errlen,
				    "server %d (%s:%u): listed twice", k + 1,
				    sv[k].host, sv[k].port);
				return -EINVAL;
			}
		k++;
		if (*e == '\0')
			break;
	}
	*n = k;
	return 0;
}

int
cluster_check_servers(const char *servers, char *err, size_t errlen)
{
	struct server *sv;
	int n, r;

	if ((sv = calloc(CLUSTER_MAX_SERVERS, sizeof(*sv))) == NULL)
		return -ENOMEM;
	r = parse_servers(servers, sv, &n, err, errlen);
	free(sv);
	return r;
}

/* ---- the auth file ---------------------------------------------------- */

/* Read user and password from path into user[ulen], pass[plen]. */
static int
read_auth(const char *path, char *user, size_t ulen, char *pass, size_t plen,
    char *err, size_t errlen)
{
	struct stat st;
	char buf[AUTH_MAX + 1], *nl, *l1, *l2, *p;
	ssize_t got;
	size_t off;
	int fd, r;

	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) == -1) {
		r = -errno;
		set_err(err, errlen, "%s: %s", path, strerror(errno));
		return r;
	}
	if (fstat(fd, &st) == -1) {
		r = -errno;
		set_err(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return r;
	}
	if (!S_ISREG(st.st_mode)) {
		set_err(err, errlen, "%s: not a regular file", path);
		close(fd);
		return -EINVAL;
	}
	if (st.st_mode & (S_IRGRP | S_IWGRP | S_IROTH | S_IWOTH)) {
		set_err(err, errlen,
		    "%s: mode %03o lets group or others read it: chmod 600 it",
		    path, (unsigned)(st.st_mode & 0777));
		close(fd);
		return -EPERM;
	}
	off = 0;
	while (off < AUTH_MAX &&
	       (got = read(fd, buf + off, AUTH_MAX - off)) != 0) {
		if (got == -1) {
			if (errno == EINTR)
				continue;
			r = -errno;
			set_err(err, errlen, "%s: %s", path, strerror(errno));
			close(fd);
			explicit_bzero(buf, sizeof(buf));
			return r;
		}
		off += (size_t)got;
	}
	close(fd);
	buf[off] = '\0';

	/* Two lines "user\npassword", or one "user password". */
	r = -EINVAL;
	l1 = buf;
	l2 = NULL;
	if ((nl = strchr(l1, '\n')) != NULL) {
		*nl = '\0';
		l2 = nl + 1;
		if ((nl = strchr(l2, '\n')) != NULL)
			*nl = '\0';
	}
	for (p = l1; *p; p++)
		if (*p == '\r')
			*p = '\0';
	if (l2 != NULL)
		for (p = l2; *p; p++)
			if (*p == '\r')
				*p = '\0';
	if (l2 == NULL || *l2 == '\0') {
		/* one line: split at the first blanks */
		if ((p = strpbrk(l1, " \t")) == NULL)
			goto bad;
		*p++ = '\0';
		while (*p == ' ' || *p == '\t')
			p++;
		l2 = p;
		for (p = l2 + strlen(l2);
		     p > l2 && (p[-1] == ' ' || p[-1] == '\t'); p--)
			p[-1] = '\0';
	}
	if (*l1 == '\0' || *l2 == '\0' || strpbrk(l1, " \t") != NULL)
		goto bad;
	if (strlen(l1) >= ulen || strlen(l2) >= plen)
		goto bad;
	strcpy(user, l1);
	strcpy(pass, l2);
	r = 0;
bad:
	if (r != 0)
		set_err(err, errlen,
		    "%s: expected \"USER PASSWORD\" or USER and PASSWORD on "
		    "two lines",
		    path);
	explicit_bzero(buf, sizeof(buf));
	return r;
}

/* ---- open and close --------------------------------------------------- */

static memcached_return_t
settings_cb(const memcached_instance_st *server, const char *key, size_t klen,
    const char *value, size_t vlen, void *ctx)
{
	size_t *min = ctx;
	char num[32];
	unsigned long long v;

	(void)server;
	if (klen == strlen("item_size_max") &&
	    memcmp(key, "item_size_max", klen) == 0 && vlen < sizeof(num)) {
		memcpy(num, value, vlen);
		num[vlen] = '\0';
		v = strtoull(num, NULL, 10);
		if (v > 0 && (*min == 0 || v < *min))
			*min = (size_t)v;
	}
	return MEMCACHED_SUCCESS;
}

static int
set_behaviors(memcached_st *m, char *err, size_t errlen)
{
	static const struct {
		memcached_behavior_t b;
		uint64_t v;
	} bs[] = {
	    {MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1},
	    {MEMCACHED_BEHAVIOR_DISTRIBUTION,
		MEMCACHED_DISTRIBUTION_CONSISTENT},
	    {MEMCACHED_BEHAVIOR_TCP_NODELAY, 1},
	    {MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, CONNECT_TIMEOUT_MS},
	    {MEMCACHED_BEHAVIOR_POLL_TIMEOUT, POLL_TIMEOUT_MS},
	    {MEMCACHED_BEHAVIOR_REMOVE_FAILED_SERVERS, 1},
	    {MEMCACHED_BEHAVIOR_SERVER_FAILURE_LIMIT, FAILURE_LIMIT},
	    {MEMCACHED_BEHAVIOR_RETRY_TIMEOUT, CLUSTER_RETRY_S},
	    {MEMCACHED_BEHAVIOR_DEAD_TIMEOUT, CLUSTER_RETRY_S},
	};
	memcached_return_t rc;
	size_t i;

	for (i = 0; i < sizeof(bs) / sizeof(bs[0]); i++) {
		rc = memcached_behavior_set(m, bs[i].b, bs[i].v);
		if (memcached_failed(rc)) {
			set_err(err, errlen, "libmemcached: %s: %s",
			    libmemcached_string_behavior(bs[i].b),
			    memcached_strerror(m, rc));
			return -EINVAL;
		}
	}
	return 0;
}

int
cluster_open(const char *servers, const char *auth_file, struct cluster **out,
    char *err, size_t errlen)
{
	struct cluster *c = NULL;
	struct server *sv = NULL;
	memcached_return_t rc;
	char user[256], pass[1024];
	size_t item_max = 0;
	int i, n, r;

	if ((sv = calloc(CLUSTER_MAX_SERVERS, sizeof(*sv))) == NULL) {
		r = -ENOMEM;
		set_err(err, errlen, "out of memory");
		goto out;
	}
	if ((r = parse_servers(servers, sv, &n, err, errlen)) != 0)
		goto out;
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		r = -ENOMEM;
		set_err(err, errlen, "out of memory");
		goto out;
	}
	pthread_mutex_init(&c->errlock, NULL);
	if ((c->master = memcached_create(NULL)) == NULL) {
		r = -ENOMEM;
		set_err(err, errlen, "libmemcached: out of memory");
		goto out;
	}
	if ((r = set_behaviors(c->master, err, errlen)) != 0)
		goto out;
	for (i = 0; i < n; i++) {
		rc = memcached_server_add(c->master, sv[i].host, sv[i].port);
		if (memcached_failed(rc)) {
			set_err(err, errlen, "%s:%u: %s", sv[i].host,
			    sv[i].port,
			    memcached_last_error_message(c->master));
			r = -EINVAL;
			goto out;
		}
	}
	if (auth_file != NULL) {
		if ((r = read_auth(auth_file, user, sizeof(user), pass,
			 sizeof(pass), err, errlen)) != 0)
			goto out;
		rc = memcached_set_sasl_auth_data(c->master, user, pass);
		explicit_bzero(pass, sizeof(pass));
		if (memcached_failed(rc)) {
			set_err(err, errlen, "SASL: %s",
			    memcached_strerror(c->master, rc));
			r = -ENOTSUP;
			goto out;
		}
	}

	/*
	 * The servers that answer say their item size; none answering is
	 * fine (they are misses until they come up).  The probe runs on the
	 * master, whose failure counts the pool's clones do not inherit.
	 */
	(void)memcached_stat_execute(
	    c->master, "settings", settings_cb, &item_max);
	if (item_max == 0)
		item_max = DEFAULT_ITEM_MAX;
	c->chunk = item_max > MIN_CHUNK + ITEM_HEADROOM
		       ? item_max - ITEM_HEADROOM
		       : MIN_CHUNK;

	c->pool = memcached_pool_create(c->master, 1, CLUSTER_POOL_MAX);
	if (c->pool == NULL) {
		r = -ENOMEM;
		set_err(err, errlen, "libmemcached: cannot create the pool");
		goto out;
	}
	*out = c; /* transferred */
	c = NULL;
	r = 0;
out:
	cluster_close(c);
	free(sv);
	return r;
}

void
cluster_close(struct cluster *c)
{
	if (c == NULL)
		return;
	if (c->pool != NULL)
		memcached_pool_destroy(c->pool);
	if (c->master != NULL) {
		memcached_destroy_sasl_auth_data(c->master);
		memcached_free(c->master);
	}
	pthread_mutex_destroy(&c->errlock);
	free(c);
}

size_t
cluster_chunk_size(struct cluster *c)
{
	return c->chunk;
}

/* ---- get and put ------------------------------------------------------ */

static memcached_st *
pool_get(struct cluster *c)
{
	struct timespec wait = {1, 0};
	memcached_return_t rc;

	return memcached_pool_fetch(c->pool, &wait, &rc);
}

static void
pool_put(struct cluster *c, memcached_st *m)
{
	memcached_pool_release(c->pool, m);
}

/* Remember a failure's text (m may be NULL: no handle to be had). */
static void
note_failure(struct cluster *c, memcached_st *m, memcached_return_t rc)
{
	pthread_mutex_lock(&c->errlock);
	if (m != NULL)
		snprintf(c->errtext, sizeof(c->errtext), "memcached: %s",
		    memcached_last_error_message(m));
	else
		snprintf(c->errtext, sizeof(c->errtext),
		    "memcached: no connection free in the pool (%s)",
		    memcached_strerror(NULL, rc));
	if (c->first[0] == '\0')
		memcpy(c->first, c->errtext, sizeof(c->first));
	pthread_mutex_unlock(&c->errlock);
	atomic_store(&c->failed, true);
}

static size_t
make_key(char *buf, const uint8_t key[CLUSTER_KEY_LEN], uint32_t chunk)
{
	static const char hex[] = "0123456789abcdef";
	size_t n, i;

	memcpy(buf, KEY_PREFIX, sizeof(KEY_PREFIX) - 1);
	n = sizeof(KEY_PREFIX) - 1;
	for (i = 0; i < CLUSTER_KEY_LEN; i++) {
		buf[n++] = hex[key[i] >> 4];
		buf[n++] = hex[key[i] & 15];
	}
	if (chunk > 0)
		n +=
		    (size_t)snprintf(buf + n, MKEY_MAX - n, "#%" PRIu32, chunk);
	buf[n] = '\0';
	return n;
}

static void
put_le(uint8_t *p, uint64_t v, int n)
{
	int i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t
get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;
	int i;

	for (i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* A failed call on a server: NOTFOUND is a plain miss, the rest errors. */
static int
is_server_failure(memcached_return_t rc)
{
	return rc != MEMCACHED_SUCCESS && rc != MEMCACHED_NOTFOUND &&
	       rc != MEMCACHED_END;
}

/* Fetch chunks 1..n of the value under hkey into buf (total bytes). */
static int
get_chunks(struct cluster *c, memcached_st *m, const uint8_t key[32],
    const char *hkey, size_t hlen, uint32_t n, size_t csize, uint8_t *buf,
    size_t total, memcached_return_t *rcp)
{
	char(*keys)[MKEY_MAX] = NULL;
	const char **kp = NULL;
	size_t *kl = NULL, want, off, vlen;
	uint8_t *seen = NULL;
	memcached_result_st resbuf, *res = NULL;
	memcached_return_t rc;
	const char *k, *hash;
	unsigned long idx;
	uint32_t i, got = 0;
	int r;

	keys = calloc(n, sizeof(*keys));
	kp = calloc(n, sizeof(*kp));
	kl = calloc(n, sizeof(*kl));
	seen = calloc(n, 1);
	if (keys == NULL || kp == NULL || kl == NULL || seen == NULL) {
		r = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		kl[i] = make_key(keys[i], key, i + 1);
		kp[i] = keys[i];
	}
	rc = memcached_mget_by_key(m, hkey, hlen, kp, kl, n);
	if (memcached_failed(rc)) {
		*rcp = rc;
		r = is_server_failure(rc) ? -EIO : -ENOENT;
		goto out;
	}
	/*
	 * On our stack: memcached_fetch_result frees a result it finds
	 * malloc'd when the fetch ends.
	 */
	if ((res = memcached_result_create(m, &resbuf)) == NULL) {
		r = -ENOMEM;
		goto out;
	}
	r = 0;
	while (memcached_fetch_result(m, res, &rc) != NULL) {
		k = memcached_result_key_value(res);
		if (r != 0)
			continue; /* drain the rest */
		if ((hash = memchr(k, '#', memcached_result_key_length(res))) ==
		    NULL) {
			r = -EBADMSG;
			continue;
		}
		idx = strtoul(hash + 1, NULL, 10);
		if (idx < 1 || idx > n || seen[idx - 1]) {
			r = -EBADMSG;
			continue;
		}
		off = (idx - 1) * csize;
		want = idx < n ? csize : total - off;
		vlen = memcached_result_length(res);
		if (vlen != want) {
			r = -EBADMSG;
			continue;
		}
		memcpy(buf + off, memcached_result_value(res), vlen);
		seen[idx - 1] = 1;
		got++;
	}
	if (rc != MEMCACHED_END && rc != MEMCACHED_NOTFOUND &&
	    rc != MEMCACHED_SUCCESS) {
		*rcp = rc;
		if (r == 0)
			r = -EIO;
	} else if (r == 0 && got != n) {
		r = -ENOENT;
		atomic_fetch_add(&c->missing_chunks, 1);
	}
out:
	if (res != NULL)
		memcached_result_free(res);
	free(seen);
	free(kl);
	free(kp);
	free(keys);
	return r;
}

int
cluster_get(struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN],
    uint8_t **data, size_t *len)
{
	char hkey[MKEY_MAX];
	memcached_st *m;
	memcached_return_t rc = MEMCACHED_SUCCESS;
	uint8_t *val = NULL, *buf = NULL;
	uint64_t total, sum;
	uint32_t n, csize;
	size_t hlen, vlen = 0;
	uint32_t flags;
	int r;

	if ((m = pool_get(c)) == NULL) {
		note_failure(c, NULL, MEMCACHED_TIMEOUT);
		atomic_fetch_add(&c->errors, 1);
		atomic_fetch_add(&c->misses, 1);
		return -EIO;
	}
	hlen = make_key(hkey, key, 0);
	val = (uint8_t *)memcached_get(m, hkey, hlen, &vlen, &flags, &rc);
	if (val == NULL) {
		r = is_server_failure(rc) ? -EIO : -ENOENT;
		goto out;
	}
	if (vlen < HDR_LEN || memcmp(val, HDR_MAGIC, 4) != 0 ||
	    get_le(val + 4, 2) != HDR_VERSION) {
		r = -EBADMSG;
		goto out;
	}
	total = get_le(val + 8, 8);
	n = (uint32_t)get_le(val + 16, 4);
	csize = (uint32_t)get_le(val + 20, 4);
	sum = get_le(val + 24, 8);
	if (total > CLUSTER_MAX_VALUE) {
		r = -EBADMSG;
		goto out;
	}
	if (n == 0) {
		if (vlen - HDR_LEN != total) {
			r = -EBADMSG;
			goto out;
		}
		if ((buf = malloc(total ? total : 1)) == NULL) {
			r = -ENOMEM;
			goto out;
		}
		memcpy(buf, val + HDR_LEN, total);
	} else {
		if (vlen != HDR_LEN || csize == 0 ||
		    (total + csize - 1) / csize != n) {
			r = -EBADMSG;
			goto out;
		}
		if ((buf = malloc(total)) == NULL) {
			r = -ENOMEM;
			goto out;
		}
		if ((r = get_chunks(c, m, key, hkey, hlen, n, csize, buf, total,
			 &rc)) != 0)
			goto out;
	}
	if (XXH3_64bits(buf, total) != sum) {
		r = -EBADMSG;
		goto out;
	}
	*data = buf; /* transferred */
	*len = total;
	buf = NULL;
	r = 0;
out:
	if (r == -EIO)
		note_failure(c, m, rc);
	pool_put(c, m);
	free(val);
	free(buf);
	if (r == 0) {
		atomic_fetch_add(&c->hits, 1);
		atomic_fetch_add(&c->bytes_in, *len);
	} else {
		atomic_fetch_add(&c->misses, 1);
		if (r == -EIO)
			atomic_fetch_add(&c->errors, 1);
		else if (r == -EBADMSG)
			atomic_fetch_add(&c->bad_checksum, 1);
	}
	return r;
}

int
cluster_put(struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN],
    const void *data, size_t len)
{
	char hkey[MKEY_MAX], ckey[MKEY_MAX];
	uint8_t hdr[HDR_LEN], *one = NULL;
	const uint8_t *p = data;
	memcached_st *m;
	memcached_return_t rc = MEMCACHED_SUCCESS;
	size_t hlen, klen, off, n;
	uint32_t nchunks, i;
	int r;

	if (len > CLUSTER_MAX_VALUE) {
		atomic_fetch_add(&c->skipped_large, 1);
		return -EFBIG;
	}
	nchunks = HDR_LEN + len <= c->chunk
		      ? 0
		      : (uint32_t)((len + c->chunk - 1) / c->chunk);
	memcpy(hdr, HDR_MAGIC, 4);
	put_le(hdr + 4, HDR_VERSION, 2);
	put_le(hdr + 6, 0, 2);
	put_le(hdr + 8, len, 8);
	put_le(hdr + 16, nchunks, 4);
	put_le(hdr + 20, nchunks ? c->chunk : 0, 4);
	put_le(hdr + 24, XXH3_64bits(data, len), 8);

	if ((m = pool_get(c)) == NULL) {
		note_failure(c, NULL, MEMCACHED_TIMEOUT);
		atomic_fetch_add(&c->put_errors, 1);
		return -EIO;
	}
	hlen = make_key(hkey, key, 0);
	/* The chunks first, then the head that makes them reachable. */
	for (i = 0; i < nchunks; i++) {
		off = (size_t)i * c->chunk;
		n = len - off < c->chunk ? len - off : c->chunk;
		klen = make_key(ckey, key, i + 1);
		rc = memcached_set_by_key(
		    m, hkey, hlen, ckey, klen, (const char *)p + off, n, 0, 0);
		if (memcached_failed(rc)) {
			r = -EIO;
			goto out;
		}
	}
	if (nchunks == 0) {
		if ((one = malloc(HDR_LEN + len)) == NULL) {
			r = -ENOMEM;
			goto out;
		}
		memcpy(one, hdr, HDR_LEN);
		if (len > 0)
			memcpy(one + HDR_LEN, data, len);
		rc = memcached_set_by_key(m, hkey, hlen, hkey, hlen,
		    (const char *)one, HDR_LEN + len, 0, 0);
	} else
		rc = memcached_set_by_key(m, hkey, hlen, hkey, hlen,
		    (const char *)hdr, HDR_LEN, 0, 0);
	r = memcached_failed(rc) ? -EIO : 0;
out:
	if (r == -EIO)
		note_failure(c, m, rc);
	pool_put(c, m);
	free(one);
	if (r == 0) {
		atomic_fetch_add(&c->puts, 1);
		atomic_fetch_add(&c->bytes_out, len);
	} else
		atomic_fetch_add(&c->put_errors, 1);
	return r;
}

/* ---- stats and errors ------------------------------------------------- */

void
cluster_get_stats(struct cluster *c, struct cluster_stats *st)
{
	st->hits = atomic_load(&c->hits);
	st->misses = atomic_load(&c->misses);
	st->errors = atomic_load(&c->errors);
	st->bytes_in = atomic_load(&c->bytes_in);
	st->bytes_out = atomic_load(&c->bytes_out);
	st->puts = atomic_load(&c->puts);
	st->put_errors = atomic_load(&c->put_errors);
	st->skipped_large = atomic_load(&c->skipped_large);
	st->bad_checksum = atomic_load(&c->bad_checksum);
	st->missing_chunks = atomic_load(&c->missing_chunks);
}

bool
cluster_error_once(struct cluster *c, char *buf, size_t len)
{
	bool no = false;

	if (!atomic_load(&c->failed))
		return false;
	if (!atomic_compare_exchange_strong(&c->reported, &no, true))
		return false;
	if (len > 0) {
		pthread_mutex_lock(&c->errlock);
		snprintf(buf, len, "%s", c->first);
		pthread_mutex_unlock(&c->errlock);
	}
	return true;
}

uint64_t
cluster_last_error(struct cluster *c, char *buf, size_t len)
{
	if (len > 0) {
		pthread_mutex_lock(&c->errlock);
		snprintf(buf, len, "%s", c->errtext);
		pthread_mutex_unlock(&c->errlock);
	}
	return atomic_load(&c->errors) + atomic_load(&c->put_errors);
}
