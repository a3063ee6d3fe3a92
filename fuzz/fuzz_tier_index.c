/*
 * fuzz_tier_index - libFuzzer target: a shard's index as the cluster tier
 * holds it (issue 38): the tier's payload (core/ds_tier.c: a length, the
 * index, zeros to whole rows; ds_tier_unwrap) and the index in it, the
 * kept index's encoding with its members' content digests
 * (dataset/ds_tar_index.c: ds_tar_index_parse).
 *
 * The first input byte picks the shape the value's envelope would claim
 * (rows of DS_TIER_ROW bytes, one channel: the tier's; or another width,
 * channel count or format, which must be refused); the rest, padded with
 * zeros to whole rows, is the payload.  ds_tier_unwrap must refuse what is
 * not of its form, and give an index that lies inside the payload.  That
 * index is parsed as it comes (its SHA-256 seldom holds), then with its
 * SHA-256 made right, so that the fuzzer reaches every field's check
 * (one that fails must fail too when a name and a stat are asked for).
 * An index that parses must encode and parse back to the same members,
 * digests and text (labels' and captions').
 */
#include <sys/stat.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "cache/cache.h"
#include "core/dsopen.h"
#include "dataset/ds_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What parses encodes and parses back the same. */
static void
round_trip(const struct tar_index *ix)
{
	struct tar_index back;
	struct stat st;
	uint8_t *enc;
	size_t len;

	/* A shard of a size that holds every member (one the parsed index
	 * may claim beyond it is not worth a round trip). */
	memset(&st, 0, sizeof(st));
	st.st_size = (off_t)1 << 62;
	for (size_t i = 0; i < ix->n; i++)
		if (ix->m[i].off > (uint64_t)st.st_size ||
		    ix->m[i].size > (uint64_t)st.st_size - ix->m[i].off)
			return;
	if (ds_tar_index_encode(ix, "s", &st, &enc, &len) != 0)
		return;
	if (ds_tar_index_parse(enc, len, "s", &st, &back) != 0 ||
	    back.n != ix->n || back.status != ix->status)
		abort();
	for (size_t i = 0; i < ix->n; i++) {
		const struct tar_member *a = &ix->m[i], *b = &back.m[i];

		if (strcmp(a->name, b->name) != 0 || a->off != b->off ||
		    a->size != b->size || a->has_digest != b->has_digest ||
		    (a->has_digest &&
			(memcmp(a->digest, b->digest, 32) != 0 ||
			    a->hlen != b->hlen ||
			    memcmp(a->head, b->head, a->hlen) != 0)) ||
		    a->has_data != b->has_data ||
		    (a->has_data && (a->dlen != b->dlen ||
					memcmp(a->data, b->data, a->dlen) != 0)))
			abort();
	}
	ds_tar_index_free(&back);
	free(enc);
}

/* Parse d (len bytes) as an index; what parses is checked. */
static void
parse(const uint8_t *d, size_t len)
{
	struct tar_index ix;
	struct stat other;

	if (ds_tar_index_parse(d, len, NULL, NULL, &ix) == 0) {
		for (size_t i = 0; i < ix.n; i++)
			if (ix.m[i].has_digest &&
			    (ix.m[i].kind != TM_FILE ||
				ix.m[i].hlen > TAR_HEAD_MAX ||
				ix.m[i].hlen > ix.m[i].size))
				abort();
		round_trip(&ix);
		ds_tar_index_free(&ix);
		return;
	}
	/* A name and a stat to check never make a bad index good. */
	memset(&other, 0, sizeof(other));
	if (ds_tar_index_parse(d, len, "another", &other, &ix) == 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t widths[] = {DS_TIER_ROW, DS_TIER_ROW, 4095, 1};
	struct cache_val v;
	const uint8_t *ix;
	size_t ixlen, rows, n;
	uint8_t *p;
	unsigned int hl = 32;

	if (size < 1)
		return 0;
	memset(&v, 0, sizeof(v));
	v.w = widths[data[0] & 3];
	v.c = data[0] & 4 ? 3 : 1;
	v.enc = data[0] & 8 ? 1 : 0;
	n = size - 1;
	rows = (n + v.w - 1) / v.w;
	if (rows == 0)
		rows = data[0] & 16 ? 1 : 0;
	if ((p = calloc(rows ? rows : 1, v.w)) == NULL)
		return 0;
	memcpy(p, data + 1, n);
	v.h = (uint32_t)rows;
	v.data = p;
	v.len = rows * v.w;
	if (ds_tier_unwrap(&v, &ix, &ixlen) == 0) {
		uint8_t *fixed;

		if (v.w != DS_TIER_ROW || v.c != 1 || v.enc != 0 ||
		    ix != p + 8 || ixlen > v.len - 8)
			abort();
		parse(ix, ixlen);
		/* Its SHA-256 made right: past the checksum, into the
		 * fields. */
		if (ixlen >= 32 && (fixed = malloc(ixlen)) != NULL) {
			memcpy(fixed, ix, ixlen);
			if (EVP_Digest(fixed, ixlen - 32, fixed + ixlen - 32,
				&hl, EVP_sha256(), NULL) == 1)
				parse(fixed, ixlen);
			free(fixed);
		}
	}
	free(p);
	return 0;
}
