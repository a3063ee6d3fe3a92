/*
 * store.c - cache_get, cache_put and eviction of the oldest values.
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
cache_load_seq(struct cache *c)
{
	rocksdb_iterator_t *it = rocksdb_create_iterator(c->db, c->ropts);
	uint8_t last[CODEC_SEQ_KEY];
	uint64_t seq = 1;

	last[0] = 'T';
	memset(last + 1, 0xff, 8);
	rocksdb_iter_seek_for_prev(it, (const char *)last, sizeof(last));
	if (rocksdb_iter_valid(it)) {
		size_t kl;
		const char *k = rocksdb_iter_key(it, &kl);

		if (kl == CODEC_SEQ_KEY && k[0] == 'T')
			seq = codec_get_be64((const uint8_t *)k + 1) + 1;
	}
	rocksdb_iter_destroy(it);
	atomic_store(&c->seq, seq);
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
	rocksdb_writebatch_delete(b, (const char *)sk, sizeof(sk));
	rocksdb_write(c->db, c->wopts, b, &e);
	rocksdb_free(e);
	rocksdb_writebatch_destroy(b);
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
	if (c->remote != NULL) /* a shared handle: remote.c */
		return cache_remote_get(c, key, v);
	if (atomic_load(&c->disabled) || cache_is_zero(key, CACHE_KEY_LEN) ||
	    cache_lookup_seq(c, key, &seq) != 0)
		goto miss;
	codec_seq_key('V', seq, sk);
	ps = rocksdb_get_pinned(
	    c->db, c->ropts, (const char *)sk, sizeof(sk), &e);
	if (e != NULL) {
		rocksdb_free(e);
		goto miss;
	}
	if (ps == NULL) {
		drop_entry(c, key, seq); /* evicted: the 'K' entry dangles */
		goto miss;
	}
	data = rocksdb_pinnableslice_value(ps, &vlen);
	if (codec_val_decode((const uint8_t *)data, vlen, key, seq, &tmp) !=
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
	memcpy(tmp.data, data + CODEC_VAL_HDR, tmp.len);
	rocksdb_pinnableslice_destroy(ps);
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
	uint64_t sst = 0, mem = 0;

	rocksdb_property_int(c->db, "rocksdb.live-sst-files-size", &sst);
	rocksdb_property_int(c->db, "rocksdb.cur-size-all-mem-tables", &mem);
	return sst + mem;
}

/*
 * Delete the oldest values until about want bytes are freed, then give the
 * space back (drop whole files in the range, compact the rest).
 */
void
cache_evict_oldest(struct cache *c, uint64_t want)
{
	rocksdb_iterator_t *it = rocksdb_create_iterator(c->db, c->ropts);
	rocksdb_writebatch_t *b = rocksdb_writebatch_create();
	uint8_t t0[CODEC_SEQ_KEY], t1[CODEC_SEQ_KEY], v0[CODEC_SEQ_KEY],
	    v1[CODEC_SEQ_KEY], vlast[CODEC_SEQ_KEY];
	uint64_t freed = 0, last = 0, n = 0, seq;
	char *e = NULL;

	codec_seq_key('T', 0, t0);
	rocksdb_iter_seek(it, (const char *)t0, sizeof(t0));
	for (; rocksdb_iter_valid(it) && freed < want; rocksdb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *k = (const void *)rocksdb_iter_key(it, &kl);
		const uint8_t *v = (const void *)rocksdb_iter_value(it, &vl);

		if (kl != CODEC_SEQ_KEY || k[0] != 'T')
			break;
		last = codec_get_be64(k + 1);
		n++;
		if (vl < CODEC_TIDX_LEN)
			continue;
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
	if (n == 0) {
		rocksdb_writebatch_destroy(b);
		return;
	}
	codec_seq_key('T', last + 1, t1);
	codec_seq_key('V', 0, v0);
	codec_seq_key('V', last + 1, v1);
	codec_seq_key('V', last, vlast);
	rocksdb_writebatch_delete_range(
	    b, (const char *)t0, sizeof(t0), (const char *)t1, sizeof(t1));
	rocksdb_writebatch_delete_range(
	    b, (const char *)v0, sizeof(v0), (const char *)v1, sizeof(v1));
	rocksdb_write(c->db, c->wopts, b, &e);
	rocksdb_writebatch_destroy(b);
	if (e != NULL) {
		cache_fail(c, "eviction", e);
		rocksdb_free(e);
		return;
	}
	atomic_fetch_add(&c->evicted, n);
	/* The limit of delete_file_in_range is inclusive. */
	rocksdb_delete_file_in_range(c->db, (const char *)v0, sizeof(v0),
	    (const char *)vlast, sizeof(vlast), &e);
	rocksdb_free(e);
	rocksdb_compact_range(
	    c->db, (const char *)t0, sizeof(t0), (const char *)v1, sizeof(v1));
}

/* Every check_every bytes put, one thread checks the size against the bound. */
static void
maybe_evict(struct cache *c, uint64_t added)
{
	uint64_t used;

	if (atomic_fetch_add(&c->since_check, added) + added < c->check_every)
		return;
	if (atomic_flag_test_and_set(&c->evicting))
		return;
	atomic_store(&c->since_check, 0);
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

void
cache_put(struct cache *c, const uint8_t key[CACHE_KEY_LEN],
    const struct cache_val *v)
{
	rocksdb_writebatch_t *b;
	uint8_t ik[CODEC_INDEX_KEY], vk[CODEC_SEQ_KEY], tk[CODEC_SEQ_KEY],
	    sb[8];
	uint8_t *buf, *tv;
	const char *prefix = v->prefix != NULL ? v->prefix : "";
	size_t plen = strlen(prefix);
	uint64_t seq;
	char *e = NULL;

	if (c != NULL && c->remote != NULL) {
		cache_remote_put(c, key, v);
		return;
	}
	if (c == NULL || atomic_load(&c->disabled) ||
	    cache_is_zero(key, CACHE_KEY_LEN))
		return;
	if (v->len + CACHE_VAL_OVERHEAD > c->size_bound / 4)
		return; /* would evict most of the cache: not worth it */
	if ((buf = malloc(CODEC_VAL_HDR + v->len + CODEC_TIDX_LEN + plen)) ==
	    NULL) {
		atomic_fetch_add(&c->insert_failures, 1);
		return;
	}
	tv = buf + CODEC_VAL_HDR + v->len;
	seq = atomic_fetch_add(&c->seq, 1);
	codec_val_header(buf, v, key, seq);
	if (v->len > 0)
		memcpy(buf + CODEC_VAL_HDR, v->data, v->len);

	codec_index_key(key, ik);
	codec_seq_key('V', seq, vk);
	codec_seq_key('T', seq, tk);
	codec_put_be64(sb, seq);
	codec_tidx_encode(tv, key, v->len, (uint64_t)time(NULL), prefix, plen);
	b = rocksdb_writebatch_create();
	rocksdb_writebatch_put(b, (const char *)vk, sizeof(vk),
	    (const char *)buf, CODEC_VAL_HDR + v->len);
	rocksdb_writebatch_put(b, (const char *)tk, sizeof(tk),
	    (const char *)tv, CODEC_TIDX_LEN + plen);
	rocksdb_writebatch_put(
	    b, (const char *)ik, sizeof(ik), (const char *)sb, sizeof(sb));
	rocksdb_write(c->db, c->wopts, b, &e);
	rocksdb_writebatch_destroy(b);
	free(buf);
	if (e != NULL) {
		atomic_fetch_add(&c->insert_failures, 1);
		cache_fail(c, "write", e);
		rocksdb_free(e);
		return;
	}
	atomic_fetch_add(&c->bytes_written, CODEC_VAL_HDR + v->len);
	maybe_evict(c, CODEC_VAL_HDR + v->len);
}

void
cache_get_stats(struct cache *c, struct cache_stats *st)
{
	uint64_t sst = 0;

	memset(st, 0, sizeof(*st));
	if (c == NULL)
		return;
	if (c->remote != NULL) {
		cache_remote_get_stats(c, st);
		return;
	}
	st->hits = atomic_load(&c->hits);
	st->misses = atomic_load(&c->misses);
	st->bytes_read = atomic_load(&c->bytes_read);
	st->bytes_written = atomic_load(&c->bytes_written);
	st->insert_failures = atomic_load(&c->insert_failures);
	if (rocksdb_property_int(c->db, "rocksdb.total-sst-files-size", &sst) ==
	    0)
		st->disk_bytes = sst;
	st->disabled = atomic_load(&c->disabled);
}
