/*
 * cluster_codec.c - cache/ (the store), the cluster tier, its lowest
 * layer: the bytes of its memcached items (see cluster_int.h for the
 * layout).  Pure functions: no server, no state, no allocation but
 * OpenSSL's MAC context; they take untrusted bytes (a server, whoever
 * wrote to it, the fuzzer) and check every field before they use
 * it.  Calls nothing of cache/ but codec.c.
 */
#include <errno.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "cache/cluster_int.h"

#define FAIL(s)                                                                \
	do {                                                                   \
		if (why != NULL)                                               \
			*why = (s);                                            \
		return -EBADMSG;                                               \
	} while (0)

size_t
cluster_mkey(char buf[CLUSTER_MKEY_MAX], const char *ns,
    const uint8_t key[CLUSTER_KEY_LEN], uint32_t chunk)
{
	static const char hex[] = "0123456789abcdef";
	char digits[10];
	size_t n = strnlen(ns, CLUSTER_NS_MAX - 1), i;
	int d = 0;

	memcpy(buf, ns, n);
	for (i = 0; i < CLUSTER_KEY_LEN; i++) {
		buf[n++] = hex[key[i] >> 4];
		buf[n++] = hex[key[i] & 15];
	}
	if (chunk > 0) {
		buf[n++] = '#';
		for (; chunk > 0; chunk /= 10)
			digits[d++] = (char)('0' + chunk % 10);
		while (d > 0)
			buf[n++] = digits[--d];
	}
	buf[n] = '\0';
	return n;
}

int
cluster_chunk_index(const char *k, size_t klen, const char *hkey, size_t hlen,
    uint32_t n, uint32_t *idx)
{
	uint64_t v = 0;
	size_t i;

	/* hkey "#" then 1..10 digits, no leading zero. */
	if (klen < hlen + 2 || klen > hlen + 11 || memcmp(k, hkey, hlen) != 0 ||
	    k[hlen] != '#' || k[hlen + 1] == '0')
		return -EBADMSG;
	for (i = hlen + 1; i < klen; i++) {
		if (k[i] < '0' || k[i] > '9')
			return -EBADMSG;
		v = v * 10 + (uint64_t)(k[i] - '0'); /* < 10^10: no overflow */
	}
	if (v < 1 || v > n)
		return -EBADMSG;
	*idx = (uint32_t)v;
	return 0;
}

void
cluster_item_encode(uint8_t item[CLUSTER_ITEM_HDR], uint32_t flags,
    uint32_t nchunks, uint32_t csize)
{
	memcpy(item, CLUSTER_ITEM_MAGIC, 4);
	codec_put_le16(item + 4, CLUSTER_ITEM_VERSION);
	codec_put_le16(item + 6, flags);
	codec_put_le32(item + 8, nchunks);
	codec_put_le32(item + 12, csize);
}

int
cluster_head_parse(const uint8_t *v, size_t vlen, size_t chunk,
    struct cluster_head *h, const char **why)
{
	uint32_t flags, n, csize;
	uint64_t plen;

	if (vlen < CLUSTER_HEAD_LEN)
		FAIL("head shorter than its header");
	if (memcmp(v, CLUSTER_ITEM_MAGIC, 4) != 0)
		FAIL("bad magic");
	if (codec_get_le16(v + 4) != CLUSTER_ITEM_VERSION)
		FAIL("another item version");
	flags = codec_get_le16(v + 6);
	if ((flags & ~CLUSTER_FLAG_MAC) != 0)
		FAIL("unknown flags");
	n = codec_get_le32(v + 8);
	csize = codec_get_le32(v + 12);
	plen = codec_get_le64(v + CLUSTER_ITEM_HDR + CLUSTER_MAC_LEN + 24);
	if (plen > CLUSTER_MAX_VALUE)
		FAIL("payload over CLUSTER_MAX_VALUE");
	if (n == 0) {
		if (csize != 0)
			FAIL("a chunk size without chunks");
		if (vlen - CLUSTER_HEAD_LEN != plen)
			FAIL("inline payload length differs from the header's");
	} else {
		if (vlen != CLUSTER_HEAD_LEN)
			FAIL("a chunked head with bytes after its header");
		if (csize != chunk)
			FAIL("another chunk size than this client's");
		/* plen >= 1 and n == ceil(plen / csize), in 64 bits. */
		if (plen == 0 || (plen + csize - 1) / csize != n)
			FAIL("chunk count does not fit the length");
	}
	h->flags = flags;
	h->nchunks = n;
	h->csize = csize;
	h->plen = plen;
	h->item = v;
	h->mac = v + CLUSTER_ITEM_HDR;
	h->env = v + CLUSTER_ITEM_HDR + CLUSTER_MAC_LEN;
	h->payload = n == 0 ? v + CLUSTER_HEAD_LEN : NULL;
	return 0;
}

int
cluster_mac(const EVP_MAC_CTX *mac, const uint8_t item[CLUSTER_ITEM_HDR],
    const uint8_t env[CODEC_ENV_HDR], const uint8_t *payload, size_t plen,
    uint8_t out[CLUSTER_MAC_LEN])
{
	EVP_MAC_CTX *ctx;
	size_t outl = 0;
	int ok;

	if ((ctx = EVP_MAC_CTX_dup(mac)) == NULL)
		return -ENOMEM;
	ok = EVP_MAC_update(ctx, item, CLUSTER_ITEM_HDR) &&
	     EVP_MAC_update(ctx, env, CODEC_ENV_HDR) &&
	     (plen == 0 || EVP_MAC_update(ctx, payload, plen)) &&
	     EVP_MAC_final(ctx, out, &outl, CLUSTER_MAC_LEN) &&
	     outl == CLUSTER_MAC_LEN;
	EVP_MAC_CTX_free(ctx);
	return ok ? 0 : -ENOMEM;
}

int
cluster_value_open(const EVP_MAC_CTX *mac, const struct cluster_head *h,
    const uint8_t *env, const uint8_t key[CLUSTER_KEY_LEN],
    struct cache_val *out, const char **why)
{
	uint8_t want[CLUSTER_MAC_LEN];
	int r;

	if (mac != NULL) {
		if (!(h->flags & CLUSTER_FLAG_MAC)) {
			if (why != NULL)
				*why = "no MAC";
			return -EACCES;
		}
		if ((r = cluster_mac(mac, h->item, env, env + CODEC_ENV_HDR,
			 h->plen, want)) != 0) {
			if (why != NULL)
				*why = "out of memory";
			return r;
		}
		if (CRYPTO_memcmp(want, h->mac, CLUSTER_MAC_LEN) != 0) {
			if (why != NULL)
				*why = "wrong MAC";
			return -EACCES;
		}
	}
	/* The envelope's header was copied from the head: the same bytes. */
	if (codec_env_open(env, CODEC_ENV_HDR + h->plen, key, out, why) != 0)
		return -EBADMSG;
	return 0;
}
