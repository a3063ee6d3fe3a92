/*
 * cluster_blob.c - cache/ (the store), the cluster tier's blobs, claims
 * and notes on memcached (see cluster_blob.h for the contract,
 * cluster_blob_int.h for the items' layout).  Beside cluster_io.c, on the
 * same client (cluster_int.h: its pool, its secret's HMAC context, its
 * error text, the chunks' multi-get); above cluster_blob_codec.c, whose
 * functions check every byte a server returns.  This file moves the
 * bytes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "cache/cluster_blob_int.h"
#include "cache/cluster_int.h"

/*
 * The namespace of c's blobs, claims and notes (cluster_blob_int.h's NS):
 * "ffb1:" then what follows "ffc2:" in its prefixes' (the key ID of its
 * secret, if any).
 */
static void
blob_ns(const struct cluster *c, char ns[CLUSTER_BLOB_NS_MAX])
{
	_Static_assert(CLUSTER_NS_MAX - sizeof(CLUSTER_KEY_PREFIX) +
			       sizeof(CLUSTER_BLOB_PREFIX) <=
			   CLUSTER_BLOB_NS_MAX,
	    "CLUSTER_BLOB_NS_MAX");
	snprintf(ns, CLUSTER_BLOB_NS_MAX, "%s%s", CLUSTER_BLOB_PREFIX,
	    c->ns + sizeof(CLUSTER_KEY_PREFIX) - 1);
}

/*
 * A handle of c's pool, or NULL with *r: -EBUSY (none free in time), -EIO
 * (the tier is off: no server takes this client's credentials).
 */
static memcached_st *
take(struct cluster *c, int *r)
{
	struct timespec wait = {
	    c->pool_wait_ms / 1000, (long)(c->pool_wait_ms % 1000) * 1000000};
	memcached_return_t rc = MEMCACHED_SUCCESS;
	memcached_st *m;

	if (c->off) {
		*r = -EIO;
		return NULL;
	}
	if ((m = memcached_pool_fetch(c->pool, &wait, &rc)) == NULL)
		*r = rc == MEMCACHED_TIMEOUT || rc == MEMCACHED_NOTFOUND ||
			     rc == MEMCACHED_IN_PROGRESS
			 ? -EBUSY
			 : -ENOMEM;
	return m;
}

static void
give(struct cluster *c, memcached_st *m)
{
	memcached_pool_release(c->pool, m);
}

/*
 * A server failed (rc on m): keep its text for cluster_last_error, as
 * cluster_io.c does for the prefixes' calls.  -EIO.
 */
static int
failed(struct cluster *c, memcached_st *m)
{
	pthread_mutex_lock(&c->errlock);
	snprintf(c->errtext, sizeof(c->errtext), "memcached: %s",
	    memcached_last_error_message(m));
	if (c->first[0] == '\0')
		memcpy(c->first, c->errtext, sizeof(c->first));
	pthread_mutex_unlock(&c->errlock);
	atomic_store(&c->failed, true);
	return -EIO;
}

/* The GMAC key of c's secret (mackey), or NULL without one: 0, -ENOMEM. */
static int
mac_key(struct cluster *c, uint8_t key[32], const uint8_t **mackey)
{
	*mackey = NULL;
	if (c->mac == NULL)
		return 0;
	if (cluster_blob_mac_key(c->mac, key) != 0)
		return -ENOMEM;
	*mackey = key;
	return 0;
}

/* ---- blobs ----------------------------------------------------------- */

/* A batch's chunks scattered into dst, each through the tag while they
 * come in order, while its bytes are in the cache. */
struct into_iov {
	struct cluster *c;
	const char *ns;
	const uint8_t *key;
	const struct iovec *dst;
	int n;
	struct cluster_blob_tagger *tag;
	uint32_t next; /* the chunk the tag wants next; 0: out of order */
};

static size_t
blob_mkey(void *arg, uint32_t i, char *buf)
{
	struct into_iov *x = arg;

	return cluster_blob_mkey(buf, x->ns, x->key, i, false);
}

static int
blob_take(void *arg, uint32_t idx, uint64_t off, const uint8_t *v, size_t len)
{
	struct into_iov *x = arg;

	cluster_blob_scatter(x->dst, x->n, off, v, len);
	if (x->next != 0 && idx == x->next &&
	    cluster_blob_tag_update(x->tag, v, len) == 0)
		x->next++;
	else
		x->next = 0; /* out of order: tagged over dst after */
	return 0;
}

/*
 * Fetch the h->nchunks chunks of the head hkey (hlen bytes) into dst at
 * their offsets: 0, -ENOENT (one missing), -EBADMSG (a chunk of the wrong
 * name or length), -EIO, -ENOMEM.  While they come in order, each goes
 * through tag as it is copied, while its bytes are in the cache: *tagged
 * then says that tag saw them all.
 */
static int
get_chunks(struct cluster *c, memcached_st *m, const char *ns,
    const uint8_t key[CLUSTER_KEY_LEN], const char *hkey, size_t hlen,
    const struct cluster_blob_head *h, const struct iovec *dst, int n,
    struct cluster_blob_tagger *tag, bool *tagged)
{
	struct into_iov x = {c, ns, key, dst, n, tag, 1};
	struct cluster_chunks cc = {
	    CLUSTER_BLOB_MKEY_MAX, blob_mkey, blob_take, &x};
	memcached_return_t rc;
	int r = cluster_chunks_get(
	    m, hkey, hlen, h->nchunks, h->csize, h->len, &cc, &rc);

	if (r == -EIO)
		r = failed(c, m);
	else if (r == -ENODATA)
		r = -ENOENT;
	*tagged = r == 0 && x.next == h->nchunks + 1;
	return r;
}

int
cluster_blob_get(struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN],
    const struct iovec *dst, int n)
{
	char ns[CLUSTER_BLOB_NS_MAX];
	char hkey[CLUSTER_BLOB_MKEY_MAX];
	uint8_t mk[32], tag[CLUSTER_BLOB_TAG];
	const uint8_t *mackey;
	struct cluster_blob_head h;
	struct cluster_blob_tagger tagger;
	memcached_return_t rc = MEMCACHED_SUCCESS;
	memcached_st *m;
	uint8_t *val;
	size_t hlen, vlen = 0;
	uint32_t flags;
	bool begun = false, tagged = false;
	int r = 0;

	if ((m = take(c, &r)) == NULL)
		return r;
	blob_ns(c, ns);
	hlen = cluster_blob_mkey(hkey, ns, key, 0, false);
	val = (uint8_t *)memcached_get(m, hkey, hlen, &vlen, &flags, &rc);
	if (val == NULL) {
		r = cluster_server_failed(rc) ? failed(c, m) : -ENOENT;
		goto out;
	}
	if (cluster_blob_head_parse(val, vlen, key, c->chunk, &h, NULL) != 0 ||
	    h.len != cluster_blob_iov_len(dst, n)) {
		r = -EBADMSG;
		goto out;
	}
	/* A secret takes MACs only; without one, none (it cannot check). */
	if ((c->mac != NULL) != ((h.flags & CLUSTER_BLOB_MAC) != 0)) {
		r = -EACCES;
		goto out;
	}
	if ((r = mac_key(c, mk, &mackey)) != 0 ||
	    (r = cluster_blob_tag_begin(&tagger, mackey, val)) != 0)
		goto out;
	begun = true;
	if (h.nchunks > 0 && (r = get_chunks(c, m, ns, key, hkey, hlen, &h, dst,
				  n, &tagger, &tagged)) != 0)
		goto out;
	if (h.nchunks == 0)
		tagged = true;
	begun = false;
	if (tagged)
		r = cluster_blob_tag_final(&tagger, tag);
	else {
		cluster_blob_tag_free(&tagger);
		r = cluster_blob_tag(mackey, val, dst, n, tag);
	}
	if (r != 0)
		goto out;
	if (CRYPTO_memcmp(tag, h.tag, CLUSTER_BLOB_TAG) != 0)
		r = mackey != NULL ? -EACCES : -EBADMSG;
out:
	if (begun)
		cluster_blob_tag_free(&tagger);
	give(c, m);
	free(val);
	OPENSSL_cleanse(mk, sizeof(mk));
	return r;
}

int
cluster_blob_put(struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN],
    const struct iovec *src, int n, unsigned ttl)
{
	char ns[CLUSTER_BLOB_NS_MAX];
	char hkey[CLUSTER_BLOB_MKEY_MAX], ckey[CLUSTER_BLOB_MKEY_MAX];
	uint8_t head[CLUSTER_BLOB_HEAD], nonce[CLUSTER_BLOB_NONCE] = {0};
	uint8_t mk[32], *tmp = NULL;
	const uint8_t *mackey;
	uint64_t len = cluster_blob_iov_len(src, n);
	size_t hlen, cs = c->chunk;
	memcached_return_t rc;
	memcached_st *m;
	uint32_t nc;
	int r = 0;

	if (len > CLUSTER_BLOB_MAX)
		return -EFBIG;
	if ((r = mac_key(c, mk, &mackey)) != 0)
		return r;
	if (mackey != NULL && RAND_bytes(nonce, sizeof(nonce)) != 1) {
		OPENSSL_cleanse(mk, sizeof(mk));
		return -ENOMEM;
	}
	cluster_blob_head_encode(head, key,
	    mackey != NULL ? CLUSTER_BLOB_MAC : 0, (uint32_t)cs, len, nonce);
	r = cluster_blob_tag(mackey, head, src, n, head + CLUSTER_BLOB_TAGGED);
	OPENSSL_cleanse(mk, sizeof(mk));
	if (r != 0)
		return r;
	if ((m = take(c, &r)) == NULL)
		return r;
	blob_ns(c, ns);
	hlen = cluster_blob_mkey(hkey, ns, key, 0, false);
	nc = (uint32_t)((len + cs - 1) / cs);
	/* The chunks first, then the head that makes them reachable. */
	for (uint32_t i = 0; i < nc; i++) {
		uint64_t off = (uint64_t)i * cs, at = off;
		size_t k = len - off < cs ? (size_t)(len - off) : cs;
		const char *p = NULL;
		size_t klen;
		int s;

		/* A chunk within one buffer goes as it is. */
		for (s = 0; s < n && at >= src[s].iov_len; s++)
			at -= src[s].iov_len;
		if (s < n && src[s].iov_len - at >= k)
			p = (const char *)src[s].iov_base + at;
		else {
			if (tmp == NULL && (tmp = malloc(cs)) == NULL) {
				r = -ENOMEM;
				goto out;
			}
			cluster_blob_gather(src, n, off, tmp, k);
			p = (const char *)tmp;
		}
		klen = cluster_blob_mkey(ckey, ns, key, i + 1, false);
		rc = memcached_set_by_key(
		    m, hkey, hlen, ckey, klen, p, k, (time_t)ttl, 0);
		if (memcached_failed(rc)) {
			r = failed(c, m);
			goto out;
		}
	}
	rc = memcached_set_by_key(m, hkey, hlen, hkey, hlen, (const char *)head,
	    sizeof(head), (time_t)ttl, 0);
	if (memcached_failed(rc))
		r = failed(c, m);
out:
	give(c, m);
	free(tmp);
	return r;
}

int
cluster_blob_has(struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN])
{
	char ns[CLUSTER_BLOB_NS_MAX];
	char hkey[CLUSTER_BLOB_MKEY_MAX];
	memcached_return_t rc = MEMCACHED_SUCCESS;
	memcached_st *m;
	size_t vlen = 0;
	uint32_t flags;
	char *val;
	int r = 0;

	if ((m = take(c, &r)) == NULL)
		return r;
	blob_ns(c, ns);
	val = memcached_get(m, hkey, cluster_blob_mkey(hkey, ns, key, 0, false),
	    &vlen, &flags, &rc);
	if (val != NULL)
		r = 1;
	else
		r = cluster_server_failed(rc) ? failed(c, m) : 0;
	give(c, m);
	free(val);
	return r;
}

/* ---- claims ---------------------------------------------------------- */

/*
 * A small item v (len bytes) under the memcached key mk (ml bytes):
 * added (-EEXIST when there) or set.  0, -EEXIST, -EIO, -EBUSY.
 */
static int
put_small(struct cluster *c, const char *mk, size_t ml, const void *v,
    size_t len, unsigned ttl, bool add)
{
	memcached_return_t rc;
	memcached_st *m;
	int r = 0;

	if ((m = take(c, &r)) == NULL)
		return r;
	rc = add ? memcached_add(m, mk, ml, v, len, (time_t)ttl, 0)
		 : memcached_set(m, mk, ml, v, len, (time_t)ttl, 0);
	if (rc == MEMCACHED_NOTSTORED || rc == MEMCACHED_DATA_EXISTS)
		r = -EEXIST;
	else if (memcached_failed(rc))
		r = failed(c, m);
	give(c, m);
	return r;
}

/* A claim's set (add: only if free): 0, -EEXIST, -EIO, -EBUSY. */
static int
claim_store(struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN],
    const char *who, unsigned ttl, bool add)
{
	char ck[CLUSTER_BLOB_MKEY_MAX], ns[CLUSTER_BLOB_NS_MAX];
	size_t cl, wl = strlen(who);

	blob_ns(c, ns);
	cl = cluster_blob_mkey(ck, ns, key, 0, true);
	if (wl > CLUSTER_WHO_MAX)
		wl = CLUSTER_WHO_MAX;
	if (ttl < 1 || ttl > 3600)
		return -EINVAL;
	return put_small(c, ck, cl, who, wl, ttl, add);
}

int
cluster_claim(struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN],
    const char *who, unsigned ttl)
{
	return claim_store(c, key, who, ttl, true);
}

int
cluster_claim_renew(struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN],
    const char *who, unsigned ttl)
{
	return claim_store(c, key, who, ttl, false);
}

int
cluster_claim_drop(struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN])
{
	char ns[CLUSTER_BLOB_NS_MAX];
	char ck[CLUSTER_BLOB_MKEY_MAX];
	size_t cl;
	memcached_return_t rc;
	memcached_st *m;
	int r = 0;

	blob_ns(c, ns);
	cl = cluster_blob_mkey(ck, ns, key, 0, true);
	if ((m = take(c, &r)) == NULL)
		return r;
	rc = memcached_delete(m, ck, cl, 0);
	if (cluster_server_failed(rc))
		r = failed(c, m);
	give(c, m);
	return r;
}

int
cluster_claim_held(
    struct cluster *c, const uint8_t key[CLUSTER_KEY_LEN], char *who)
{
	char ck[CLUSTER_BLOB_MKEY_MAX], ns[CLUSTER_BLOB_NS_MAX];
	size_t cl, vlen = 0;
	memcached_return_t rc = MEMCACHED_SUCCESS;
	memcached_st *m;
	uint32_t flags;
	char *val;
	int r = 0;

	blob_ns(c, ns);
	cl = cluster_blob_mkey(ck, ns, key, 0, true);
	if ((m = take(c, &r)) == NULL)
		return r;
	val = memcached_get(m, ck, cl, &vlen, &flags, &rc);
	/* An empty value is held too: libmemcached hands it as NULL. */
	if (val != NULL || rc == MEMCACHED_SUCCESS) {
		r = 1;
		if (who != NULL)
			cluster_claim_who(val != NULL ? val : "", vlen, who);
	} else
		r = cluster_server_failed(rc) ? failed(c, m) : 0;
	give(c, m);
	free(val);
	return r;
}

/* ---- notes ------------------------------------------------------------ */

static int
note_store(struct cluster *c, const char *name, const void *v, size_t len,
    unsigned ttl, bool add)
{
	char ns[CLUSTER_BLOB_NS_MAX];
	char nk[CLUSTER_BLOB_MKEY_MAX];
	size_t kl;

	blob_ns(c, ns);
	kl = cluster_blob_note_mkey(nk, ns, name);
	if (kl == 0 || len > CLUSTER_NOTE_MAX)
		return -EINVAL;
	return put_small(c, nk, kl, v, len, ttl, add);
}

int
cluster_note_set(struct cluster *c, const char *name, const void *v, size_t len,
    unsigned ttl)
{
	return note_store(c, name, v, len, ttl, false);
}

int
cluster_note_add(struct cluster *c, const char *name, const void *v, size_t len,
    unsigned ttl)
{
	return note_store(c, name, v, len, ttl, true);
}

int
cluster_note_get(struct cluster *c, const char *const *names, size_t n,
    cluster_note_fn found, void *arg)
{
	char ns[CLUSTER_BLOB_NS_MAX];
	char(*keys)[CLUSTER_BLOB_MKEY_MAX] = NULL;
	const char **kp = NULL;
	size_t *kl = NULL;
	memcached_result_st resbuf, *res = NULL;
	memcached_return_t rc;
	memcached_st *m = NULL;
	int r = 0, got = 0;

	if (n == 0)
		return 0;
	blob_ns(c, ns);
	keys = calloc(n, sizeof(*keys));
	kp = calloc(n, sizeof(*kp));
	kl = calloc(n, sizeof(*kl));
	if (keys == NULL || kp == NULL || kl == NULL) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if ((kl[i] = cluster_blob_note_mkey(keys[i], ns, names[i])) == 0) {
			r = -EINVAL;
			goto out;
		}
		kp[i] = keys[i];
	}
	if ((m = take(c, &r)) == NULL)
		goto out;
	rc = memcached_mget(m, kp, kl, n);
	if (memcached_failed(rc)) {
		r = cluster_server_failed(rc) ? failed(c, m) : 0;
		goto out;
	}
	if ((res = memcached_result_create(m, &resbuf)) == NULL) {
		r = -ENOMEM;
		goto out;
	}
	while (memcached_fetch_result(m, res, &rc) != NULL) {
		const char *k = memcached_result_key_value(res);
		size_t klen = memcached_result_key_length(res);
		size_t vlen = memcached_result_length(res);

		if (vlen > CLUSTER_NOTE_MAX)
			continue;
		for (size_t i = 0; i < n; i++)
			if (kl[i] == klen && memcmp(kp[i], k, klen) == 0) {
				found(arg, i,
				    (const uint8_t *)memcached_result_value(
					res),
				    vlen);
				got++;
				break;
			}
	}
	if (cluster_server_failed(rc))
		r = failed(c, m);
	else
		r = got;
out:
	if (res != NULL)
		memcached_result_free(res);
	if (m != NULL)
		give(c, m);
	free(kl);
	free(kp);
	free(keys);
	return r;
}
