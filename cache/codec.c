/*
 * codec.c - the bytes of values, index entries and digest memos.
 *
 * A value ('V' seq) is an 80-byte header and the payload:
 *
 *	0	"FFCV"
 *	4	CACHE_FORMAT_VERSION	u32 LE
 *	8	w h c dtype|enc<<8	4 x u32 LE (dtype: the low byte,
 *				enc: how the payload holds the array, see
 *				format.h; 0 = raw, as before formats)
 *	24	seq			u64 LE (the key it is stored under)
 *	32	payload length		u64 LE
 *	40	XXH3_64bits(payload)	u64 LE
 *	48	key[32]			(the cache key it belongs to)
 *
 * seq and key are repeated so that a value read under the wrong key (a
 * stale 'K' entry) is never taken for a hit.
 */
#include <errno.h>
#include <string.h>

#include <xxhash.h>

#include "cache/codec.h"

uint64_t
codec_checksum(const void *data, size_t len)
{
	return (uint64_t)XXH3_64bits(data, len);
}

void
codec_seq_key(int kind, uint64_t seq, uint8_t k[CODEC_SEQ_KEY])
{
	k[0] = (uint8_t)kind;
	codec_put_be64(k + 1, seq);
}

void
codec_index_key(const uint8_t key[CACHE_KEY_LEN], uint8_t k[CODEC_INDEX_KEY])
{
	k[0] = 'K';
	memcpy(k + 1, key, CACHE_KEY_LEN);
}

void
codec_val_header(uint8_t hdr[CODEC_VAL_HDR], const struct cache_val *v,
    const uint8_t key[CACHE_KEY_LEN], uint64_t seq)
{
	memcpy(hdr, CODEC_VAL_MAGIC, 4);
	codec_put_le32(hdr + 4, CACHE_FORMAT_VERSION);
	codec_put_le32(hdr + 8, v->w);
	codec_put_le32(hdr + 12, v->h);
	codec_put_le32(hdr + 16, v->c);
	codec_put_le32(hdr + 20, (v->dtype & 0xff) | v->enc << 8);
	codec_put_le64(hdr + 24, seq);
	codec_put_le64(hdr + 32, v->len);
	codec_put_le64(hdr + 40, codec_checksum(v->data, v->len));
	memcpy(hdr + 48, key, CACHE_KEY_LEN);
}

int
codec_val_decode(const uint8_t *v, size_t vlen,
    const uint8_t key[CACHE_KEY_LEN], uint64_t seq, struct cache_val *out)
{
	uint64_t len;

	if (vlen < CODEC_VAL_HDR || memcmp(v, CODEC_VAL_MAGIC, 4) != 0 ||
	    codec_get_le32(v + 4) != CACHE_FORMAT_VERSION ||
	    codec_get_le64(v + 24) != seq ||
	    memcmp(v + 48, key, CACHE_KEY_LEN) != 0)
		return -EINVAL;
	len = codec_get_le64(v + 32);
	if (len != vlen - CODEC_VAL_HDR ||
	    codec_checksum(v + CODEC_VAL_HDR, len) != codec_get_le64(v + 40))
		return -EINVAL;
	out->w = codec_get_le32(v + 8);
	out->h = codec_get_le32(v + 12);
	out->c = codec_get_le32(v + 16);
	out->dtype = codec_get_le32(v + 20) & 0xff;
	out->enc = codec_get_le32(v + 20) >> 8;
	out->data = NULL;
	out->len = len;
	out->prefix = NULL;
	return 0;
}

void
codec_tidx_encode(uint8_t *buf, const uint8_t key[CACHE_KEY_LEN], uint64_t len,
    uint64_t time, const char *prefix, size_t plen)
{
	memcpy(buf, key, CACHE_KEY_LEN);
	codec_put_le64(buf + CACHE_KEY_LEN, len);
	codec_put_le64(buf + CACHE_KEY_LEN + 8, time);
	if (plen > 0)
		memcpy(buf + CODEC_TIDX_LEN, prefix, plen);
}

int
codec_tidx_decode(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
    struct cache_entry *ent)
{
	if (kl != CODEC_SEQ_KEY || k[0] != 'T' || vl < CODEC_TIDX_LEN)
		return -EINVAL;
	ent->seq = codec_get_be64(k + 1);
	memcpy(ent->key, v, CACHE_KEY_LEN);
	ent->len = codec_get_le64(v + CACHE_KEY_LEN);
	ent->time = codec_get_le64(v + CACHE_KEY_LEN + 8);
	ent->prefix = (const char *)v + CODEC_TIDX_LEN;
	ent->prefix_len = vl - CODEC_TIDX_LEN;
	/* A damaged length must not wrap the byte counts of ls and evict. */
	ent->bytes = ent->len > UINT64_MAX - CODEC_VAL_HDR
			 ? UINT64_MAX
			 : ent->len + CODEC_VAL_HDR;
	return 0;
}

void
codec_memo_stat(const struct stat *st, uint8_t s[CODEC_MEMO_STAT])
{
	codec_put_le64(s, (uint64_t)st->st_size);
	codec_put_le64(s + 8, (uint64_t)st->st_mtim.tv_sec);
	codec_put_le64(s + 16, (uint64_t)st->st_mtim.tv_nsec);
	codec_put_le64(s + 24, (uint64_t)st->st_ctim.tv_sec);
	codec_put_le64(s + 32, (uint64_t)st->st_ctim.tv_nsec);
	codec_put_le64(s + 40, (uint64_t)st->st_ino);
	codec_put_le64(s + 48, (uint64_t)st->st_dev);
}
