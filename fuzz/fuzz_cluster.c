/*
 * fuzz_cluster - libFuzzer target: the cluster tier's item codec
 * (cache/cluster_codec.c), everything a memcached server (or whoever can
 * write to it) hands a reader: the head item's parse, the chunk-key parse
 * and the one check of a value (MAC with cluster_secret, then the
 * envelope, codec_env_open, against the key asked for).
 *
 * Input: a mode byte, then the bytes.  Every input goes through the
 * chunk-key parse (the bytes as a memcached key, up to 250 of them, never
 * NUL-terminated) and the head parse (the bytes as a head item, for chunks
 * of 1 KiB or CLUSTER_CHUNK: mode bit 0).  A head that parses with its
 * payload inline goes through cluster_value_open without and with a
 * secret; mode bit 1 reseals its envelope for the fixed key first, bit 2
 * also writes the right MAC, so that the fuzzer reaches the accepting
 * paths.  Invariants (abort on a breach): a parsed chunk key is the one
 * cluster_mkey makes for its index, within 1..n; a parsed head's count and
 * size fit its length and this client's chunk size; an accepted value
 * with a secret carries the MAC flag and the MAC of its bytes, and names
 * the key asked for, with the head's length.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "cache/cluster_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t key[CLUSTER_KEY_LEN] = {7, 1, 2, 3, 4, 5};
static const char secret[] = "fuzz_cluster's secret, 32 bytes";

static EVP_MAC_CTX *
mac_ctx(void)
{
	static EVP_MAC_CTX *ctx;
	OSSL_PARAM params[2];
	EVP_MAC *mac;

	if (ctx != NULL)
		return ctx;
	params[0] = OSSL_PARAM_construct_utf8_string(
	    OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	if ((mac = EVP_MAC_fetch(NULL, "HMAC", NULL)) == NULL ||
	    (ctx = EVP_MAC_CTX_new(mac)) == NULL ||
	    !EVP_MAC_init(
		ctx, (const uint8_t *)secret, sizeof(secret) - 1, params))
		abort();
	EVP_MAC_free(mac);
	return ctx;
}

static void
chunk_keys(const uint8_t *d, size_t n, uint32_t count)
{
	char hkey[CLUSTER_MKEY_MAX], want[CLUSTER_MKEY_MAX], *k;
	size_t hlen, klen = n > 250 ? 250 : n;
	uint32_t idx = 0;

	/* A copy of exactly klen bytes: ASan sees a read past them. */
	if ((k = malloc(klen ? klen : 1)) == NULL)
		return;
	memcpy(k, d, klen);
	hlen = cluster_mkey(hkey, CLUSTER_KEY_PREFIX, key, 0);
	if (cluster_chunk_index(k, klen, hkey, hlen, count, &idx) == 0) {
		if (idx < 1 || idx > count)
			abort();
		if (cluster_mkey(want, CLUSTER_KEY_PREFIX, key, idx) != klen ||
		    memcmp(want, k, klen) != 0)
			abort();
	}
	free(k);
}

static void
head(const uint8_t *d, size_t n, unsigned mode)
{
	size_t chunk = mode & 1 ? CLUSTER_CHUNK : CLUSTER_CHUNK_MIN;
	struct cluster_head h;
	struct cache_val v, in;
	uint8_t *item, *env, mac[CLUSTER_MAC_LEN];
	int r;

	if ((item = malloc(n ? n : 1)) == NULL)
		return;
	memcpy(item, d, n);
	if (n >= CLUSTER_HEAD_LEN && (mode & 2)) {
		/* Reseal: a sound envelope of the payload after the head. */
		env = item + CLUSTER_ITEM_HDR + CLUSTER_MAC_LEN;
		in.w = codec_get_le32(env + 8);
		in.h = codec_get_le32(env + 12);
		in.c = codec_get_le32(env + 16);
		in.dtype = codec_get_le32(env + 20) & 0xff;
		in.enc = codec_get_le32(env + 20) >> 8;
		in.src_w = codec_get_le32(env + 64);
		in.src_h = codec_get_le32(env + 68);
		in.data = item + CLUSTER_HEAD_LEN;
		in.len = n - CLUSTER_HEAD_LEN;
		in.prefix = NULL;
		codec_env_seal(env, key, &in);
		if ((mode & 4) && cluster_mac(mac_ctx(), item, env, in.data,
				      in.len, item + CLUSTER_ITEM_HDR) != 0)
			abort();
	}
	if (cluster_head_parse(item, n, chunk, &h, NULL) != 0)
		goto out;
	if (h.plen > CLUSTER_MAX_VALUE || h.item != item)
		abort();
	if (h.nchunks == 0) {
		if (h.csize != 0 || n != CLUSTER_HEAD_LEN + h.plen)
			abort();
	} else if (h.csize != chunk || n != CLUSTER_HEAD_LEN ||
		   (uint64_t)h.nchunks * h.csize < h.plen ||
		   (uint64_t)(h.nchunks - 1) * h.csize >= h.plen)
		abort();
	if (h.nchunks != 0)
		goto out;
	/* Inline: the envelope's header and payload are contiguous here. */
	env = item + CLUSTER_ITEM_HDR + CLUSTER_MAC_LEN;
	r = cluster_value_open(NULL, &h, env, key, &v, NULL);
	if (r == 0 &&
	    (v.len != h.plen || memcmp(env + 32, key, CLUSTER_KEY_LEN) != 0))
		abort();
	r = cluster_value_open(mac_ctx(), &h, env, key, &v, NULL);
	if (r == 0) {
		if (!(h.flags & CLUSTER_FLAG_MAC) || v.len != h.plen)
			abort();
		if (cluster_mac(mac_ctx(), item, env, env + CODEC_ENV_HDR,
			h.plen, mac) != 0 ||
		    memcmp(mac, h.mac, CLUSTER_MAC_LEN) != 0)
			abort();
	} else if (r != -EACCES && r != -EBADMSG)
		abort();
out:
	free(item);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	chunk_keys(data + 1, size - 1, 1u + (data[0] >> 3) * 4);
	head(data + 1, size - 1, data[0]);
	return 0;
}
