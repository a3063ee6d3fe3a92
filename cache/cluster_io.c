/*
 * cluster_io.c - cache/ (the store), the cluster tier's get and put
 * against memcached (see cluster.h for the contract, cluster_int.h for the
 * items' layout).  Above cluster_codec.c, whose functions check every byte
 * a server returns; this file moves the bytes and counts.  Its multi-get
 * of a value's chunks (cluster_chunks_get) serves cluster_blob.c too.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/cluster_int.h"

/*
 * A handle of the pool, or NULL with *rcp why: MEMCACHED_TIMEOUT (none
 * free within the wait) or a failure to make one.
 */
static memcached_st *
pool_get(struct cluster *c, memcached_return_t *rcp)
{
	struct timespec wait = {
	    c->pool_wait_ms / 1000, (long)(c->pool_wait_ms % 1000) * 1000000};

	return memcached_pool_fetch(c->pool, &wait, rcp);
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
		    "memcached: no handle from the pool (%s)",
		    memcached_strerror(NULL, rc));
	if (c->first[0] == '\0')
		memcpy(c->first, c->errtext, sizeof(c->first));
	pthread_mutex_unlock(&c->errlock);
	atomic_store(&c->failed, true);
}

/*
 * No handle: a wait that ran out is a pool wait (a miss, not a server's
 * failure); anything else (no memory for a clone) an error.  The return
 * of cluster_get and cluster_put.
 */
static int
no_handle(struct cluster *c, memcached_return_t rc)
{
	if (rc == MEMCACHED_TIMEOUT || rc == MEMCACHED_NOTFOUND ||
	    rc == MEMCACHED_IN_PROGRESS) {
		atomic_fetch_add(&c->pool_waits, 1);
		return -EBUSY;
	}
	note_failure(c, NULL, rc);
	return -EIO;
}

int
cluster_chunks_get(memcached_st *m, const char *hkey, size_t hlen, uint32_t n,
    uint64_t csize, uint64_t total, const struct cluster_chunks *cc,
    memcached_return_t *rcp)
{
	char *keys = NULL;
	const char **kp = NULL;
	size_t *kl = NULL;
	uint8_t *seen = NULL;
	memcached_result_st resbuf, *res = NULL;
	memcached_return_t rc;
	uint32_t idx, got = 0;
	int r;

	*rcp = MEMCACHED_SUCCESS;
	keys = calloc(n, cc->kmax);
	kp = calloc(n, sizeof(*kp));
	kl = calloc(n, sizeof(*kl));
	seen = calloc(n, 1);
	if (keys == NULL || kp == NULL || kl == NULL || seen == NULL) {
		r = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		kp[i] = keys + (size_t)i * cc->kmax;
		kl[i] = cc->mkey(cc->arg, i + 1, keys + (size_t)i * cc->kmax);
	}
	rc = memcached_mget_by_key(m, hkey, hlen, kp, kl, n);
	if (memcached_failed(rc)) {
		*rcp = rc;
		r = cluster_server_failed(rc) ? -EIO : -ENODATA;
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
		uint64_t off;
		size_t vlen;

		if (r != 0)
			continue; /* drain the rest */
		/* The key is not NUL-terminated: its length bounds it. */
		if (cluster_chunk_index(memcached_result_key_value(res),
			memcached_result_key_length(res), hkey, hlen, n,
			&idx) != 0 ||
		    seen[idx - 1]) {
			r = -EBADMSG;
			continue;
		}
		off = (uint64_t)(idx - 1) * csize;
		vlen = memcached_result_length(res);
		if (vlen != (idx < n ? csize : total - off)) {
			r = -EBADMSG;
			continue;
		}
		if ((r = cc->take(cc->arg, idx, off,
			 (const uint8_t *)memcached_result_value(res), vlen)) !=
		    0)
			continue;
		seen[idx - 1] = 1;
		got++;
	}
	if (cluster_server_failed(rc)) {
		*rcp = rc;
		if (r == 0)
			r = -EIO;
	} else if (r == 0 && got != n)
		r = -ENOENT;
out:
	if (res != NULL)
		memcached_result_free(res);
	free(seen);
	free(kl);
	free(kp);
	free(keys);
	return r;
}

/* A prefix's chunks into one buffer of the envelope's header and payload,
 * allocated when the first sound chunk arrives (a forged head alone
 * costs nothing). */
struct into_buf {
	struct cluster *c;
	const uint8_t *key;
	const struct cluster_head *h;
	uint8_t *buf;
};

static size_t
prefix_mkey(void *arg, uint32_t i, char *buf)
{
	struct into_buf *x = arg;

	return cluster_mkey(buf, x->c->ns, x->key, i);
}

static int
prefix_take(void *arg, uint32_t idx, uint64_t off, const uint8_t *v, size_t len)
{
	struct into_buf *x = arg;

	(void)idx;
	if (x->buf == NULL) {
		if ((x->buf = malloc(CODEC_ENV_HDR + x->h->plen)) == NULL)
			return -ENOMEM;
		memcpy(x->buf, x->h->env, CODEC_ENV_HDR);
	}
	memcpy(x->buf + CODEC_ENV_HDR + off, v, len);
	return 0;
}

/*
 * Fetch the h->nchunks chunks of the head hkey (hlen bytes) into a buffer
 * of the envelope's header and payload: 0 and *bufp, or -EBADMSG (a chunk
 * of the wrong name or length), -ENOENT (a chunk missing: counted),
 * -EIO with *rcp (a server failed), -ENOMEM.
 */
static int
get_chunks(struct cluster *c, memcached_st *m,
    const uint8_t key[CLUSTER_KEY_LEN], const char *hkey, size_t hlen,
    const struct cluster_head *h, uint8_t **bufp, memcached_return_t *rcp)
{
	struct into_buf x = {c, key, h, NULL};
	struct cluster_chunks cc = {
	    CLUSTER_MKEY_MAX, prefix_mkey, prefix_take, &x};
	int r = cluster_chunks_get(
	    m, hkey, hlen, h->nchunks, h->csize, h->plen, &cc, rcp);

	if (r == -ENOENT)
		atomic_fetch_add(&c->missing_chunks, 1);
	else if (r == -ENODATA)
		r = -ENOENT;
	if (r == 0)
		*bufp = x.buf; /* transferred */
	else
		free(x.buf);
	return r;
}

int
cluster_get(
    struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN], struct cache_val *v)
{
	char hkey[CLUSTER_MKEY_MAX];
	struct cluster_head h;
	struct cache_val out;
	memcached_st *m;
	memcached_return_t rc = MEMCACHED_SUCCESS;
	uint8_t *val = NULL, *buf = NULL;
	size_t hlen, vlen = 0;
	uint32_t flags;
	int r;

	if (c->off) { /* its servers refused us at open (cluster.h) */
		atomic_fetch_add(&c->misses, 1);
		return -EACCES;
	}
	if ((m = pool_get(c, &rc)) == NULL) {
		r = no_handle(c, rc);
		atomic_fetch_add(&c->misses, 1);
		if (r == -EIO)
			atomic_fetch_add(&c->errors, 1);
		return r;
	}
	hlen = cluster_mkey(hkey, c->ns, key, 0);
	val = (uint8_t *)memcached_get(m, hkey, hlen, &vlen, &flags, &rc);
	if (val == NULL) {
		r = cluster_server_failed(rc) ? -EIO : -ENOENT;
		goto out;
	}
	if (cluster_head_parse(val, vlen, c->chunk, &h, NULL) != 0) {
		r = -EBADMSG;
		goto out;
	}
	if (h.nchunks == 0) {
		if ((buf = malloc(CODEC_ENV_HDR + h.plen)) == NULL) {
			r = -ENOMEM;
			goto out;
		}
		memcpy(buf, h.env, CODEC_ENV_HDR);
		memcpy(buf + CODEC_ENV_HDR, h.payload, h.plen);
	} else if ((r = get_chunks(c, m, key, hkey, hlen, &h, &buf, &rc)) != 0)
		goto out;
	if ((r = cluster_value_open(c->mac, &h, buf, key, &out, NULL)) != 0)
		goto out;
	memmove(buf, buf + CODEC_ENV_HDR, h.plen);
	out.data = buf; /* transferred */
	buf = NULL;
	*v = out;
	r = 0;
out:
	if (r == -EIO)
		note_failure(c, m, rc);
	pool_put(c, m);
	free(val);
	free(buf);
	if (r == 0) {
		atomic_fetch_add(&c->hits, 1);
		atomic_fetch_add(&c->bytes_in, v->len);
	} else {
		atomic_fetch_add(&c->misses, 1);
		if (r == -EIO)
			atomic_fetch_add(&c->errors, 1);
		else if (r == -EBADMSG)
			atomic_fetch_add(&c->bad_checksum, 1);
		else if (r == -EACCES)
			atomic_fetch_add(&c->bad_mac, 1);
	}
	return r;
}

int
cluster_put(struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN],
    const struct cache_val *v)
{
	char hkey[CLUSTER_MKEY_MAX], ckey[CLUSTER_MKEY_MAX];
	uint8_t head[CLUSTER_HEAD_LEN], *one = NULL;
	uint8_t *env = head + CLUSTER_ITEM_HDR + CLUSTER_MAC_LEN;
	const uint8_t *p = v->data;
	memcached_st *m;
	memcached_return_t rc = MEMCACHED_SUCCESS;
	size_t len = v->len, hlen, klen, off, n;
	uint32_t nchunks, i;
	int r;

	if (c->off)
		return -EACCES;
	if (len > CLUSTER_MAX_VALUE) {
		atomic_fetch_add(&c->skipped_large, 1);
		return -EFBIG;
	}
	nchunks = CLUSTER_HEAD_LEN + len <= c->chunk
		      ? 0
		      : (uint32_t)((len + c->chunk - 1) / c->chunk);
	cluster_item_encode(head, c->mac != NULL ? CLUSTER_FLAG_MAC : 0,
	    nchunks, nchunks ? (uint32_t)c->chunk : 0);
	memset(head + CLUSTER_ITEM_HDR, 0, CLUSTER_MAC_LEN);
	codec_env_seal(env, key, v);
	if (c->mac != NULL && cluster_mac(c->mac, head, env, p, len,
				  head + CLUSTER_ITEM_HDR) != 0) {
		atomic_fetch_add(&c->put_errors, 1);
		return -ENOMEM;
	}
	if (nchunks == 0) {
		if ((one = malloc(CLUSTER_HEAD_LEN + len)) == NULL) {
			atomic_fetch_add(&c->put_errors, 1);
			return -ENOMEM;
		}
		memcpy(one, head, CLUSTER_HEAD_LEN);
		if (len > 0)
			memcpy(one + CLUSTER_HEAD_LEN, p, len);
	}
	if ((m = pool_get(c, &rc)) == NULL) {
		free(one);
		if ((r = no_handle(c, rc)) == -EIO)
			atomic_fetch_add(&c->put_errors, 1);
		return r;
	}
	hlen = cluster_mkey(hkey, c->ns, key, 0);
	/* The chunks first, then the head that makes them reachable. */
	for (i = 0; i < nchunks; i++) {
		off = (size_t)i * c->chunk;
		n = len - off < c->chunk ? len - off : c->chunk;
		klen = cluster_mkey(ckey, c->ns, key, i + 1);
		rc = memcached_set_by_key(
		    m, hkey, hlen, ckey, klen, (const char *)p + off, n, 0, 0);
		if (memcached_failed(rc)) {
			r = -EIO;
			goto out;
		}
	}
	if (nchunks == 0)
		rc = memcached_set_by_key(m, hkey, hlen, hkey, hlen,
		    (const char *)one, CLUSTER_HEAD_LEN + len, 0, 0);
	else
		rc = memcached_set_by_key(m, hkey, hlen, hkey, hlen,
		    (const char *)head, CLUSTER_HEAD_LEN, 0, 0);
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
