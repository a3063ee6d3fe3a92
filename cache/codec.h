/*
 * codec.h - cache/ (the store), layer codec: the bytes of the cache's
 * records, without RocksDB.
 *
 * Keys are told apart by their first byte (see cache_int.h for the whole
 * layout).  This module only turns values and index entries into bytes and
 * back; it allocates nothing, keeps no state and may be called from any
 * thread.  Decoders take untrusted bytes (a damaged store, the fuzzer):
 * they check every length before they read.
 */
#ifndef FEEDFS_CACHE_CODEC_H
#define FEEDFS_CACHE_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "cache/cache.h"

/*
 * The value envelope: the one form of a cached value in the store ('V'),
 * on the data socket (GET replies and PUTs) and in the cluster tier.  It
 * names the key it belongs to and the array's shape, and one checksum
 * covers them and the payload, so a damaged header, a value copied from
 * another key or a truncated payload is never taken for a hit:
 *
 *	0	"FFEV"
 *	4	CACHE_FORMAT_VERSION	u32 LE
 *	8	w h c			3 x u32 LE
 *	20	dtype | enc << 8	u32 LE (dtype: 0 uint8, 1 float16,
 *					2 float32; enc: format.h's, 0 = raw,
 *					the only one for other than uint8)
 *	24	payload length		u64 LE
 *	32	key[32]			the cache key it belongs to
 *	64	src_w src_h		2 x u32 LE: the frame (0 0: none)
 *	72	XXH3_64bits of bytes 0..71 then the payload	u64 LE
 *	80	the payload
 */
#define CODEC_ENV_MAGIC "FFEV"
#define CODEC_ENV_HDR 80
/* The bytes of the header that its checksum covers (all before it). */
#define CODEC_ENV_SUMMED 72
/* Bounds codec_env_open holds every envelope to, whoever sent it. */
#define CODEC_ENV_MAX_DIM 65535u  /* w and h */
#define CODEC_ENV_MAX_C 4u
/* An index ('T') value: key len time, then the prefix text (no NUL). */
#define CODEC_TIDX_LEN 48
#define CODEC_SEQ_KEY 9			    /* 'V' or 'T', seq (u64 BE) */
#define CODEC_INDEX_KEY (1 + CACHE_KEY_LEN) /* 'K', key */
#define CODEC_MEMO_KEY 33		    /* 'D', SHA-256(path) */
/*
 * A digest memo: digest[32], size mtime(2) ctime(2) ino dev (7 x u64 LE),
 * then the seq (u64 LE) of its 'M' record.
 */
#define CODEC_MEMO_STAT 56
#define CODEC_MEMO_VAL (32 + CODEC_MEMO_STAT + 8)
/* A memo's 'M' record ('M', seq u64 BE): SHA-256(path), time (u64 LE). */
#define CODEC_MEMO_IDX 40

static inline void
codec_put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t
codec_get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static inline void
codec_put_le16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline uint32_t
codec_get_le16(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static inline void
codec_put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t
codec_get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline void
codec_put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static inline uint64_t
codec_get_be64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* The payload checksum: XXH3_64bits (seed 0) of len bytes. */
uint64_t codec_checksum(const void *data, size_t len);

/* Key of kind ('V' or 'T') and seq: seq big-endian, so keys sort by it. */
void codec_seq_key(int kind, uint64_t seq, uint8_t k[CODEC_SEQ_KEY]);
/* 'K' key: where the value of key lives. */
void codec_index_key(
    const uint8_t key[CACHE_KEY_LEN], uint8_t k[CODEC_INDEX_KEY]);

/*
 * Seal value v of key: write the envelope's header into hdr, its checksum
 * over the header's first 64 bytes and v->len bytes of v->data included.
 * The payload (v->data) follows the header wherever the envelope goes.
 */
void codec_env_seal(uint8_t hdr[CODEC_ENV_HDR],
    const uint8_t key[CACHE_KEY_LEN], const struct cache_val *v);
/*
 * The one check of an envelope, wherever it comes from (the store, the
 * socket, the tier): is env (len bytes: header and payload) a sound value
 * of key (NULL: of the key it names, at env + 32)?  Magic, version, key,
 * a shape within the bounds above whose raw size matches the payload
 * length (a raw value) or bounds it (an encoded one, whose decoder checks
 * the rest), a frame that is none or at least the shape, a known format,
 * the length and the checksum.  0 and out's
 * shape and len filled (out->data and out->prefix NULL: the payload is
 * env + CODEC_ENV_HDR), else -EINVAL and why (may be NULL) says what.
 */
int codec_env_open(const uint8_t *env, size_t len,
    const uint8_t key[CACHE_KEY_LEN], struct cache_val *out,
    const char **why);

/*
 * Write the 'T' value of an entry into buf (CODEC_TIDX_LEN + plen bytes):
 * key, payload length, insertion time, prefix.
 */
void codec_tidx_encode(uint8_t *buf, const uint8_t key[CACHE_KEY_LEN],
    uint64_t len, uint64_t time, const char *prefix, size_t plen);
/*
 * Decode the 'T' entry with key k (kl bytes) and value v (vl bytes): 0 and
 * ent filled (ent->prefix points into v), or -EINVAL.
 */
int codec_tidx_decode(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
    struct cache_entry *ent);

/* The stat fields a digest memo holds for: size, mtime, ctime, ino, dev. */
void codec_memo_stat(const struct stat *st, uint8_t s[CODEC_MEMO_STAT]);

#endif
