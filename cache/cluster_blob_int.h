/*
 * cluster_blob_int.h - cache/ (the store), the cluster tier's blobs:
 * what cluster_blob.c (the calls on memcached) and cluster_blob_codec.c
 * (the items' bytes, pure) share, and the fuzz target of the codec.  Not
 * for use elsewhere.
 *
 * Head item "ffb1:HEX" (numbers little endian), CLUSTER_BLOB_HEAD bytes:
 *
 *	0	"FFBL"
 *	4	version (u16): CLUSTER_BLOB_VERSION
 *	6	flags (u16): CLUSTER_BLOB_MAC when the tag is a GMAC
 *	8	chunk count (u32): ceil(length / chunk size), 0 for length 0
 *	12	chunk size (u32): the client's (cluster_chunk_size)
 *	16	length (u64): at most CLUSTER_BLOB_MAX
 *	24	nonce (12 bytes): random with a MAC, else zeros
 *	36	zero (u32)
 *	40	the key (32 bytes)
 *	72	tag (16 bytes): GMAC (AES-256-GCM, the nonce as its IV, the
 *		key HMAC-SHA256(secret, CLUSTER_BLOB_LABEL)) of bytes 0..71
 *		then the payload; without a MAC, XXH3-128 of the same bytes
 *		(low 64 bits, then high, each little endian)
 *
 * Chunk item "ffb1:HEX#I" (I = 1..count): payload bytes (I - 1) * size
 * .. I * size, the last one shorter.  Claim "ffb1:HEX:c"; note
 * "ffb1:n:NAME".  With a secret, "ffb1:kID:" instead of "ffb1:" (NS
 * below).
 */
#ifndef FEEDFS_CLUSTER_BLOB_INT_H
#define FEEDFS_CLUSTER_BLOB_INT_H

#include <sys/uio.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "cache/cluster_blob.h"

#define CLUSTER_BLOB_PREFIX "ffb1:"
#define CLUSTER_BLOB_MAGIC "FFBL"
#define CLUSTER_BLOB_VERSION 1
#define CLUSTER_BLOB_MAC 1u
#define CLUSTER_BLOB_HEAD 88
#define CLUSTER_BLOB_TAGGED 72 /* the bytes of the head the tag covers */
#define CLUSTER_BLOB_TAG 16
#define CLUSTER_BLOB_NONCE 12
#define CLUSTER_BLOB_LABEL "feedfs cluster blob key v1"
/*
 * The namespace of a client's blobs, claims and notes, as its prefixes'
 * (cluster_int.h): "ffb1:" without a secret, "ffb1:kID:" with one (the
 * ID of the prefixes' namespace), so that the nodes of one secret never
 * read nor overwrite another's.  At most CLUSTER_BLOB_NS_MAX bytes with
 * its NUL.
 */
#define CLUSTER_BLOB_NS_MAX 24
/* NS + 64 hex + "#" or ":" + up to 10 digits + NUL; or a note. */
#define CLUSTER_BLOB_MKEY_MAX                                                  \
	(CLUSTER_BLOB_NS_MAX + 2 * CLUSTER_KEY_LEN + 12 +                      \
	    CLUSTER_NOTE_NAME_MAX)

/* A head, parsed. */
struct cluster_blob_head {
	uint32_t flags, nchunks, csize;
	uint64_t len;
	const uint8_t *nonce; /* CLUSTER_BLOB_NONCE bytes */
	const uint8_t *tag;   /* CLUSTER_BLOB_TAG bytes */
};

/*
 * The memcached key of key's head (chunk 0), chunk I, or claim (claim
 * set: chunk ignored) in the namespace ns (NS above) into buf; its length.
 */
size_t cluster_blob_mkey(char buf[CLUSTER_BLOB_MKEY_MAX], const char *ns,
    const uint8_t key[CLUSTER_KEY_LEN], uint32_t chunk, bool claim);
/*
 * A note's memcached key in ns into buf: its length, or 0 for a name that
 * is empty, too long or has a byte outside [A-Za-z0-9._:/-].
 */
size_t cluster_blob_note_mkey(
    char buf[CLUSTER_BLOB_MKEY_MAX], const char *ns, const char *name);

/*
 * A claim item's value v (vlen bytes, any: whoever can write to a server
 * wrote it) as its holder's text into who: up to the first NUL, at most
 * CLUSTER_WHO_MAX bytes, each byte outside printable ASCII made '?', then
 * a NUL.  Its length.
 */
size_t cluster_claim_who(
    const char *v, size_t vlen, char who[CLUSTER_WHO_MAX + 1]);

/*
 * Write a head (its tag zeroed: cluster_blob_tag fills it).  The chunk
 * count follows from len and csize.
 */
void cluster_blob_head_encode(uint8_t head[CLUSTER_BLOB_HEAD],
    const uint8_t key[CLUSTER_KEY_LEN], uint32_t flags, uint32_t csize,
    uint64_t len, const uint8_t nonce[CLUSTER_BLOB_NONCE]);
/*
 * Parse the head item v (vlen bytes) read for key by a client whose
 * chunk size is csize: magic, version, flags, exactly CLUSTER_BLOB_HEAD
 * bytes, that key, a length within CLUSTER_BLOB_MAX, the client's chunk
 * size and the count that fits the length, zeros where they belong (the
 * nonce without a MAC, the reserved word).  0 and h (pointing into v),
 * or -EBADMSG and why.
 */
int cluster_blob_head_parse(const uint8_t *v, size_t vlen,
    const uint8_t key[CLUSTER_KEY_LEN], size_t csize,
    struct cluster_blob_head *h, const char **why);

/*
 * The GMAC key of the secret whose HMAC context is hmac: HMAC-SHA256 of
 * CLUSTER_BLOB_LABEL.  0 or -ENOMEM.
 */
int cluster_blob_mac_key(const EVP_MAC_CTX *hmac, uint8_t out[32]);
/*
 * The tag of a head's first CLUSTER_BLOB_TAGGED bytes then the payload
 * src[0..n): with mackey (32 bytes) a GMAC under it with the head's
 * nonce, else XXH3-128.  0 or -ENOMEM.
 */
int cluster_blob_tag(const uint8_t *mackey,
    const uint8_t head[CLUSTER_BLOB_HEAD], const struct iovec *src, int n,
    uint8_t out[CLUSTER_BLOB_TAG]);

/*
 * The same tag in steps: begin (with the head), the payload's bytes in
 * order, final (which frees; free alone after a failure).  0 or -ENOMEM.
 */
struct cluster_blob_tagger {
	struct XXH3_state_s *xx; /* without a MAC */
	EVP_MAC *m;
	EVP_MAC_CTX *mac;        /* with one */
};
int cluster_blob_tag_begin(struct cluster_blob_tagger *t, const uint8_t *mackey,
    const uint8_t head[CLUSTER_BLOB_HEAD]);
int cluster_blob_tag_update(
    struct cluster_blob_tagger *t, const void *p, size_t n);
int cluster_blob_tag_final(
    struct cluster_blob_tagger *t, uint8_t out[CLUSTER_BLOB_TAG]);
void cluster_blob_tag_free(struct cluster_blob_tagger *t);

/*
 * Copy len bytes of src to the offset off of the concatenation of
 * dst[0..n), or from it into out (cluster_blob_gather); the range is
 * within their sum (the caller checked).
 */
void cluster_blob_scatter(
    const struct iovec *dst, int n, uint64_t off, const void *src, size_t len);
void cluster_blob_gather(
    const struct iovec *src, int n, uint64_t off, void *out, size_t len);
/* The sum of iov[0..n)'s lengths. */
uint64_t cluster_blob_iov_len(const struct iovec *iov, int n);

#endif
