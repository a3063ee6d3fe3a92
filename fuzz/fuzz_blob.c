/*
 * fuzz_blob - libFuzzer target: what a memcached server (or whoever can
 * write to it) hands a mount or a batch worker about finished batches
 * (issue 37): a blob's head (cache/cluster_blob_codec.c: its parse, then
 * its tag over the bytes after it, without and with a secret's GMAC), a
 * chunk key's parse against a blob's head key, a claim's holder text
 * (cluster_claim_who), a batch's sample ids (core/batch_tier.c:
 * tier_ids_check), a reader's position note (tier_pos_decode) and a
 * note's name.
 *
 * Input: a mode byte, then the bytes.  Mode bit 0: chunks of 1 KiB or
 * CLUSTER_CHUNK; bit 1: the first CLUSTER_BLOB_HEAD bytes are made a
 * head for the fixed key (magic, version, the key, a sound count for
 * the length they name) so that the parse's accepting paths are reached;
 * bit 2: with the right tag over the rest (bit 3: a GMAC under the fixed
 * secret).  Invariants (abort on a breach): a parsed head names the key
 * asked for, this client's chunk size, a count that fits its length
 * within CLUSTER_BLOB_MAX; a head written with the right tag is
 * accepted; a holder's text is at most CLUSTER_WHO_MAX printable bytes,
 * the value's own where they were printable; ids taken are each below
 * the plan's count, and ids refused have one that is not; a decoded
 * position has 1 <= world <= 1024 and rank < world and encodes back to
 * the same bytes; a note name taken is made of the allowed bytes.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "cache/cluster_blob_int.h"
#include "cache/cluster_int.h"
#include "cache/codec.h"
#include "core/batch_tier.h"
#include "core/job.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t key[CLUSTER_KEY_LEN] = {9, 8, 7, 6, 5, 4, 3};
static const uint8_t mackey[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9};

static void
head(const uint8_t *d, size_t n, unsigned mode)
{
	size_t chunk = mode & 1 ? CLUSTER_CHUNK : CLUSTER_CHUNK_MIN;
	const uint8_t *mk = mode & 8 ? mackey : NULL;
	struct cluster_blob_head h;
	uint8_t *item, tag[CLUSTER_BLOB_TAG];
	struct iovec rest;
	int r;

	if ((item = malloc(n ? n : 1)) == NULL)
		return;
	memcpy(item, d, n);
	if (n >= CLUSTER_BLOB_HEAD && (mode & 2)) {
		uint8_t nonce[CLUSTER_BLOB_NONCE] = {0};
		uint64_t len = codec_get_le64(item + 16) % (64u << 20);

		if (mk != NULL)
			memcpy(nonce, item + 24, sizeof(nonce));
		cluster_blob_head_encode(item, key,
		    mk != NULL ? CLUSTER_BLOB_MAC : 0, (uint32_t)chunk, len,
		    nonce);
	}
	rest.iov_base = item + (n > CLUSTER_BLOB_HEAD ? CLUSTER_BLOB_HEAD : n);
	rest.iov_len = n > CLUSTER_BLOB_HEAD ? n - CLUSTER_BLOB_HEAD : 0;
	if (n >= CLUSTER_BLOB_HEAD && (mode & 4) &&
	    cluster_blob_tag(mk, item, &rest, 1, item + CLUSTER_BLOB_TAGGED) !=
		0)
		abort();
	/* The head alone: exactly CLUSTER_BLOB_HEAD bytes, or not a head. */
	r = cluster_blob_head_parse(item,
	    n > CLUSTER_BLOB_HEAD ? CLUSTER_BLOB_HEAD : n, key, chunk, &h,
	    NULL);
	if (r == 0) {
		if (h.csize != chunk || h.len > CLUSTER_BLOB_MAX ||
		    (uint64_t)h.nchunks * h.csize < h.len ||
		    (h.nchunks > 0 &&
			(uint64_t)(h.nchunks - 1) * h.csize >= h.len) ||
		    memcmp(item + 40, key, CLUSTER_KEY_LEN) != 0 ||
		    h.tag != item + CLUSTER_BLOB_TAGGED)
			abort();
		if (cluster_blob_tag(
			(h.flags & CLUSTER_BLOB_MAC) ? mackey : NULL, item,
			&rest, 1, tag) != 0)
			abort();
		/* Written with its right tag: the tag checks out. */
		if ((mode & 6) == 6 &&
		    ((h.flags & CLUSTER_BLOB_MAC) != 0) == (mk != NULL) &&
		    memcmp(tag, h.tag, CLUSTER_BLOB_TAG) != 0)
			abort();
	} else if (r != -EBADMSG)
		abort();
	free(item);
}

static void
chunk_key(const uint8_t *d, size_t n)
{
	char hkey[CLUSTER_BLOB_MKEY_MAX], want[CLUSTER_BLOB_MKEY_MAX], *k;
	size_t hlen, klen = n > 250 ? 250 : n;
	uint32_t idx = 0, count = 1 + (n > 0 ? d[0] : 0);

	if ((k = malloc(klen ? klen : 1)) == NULL)
		return;
	memcpy(k, d, klen);
	hlen =
	    cluster_blob_mkey(hkey, "ffb1:k0123456789abcdef:", key, 0, false);
	if (cluster_chunk_index(k, klen, hkey, hlen, count, &idx) == 0 &&
	    (idx < 1 || idx > count ||
		cluster_blob_mkey(
		    want, "ffb1:k0123456789abcdef:", key, idx, false) != klen ||
		memcmp(want, k, klen) != 0))
		abort();
	free(k);
}

static void
claim_who(const uint8_t *d, size_t n)
{
	char who[CLUSTER_WHO_MAX + 1];
	size_t k = cluster_claim_who((const char *)d, n, who);

	if (k > CLUSTER_WHO_MAX || k > n || strlen(who) != k)
		abort();
	for (size_t i = 0; i < k; i++)
		if (d[i] == 0 || who[i] < 0x20 || who[i] >= 0x7f ||
		    (d[i] >= 0x20 && d[i] < 0x7f && who[i] != (char)d[i]))
			abort();
	if (k < n && k < CLUSTER_WHO_MAX && d[k] != 0)
		abort();
}

/* The ids of a batch of n / 8 samples, checked against a plan of 1 + d[0]. */
static void
ids(const uint8_t *d, size_t n)
{
	static struct job j; /* tier_ids_check reads only plan.n */
	int64_t out[1024];
	uint32_t len = n / 8 < 1024 ? (uint32_t)(n / 8) : 1024;
	bool over = false;
	int r;

	j.plan.n = 1 + (n > 0 ? d[0] : 0);
	for (uint32_t s = 0; s < len; s++)
		over |= codec_get_le64(d + (size_t)s * 8) >= j.plan.n;
	r = tier_ids_check(&j, d, len, out);
	if (r != (over ? -EBADMSG : 0))
		abort();
	for (uint32_t s = 0; r == 0 && s < len; s++)
		if (out[s] < 0 || (uint64_t)out[s] >= j.plan.n ||
		    (uint64_t)out[s] != codec_get_le64(d + (size_t)s * 8))
			abort();
}

static void
position(const uint8_t *d, size_t n)
{
	struct tier_pos p;
	uint8_t back[TIER_POS_LEN];

	if (tier_pos_decode(d, n, &p) != 0)
		return;
	if (p.world < 1 || p.world > 1024 || p.rank >= p.world ||
	    n != TIER_POS_LEN)
		abort();
	tier_pos_encode(&p, back);
	if (memcmp(back, d, TIER_POS_LEN) != 0)
		abort();
}

static void
note_name(const uint8_t *d, size_t n)
{
	char name[CLUSTER_NOTE_NAME_MAX + 8], buf[CLUSTER_BLOB_MKEY_MAX];
	size_t len = n < sizeof(name) - 1 ? n : sizeof(name) - 1, kl;

	memcpy(name, d, len);
	name[len] = '\0';
	kl = cluster_blob_note_mkey(buf, CLUSTER_BLOB_PREFIX, name);
	if (kl == 0)
		return;
	if (kl != strlen(CLUSTER_BLOB_PREFIX "n:") + strlen(name) ||
	    strlen(name) > CLUSTER_NOTE_NAME_MAX)
		abort();
	for (const char *s = name; *s; s++)
		if (strchr(
			"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			"0123456789._:/-",
			*s) == NULL)
			abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	head(data + 1, size - 1, data[0]);
	chunk_key(data + 1, size - 1);
	claim_who(data + 1, size - 1);
	ids(data + 1, size - 1);
	position(data + 1, size - 1);
	note_name(data + 1, size - 1);
	return 0;
}
