/*
 * codec.c - cache/ (the store), layer codec: the bytes of values (the
 * envelope, codec.h), index entries and digest memos.  A layer below
 * everything else in cache/: it calls nothing of cache/ but format.h's
 * names.
 *
 * The envelope carries the key, so a value read under the wrong key (a
 * stale 'K' entry, an item copied in the tier) is never taken for a hit.
 */
#include <errno.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "cache/codec.h"
#include "cache/format.h"

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

static uint64_t
env_sum(const uint8_t *hdr, const void *payload, size_t len)
{
	XXH3_state_t st;

	XXH3_64bits_reset(&st);
	XXH3_64bits_update(&st, hdr, CODEC_ENV_SUMMED);
	XXH3_64bits_update(&st, payload, len);
	return (uint64_t)XXH3_64bits_digest(&st);
}

void
codec_env_seal(uint8_t hdr[CODEC_ENV_HDR], const uint8_t key[CACHE_KEY_LEN],
    const struct cache_val *v)
{
	memcpy(hdr, CODEC_ENV_MAGIC, 4);
	codec_put_le32(hdr + 4, CACHE_FORMAT_VERSION);
	codec_put_le32(hdr + 8, v->w);
	codec_put_le32(hdr + 12, v->h);
	codec_put_le32(hdr + 16, v->c);
	codec_put_le32(hdr + 20, (v->dtype & 0xff) | v->enc << 8);
	codec_put_le64(hdr + 24, v->len);
	memcpy(hdr + 32, key, CACHE_KEY_LEN);
	codec_put_le32(hdr + 64, v->src_w);
	codec_put_le32(hdr + 68, v->src_h);
	codec_put_le64(hdr + CODEC_ENV_SUMMED, env_sum(hdr, v->data, v->len));
}

/* Is enc a format this build knows (format.h)? */
static bool
env_enc_ok(uint32_t enc)
{
	switch (CACHE_FMT_OF(enc)) {
	case CACHE_FMT_RAW:
	case CACHE_FMT_LOSSLESS:
		return enc >> 8 == 0;
	case CACHE_FMT_JPEG:
		return enc >> 16 == 0 && CACHE_FMT_Q(enc) >= 1 &&
		       CACHE_FMT_Q(enc) <= 100;
	default:
		return false;
	}
}

#define ENV_FAIL(s)                    \
	do {                           \
		if (why != NULL)       \
			*why = (s);    \
		return -EINVAL;        \
	} while (0)

int
codec_env_open(const uint8_t *env, size_t len,
    const uint8_t key[CACHE_KEY_LEN], struct cache_val *out,
    const char **why)
{
	uint32_t w, h, c, de, enc, sw, sh;
	uint64_t plen, raw;

	if (len < CODEC_ENV_HDR)
		ENV_FAIL("shorter than a header");
	if (memcmp(env, CODEC_ENV_MAGIC, 4) != 0)
		ENV_FAIL("bad magic");
	if (codec_get_le32(env + 4) != CACHE_FORMAT_VERSION)
		ENV_FAIL("another format version");
	if (key != NULL && memcmp(env + 32, key, CACHE_KEY_LEN) != 0)
		ENV_FAIL("the value of another key");
	w = codec_get_le32(env + 8);
	h = codec_get_le32(env + 12);
	c = codec_get_le32(env + 16);
	de = codec_get_le32(env + 20);
	enc = de >> 8;
	if (w == 0 || h == 0 || c == 0 || w > CODEC_ENV_MAX_DIM ||
	    h > CODEC_ENV_MAX_DIM || c > CODEC_ENV_MAX_C || (de & 0xff) > 2 ||
	    (enc != 0 && (de & 0xff) != 0))
		ENV_FAIL("bad shape");
	if (!env_enc_ok(enc))
		ENV_FAIL("unknown format");
	sw = codec_get_le32(env + 64);
	sh = codec_get_le32(env + 68);
	if ((sw | sh) != 0 && (sw < w || sh < h))
		ENV_FAIL("a frame smaller than the shape");
	plen = codec_get_le64(env + 24);
	if (plen != len - CODEC_ENV_HDR)
		ENV_FAIL("payload length differs from the header's");
	/* dtype 0, 1, 2: uint8, float16, float32 (xf.h's order). */
	raw = (uint64_t)w * h * c << (de & 0xff); /* < 2^36: no overflow */
	/*
	 * A raw payload is the array; an encoded one (zstd, JPEG) is at
	 * most a little over it for any real image: a header that says
	 * otherwise is damaged or forged.
	 */
	if (enc == 0 ? plen != raw : plen > 2 * raw + 65536)
		ENV_FAIL("payload length does not fit the shape");
	if (env_sum(env, env + CODEC_ENV_HDR, plen) !=
	    codec_get_le64(env + CODEC_ENV_SUMMED))
		ENV_FAIL("checksum mismatch");
	out->w = w;
	out->h = h;
	out->c = c;
	out->src_w = sw;
	out->src_h = sh;
	out->dtype = de & 0xff;
	out->enc = enc;
	out->data = NULL;
	out->len = plen;
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
	ent->bytes = ent->len > UINT64_MAX - CODEC_ENV_HDR
			 ? UINT64_MAX
			 : ent->len + CODEC_ENV_HDR;
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
