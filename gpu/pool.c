/*
 * pool.c - first-fit accounting of the device buffer pool (gpu/, plain C,
 * built with or without CUDA; see pool.h).
 *
 * The held ranges are few (one per open .cuda file and batch being
 * staged), so a sorted array scanned linearly is enough.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/pool.h"

int
gpu_pool_init(struct gpu_pool *p, uint64_t size, uint64_t align)
{
	if (align == 0 || (align & (align - 1)) != 0)
		return -EINVAL;
	memset(p, 0, sizeof(*p));
	p->size = size & ~(align - 1);
	p->align = align;
	return 0;
}

void
gpu_pool_fini(struct gpu_pool *p)
{
	free(p->held);
	p->held = NULL;
	p->n = p->cap = 0;
}

int
gpu_pool_get(struct gpu_pool *p, uint64_t len, uint64_t *off)
{
	uint64_t at = 0;
	size_t i;

	if (len == 0)
		return -EINVAL;
	if (len > p->size) {
		p->fails++;
		return -E2BIG;
	}
	len = (len + p->align - 1) & ~(p->align - 1);
	/* The first gap, before held[i], that len fits in. */
	for (i = 0; i <= p->n; i++) {
		uint64_t end = i < p->n ? p->held[i].off : p->size;

		if (end - at >= len)
			break;
		if (i < p->n)
			at = p->held[i].off + p->held[i].len;
	}
	if (i > p->n) {
		p->fails++;
		return -ENOSPC;
	}
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 16;
		struct gpu_extent *h = realloc(p->held, cap * sizeof(*h));

		if (!h)
			return -ENOMEM;
		p->held = h;
		p->cap = cap;
	}
	memmove(&p->held[i + 1], &p->held[i], (p->n - i) * sizeof(*p->held));
	p->held[i].off = at;
	p->held[i].len = len;
	p->n++;
	p->used += len;
	if (p->used > p->peak)
		p->peak = p->used;
	p->gets++;
	*off = at;
	return 0;
}

int
gpu_pool_put(struct gpu_pool *p, uint64_t off)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->held[i].off == off) {
			p->used -= p->held[i].len;
			memmove(&p->held[i], &p->held[i + 1],
			    (p->n - i - 1) * sizeof(*p->held));
			p->n--;
			return 0;
		}
	return -ENOENT;
}

uint64_t
gpu_pool_share(uint64_t total, uint32_t njobs)
{
	if (njobs == 0)
		return 0;
	return total / njobs & ~(uint64_t)(GPU_POOL_ALIGN - 1);
}
