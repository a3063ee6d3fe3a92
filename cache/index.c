/*
 * index.c - cache/ (the store), layer store (under store.c and admin.c;
 * calls codec.c and memo.c).  The 'T' index read whole: cache_scan, and
 * from it, at open and after an admin delete, the next seq and the
 * admission totals (cache_load_seq, cache_load_totals); what an entry
 * counts against admit_bytes (cache_entry_cost).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <rocksdb/c.h>

#include "cache/cache_int.h"

struct totals {
	uint64_t used, n, oldest;
};

int
cache_scan(
    struct cache *c, cache_entry_fn fn, void *arg, char *err, size_t errlen)
{
	rocksdb_iterator_t *it = rocksdb_create_iterator(c->db, c->ropts);
	struct cache_entry ent;
	uint8_t t0[CODEC_SEQ_KEY];
	char *e = NULL;
	int r = 0;

	codec_seq_key('T', 0, t0);
	for (rocksdb_iter_seek(it, (const char *)t0, sizeof(t0));
	     rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *k = (const void *)rocksdb_iter_key(it, &kl);
		const uint8_t *v = (const void *)rocksdb_iter_value(it, &vl);

		if (kl < 1 || k[0] != 'T')
			break;
		if (codec_tidx_decode(k, kl, v, vl, &ent) != 0)
			continue;
		if ((r = fn(&ent, arg)) != 0)
			break;
	}
	rocksdb_iter_get_error(it, &e);
	if (e != NULL) {
		snprintf(err, errlen, "%s", e);
		rocksdb_free(e);
		r = -EIO;
	}
	rocksdb_iter_destroy(it);
	return r;
}

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
	c->stale = CACHE_STALE_DEFAULT;
	cache_load_totals(c);
	cache_load_memos(c, true);
}

/* What an entry counts against admit_bytes. */
uint64_t
cache_entry_cost(uint64_t len, size_t plen)
{
	return len + plen + CACHE_VAL_OVERHEAD;
}

static int
add_entry(const struct cache_entry *ent, void *arg)
{
	struct totals *t = arg;

	if (t->n++ == 0)
		t->oldest = ent->time;
	t->used += cache_entry_cost(ent->len, ent->prefix_len);
	return 0;
}

void
cache_load_totals(struct cache *c)
{
	struct totals t = {0, 0, (uint64_t)time(NULL)};
	char err[256];

	/* A damaged index counts what it could read. */
	(void)cache_scan(c, add_entry, &t, err, sizeof(err));
	atomic_store(&c->used, t.used);
	atomic_store(&c->entries, t.n);
	atomic_store(&c->oldest_time, t.oldest);
}
