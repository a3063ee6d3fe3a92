/*
 * bufpool.c - large batch buffers kept for reuse.  Layer: the engine
 * (engine/), below batch.c and above budget.c.
 *
 * A batch's images (or raw samples) are tens of megabytes; malloc gives
 * such a block fresh pages from mmap, and the kernel zeroes each page at
 * its first touch (clear_page), then munmap gives them back: per batch,
 * a page fault and a page clear per 4 KB.  Buffers given back here are
 * kept (up to POOL_MAX, counted in the memory budget like the batch they
 * came from) and handed to the next batch of the same size, whose pages
 * are then already there.  The budget counts them as room (its reclaimer
 * BUDGET_KEPT, registered by bufpool_budget): it frees them, except one
 * the new batch will take, before it gives back any batch.  Every
 * function is called with feed.lock held.
 *
 * Buffers of POOL_MIN and more are mapped on their own (mmap), not
 * taken from malloc, so that one given back returns its pages to the
 * kernel at once and the daemon's RSS follows the budget.  From malloc,
 * a freed buffer under glibc's mmap threshold (32 MB: feed.c's
 * feed_keep_freed_memory) stayed in the arena of the thread that took
 * it, and each FUSE thread has an arena of its own: six readers of 25 MB
 * batches drove the daemon to a VmHWM of 502 MiB at memory = 224M (the
 * budget's peak 193 MiB), at the 512M limit of its cgroup.
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "engine/engine.h"

#define POOL_MAX 8	     /* buffers kept */
#define POOL_MIN (64u << 10) /* smaller ones go back to malloc */
#define POOL_HUGE (4u << 20) /* transparent huge pages from here on */

struct pooled {
	size_t size;
	struct pooled *next; /* the buffer itself holds this header */
};

/* A buffer of size bytes: mapped on its own from POOL_MIN up. */
static void *
buf_alloc(size_t size)
{
	void *p;

	if (size < POOL_MIN)
		return malloc(size < sizeof(struct pooled)
				  ? sizeof(struct pooled)
				  : size);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (size >= POOL_HUGE) /* fewer faults and TLB misses; a hint */
		madvise(p, size, MADV_HUGEPAGE);
	return p;
}

static void
buf_free(void *p, size_t size)
{
	if (size < POOL_MIN)
		free(p);
	else
		munmap(p, size);
}

void *
bufpool_get(struct feed *f, size_t size)
{
	struct pooled **pp, *x;
	for (pp = &f->pool; (x = *pp) != NULL; pp = &x->next)
		if (x->size == size) {
			*pp = x->next;
			f->npool--;
			f->pool_bytes -= size;
			f->pool_reused++;
			budget_sub(&f->budget, size);
			return x;
		}
	f->pool_allocated++;
	return buf_alloc(size);
}

void
bufpool_put(struct feed *f, void *p, size_t size)
{
	struct pooled *x = p;

	if (p == NULL)
		return;
	if (size < POOL_MIN || f->npool >= POOL_MAX || f->stopping) {
		buf_free(p, size);
		return;
	}
	x->size = size;
	x->next = f->pool;
	f->pool = x;
	f->npool++;
	f->pool_bytes += size;
	budget_add(&f->budget, size);
}

size_t
bufpool_has(struct feed *f, size_t size)
{
	for (struct pooled *x = f->pool; x; x = x->next)
		if (x->size == size)
			return size;
	return 0;
}

/* Reclaimer BUDGET_KEPT: free one kept buffer, sparing the first one of
 * ask->keep bytes (the one the caller takes); false: none. */
static bool
trim_one(void *arg, const struct budget_ask *ask)
{
	struct feed *f = arg;
	struct pooled **pp = &f->pool, *x;
	uint64_t keep = ask->keep;

	while ((x = *pp) != NULL && x->size == keep) {
		keep = 0; /* the one the caller takes: spared once */
		pp = &x->next;
	}
	if (x == NULL)
		return false;
	*pp = x->next;
	f->npool--;
	f->pool_bytes -= x->size;
	budget_sub(&f->budget, x->size);
	buf_free(x, x->size);
	return true;
}

/* What the kept buffers hold: room for the budget. */
static uint64_t
kept_bytes(void *arg)
{
	const struct feed *f = arg;

	return f->pool_bytes;
}

void
bufpool_budget(struct feed *f)
{
	struct budget_reclaimer r = {"kept buffers", trim_one, kept_bytes, f};

	budget_register(&f->budget, BUDGET_KEPT, &r);
}

void
bufpool_free_all(struct feed *f)
{
	while (f->pool) {
		struct pooled *x = f->pool;

		f->pool = x->next;
		f->npool--;
		f->pool_bytes -= x->size;
		budget_sub(&f->budget, x->size);
		buf_free(x, x->size);
	}
}
