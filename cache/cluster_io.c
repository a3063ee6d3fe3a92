/*
 * cluster_io.c - the cluster tier's values in memcached: the key and
 * header codec, get and put (see cluster.h for the layout and the
 * contract).
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
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "cache/cluster_int.h"

#define HDR_MAGIC "FFCL"
#define HDR_VERSION 1
#define HDR_LEN 32
#define KEY_PREFIX "ffc1:"
/* "ffc1:" + 64 hex + "#" + chunk number + NUL */
#define MKEY_MAX (sizeof(KEY_PREFIX) + 2 * CLUSTER_KEY_LEN + 16)

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
