/*
 * digest.c - layer: store (calls codec.c, and err.c's cache_fail).  The
 * hashes (SHA-256 of sources, cache keys) and the digest memos, which let
 * a hit skip reading its source.
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

uint64_t
cache_memo_budget(const struct cache *c)
{
	return cache_admit_bytes(c) / 32;
}

/*
 * The memo under k: 0 and its value in v (CODEC_MEMO_VAL bytes, *seq its
 * 'M' record's), -ENOENT, or -EINVAL for one of the format before 'M'
 * records (*seq 0: counted nowhere).
 */
static int
memo_read(struct cache *c, const uint8_t k[CODEC_MEMO_KEY],
    uint8_t v[CODEC_MEMO_VAL], uint64_t *seq)
{
	rocksdb_pinnableslice_t *ps;
	const char *d;
	char *e = NULL;
	size_t vlen;
	int r = 0;

	*seq = 0;
	ps = rocksdb_get_pinned(
	    c->db, c->ropts, (const char *)k, CODEC_MEMO_KEY, &e);
	if (e != NULL) {
		rocksdb_free(e);
		return -ENOENT;
	}
	if (ps == NULL)
		return -ENOENT;
	d = rocksdb_pinnableslice_value(ps, &vlen);
	if (vlen == CODEC_MEMO_VAL) {
		memcpy(v, d, CODEC_MEMO_VAL);
		*seq = codec_get_le64(v + 32 + CODEC_MEMO_STAT);
	} else
		r = -EINVAL;
	rocksdb_pinnableslice_destroy(ps);
	return r;
}

/* Forget one counted memo (its 'M' record is gone), under c->memo. */
static void
memo_uncount(struct cache *c, uint64_t n)
{
	uint64_t cur = atomic_load(&c->memos), u = atomic_load(&c->memo_used);

	atomic_store(&c->memos, cur > n ? cur - n : 0);
	atomic_store(&c->memo_used,
	    u > n * CACHE_MEMO_COST ? u - n * CACHE_MEMO_COST : 0);
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
	r = memo_read(c, k, v, &seq);
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
		memo_uncount(c, 1);
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
	if ((r = memo_read(c, k, v, &seq)) == -ENOENT)
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

static uint64_t evict_memos_locked(struct cache *c, uint64_t want,
    uint64_t before, uint64_t *lastp, char **ep);
static void memo_compact(struct cache *c, uint64_t last);

/*
 * Room for a new memo in the memos' share, holding c->memo: when it is
 * full, the oldest memos go (an eighth of the share at once, so that one
 * compaction serves many puts).  *last: the seq of the newest memo
 * evicted (for memo_compact), or left.  Whether there is room.
 */
static bool
memo_room(struct cache *c, uint64_t *last)
{
	uint64_t budget = cache_memo_budget(c), used, want;
	char *e = NULL;

	used = atomic_load(&c->memo_used);
	if (used + CACHE_MEMO_COST <= budget)
		return true;
	want = used + CACHE_MEMO_COST - budget;
	if (want < budget / 8)
		want = budget / 8;
	(void)evict_memos_locked(c, want, UINT64_MAX, last, &e);
	if (e != NULL) {
		cache_fail(c, "eviction", e);
		rocksdb_free(e);
		return false;
	}
	return atomic_load(&c->memo_used) + CACHE_MEMO_COST <= budget;
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
	if (c == NULL || atomic_load(&c->disabled) || cache_is_zero(digest, 32))
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
	r = memo_read(c, k, old, &old_seq);
	if (r == 0 && memcmp(old, v, 32 + CODEC_MEMO_STAT) == 0) {
		/* Two workers digested one file: the first memo stands. */
		pthread_mutex_unlock(&c->memo);
		return;
	}
	if (r != 0 && !memo_room(c, &evicted)) {
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
		memo_compact(c, evicted);
	if (e != NULL) {
		atomic_fetch_add(&c->insert_failures, 1);
		cache_fail(c, "write", e);
		rocksdb_free(e);
		return;
	}
	if (atomic_load(&c->memo_used) > cache_memo_budget(c))
		cache_maintain_soon(c);
}

/*
 * cache_evict_memos holding c->memo, without giving the space back: how
 * many went, and *last the seq of the newest of them; *e on failure.
 */
static uint64_t
evict_memos_locked(
    struct cache *c, uint64_t want, uint64_t before, uint64_t *lastp, char **ep)
{
	rocksdb_iterator_t *it;
	rocksdb_writebatch_t *b;
	uint8_t m0[CODEC_SEQ_KEY], m1[CODEC_SEQ_KEY];
	uint64_t n = 0, last = 0, freed = 0;
	char *e = NULL;

	it = rocksdb_create_iterator(c->db, c->ropts);
	b = rocksdb_writebatch_create();
	codec_seq_key('M', 0, m0);
	for (rocksdb_iter_seek(it, (const char *)m0, sizeof(m0));
	     rocksdb_iter_valid(it) && freed < want; rocksdb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *k = (const void *)rocksdb_iter_key(it, &kl);
		const uint8_t *mv = (const void *)rocksdb_iter_value(it, &vl);
		uint8_t dk[CODEC_MEMO_KEY], v[CODEC_MEMO_VAL];
		uint64_t seq;

		if (kl != CODEC_SEQ_KEY || k[0] != 'M')
			break;
		if (vl == CODEC_MEMO_IDX && codec_get_le64(mv + 32) >= before)
			break;
		last = codec_get_be64(k + 1);
		n++;
		freed += CACHE_MEMO_COST;
		if (vl != CODEC_MEMO_IDX)
			continue;
		/* The memo itself, unless a newer put took its path. */
		dk[0] = 'D';
		memcpy(dk + 1, mv, 32);
		if (memo_read(c, dk, v, &seq) == 0 && seq == last)
			rocksdb_writebatch_delete(
			    b, (const char *)dk, sizeof(dk));
	}
	rocksdb_iter_get_error(it, &e);
	rocksdb_iter_destroy(it);
	if (e == NULL && n > 0) {
		codec_seq_key('M', last + 1, m1);
		rocksdb_writebatch_delete_range(b, (const char *)m0, sizeof(m0),
		    (const char *)m1, sizeof(m1));
		rocksdb_write(c->db, c->wopts, b, &e);
	}
	rocksdb_writebatch_destroy(b);
	if (e == NULL && n > 0) {
		memo_uncount(c, n);
		atomic_fetch_add(&c->memo_evicted, n);
	}
	*lastp = last;
	*ep = e;
	return e == NULL ? n : 0;
}

/* The space of the 'M' records up to seq last back. */
static void
memo_compact(struct cache *c, uint64_t last)
{
	uint8_t m0[CODEC_SEQ_KEY], m1[CODEC_SEQ_KEY];

	codec_seq_key('M', 0, m0);
	codec_seq_key('M', last + 1, m1);
	rocksdb_compact_range(
	    c->db, (const char *)m0, sizeof(m0), (const char *)m1, sizeof(m1));
}

int
cache_evict_memos(struct cache *c, uint64_t want, uint64_t before,
    uint64_t *nout, char *err, size_t errlen)
{
	uint64_t n, last = 0;
	char *e = NULL;

	if (nout != NULL)
		*nout = 0;
	pthread_mutex_lock(&c->memo);
	n = evict_memos_locked(c, want, before, &last, &e);
	pthread_mutex_unlock(&c->memo);
	if (e != NULL) {
		if (err != NULL)
			snprintf(err, errlen, "%s", e);
		cache_fail(c, "eviction", e);
		rocksdb_free(e);
		return -EIO;
	}
	if (n > 0) {
		/* The deleted records' space back: 'M' is one range. */
		memo_compact(c, last);
		if (nout != NULL)
			*nout = n;
	}
	return 0;
}

void
cache_load_memos(struct cache *c, bool migrate)
{
	rocksdb_iterator_t *it = rocksdb_create_iterator(c->db, c->ropts);
	uint8_t m0[CODEC_SEQ_KEY], d0[1] = {'D'}, d1[1] = {'D' + 1};
	uint64_t n = 0, next = 1;

	if (migrate) {
		/*
		 * A store of the format before 'M' records: its memos would
		 * never be evicted.  They cost only a read each: all go.
		 */
		rocksdb_iter_seek(it, (const char *)d0, sizeof(d0));
		if (rocksdb_iter_valid(it)) {
			size_t kl, vl;
			const char *k = rocksdb_iter_key(it, &kl);

			(void)rocksdb_iter_value(it, &vl);
			if (kl == CODEC_MEMO_KEY && k[0] == 'D' &&
			    vl != CODEC_MEMO_VAL) {
				char *e = NULL;

				rocksdb_delete_range_cf(c->db, c->wopts,
				    c->cf[0], (const char *)d0, sizeof(d0),
				    (const char *)d1, sizeof(d1), &e);
				rocksdb_free(e);
			}
		}
	}
	codec_seq_key('M', 0, m0);
	for (rocksdb_iter_seek(it, (const char *)m0, sizeof(m0));
	     rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
		size_t kl;
		const uint8_t *k = (const void *)rocksdb_iter_key(it, &kl);

		if (kl != CODEC_SEQ_KEY || k[0] != 'M')
			break;
		n++;
		next = codec_get_be64(k + 1) + 1;
	}
	rocksdb_iter_destroy(it);
	atomic_store(&c->memo_seq, next);
	atomic_store(&c->memos, n);
	atomic_store(&c->memo_used, n * CACHE_MEMO_COST);
}
