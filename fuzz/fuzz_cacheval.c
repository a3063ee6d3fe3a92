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
 * decode to the shape it was written with.
 */
#include <stdlib.h>
#include <string.h>

#include "cache/codec.h"

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
		in.data = buf + CODEC_ENV_HDR;
		in.len = n - CODEC_ENV_HDR;
		in.prefix = NULL;
		codec_env_seal(buf, key, &in);
		/* A sealed header opens unless its shape is out of bounds. */
		if (codec_env_open(buf, n, key, &v, NULL) == 0 &&
		    (v.w != in.w || v.h != in.h || v.c != in.c ||
			v.dtype != in.dtype || v.enc != in.enc))
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
