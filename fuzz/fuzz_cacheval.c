/*
 * fuzz_cacheval - libFuzzer target: the cache's value and index decoders
 * (cache/codec.c: codec_env_open, the value envelope of the store, the
 * socket and the tier; codec_tidx_decode, an insertion-index entry).
 *
 * The first input byte picks the mode: odd, the rest is a value as it comes
 * from RocksDB; even, the rest gets a sealed header (magic, version,
 * key, length and checksum, from codec_env_seal) written over it first,
 * so that the fuzzer reaches past the checks into the decoded fields.  A
 * value that parses must hold exactly its payload; one sound header must
 * decode to the shape it was written with.  A sound value of an encoded
 * cache_format (lossless, jpeg: what the cluster tier now carries too) of
 * a small enough image goes on through cache_fmt_decode, as a hit does
 * (core/sample.c); a lossless one that decodes must encode and decode
 * back to the same pixels.
 */
#include <stdlib.h>
#include <string.h>

#include "cache/codec.h"
#include "cache/format.h"

/* Images decoded per input at most (the fuzzer's speed, not a bound of
 * feedfs's, which is the job's max_pixels). */
#define FUZZ_MAX_PIXELS (256u * 256)

/* The payload of a sound envelope v (at p), decoded as a hit decodes it. */
static void
decode_payload(const struct cache_val *v, const uint8_t *p)
{
	uint8_t *px = NULL, *again = NULL, *enc = NULL;
	size_t n = (size_t)v->w * v->h * 3, len = 0;

	if (v->enc == 0 || v->c != 3 || v->dtype != 0 ||
	    (uint64_t)v->w * v->h > FUZZ_MAX_PIXELS)
		return;
	if (cache_fmt_decode(v->enc, v->w, v->h, p, v->len, &px) != 0)
		return;
	if (CACHE_FMT_OF(v->enc) == CACHE_FMT_LOSSLESS) {
		if (cache_fmt_encode(v->enc, v->w, v->h, px, &enc, &len) != 0 ||
		    cache_fmt_decode(v->enc, v->w, v->h, enc, len, &again) !=
			0 ||
		    memcmp(px, again, n) != 0)
			abort();
	}
	free(px);
	free(again);
	free(enc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t key[CACHE_KEY_LEN] = {1, 2, 3};
	struct cache_val v, in;
	struct cache_entry ent;
	uint8_t *buf;
	size_t n;

	if (size < 1)
		return 0;
	n = size - 1;
	if ((buf = malloc(n ? n : 1)) == NULL)
		return 0;
	memcpy(buf, data + 1, n);
	if (!(data[0] & 1) && n >= CODEC_ENV_HDR) {
		in.w = codec_get_le32(buf + 8);
		in.h = codec_get_le32(buf + 12);
		in.c = codec_get_le32(buf + 16);
		in.dtype = codec_get_le32(buf + 20) & 0xff;
		in.enc = codec_get_le32(buf + 20) >> 8;
		in.src_w = codec_get_le32(buf + 64);
		in.src_h = codec_get_le32(buf + 68);
		in.data = buf + CODEC_ENV_HDR;
		in.len = n - CODEC_ENV_HDR;
		in.prefix = NULL;
		codec_env_seal(buf, key, &in);
		/* A sealed header opens unless its shape is out of bounds. */
		if (codec_env_open(buf, n, key, &v, NULL) == 0 &&
		    (v.w != in.w || v.h != in.h || v.c != in.c ||
			v.dtype != in.dtype || v.enc != in.enc ||
			v.src_w != in.src_w || v.src_h != in.src_h))
			abort();
	}
	if (codec_env_open(buf, n, key, &v, NULL) == 0) {
		uint64_t raw = (uint64_t)v.w * v.h * v.c << v.dtype;

		if (v.len != n - CODEC_ENV_HDR)
			abort();
		if (memcmp(buf, CODEC_ENV_MAGIC, 4) != 0 ||
		    memcmp(buf + 32, key, CACHE_KEY_LEN) != 0)
			abort();
		if (v.w == 0 || v.h == 0 || (v.enc == 0 && v.len != raw))
			abort();
		/* a frame is none, or at least the shape */
		if ((v.src_w | v.src_h) != 0 &&
		    (v.src_w < v.w || v.src_h < v.h))
			abort();
		decode_payload(&v, buf + CODEC_ENV_HDR);
	}
	if (n >= CODEC_SEQ_KEY &&
	    codec_tidx_decode(buf, CODEC_SEQ_KEY, buf + CODEC_SEQ_KEY,
		n - CODEC_SEQ_KEY, &ent) == 0) {
		if (ent.prefix_len != n - CODEC_SEQ_KEY - CODEC_TIDX_LEN)
			abort();
	}
	free(buf);
	return 0;
}
