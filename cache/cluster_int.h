/*
 * cluster_int.h - cache/ (the store), the cluster tier: what its files
 * share (cluster.c: open, close, stats and errors; cluster_conf.c: the
 * server list and the auth and secret files; cluster_codec.c: the items'
 * bytes, pure; cluster_io.c: get and put).  Not for use outside
 * cache/cluster*.c and the fuzz target of the codec.
 */
#ifndef FEEDFS_CLUSTER_INT_H
#define FEEDFS_CLUSTER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libmemcached/memcached.h>
#include <libmemcachedutil-1.0/pool.h>
#include <openssl/evp.h>

#include "cache/cluster.h"
#include "cache/codec.h"

/* ---- the items' bytes (cluster_codec.c; no server, no state) ---------- */

/*
 * Head item value (all numbers little endian):
 *
 *	0	"FFCL"
 *	4	version (u16): CLUSTER_ITEM_VERSION
 *	6	flags (u16): CLUSTER_FLAG_MAC when the MAC field is one
 *	8	chunk count (u32): 0 when the payload follows the head
 *	12	chunk size (u32): payload bytes per chunk item (0 with none)
 *	16	MAC (32 bytes): HMAC-SHA256 under the secret of bytes 0..15,
 *		then the envelope (header and payload); zeros without
 *	48	the envelope's header (codec.h, CODEC_ENV_HDR bytes)
 *	128	the payload, when the chunk count is 0
 *
 * Chunk item "NSHEX#I" (I = 1..count in decimal, no leading zero):
 * payload bytes (I - 1) * size .. I * size, the last one shorter.
 *
 * NS, the namespace of a client's items: "ffc2:" without a secret,
 * "ffc2:kID:" with one, ID the first CLUSTER_KEYID_LEN bytes in hex of
 * HMAC-SHA256(secret, CLUSTER_KEYID_LABEL): a client reads and writes
 * only the items of its own secret (or of none), so nodes of different
 * secrets never read each other's values as bad MACs, nor overwrite or
 * evict them; the ID names the secret without giving it away.
 */
#define CLUSTER_KEY_PREFIX "ffc2:"
#define CLUSTER_KEYID_LEN 8
#define CLUSTER_KEYID_LABEL "feedfs cluster key id"
/* "ffc2:k" + 16 hex + ":" + NUL */
#define CLUSTER_NS_MAX (sizeof(CLUSTER_KEY_PREFIX) + 2 + 2 * CLUSTER_KEYID_LEN)
#define CLUSTER_ITEM_MAGIC "FFCL"
#define CLUSTER_ITEM_VERSION 2
#define CLUSTER_FLAG_MAC 1u
#define CLUSTER_ITEM_HDR 16
#define CLUSTER_MAC_LEN 32
#define CLUSTER_HEAD_LEN (CLUSTER_ITEM_HDR + CLUSTER_MAC_LEN + CODEC_ENV_HDR)
/* NS + 64 hex + "#" + up to 10 digits + NUL */
#define CLUSTER_MKEY_MAX (CLUSTER_NS_MAX + 2 * CLUSTER_KEY_LEN + 12)

/* A head item, parsed: pointers into the item's bytes. */
struct cluster_head {
	uint32_t flags, nchunks, csize;
	uint64_t plen;		/* the envelope's payload length */
	const uint8_t *item;	/* CLUSTER_ITEM_HDR bytes */
	const uint8_t *mac;	/* CLUSTER_MAC_LEN bytes */
	const uint8_t *env;	/* CODEC_ENV_HDR bytes */
	const uint8_t *payload; /* plen bytes when nchunks is 0, else NULL */
};

/*
 * The memcached key of key's head (chunk 0) or chunk in the namespace ns
 * (a NUL-terminated NS, shorter than CLUSTER_NS_MAX) into buf; its length.
 */
size_t cluster_mkey(char buf[CLUSTER_MKEY_MAX], const char *ns,
    const uint8_t key[CLUSTER_KEY_LEN], uint32_t chunk);
/*
 * Which chunk of the head hkey (hlen bytes) the memcached key k (klen
 * bytes, not NUL-terminated) names: 0 and *idx in 1..n, or -EBADMSG.
 * Reads only k[0..klen).
 */
int cluster_chunk_index(const char *k, size_t klen, const char *hkey,
    size_t hlen, uint32_t n, uint32_t *idx);
/*
 * Parse the head item v (vlen bytes) for a client whose chunk size is
 * chunk: magic, version, flags, a payload length within
 * CLUSTER_MAX_VALUE, and either the payload inline (count and size 0, the
 * item exactly that long) or a head alone whose size is chunk and whose
 * count is the length's.  0 and h filled, or -EBADMSG and why.  The
 * envelope itself is checked by cluster_value_open.
 */
int cluster_head_parse(const uint8_t *v, size_t vlen, size_t chunk,
    struct cluster_head *h, const char **why);
/* Write a head's first CLUSTER_ITEM_HDR bytes. */
void cluster_item_encode(uint8_t item[CLUSTER_ITEM_HDR], uint32_t flags,
    uint32_t nchunks, uint32_t csize);
/*
 * The MAC of a value: HMAC-SHA256 (mac, a context keyed with the secret)
 * of item[CLUSTER_ITEM_HDR], then env (the envelope's header and plen
 * bytes of payload, contiguous or not).  0, or -ENOMEM.
 */
int cluster_mac(const EVP_MAC_CTX *mac, const uint8_t item[CLUSTER_ITEM_HDR],
    const uint8_t env[CODEC_ENV_HDR], const uint8_t *payload, size_t plen,
    uint8_t out[CLUSTER_MAC_LEN]);
/*
 * The one check of a value read for key: with mac (a keyed context; NULL
 * without a secret) the head must carry a MAC and it must be the value's
 * (else -EACCES); then codec_env_open on env (CODEC_ENV_HDR + h->plen
 * bytes: the header and the payload) against key (else -EBADMSG).  0 and
 * out's shape and len filled (out->data NULL), and why set on failure.
 */
int cluster_value_open(const EVP_MAC_CTX *mac, const struct cluster_head *h,
    const uint8_t *env, const uint8_t key[CLUSTER_KEY_LEN],
    struct cache_val *out, const char **why);

/* ---- the client ------------------------------------------------------- */

/*
 * Lock order: none.  The counters are atomics; errlock guards only the
 * error text.
 */
struct cluster {
	memcached_st *master; /* the template the pool clones */
	memcached_pool_st *pool;
	size_t chunk;	       /* payload bytes per chunk item */
	unsigned pool_wait_ms; /* how long a call waits for a handle */
	EVP_MAC_CTX *mac;      /* keyed with the secret; NULL without one */
	char ns[CLUSTER_NS_MAX]; /* the items' namespace (NS above) */
	/*
	 * What cluster_open's probe found (cluster_problem), "" when
	 * nothing; off: every server that answered refused this client's
	 * credentials (or their lack), and no server is asked.  Set at open.
	 */
	char problem[1024];
	bool off;
	unsigned refused;

	_Atomic uint64_t hits, misses, errors, bytes_in, bytes_out, puts,
	    put_errors, skipped_large, bad_checksum, bad_mac, missing_chunks,
	    pool_waits;

	pthread_mutex_t errlock;
	char first[256];      /* the first failure; guarded by errlock */
	char errtext[256];    /* the latest; guarded by errlock */
	atomic_bool failed;   /* a failure happened */
	atomic_bool reported; /* cluster_error_once said it */
};

struct server {
	char host[256];
	unsigned port;
};

/* NOTFOUND and END are answers; any other failure is a server's. */
static inline bool
cluster_server_failed(memcached_return_t rc)
{
	return memcached_failed(rc) && rc != MEMCACHED_NOTFOUND &&
	       rc != MEMCACHED_END;
}

/*
 * What cluster_chunks_get asks of its caller (a prefix's chunks,
 * cluster_io.c; a batch's, cluster_blob.c): mkey writes chunk i's
 * memcached key (1..n) into buf (kmax bytes) and returns its length;
 * take gets chunk idx, checked (named once, of its length), at payload
 * offset off: len bytes at v, valid until it returns; nonzero stops the
 * taking (the rest is drained) and is returned.
 */
struct cluster_chunks {
	size_t kmax;
	size_t (*mkey)(void *arg, uint32_t i, char *buf);
	int (*take)(void *arg, uint32_t idx, uint64_t off, const uint8_t *v,
	    size_t len);
	void *arg;
};

/*
 * Multi-get the n chunks (of csize bytes, the last the rest of total) of
 * the head hkey (hlen bytes: the server key, so they all come from its
 * server), each checked (cluster_chunk_index names one of the n, not
 * seen before; its length) before cc->take has it.  0 (all n taken),
 * -ENOENT (one missing), -ENODATA (the multi-get itself found nothing),
 * -EBADMSG (a chunk of the wrong name or length), -EIO with *rcp (a
 * server failed), -ENOMEM, or what take returned.
 */
int cluster_chunks_get(memcached_st *m, const char *hkey, size_t hlen,
    uint32_t n, uint64_t csize, uint64_t total, const struct cluster_chunks *cc,
    memcached_return_t *rcp);

/* printf into err[errlen] (nothing when err is NULL or errlen 0). */
void cluster_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Parse the comma-separated "HOST:PORT" list servers into
 * sv[CLUSTER_MAX_SERVERS]; *n set to their number on success.  -EINVAL
 * with a message in err naming the server.
 */
int cluster_parse_servers(
    const char *servers, struct server *sv, int *n, char *err, size_t errlen);

/*
 * Read user and password from the auth file path into user[ulen] and
 * pass[plen]; the caller wipes pass.  0, or -errno with a message in err.
 */
int cluster_read_auth(const char *path, char *user, size_t ulen, char *pass,
    size_t plen, char *err, size_t errlen);

/*
 * Read the secret file path into buf[CLUSTER_SECRET_MAX] (its bytes less
 * one trailing newline); *len its length, CLUSTER_SECRET_MIN..MAX.  The
 * caller wipes buf.  0, or -errno with a message in err.
 */
int cluster_read_secret(
    const char *path, uint8_t *buf, size_t *len, char *err, size_t errlen);

#endif
