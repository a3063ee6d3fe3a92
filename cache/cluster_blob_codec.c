/*
 * cluster_blob_codec.c - cache/ (the store), the cluster tier's blobs,
 * their lowest layer: the items' bytes (see cluster_blob_int.h for the
 * layout).  Pure functions: no server, no state; they take untrusted
 * bytes (a server, whoever wrote to it, the fuzzer) and check every field
 * before they use it.  Calls nothing of cache/ but codec.h's byte order
 * helpers.
 */
#include <errno.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <xxhash.h>

#include "cache/cluster_blob_int.h"
#include "cache/codec.h"

#define FAIL(s)                                                                \
	do {                                                                   \
		if (why != NULL)                                               \
			*why = (s);                                            \
		return -EBADMSG;                                               \
	} while (0)

static const char hex[] = "0123456789abcdef";

size_t
cluster_blob_mkey(char buf[CLUSTER_BLOB_MKEY_MAX], const char *ns,
    const uint8_t key[CLUSTER_KEY_LEN], uint32_t chunk, bool claim)
{
	char digits[10];
	size_t n = strlen(ns);
	int d = 0;

	memcpy(buf, ns, n);
	for (size_t i = 0; i < CLUSTER_KEY_LEN; i++) {
		buf[n++] = hex[key[i] >> 4];
		buf[n++] = hex[key[i] & 15];
	}
	if (claim) {
		buf[n++] = ':';
		buf[n++] = 'c';
	} else if (chunk > 0) {
		buf[n++] = '#';
		for (; chunk > 0; chunk /= 10)
			digits[d++] = (char)('0' + chunk % 10);
		while (d > 0)
			buf[n++] = digits[--d];
	}
	buf[n] = '\0';
	return n;
}

size_t
cluster_blob_note_mkey(
    char buf[CLUSTER_BLOB_MKEY_MAX], const char *ns, const char *name)
{
	size_t n = strlen(ns), len = strlen(name);

	if (len == 0 || len > CLUSTER_NOTE_NAME_MAX)
		return 0;
	for (size_t i = 0; i < len; i++) {
		char ch = name[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			(ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ||
			ch == ':' || ch == '/' || ch == '-'))
			return 0;
	}
	memcpy(buf, ns, n);
	memcpy(buf + n, "n:", 2);
	memcpy(buf + n + 2, name, len + 1);
	return n + 2 + len;
}

void
cluster_blob_head_encode(uint8_t head[CLUSTER_BLOB_HEAD],
    const uint8_t key[CLUSTER_KEY_LEN], uint32_t flags, uint32_t csize,
    uint64_t len, const uint8_t nonce[CLUSTER_BLOB_NONCE])
{
	memset(head, 0, CLUSTER_BLOB_HEAD);
	memcpy(head, CLUSTER_BLOB_MAGIC, 4);
	codec_put_le16(head + 4, CLUSTER_BLOB_VERSION);
	codec_put_le16(head + 6, flags);
	codec_put_le32(head + 8, (uint32_t)((len + csize - 1) / csize));
	codec_put_le32(head + 12, csize);
	codec_put_le64(head + 16, len);
	memcpy(head + 24, nonce, CLUSTER_BLOB_NONCE);
	memcpy(head + 40, key, CLUSTER_KEY_LEN);
}

int
cluster_blob_head_parse(const uint8_t *v, size_t vlen,
    const uint8_t key[CLUSTER_KEY_LEN], size_t csize,
    struct cluster_blob_head *h, const char **why)
{
	static const uint8_t zeros[CLUSTER_BLOB_NONCE];
	uint32_t flags, n, cs;
	uint64_t len;

	if (vlen != CLUSTER_BLOB_HEAD)
		FAIL("a head of another length");
	if (memcmp(v, CLUSTER_BLOB_MAGIC, 4) != 0)
		FAIL("bad magic");
	if (codec_get_le16(v + 4) != CLUSTER_BLOB_VERSION)
		FAIL("another blob version");
	flags = codec_get_le16(v + 6);
	if ((flags & ~CLUSTER_BLOB_MAC) != 0)
		FAIL("unknown flags");
	n = codec_get_le32(v + 8);
	cs = codec_get_le32(v + 12);
	len = codec_get_le64(v + 16);
	if (codec_get_le32(v + 36) != 0)
		FAIL("reserved bytes set");
	if (!(flags & CLUSTER_BLOB_MAC) &&
	    memcmp(v + 24, zeros, CLUSTER_BLOB_NONCE) != 0)
		FAIL("a nonce without a MAC");
	if (memcmp(v + 40, key, CLUSTER_KEY_LEN) != 0)
		FAIL("another key's blob");
	if (len > CLUSTER_BLOB_MAX)
		FAIL("length over CLUSTER_BLOB_MAX");
	if (cs != csize)
		FAIL("another chunk size than this client's");
	/* cs >= 1 (the client's); n == ceil(len / cs), in 64 bits. */
	if (cs == 0 || (len + cs - 1) / cs != n)
		FAIL("chunk count does not fit the length");
	h->flags = flags;
	h->nchunks = n;
	h->csize = cs;
	h->len = len;
	h->nonce = v + 24;
	h->tag = v + CLUSTER_BLOB_TAGGED;
	return 0;
}

int
cluster_blob_mac_key(const EVP_MAC_CTX *hmac, uint8_t out[32])
{
	EVP_MAC_CTX *ctx;
	size_t outl = 0;
	int ok;

	if ((ctx = EVP_MAC_CTX_dup(hmac)) == NULL)
		return -ENOMEM;
	ok = EVP_MAC_update(ctx, (const uint8_t *)CLUSTER_BLOB_LABEL,
		 sizeof(CLUSTER_BLOB_LABEL) - 1) &&
	     EVP_MAC_final(ctx, out, &outl, 32) && outl == 32;
	EVP_MAC_CTX_free(ctx);
	return ok ? 0 : -ENOMEM;
}

int
cluster_blob_tag_begin(struct cluster_blob_tagger *t, const uint8_t *mackey,
    const uint8_t head[CLUSTER_BLOB_HEAD])
{
	OSSL_PARAM params[3];
	int ok;

	memset(t, 0, sizeof(*t));
	if (mackey == NULL) {
		if ((t->xx = XXH3_createState()) == NULL)
			return -ENOMEM;
		XXH3_128bits_reset(t->xx);
		XXH3_128bits_update(t->xx, head, CLUSTER_BLOB_TAGGED);
		return 0;
	}
	params[0] = OSSL_PARAM_construct_utf8_string(
	    OSSL_MAC_PARAM_CIPHER, (char *)"AES-256-GCM", 0);
	params[1] = OSSL_PARAM_construct_octet_string(
	    OSSL_MAC_PARAM_IV, (void *)(head + 24), CLUSTER_BLOB_NONCE);
	params[2] = OSSL_PARAM_construct_end();
	ok = (t->m = EVP_MAC_fetch(NULL, "GMAC", NULL)) != NULL &&
	     (t->mac = EVP_MAC_CTX_new(t->m)) != NULL &&
	     EVP_MAC_init(t->mac, mackey, 32, params) &&
	     EVP_MAC_update(t->mac, head, CLUSTER_BLOB_TAGGED);
	if (!ok) {
		cluster_blob_tag_free(t);
		return -ENOMEM;
	}
	return 0;
}

int
cluster_blob_tag_update(
    struct cluster_blob_tagger *t, const void *p, size_t n)
{
	if (n == 0)
		return 0;
	if (t->xx != NULL) {
		XXH3_128bits_update(t->xx, p, n);
		return 0;
	}
	return EVP_MAC_update(t->mac, p, n) ? 0 : -ENOMEM;
}

int
cluster_blob_tag_final(
    struct cluster_blob_tagger *t, uint8_t out[CLUSTER_BLOB_TAG])
{
	size_t outl = 0;
	int r = 0;

	if (t->xx != NULL) {
		XXH128_hash_t h = XXH3_128bits_digest(t->xx);

		codec_put_le64(out, h.low64);
		codec_put_le64(out + 8, h.high64);
	} else if (!EVP_MAC_final(t->mac, out, &outl, CLUSTER_BLOB_TAG) ||
		   outl != CLUSTER_BLOB_TAG)
		r = -ENOMEM;
	cluster_blob_tag_free(t);
	return r;
}

void
cluster_blob_tag_free(struct cluster_blob_tagger *t)
{
	if (t->xx != NULL)
		XXH3_freeState(t->xx);
	EVP_MAC_CTX_free(t->mac);
	EVP_MAC_free(t->m);
	memset(t, 0, sizeof(*t));
}

int
cluster_blob_tag(const uint8_t *mackey,
    const uint8_t head[CLUSTER_BLOB_HEAD], const struct iovec *src, int n,
    uint8_t out[CLUSTER_BLOB_TAG])
{
	struct cluster_blob_tagger t;
	int r;

	if ((r = cluster_blob_tag_begin(&t, mackey, head)) != 0)
		return r;
	for (int i = 0; i < n && r == 0; i++)
		r = cluster_blob_tag_update(&t, src[i].iov_base, src[i].iov_len);
	if (r != 0) {
		cluster_blob_tag_free(&t);
		return r;
	}
	return cluster_blob_tag_final(&t, out);
}

uint64_t
cluster_blob_iov_len(const struct iovec *iov, int n)
{
	uint64_t sum = 0;

	for (int i = 0; i < n; i++)
		sum += iov[i].iov_len;
	return sum;
}

/* Copy between flat and the concatenation of iov at off, either way. */
static void
move(const struct iovec *iov, int n, uint64_t off, uint8_t *flat, size_t len,
    bool to_iov)
{
	for (int i = 0; i < n && len > 0; i++) {
		size_t take;

		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		take = iov[i].iov_len - off < len ? iov[i].iov_len - off : len;
		if (to_iov)
			memcpy((uint8_t *)iov[i].iov_base + off, flat, take);
		else
			memcpy(
			    flat, (const uint8_t *)iov[i].iov_base + off, take);
		flat += take;
		len -= take;
		off = 0;
	}
}

void
cluster_blob_scatter(
    const struct iovec *dst, int n, uint64_t off, const void *src, size_t len)
{
	move(dst, n, off, (uint8_t *)src, len, true);
}

void
cluster_blob_gather(
    const struct iovec *src, int n, uint64_t off, void *out, size_t len)
{
	move(src, n, off, out, len, false);
}

size_t
cluster_claim_who(const char *v, size_t vlen, char who[CLUSTER_WHO_MAX + 1])
{
	size_t k = 0;

	for (; k < vlen && k < CLUSTER_WHO_MAX && v[k] != '\0'; k++)
		who[k] = v[k] >= 0x20 && v[k] < 0x7f ? v[k] : '?';
	who[k] = '\0';
	return k;
}
