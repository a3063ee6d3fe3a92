/*
 * bufpool.c - large batch buffers kept for reuse.
 *
 * A batch's images (or raw samples) are tens of megabytes; malloc gives
 * such a block fresh pages from mmap, and the kernel zeroes each page at
 * its first touch (clear_page), then munmap gives them back: per batch,
 * a page fault and a page clear per 4 KB.  Buffers given back here are
 * kept (up to POOL_MAX, counted in the memory budget like the batch they
 * came from) and handed to the next batch of the same size, whose pages
 * are then already there.  batch_make_room counts them as room: it frees
 * them, except one the new batch will take, before it gives back any
 * batch.  Every function is called with feed.lock held.
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "core/engine.h"

#define POOL_MAX 8	     /* buffers kept */
#define POOL_MIN (64u << 10) /* smaller ones go back to malloc */
#define POOL_HUGE (4u << 20) /* transparent huge pages from here on */

struct pooled {
	size_t size;
	struct pooled *next; /* the buffer itself holds this header */
};

void *
bufpool_get(struct feed *f, size_t size)
{
	struct pooled **pp, *x;
	void *p;

	for (pp = &f->pool; (x = *pp) != NULL; pp = &x->next)
		if (x->size == size) {
			*pp = x->next;
			f->npool--;
			f->pool_bytes -= size;
			f->pool_reused++;
			feed_mem_sub(f, size);
			return x;
		}
	f->pool_allocated++;
	if ((p = malloc(size < sizeof(*x) ? sizeof(*x) : size)) == NULL)
		return NULL;
	if (size >= POOL_HUGE) /* fewer faults and TLB misses; a hint */
		madvise((void *)(((uintptr_t)p + 4095) & ~(uintptr_t)4095),
		    size - 4096, MADV_HUGEPAGE);
	return p;
}

void
bufpool_put(struct feed *f, void *p, size_t size)
{
	struct pooled *x = p;

	if (p == NULL)
		return;
	if (size < POOL_MIN || f->npool >= POOL_MAX || f->stopping) {
		free(p);
		return;
	}
	x->size = size;
	x->next = f->pool;
	f->pool = x;
	f->npool++;
	f->pool_bytes += size;
	feed_mem_add(f, size);
}

size_t
bufpool_has(struct feed *f, size_t size)
{
	for (struct pooled *x = f->pool; x; x = x->next)
		if (x->size == size)
			return size;
	return 0;
}

void
bufpool_trim(struct feed *f, uint64_t need, size_t keep)
{
	struct pooled **pp = &f->pool, *x;

	while ((x = *pp) != NULL && f->mem_used + need > f->memory) {
		if (x->size == keep) {
			keep = 0; /* the one the caller takes: spared once */
			pp = &x->next;
			continue;
		}
		*pp = x->next;
		f->npool--;
		f->pool_bytes -= x->size;
		feed_mem_sub(f, x->size);
		free(x);
	}
}

void
bufpool_free_all(struct feed *f)
{
	while (f->pool) {
		struct pooled *x = f->pool;

		f->pool = x->next;
		f->npool--;
		f->pool_bytes -= x->size;
		feed_mem_sub(f, x->size);
		free(x);
	}
}
