/*
 * fuzz_cacheval - libFuzzer target: the cache's value and index decoders.
 *
 * cache.c keeps them static (parse_val: a stored value's header, length
 * and checksum; parse_tidx: an insertion-index entry), so this target
 * includes cache.c itself.  The first input byte picks the mode: odd, the
 * rest is a value as it comes from RocksDB; even, the rest gets a sound
 * magic, version, key, length and checksum written over it first, so that
 * the fuzzer reaches past the checks into the decoded fields.  A value
 * that parses must hold exactly its payload.
 */
#include "cache/cache.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t key[CACHE_KEY_LEN] = { 1, 2, 3 };
	struct cache_val v;
	struct cache_entry ent;
	uint8_t *buf;
	uint64_t seq = 7;

	if (size < 1)
		return 0;
	if ((buf = malloc(size)) == NULL)
		return 0;
	memcpy(buf, data + 1, size - 1);
	if (!(data[0] & 1) && size - 1 >= VAL_HDR) {
		memcpy(buf, VAL_MAGIC, 4);
		put_le32(buf + 4, CACHE_FORMAT_VERSION);
		put_le64(buf + 24, seq);
		put_le64(buf + 32, size - 1 - VAL_HDR);
		put_le64(buf + 40, xxh64(buf + VAL_HDR, size - 1 - VAL_HDR));
		memcpy(buf + 48, key, CACHE_KEY_LEN);
	}
	if (parse_val(buf, size - 1, key, seq, &v) == 0) {
		if (v.len != size - 1 - VAL_HDR)
			abort();
		if (memcmp(buf, VAL_MAGIC, 4) != 0)
			abort();
	}
	if (size - 1 >= 9 &&
	    parse_tidx(buf, 9, buf + 9, size - 1 - 9, &ent)) {
		if (ent.prefix_len != size - 1 - 9 - TIDX_VAL)
			abort();
	}
	free(buf);
	return 0;
}
