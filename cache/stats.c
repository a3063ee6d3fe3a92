/*
 * stats.c - cache/ (the store), layer store (calls memo.c).  What a store
 * counts: its figures (cache_get_stats), and hits and misses per prefix
 * text (cache_note_use, cache_get_prefix_stats).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <rocksdb/c.h>

#include "cache/cache_int.h"

void
cache_get_stats(struct cache *c, struct cache_stats *st)
{
	uint64_t sst = 0;

	memset(st, 0, sizeof(*st));
	if (c == NULL)
		return;
	if (c->ops != NULL) {
		c->ops->get_stats(c, st);
		return;
	}
	st->hits = atomic_load(&c->hits);
	st->misses = atomic_load(&c->misses);
	st->bytes_read = atomic_load(&c->bytes_read);
	st->bytes_written = atomic_load(&c->bytes_written);
	st->insert_failures = atomic_load(&c->insert_failures);
	st->inserts = atomic_load(&c->inserts);
	st->denied = atomic_load(&c->denied);
	st->oversize = atomic_load(&c->oversize);
	st->evictions = atomic_load(&c->evicted);
	st->refreshes = atomic_load(&c->refreshed);
	st->entries = atomic_load(&c->entries);
	st->used_bytes = atomic_load(&c->used) + atomic_load(&c->memo_used);
	st->memos = atomic_load(&c->memos);
	st->memo_evictions = atomic_load(&c->memo_evicted);
	st->admit_bytes = cache_admit_bytes(c);
	for (int i = 0; i < 2; i++)
		if (rocksdb_property_int_cf(c->db, c->cf[i],
			"rocksdb.total-sst-files-size", &sst) == 0)
			st->disk_bytes += sst;
	st->disabled = atomic_load(&c->disabled);
	st->full = atomic_load(&c->full);
	st->nospace = atomic_load(&c->nospace);
	st->size_bound = c->size_bound;
	st->size_clamped = c->size_clamped;
	st->dir_format = CACHE_FORMAT_VERSION;
}

void
cache_note_use(struct cache *c, const char *prefix, bool hit)
{
	struct cache_pfx_stat *p;
	size_t i;

	if (c == NULL)
		return;
	if (c->ops != NULL) { /* a shared handle: to its store (handle.c) */
		c->ops->note_use(c, prefix, hit);
		return;
	}
	for (i = 0; i < CACHE_PFX_MAX; i++) {
		unsigned st = atomic_load(&c->pfx[i].state);

		p = &c->pfx[i];
		if (st == 2 && strcmp(p->text, prefix) == 0)
			break;
		if (st == 0 &&
		    atomic_compare_exchange_strong(&p->state, &st, 1)) {
			snprintf(p->text, sizeof(p->text), "%s", prefix);
			atomic_store(&p->state, 2);
			break;
		}
	}
	if (i == CACHE_PFX_MAX)
		return;
	atomic_fetch_add(hit ? &p->hits : &p->misses, 1);
}

size_t
cache_get_prefix_stats(
    struct cache *c, struct cache_prefix_stat *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; c != NULL && i < CACHE_PFX_MAX; i++) {
		struct cache_pfx_stat *p = &c->pfx[i];
		size_t k;

		if (atomic_load(&p->state) != 2)
			continue;
		for (k = 0; k < n; k++)
			if (strcmp(out[k].text, p->text) == 0)
				break;
		if (k == n) {
			if (n == max)
				continue;
			snprintf(
			    out[n].text, sizeof(out[n].text), "%s", p->text);
			out[n].hits = out[n].misses = 0;
			n++;
		}
		out[k].hits += atomic_load(&p->hits);
		out[k].misses += atomic_load(&p->misses);
	}
	return n;
}
