/*
 * arena.c - per-thread scratch arenas for the ops' pixel and scratch
 * buffers (see xf.h, xf_arena_new).  Layer: transforms (transforms/).
 *
 * A sample's decode, resize and crop each want a buffer of a few hundred
 * kilobytes to a few megabytes.  From malloc, such a buffer is either a
 * fresh mmap or heap memory that glibc trimmed back to the kernel since
 * the last sample; either way each of its pages is faulted in and
 * cleared again (clear_page) at its first touch, for every sample.  An
 * arena keeps a few blocks mapped for the thread that owns it and hands
 * them out again, so a steady-state epoch touches no fresh page: each
 * block only grows, to the largest buffer its role has needed.
 *
 * Blocks are mmap'd here (never given to malloc), so xf_free tells them
 * from malloc'd memory by address; a request the arena cannot keep (over
 * its cap) is malloc'd and freed as before, and told to the arena's
 * owner while it is held (xf_arena_count), so that a large image is
 * counted in the owner's budget: the arena remembers the last
 * ARENA_OUTSIDE of them to tell their frees.  An arena is used by one
 * thread at a time, the one that installed it: no locks.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "transforms/xf.h"

#define ARENA_SLOTS 12		       /* blocks kept */
#define ARENA_GRAIN ((size_t)64 << 10) /* sizes rounded up to this */
#define ARENA_HUGE ((size_t)4 << 20)   /* huge pages from here on */
#define ARENA_MIN ((size_t)32 << 10)   /* smaller ones: malloc keeps them */
#define ARENA_OUTSIDE 16 /* large malloc'd buffers counted at once */

struct block {
	uint8_t *p; /* NULL: slot unused */
	size_t cap; /* mapped bytes */
	bool busy;  /* handed out */
};

struct xf_arena {
	size_t cap;  /* the most bytes kept mapped */
	size_t kept; /* mapped now */
	uint64_t reused, fresh, outside;
	struct block b[ARENA_SLOTS];
	/* Buffers malloc'd outside it (p NULL: unused), told to count. */
	struct {
		void *p;
		size_t n;
	} out[ARENA_OUTSIDE];
	void (*count)(void *arg, size_t n, bool held);
	void *count_arg;
};

static _Thread_local struct xf_arena *cur;

struct xf_arena *
xf_arena_new(size_t cap)
{
	struct xf_arena *a = calloc(1, sizeof(*a));

	if (a != NULL)
		a->cap = cap;
	return a;
}

void
xf_arena_free(struct xf_arena *a)
{
	if (a == NULL)
		return;
	if (cur == a)
		cur = NULL;
	/* Buffers still counted (an image its caller kept): uncounted now,
	 * freed by whoever holds them. */
	for (int i = 0; i < ARENA_OUTSIDE; i++)
		if (a->out[i].p != NULL)
			a->count(a->count_arg, a->out[i].n, false);
	for (int i = 0; i < ARENA_SLOTS; i++)
		if (a->b[i].p != NULL)
			munmap(a->b[i].p, a->b[i].cap);
	free(a);
}

void
xf_arena_count(struct xf_arena *a,
    void (*count)(void *arg, size_t n, bool held), void *arg)
{
	a->count = count;
	a->count_arg = arg;
}

void
xf_arena_use(struct xf_arena *a)
{
	cur = a;
}

size_t
xf_arena_bytes(const struct xf_arena *a)
{
	return a ? a->kept : 0;
}

void
xf_arena_counts(const struct xf_arena *a, uint64_t *reused, uint64_t *fresh)
{
	*reused = a ? a->reused : 0;
	*fresh = a ? a->fresh : 0;
}

/* Map a block of cap bytes into slot s (unused). */
static void *
map_block(struct xf_arena *a, struct block *s, size_t cap)
{
	void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	if (cap >= ARENA_HUGE) /* fewer faults and TLB misses; a hint */
		madvise(p, cap, MADV_HUGEPAGE);
	s->p = p;
	s->cap = cap;
	s->busy = true;
	a->kept += cap;
	a->fresh++;
	return p;
}

static void
unmap_block(struct xf_arena *a, struct block *s)
{
	munmap(s->p, s->cap);
	a->kept -= s->cap;
	s->p = NULL;
	s->cap = 0;
	s->busy = false;
}

size_t
xf_arena_trim(struct xf_arena *a)
{
	size_t before;

	if (a == NULL)
		return 0;
	before = a->kept;
	for (int i = 0; i < ARENA_SLOTS; i++)
		if (a->b[i].p != NULL && !a->b[i].busy)
			unmap_block(a, &a->b[i]);
	return before - a->kept;
}

/*
 * A large buffer the arena does not keep: malloc'd, and counted by the
 * owner (before its pages are touched, so that it can make room) while a
 * slot remembers it.  Without a free slot it is malloc'd uncounted.
 */
static void *
alloc_counted(struct xf_arena *a, size_t n)
{
	void *p;
	int i = 0;

	if (a->count != NULL)
		while (i < ARENA_OUTSIDE && a->out[i].p != NULL)
			i++;
	if (a->count == NULL || i == ARENA_OUTSIDE)
		return malloc(n);
	a->count(a->count_arg, n, true);
	if ((p = malloc(n)) == NULL) {
		a->count(a->count_arg, n, false);
		return NULL;
	}
	a->out[i].p = p;
	a->out[i].n = n;
	return p;
}

void *
xf_alloc(size_t n)
{
	struct xf_arena *a = cur;
	struct block *fit = NULL, *spare = NULL, *small = NULL;
	size_t cap;

	if (a == NULL || n < ARENA_MIN || n > a->cap / 2)
		goto outside;
	for (int i = 0; i < ARENA_SLOTS; i++) {
		struct block *s = &a->b[i];

		if (s->p == NULL) {
			if (spare == NULL)
				spare = s;
		} else if (!s->busy) {
			if (s->cap >= n && (!fit || s->cap < fit->cap))
				fit = s;
			if (s->cap < n && (!small || s->cap > small->cap))
				small = s;
		}
	}
	if (fit != NULL) {
		fit->busy = true;
		a->reused++;
		return fit->p;
	}
	/* Grow: the largest free block too small gives way, else a new slot;
	 * with a quarter more than asked, so that sizes settle. */
	cap = n + n / 4;
	cap = (cap + ARENA_GRAIN - 1) & ~(ARENA_GRAIN - 1);
	if (small != NULL) {
		unmap_block(a, small);
		spare = small;
	}
	if (spare == NULL || a->kept + cap > a->cap)
		goto outside;
	{
		void *p = map_block(a, spare, cap);

		if (p != NULL)
			return p;
	}
outside:
	if (a != NULL && n >= ARENA_MIN) {
		a->outside++;
		return alloc_counted(a, n);
	}
	return malloc(n ? n : 1);
}

void
xf_free(void *p)
{
	struct xf_arena *a = cur;

	if (p == NULL)
		return;
	if (a != NULL) {
		for (int i = 0; i < ARENA_SLOTS; i++)
			if (a->b[i].p == p) {
				a->b[i].busy = false;
				return;
			}
		for (int i = 0; i < ARENA_OUTSIDE; i++)
			if (a->out[i].p == p) {
				a->out[i].p = NULL;
				free(p);
				a->count(a->count_arg, a->out[i].n, false);
				return;
			}
	}
	free(p);
}
