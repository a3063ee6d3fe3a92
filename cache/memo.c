/*
 * memo.c - cache/ (the store), layer store (under index.c, store.c,
 * stats.c and digest.c; calls codec.c and err.c).  The digest memos'
 * records below their lookups: the share of admission that values and
 * memos fill (cache_admit_bytes, and the memos' 32nd of it:
 * cache_memo_budget), reading and counting a memo, room for a new one, the
 * eviction of the oldest (their 'M' records, in insertion order), and
 * their counts loaded at open.  digest.c says what memos are for and when
 * one is made.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <rocksdb/c.h>

#include "cache/cache_int.h"

uint64_t
cache_admit_bytes(const struct cache *c)
{
	return c->size_bound - c->size_bound / 20;
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
int
cache_memo_read(struct cache *c, const uint8_t k[CODEC_MEMO_KEY],
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

/* Forget n counted memos (their 'M' records are gone), under c->memo. */
void
cache_memo_uncount(struct cache *c, uint64_t n)
{
	uint64_t cur = atomic_load(&c->memos), u = atomic_load(&c->memo_used);

	atomic_store(&c->memos, cur > n ? cur - n : 0);
	atomic_store(&c->memo_used,
	    u > n * CACHE_MEMO_COST ? u - n * CACHE_MEMO_COST : 0);
}

static uint64_t evict_memos_locked(struct cache *c, uint64_t want,
    uint64_t before, uint64_t *lastp, char **ep);

/*
 * Room for a new memo in the memos' share, holding c->memo: when it is
 * full, the oldest memos go (an eighth of the share at once, so that one
 * compaction serves many puts).  *last: the seq of the newest memo
 * evicted (for cache_memo_compact), or left.  Whether there is room.
 */
bool
cache_memo_room(struct cache *c, uint64_t *last)
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
		if (cache_memo_read(c, dk, v, &seq) == 0 && seq == last)
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
		cache_memo_uncount(c, n);
		atomic_fetch_add(&c->memo_evicted, n);
	}
	*lastp = last;
	*ep = e;
	return e == NULL ? n : 0;
}

/* The space of the 'M' records up to seq last back. */
void
cache_memo_compact(struct cache *c, uint64_t last)
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
		cache_memo_compact(c, last);
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
