/*
 * digest.c - cache/ (the store), layer store (above memo.c and store.c;
 * calls codec.c and err.c).  The hashes (SHA-256 of sources, cache keys)
 * and the digest memos' lookups, which let a hit skip reading its source
 * (their records' share, room and eviction: memo.c).
 *
 * Digest memos are small (~100 bytes a source file) but as many as the
 * source files (or tar members): they count against admit_bytes
 * (CACHE_MEMO_COST each) in a share of it of their own, a 32nd
 * (cache_memo_budget: a memo is worth less than any value, and is of use
 * only beside its value), which values do not take; past that the oldest
 * go, in insertion order (their 'M' records), when a memo is put, and in
 * cache_maintain should the share have shrunk (a smaller cache_size).  A
 * memo met with another stat than its file's (the file changed) is
 * deleted then, not kept for good.  Every write of memos holds c->memo,
 * so that their count stays true.
 *
 * A memo is made only for a file whose times are older than the read
 * that digested it by more than the file system's timestamp granularity
 * (git's racy-timestamp rule, cache_memo_trusted): a file changed in the
 * same tick as it was read keeps its stat and would else map its new
 * content to the old digest.
 */
#include <sys/stat.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <rocksdb/c.h>

#include "cache/cache_int.h"

/*
 * On an allocation failure inside OpenSSL the digest is all zeroes, which
 * cache_key, cache_get and cache_put take as "unknown": never a hit.
 */
void
cache_sha256(const void *data, size_t len, uint8_t out[32])
{
	if (EVP_Digest(data, len, out, NULL, EVP_sha256(), NULL) != 1)
		memset(out, 0, 32);
}

void
cache_key(
    const uint8_t digest[32], const char *prefix, uint8_t key[CACHE_KEY_LEN])
{
	EVP_MD_CTX *ctx;
	uint8_t n[8], ver[4];
	size_t plen = strlen(prefix);
	int ok;

	memset(key, 0, CACHE_KEY_LEN);
	if (cache_is_zero(digest, 32) || (ctx = EVP_MD_CTX_new()) == NULL)
		return;
	codec_put_le64(n, plen);
	codec_put_le32(ver, CACHE_FORMAT_VERSION);
	ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
	     EVP_DigestUpdate(ctx, digest, 32) == 1 &&
	     EVP_DigestUpdate(ctx, n, sizeof(n)) == 1 &&
	     EVP_DigestUpdate(ctx, prefix, plen) == 1 &&
	     EVP_DigestUpdate(ctx, ver, sizeof(ver)) == 1 &&
	     EVP_DigestFinal_ex(ctx, key, NULL) == 1;
	EVP_MD_CTX_free(ctx);
	if (!ok)
		memset(key, 0, CACHE_KEY_LEN);
}

/*
 * Whether file time t is older than t0 (a clock reading) by more than the
 * grain.  t may be anything (a client sends its stat): compared in
 * seconds first, so that no subtraction can overflow.
 */
static bool
older(const struct timespec *t, const struct timespec *t0)
{
	int64_t s0 = (int64_t)t0->tv_sec, d;

	if ((int64_t)t->tv_sec < s0 - 10)
		return true;
	if ((int64_t)t->tv_sec > s0)
		return false;
	d = (s0 - (int64_t)t->tv_sec) * 1000000000 +
	    ((int64_t)t0->tv_nsec - (int64_t)t->tv_nsec);
	return d > CACHE_MEMO_GRAIN_NS;
}

bool
cache_memo_trusted(const struct stat *before, const struct stat *after,
    const struct timespec *t0)
{
	uint8_t a[CODEC_MEMO_STAT], b[CODEC_MEMO_STAT];

	codec_memo_stat(before, a);
	codec_memo_stat(after, b);
	return memcmp(a, b, sizeof(a)) == 0 && older(&before->st_mtim, t0) &&
	       older(&before->st_ctim, t0);
}

static void
memo_key(const char *path, uint8_t k[CODEC_MEMO_KEY])
{
	k[0] = 'D';
	cache_sha256(path, strlen(path), k + 1);
}

/*
 * Delete the memo under k that a lookup found stale (or of the old
 * format), unless a put replaced it meanwhile (its seq is no longer seen).
 * A secondary instance (feedfs-cache) writes nothing.
 */
static void
memo_drop(struct cache *c, const uint8_t k[CODEC_MEMO_KEY], int seen,
    uint64_t seen_seq)
{
	rocksdb_writebatch_t *b;
	uint8_t v[CODEC_MEMO_VAL], mk[CODEC_SEQ_KEY];
	uint64_t seq;
	char *e = NULL;
	int r;

	if (c->secondary[0] != '\0')
		return;
	pthread_mutex_lock(&c->memo);
	r = cache_memo_read(c, k, v, &seq);
	if (r != seen || seq != seen_seq) {
		pthread_mutex_unlock(&c->memo);
		return;
	}
	b = rocksdb_writebatch_create();
	rocksdb_writebatch_delete(b, (const char *)k, CODEC_MEMO_KEY);
	if (seq != 0) {
		codec_seq_key('M', seq, mk);
		rocksdb_writebatch_delete(b, (const char *)mk, sizeof(mk));
	}
	rocksdb_write(c->db, c->wopts, b, &e);
	rocksdb_writebatch_destroy(b);
	if (e == NULL && seq != 0)
		cache_memo_uncount(c, 1);
	rocksdb_free(e); /* best effort: met again, tried again */
	pthread_mutex_unlock(&c->memo);
}

int
cache_get_digest(struct cache *c, const char *path, const struct stat *st,
    uint8_t digest[32])
{
	uint8_t k[CODEC_MEMO_KEY], want[CODEC_MEMO_STAT], v[CODEC_MEMO_VAL];
	uint64_t seq;
	int r;

	if (c != NULL && c->ops != NULL)
		return c->ops->get_digest(c, path, st, digest);
	if (c == NULL || atomic_load(&c->disabled))
		return -ENOENT;
	memo_key(path, k);
	if ((r = cache_memo_read(c, k, v, &seq)) == -ENOENT)
		return -ENOENT;
	codec_memo_stat(st, want);
	if (r == 0 && memcmp(v + 32, want, sizeof(want)) == 0) {
		memcpy(digest, v, 32);
		return 0;
	}
	/* The file changed since (or an old memo): it is no use any more. */
	memo_drop(c, k, r, seq);
	return -ENOENT;
}

void
cache_put_digest(struct cache *c, const char *path, const struct stat *st,
    const uint8_t digest[32])
{
	uint8_t k[CODEC_MEMO_KEY], v[CODEC_MEMO_VAL], old[CODEC_MEMO_VAL],
	    mk[CODEC_SEQ_KEY], mv[CODEC_MEMO_IDX];
	rocksdb_writebatch_t *b;
	struct timespec now;
	uint64_t seq, old_seq, evicted = 0;
	char *e = NULL;
	bool counted = false;
	int r;

	if (c != NULL && c->ops != NULL) {
		c->ops->put_digest(c, path, st, digest);
		return;
	}
	if (c == NULL || atomic_load(&c->disabled) ||
	    cache_is_zero(digest, 32) || !cache_room_ok(c))
		return;
	/*
	 * The caller's read began before now: a stat racy against now is
	 * racy against that read too (a client's memo is checked here, by
	 * the owner, as well).
	 */
	clock_gettime(CLOCK_REALTIME, &now);
	if (!cache_memo_trusted(st, st, &now))
		return;
	memo_key(path, k);
	memcpy(v, digest, 32);
	codec_memo_stat(st, v + 32);
	pthread_mutex_lock(&c->memo);
	r = cache_memo_read(c, k, old, &old_seq);
	if (r == 0 && memcmp(old, v, 32 + CODEC_MEMO_STAT) == 0) {
		/* Two workers digested one file: the first memo stands. */
		pthread_mutex_unlock(&c->memo);
		return;
	}
	if (r != 0 && !cache_memo_room(c, &evicted)) {
		pthread_mutex_unlock(&c->memo);
		return;
	}
	seq = atomic_fetch_add(&c->memo_seq, 1);
	codec_put_le64(v + 32 + CODEC_MEMO_STAT, seq);
	codec_seq_key('M', seq, mk);
	memcpy(mv, k + 1, 32);
	codec_put_le64(mv + 32, (uint64_t)now.tv_sec);
	b = rocksdb_writebatch_create();
	rocksdb_writebatch_put(
	    b, (const char *)k, sizeof(k), (const char *)v, sizeof(v));
	rocksdb_writebatch_put(
	    b, (const char *)mk, sizeof(mk), (const char *)mv, sizeof(mv));
	if (r == 0) {
		/* Replaced: its record goes, its count passes to this one. */
		codec_seq_key('M', old_seq, mk);
		rocksdb_writebatch_delete(b, (const char *)mk, sizeof(mk));
		counted = true;
	}
	rocksdb_write(c->db, c->wopts, b, &e);
	rocksdb_writebatch_destroy(b);
	if (e == NULL && !counted) {
		atomic_fetch_add(&c->memos, 1);
		atomic_fetch_add(&c->memo_used, CACHE_MEMO_COST);
	}
	pthread_mutex_unlock(&c->memo);
	if (evicted != 0)
		cache_memo_compact(c, evicted);
	if (e != NULL) {
		atomic_fetch_add(&c->insert_failures, 1);
		cache_fail(c, "write", e);
		rocksdb_free(e);
		return;
	}
	if (atomic_load(&c->memo_used) > cache_memo_budget(c))
		cache_maintain_soon(c);
}
