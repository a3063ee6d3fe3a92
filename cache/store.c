/*
 * store.c - cache/ (the store), layer store (above err.c, memo.c and
 * index.c, under digest.c, open.c and admin.c; calls codec.c). cache_get,
 * cache_put, eviction of the oldest values and the check of the store's
 * size (cache_maintain), and the admin lock that keeps the admission
 * totals true (cache_int.h).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rocksdb/c.h>

#include "cache/cache_int.h"

void
cache_admin_lock_init(struct cache *c)
{
	pthread_rwlockattr_t a;

	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(
	    &a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&c->admin, &a);
	pthread_rwlockattr_destroy(&a);
	pthread_mutex_init(&c->memo, NULL);
}

void
cache_admin_lock_destroy(struct cache *c)
{
	pthread_rwlock_destroy(&c->admin);
	pthread_mutex_destroy(&c->memo);
}

static void
sub_sat(atomic_uint_least64_t *a, uint64_t v)
{
	uint64_t cur = atomic_load(a);

	while (!atomic_compare_exchange_weak(a, &cur, cur > v ? cur - v : 0))
		;
}

int
cache_lookup_seq(
    struct cache *c, const uint8_t key[CACHE_KEY_LEN], uint64_t *seq)
{
	uint8_t k[CODEC_INDEX_KEY];
	char *e = NULL, *v;
	size_t vlen;
	int r = -ENOENT;

	codec_index_key(key, k);
	v = rocksdb_get(c->db, c->ropts, (const char *)k, sizeof(k), &vlen, &e);
	if (e == NULL && v != NULL && vlen == 8) {
		*seq = codec_get_be64((const uint8_t *)v);
		r = 0;
	}
	rocksdb_free(e);
	rocksdb_free(v);
	return r;
}

bool
cache_has(struct cache *c, const uint8_t key[CACHE_KEY_LEN])
{
	uint64_t seq;

	/* A shared handle has no db of its own: ask the store it uses. */
	return c != NULL && c->ops == NULL && cache_lookup_seq(c, key, &seq) == 0;
}

int
cache_holds(struct cache *c, const uint8_t key[CACHE_KEY_LEN])
{
	uint64_t seq;

	if (c == NULL)
		return 0;
	if (c->ops != NULL) /* a shared handle: handle.c */
		return c->ops->holds(c, key);
	return cache_lookup_seq(c, key, &seq) == 0;
}

/* Forget a missing or corrupt entry (best effort). */
static void
drop_entry(struct cache *c, const uint8_t key[CACHE_KEY_LEN], uint64_t seq)
{
	rocksdb_writebatch_t *b = rocksdb_writebatch_create();
	uint8_t k[CODEC_INDEX_KEY], sk[CODEC_SEQ_KEY];
	char *e = NULL;

	codec_index_key(key, k);
	rocksdb_writebatch_delete(b, (const char *)k, sizeof(k));
	codec_seq_key('V', seq, sk);
	rocksdb_writebatch_delete_cf(b, c->vcf, (const char *)sk, sizeof(sk));
	rocksdb_write(c->db, c->wopts, b, &e);
	rocksdb_free(e);
	rocksdb_writebatch_destroy(b);
}

static int put_at(struct cache *c, const uint8_t key[CACHE_KEY_LEN],
    const struct cache_val *v, const char *prefix, size_t plen,
    uint64_t old_seq, bool counted);

/*
 * A hit on an entry put more than stale / 2 seconds ago: rewrite it as
 * new (cache.h, struct cache_opts: stale).  v is the value read, its payload in v->data.
 */
static void
maybe_refresh(struct cache *c, const uint8_t key[CACHE_KEY_LEN], uint64_t seq,
    const struct cache_val *v)
{
	struct cache_entry ent;
	uint8_t tk[CODEC_SEQ_KEY];
	char *e = NULL, *t;
	size_t tl;
	uint64_t now = (uint64_t)time(NULL);

	if (c->stale == 0 || c->secondary[0] != '\0' || atomic_load(&c->full))
		return;
	codec_seq_key('T', seq, tk);
	t = rocksdb_get(c->db, c->ropts, (const char *)tk, sizeof(tk), &tl, &e);
	if (e == NULL && t != NULL &&
	    codec_tidx_decode(tk, sizeof(tk), (const uint8_t *)t, tl, &ent) ==
		0 &&
	    now > ent.time && now - ent.time > c->stale / 2) {
		struct cache_val nv = *v;

		/* Shared with puts, not with admin deletes (cache_int.h). */
		pthread_rwlock_rdlock(&c->admin);
		if (put_at(c, key, &nv, ent.prefix, ent.prefix_len, seq,
			false) == 0)
			atomic_fetch_add(&c->refreshed, 1);
		pthread_rwlock_unlock(&c->admin);
	}
	rocksdb_free(e);
	rocksdb_free(t);
}

int
cache_get(
    struct cache *c, const uint8_t key[CACHE_KEY_LEN], struct cache_val *v)
{
	rocksdb_pinnableslice_t *ps;
	struct cache_val tmp;
	const char *data;
	uint8_t sk[CODEC_SEQ_KEY];
	uint64_t seq;
	char *e = NULL;
	size_t vlen;

	if (c == NULL)
		return -ENOENT;
	if (c->ops != NULL) /* a shared handle: handle.c */
		return c->ops->get(c, key, v);
	if (atomic_load(&c->disabled) || cache_is_zero(key, CACHE_KEY_LEN) ||
	    cache_lookup_seq(c, key, &seq) != 0)
		goto miss;
	codec_seq_key('V', seq, sk);
	ps = rocksdb_get_pinned_cf(
	    c->db, c->vropts, c->vcf, (const char *)sk, sizeof(sk), &e);
	if (e != NULL) {
		rocksdb_free(e);
		goto miss;
	}
	if (ps == NULL) {
		drop_entry(c, key, seq); /* evicted: the 'K' entry dangles */
		goto miss;
	}
	data = rocksdb_pinnableslice_value(ps, &vlen);
	if (codec_env_open((const uint8_t *)data, vlen, key, &tmp, NULL) !=
	    0) {
		rocksdb_pinnableslice_destroy(ps);
		atomic_fetch_add(&c->corrupt, 1);
		drop_entry(c, key, seq);
		goto miss;
	}
	if ((tmp.data = malloc(tmp.len ? tmp.len : 1)) == NULL) {
		rocksdb_pinnableslice_destroy(ps);
		goto miss;
	}
	memcpy(tmp.data, data + CODEC_ENV_HDR, tmp.len);
	rocksdb_pinnableslice_destroy(ps);
	maybe_refresh(c, key, seq, &tmp);
	atomic_fetch_add(&c->hits, 1);
	atomic_fetch_add(&c->bytes_read, vlen);
	*v = tmp;
	return 0;
miss:
	atomic_fetch_add(&c->misses, 1);
	return -ENOENT;
}

uint64_t
cache_store_bytes(struct cache *c)
{
	uint64_t total = 0;

	for (int i = 0; i < 2; i++) {
		uint64_t sst = 0, mem = 0;

		rocksdb_property_int_cf(
		    c->db, c->cf[i], "rocksdb.live-sst-files-size", &sst);
		rocksdb_property_int_cf(
		    c->db, c->cf[i], "rocksdb.cur-size-all-mem-tables", &mem);
		total += sst + mem;
	}
	return total;
}

/*
 * Delete the oldest values until about want bytes are freed, stopping at
 * the first entry put at or after before; then give the space back (drop
 * whole files in the range, compact the rest).  Returns the bytes freed
 * (as admission counts them).
 */
static uint64_t
evict_range(struct cache *c, uint64_t want, uint64_t before)
{
	rocksdb_iterator_t *it = rocksdb_create_iterator(c->db, c->ropts);
	rocksdb_writebatch_t *b = rocksdb_writebatch_create();
	uint8_t t0[CODEC_SEQ_KEY], t1[CODEC_SEQ_KEY], v0[CODEC_SEQ_KEY],
	    v1[CODEC_SEQ_KEY], vlast[CODEC_SEQ_KEY];
	uint64_t freed = 0, cost = 0, last = 0, n = 0, seq;
	uint64_t next_time = (uint64_t)time(NULL);
	char *e = NULL;

	codec_seq_key('T', 0, t0);
	rocksdb_iter_seek(it, (const char *)t0, sizeof(t0));
	for (; rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *k = (const void *)rocksdb_iter_key(it, &kl);
		const uint8_t *v = (const void *)rocksdb_iter_value(it, &vl);

		if (kl != CODEC_SEQ_KEY || k[0] != 'T')
			break;
		if (vl >= CODEC_TIDX_LEN &&
		    (freed >= want ||
			codec_get_le64(v + CACHE_KEY_LEN + 8) >= before)) {
			next_time = codec_get_le64(v + CACHE_KEY_LEN + 8);
			break;
		}
		last = codec_get_be64(k + 1);
		n++;
		if (vl < CODEC_TIDX_LEN)
			continue;
		cost += cache_entry_cost(
		    codec_get_le64(v + CACHE_KEY_LEN), vl - CODEC_TIDX_LEN);
		/* A newer put of the same key keeps its 'K' entry. */
		if (cache_lookup_seq(c, v, &seq) == 0 && seq == last) {
			uint8_t ik[CODEC_INDEX_KEY];

			codec_index_key(v, ik);
			rocksdb_writebatch_delete(
			    b, (const char *)ik, sizeof(ik));
		}
		freed += codec_get_le64(v + CACHE_KEY_LEN) + CACHE_VAL_OVERHEAD;
	}
	rocksdb_iter_destroy(it);
	atomic_store(&c->oldest_time, next_time);
	if (n == 0) {
		rocksdb_writebatch_destroy(b);
		return 0;
	}
	codec_seq_key('T', last + 1, t1);
	codec_seq_key('V', 0, v0);
	codec_seq_key('V', last + 1, v1);
	codec_seq_key('V', last, vlast);
	rocksdb_writebatch_delete_range(
	    b, (const char *)t0, sizeof(t0), (const char *)t1, sizeof(t1));
	rocksdb_writebatch_delete_range_cf(b, c->vcf, (const char *)v0,
	    sizeof(v0), (const char *)v1, sizeof(v1));
	rocksdb_write(c->db, c->wopts, b, &e);
	rocksdb_writebatch_destroy(b);
	if (e != NULL) {
		cache_fail(c, "eviction", e);
		rocksdb_free(e);
		return 0;
	}
	atomic_fetch_add(&c->evicted, n);
	sub_sat(&c->used, cost);
	sub_sat(&c->entries, n);
	/*
	 * The values' files that hold only evicted ones go whole (the limit
	 * of delete_file_in_range is inclusive); compactions give back the
	 * rest.
	 */
	rocksdb_delete_file_in_range_cf(c->db, c->vcf, (const char *)v0,
	    sizeof(v0), (const char *)vlast, sizeof(vlast), &e);
	rocksdb_free(e);
	rocksdb_compact_range_cf(c->db, c->vcf, (const char *)v0, sizeof(v0),
	    (const char *)v1, sizeof(v1));
	rocksdb_compact_range(
	    c->db, (const char *)t0, sizeof(t0), (const char *)t1, sizeof(t1));
	return cost;
}

void
cache_evict_oldest(struct cache *c, uint64_t want)
{
	evict_range(c, want, UINT64_MAX);
}

/* What values are admitted up to: admit_bytes less the memos' share. */
static uint64_t
value_budget(const struct cache *c)
{
	return cache_admit_bytes(c) - cache_memo_budget(c);
}

/*
 * Make room for an entry of cost bytes when the store is full: delete
 * stale entries, oldest first (a batch of admit_bytes / 32 at least, so
 * that one compaction serves many puts).  Whether there is room now.
 */
static bool
make_room(struct cache *c, uint64_t cost)
{
	uint64_t now = (uint64_t)time(NULL), before, want, used, budget;
	bool ok;

	budget = value_budget(c);
	before = c->stale == 0	  ? UINT64_MAX
		 : now > c->stale ? now - c->stale + 1
				  : 0;
	if (atomic_load(&c->oldest_time) >= before)
		return false; /* the oldest entry is in use */
	if (atomic_flag_test_and_set(&c->evicting))
		return false;
	used = atomic_load(&c->used);
	want = used + cost > budget ? used + cost - budget : 0;
	if (want < budget / 32)
		want = budget / 32;
	evict_range(c, want, before);
	ok = atomic_load(&c->used) + cost <= budget;
	atomic_flag_clear(&c->evicting);
	return ok;
}

/*
 * Count cost bytes against value_budget before
 * the put, so that puts on many threads at once cannot pass the admission
 * level together: making room once if they do not fit.  Whether they were
 * counted.
 */
static bool
reserve(struct cache *c, uint64_t cost)
{
	uint64_t budget = value_budget(c), u = atomic_load(&c->used);
	bool tried = false;

	for (;;) {
		if (u + cost > budget) {
			if (tried || !make_room(c, cost))
				return false;
			tried = true;
			u = atomic_load(&c->used);
			continue;
		}
		if (atomic_compare_exchange_weak(&c->used, &u, u + cost))
			return true;
	}
}

_Thread_local bool cache_no_evict;

/*
 * Every check_every bytes put, one thread checks the size against the
 * bound: the putting thread (which the eviction slows down, as it
 * should), or the owner's maintenance thread (srv.c) when the putting
 * thread is one of its request threads (cache_no_evict: a refresh on a
 * hit).
 */
static void
maybe_evict(struct cache *c, uint64_t added)
{
	if (atomic_fetch_add(&c->since_check, added) + added < c->check_every)
		return;
	cache_maintain_soon(c);
}

void
cache_maintain_soon(struct cache *c)
{
	if (cache_no_evict && c->maint_wake != NULL) {
		c->maint_wake(c->maint_arg);
		return;
	}
	cache_maintain(c);
}

void
cache_maintain(struct cache *c)
{
	uint64_t used, mb = cache_memo_budget(c);

	if (atomic_flag_test_and_set(&c->evicting))
		return;
	atomic_store(&c->since_check, 0);
	/*
	 * Memos past their share (it shrank: a smaller cache_size): the
	 * oldest go, down to 7/8 of it.
	 */
	if ((used = atomic_load(&c->memo_used)) > mb)
		(void)cache_evict_memos(
		    c, used - (mb - mb / 8), UINT64_MAX, NULL, NULL, 0);
	/*
	 * Other threads go on putting while an eviction compacts: look again
	 * when it is done (a few rounds at most, then the next put's turn).
	 */
	for (int round = 0;
	     round < 4 && (used = cache_store_bytes(c)) > c->size_bound;
	     round++)
		cache_evict_oldest(c, used - c->size_bound / 10 * 9);
	atomic_flag_clear(&c->evicting);
}

#define BATCH_KEEP_MAX (8u << 20) /* a thread's batch kept up to this */

static pthread_key_t batch_key;
static pthread_once_t batch_once = PTHREAD_ONCE_INIT;

static void
batch_free(void *b)
{
	rocksdb_writebatch_destroy(b);
}

static void
batch_key_make(void)
{
	if (pthread_key_create(&batch_key, batch_free) != 0)
		batch_key = (pthread_key_t)-1; /* no key: a batch per put */
}

/*
 * The calling thread's write batch, empty: kept between puts (cleared,
 * its buffer kept), so that a put does not grow a new one to the
 * value's size, page by fresh page.  Freed when the thread exits.
 */
static rocksdb_writebatch_t *
thread_batch(bool *kept)
{
	rocksdb_writebatch_t *b = NULL;

	pthread_once(&batch_once, batch_key_make);
	*kept = false;
	if (batch_key != (pthread_key_t)-1 &&
	    (b = pthread_getspecific(batch_key)) != NULL) {
		*kept = true;
		return b;
	}
	b = rocksdb_writebatch_create();
	if (batch_key != (pthread_key_t)-1 &&
	    pthread_setspecific(batch_key, b) == 0)
		*kept = true;
	return b;
}

/* Done with the thread's batch b: cleared for the next put, unless it
 * grew large (a huge value): that one is freed, not kept. */
static void
thread_batch_done(rocksdb_writebatch_t *b, bool kept)
{
	size_t size;

	rocksdb_writebatch_data(b, &size);
	if (kept && size <= BATCH_KEEP_MAX) {
		rocksdb_writebatch_clear(b);
		return;
	}
	if (kept)
		pthread_setspecific(batch_key, NULL);
	rocksdb_writebatch_destroy(b);
}

/*
 * Write v under key as the newest entry, with prefix (plen bytes) in its
 * index record; old_seq nonzero: a refresh, which deletes the entry at
 * old_seq in the same write.  0, or -ENOMEM / -EIO (counted).  The value
 * goes into the write batch as two parts, the envelope's header and the
 * payload where it lies: no copy of it is made here.
 */
static int
put_at(struct cache *c, const uint8_t key[CACHE_KEY_LEN],
    const struct cache_val *v, const char *prefix, size_t plen,
    uint64_t old_seq, bool counted)
{
	rocksdb_writebatch_t *b;
	uint8_t ik[CODEC_INDEX_KEY], vk[CODEC_SEQ_KEY], tk[CODEC_SEQ_KEY],
	    sb[8], hdr[CODEC_ENV_HDR];
	const char *vparts[2] = {(const char *)hdr, (const char *)v->data};
	size_t vsizes[2] = {CODEC_ENV_HDR, v->len};
	const char *vkey = (const char *)vk;
	size_t vklen = sizeof(vk);
	uint8_t *tv;
	uint64_t seq;
	char *e = NULL;
	bool kept;

	if ((tv = malloc(CODEC_TIDX_LEN + plen)) == NULL) {
		atomic_fetch_add(&c->insert_failures, 1);
		return -ENOMEM;
	}
	seq = atomic_fetch_add(&c->seq, 1);
	codec_env_seal(hdr, key, v);

	codec_index_key(key, ik);
	codec_seq_key('V', seq, vk);
	codec_seq_key('T', seq, tk);
	codec_put_be64(sb, seq);
	codec_tidx_encode(tv, key, v->len, (uint64_t)time(NULL), prefix, plen);
	b = thread_batch(&kept);
	rocksdb_writebatch_putv_cf(
	    b, c->vcf, 1, &vkey, &vklen, v->len > 0 ? 2 : 1, vparts, vsizes);
	rocksdb_writebatch_put(b, (const char *)tk, sizeof(tk),
	    (const char *)tv, CODEC_TIDX_LEN + plen);
	rocksdb_writebatch_put(
	    b, (const char *)ik, sizeof(ik), (const char *)sb, sizeof(sb));
	if (old_seq != 0) {
		codec_seq_key('V', old_seq, vk);
		rocksdb_writebatch_delete_cf(
		    b, c->vcf, (const char *)vk, sizeof(vk));
		codec_seq_key('T', old_seq, tk);
		rocksdb_writebatch_delete(b, (const char *)tk, sizeof(tk));
	}
	rocksdb_write(c->db, c->wopts, b, &e);
	thread_batch_done(b, kept);
	free(tv);
	if (e != NULL) {
		atomic_fetch_add(&c->insert_failures, 1);
		cache_fail(c, "write", e);
		rocksdb_free(e);
		return -EIO;
	}
	/*
	 * Two threads refreshing one entry at once leave one of the two new
	 * records unreferenced; eviction takes it like any other.
	 */
	if (old_seq == 0) {
		if (!counted)
			atomic_fetch_add(
			    &c->used, cache_entry_cost(v->len, plen));
		atomic_fetch_add(&c->entries, 1);
	}
	atomic_fetch_add(&c->bytes_written, CODEC_ENV_HDR + v->len);
	cache_room_wrote(c);
	maybe_evict(c, CODEC_ENV_HDR + v->len);
	return 0;
}

void
cache_put(struct cache *c, const uint8_t key[CACHE_KEY_LEN],
    const struct cache_val *v)
{
	const char *prefix = v->prefix != NULL ? v->prefix : "";
	size_t plen = strlen(prefix);
	uint64_t cost = cache_entry_cost(v->len, plen), seq, h, cur = 0;
	atomic_uint_least64_t *slot;

	if (c != NULL && c->ops != NULL) {
		c->ops->put(c, key, v); /* the owner admits it */
		return;
	}
	if (c == NULL || atomic_load(&c->disabled) ||
	    cache_is_zero(key, CACHE_KEY_LEN))
		return;
	if (v->len + CACHE_VAL_OVERHEAD > c->size_bound / 4) {
		/* Would evict most of the cache: not worth it. */
		atomic_fetch_add(&c->oversize, 1);
		return;
	}
	if (!cache_room_ok(c)) {
		/* A full disk: no insert, counted (room.c). */
		atomic_fetch_add(&c->nospace, 1);
		atomic_fetch_add(&c->insert_failures, 1);
		return;
	}
	/*
	 * Two workers that missed the same sample at once (its batches of
	 * two epochs, made together) both put it: the second would be an
	 * entry of its own, counted, never read.  The first claims the key
	 * for the time of its put; a second finds it claimed, or stored.
	 */
	h = codec_get_le64(key) | 1;
	slot = &c->putting[h % CACHE_PUTTING];
	if (!atomic_compare_exchange_strong(slot, &cur, h)) {
		if (cur == h)
			return; /* being put by another worker */
		slot = NULL;	/* another key's slot: go on unclaimed */
	}
	/*
	 * From admission to accounting, exclusive of admin deletes: their
	 * cache_load_totals then counts every entry once (cache_int.h).
	 */
	pthread_rwlock_rdlock(&c->admin);
	if (cache_lookup_seq(c, key, &seq) == 0)
		goto unlock;
	/* stale = 0: no admission, the oldest go when the files pass the
	 * bound (maybe_evict), as before admission. */
	if (c->stale != 0 && !reserve(c, cost)) {
		atomic_fetch_add(&c->denied, 1);
		goto unlock;
	}
	if (put_at(c, key, v, prefix, plen, 0, c->stale != 0) == 0)
		atomic_fetch_add(&c->inserts, 1);
	else if (c->stale != 0)
		sub_sat(&c->used, cost);
unlock:
	pthread_rwlock_unlock(&c->admin);
	if (slot != NULL)
		atomic_store(slot, 0);
}
