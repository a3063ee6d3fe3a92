/*
 * batch.c - the batch table and the memory budget (see engine.h).
 *
 * Batches live in a hash table keyed by (feed_key, raw).  Every byte a
 * batch holds is counted in feed.mem_used when it is made and uncounted
 * when it is destroyed; batch_make_room destroys batches that no open
 * file holds until a new one fits in feed.memory.  Every function is
 * called with feed.lock held.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"

static size_t
key_hash(const struct feed_key *k)
{
	uint64_t h = k->job * 0x9e3779b97f4a7c15ULL;

	h = (h ^ k->rank) * 0x100000001b3ULL;
	h = (h ^ k->world) * 0x100000001b3ULL;
	h = (h ^ k->epoch) * 0x100000001b3ULL;
	h = (h ^ k->batch) * 0x100000001b3ULL;
	return (size_t)(h ^ (h >> 29)) % FEED_HASH;
}

static bool
key_eq(const struct feed_key *a, const struct feed_key *b)
{
	return a->job == b->job && a->rank == b->rank && a->world == b->world &&
	       a->epoch == b->epoch && a->batch == b->batch;
}

void
feed_mem_add(struct feed *f, uint64_t bytes)
{
	f->mem_used += bytes;
	if (f->mem_used > f->mem_peak)
		f->mem_peak = f->mem_used;
}

void
feed_mem_sub(struct feed *f, uint64_t bytes)
{
	f->mem_used -= bytes;
	pthread_cond_broadcast(&f->room);
}

struct batch *
batch_find(struct feed *f, const struct feed_key *k, bool raw)
{
	struct batch *b;

	for (b = f->table[key_hash(k)]; b; b = b->hnext)
		if (key_eq(&b->key, k) && b->raw == raw)
			return b;
	return NULL;
}

/* Bytes a batch of geometry g holds: its files and its slot positions. */
static uint64_t
batch_bytes(const struct batch_geom *g, bool raw)
{
	return (raw ? g->raw_size : g->size[BK_IMAGES]) + g->size[BK_LABELS] +
	       g->size[BK_IDS] + (uint64_t)g->len * sizeof(uint64_t);
}

void
batch_destroy(struct feed *f, struct batch *b)
{
	struct batch **pp;

	for (pp = &f->table[key_hash(&b->key)]; *pp; pp = &(*pp)->hnext)
		if (*pp == b) {
			*pp = b->hnext;
			break;
		}
	sched_dequeue(f, b);
	order_put(b->order);
	if (b->r.rv)
		relaxed_detach(f, b);
	feed_mem_sub(f, b->mem);
	f->nbatches--;
	pthread_cond_destroy(&b->cv);
	for (int i = 0; i <= BK_IDS; i++)
		free(b->file[i]);
	free(b->pos);
	free(b);
}

bool
batch_make_room(struct feed *f, uint64_t need, bool any)
{
	while (f->mem_used + need > f->memory) {
		struct batch *victim = NULL;

		for (size_t i = 0; i < FEED_HASH; i++)
			for (struct batch *b = f->table[i]; b; b = b->hnext) {
				if (b->refs || !b->ready || b->inflight)
					continue;
				if (!b->consumed && !any)
					continue;
				if (!victim || b->consumed > victim->consumed ||
				    (b->consumed == victim->consumed &&
					b->used < victim->used))
					victim = b;
			}
		if (!victim)
			return false;
		batch_destroy(f, victim);
	}
	return true;
}

/* A new batch of key k: its files allocated, headers written. */
static struct batch *
batch_new(struct feed *f, const struct feed_key *k, bool raw)
{
	struct job *j = &f->jobs[k->job];
	struct batch *b;

	if ((b = calloc(1, sizeof(*b))) == NULL)
		return NULL;
	b->key = *k;
	b->job = j;
	b->raw = raw;
	job_batch_geom(j, k->world, k->batch, &b->g);
	b->file[BK_IMAGES] = malloc(raw ? b->g.raw_size : b->g.size[BK_IMAGES]);
	b->file[BK_LABELS] = malloc(b->g.size[BK_LABELS]);
	b->file[BK_IDS] = malloc(b->g.size[BK_IDS]);
	b->pos = malloc((b->g.len ? b->g.len : 1) * sizeof(*b->pos));
	b->order = order_get(f, k->job, k->epoch);
	if (!b->file[BK_IMAGES] || !b->file[BK_LABELS] || !b->file[BK_IDS] ||
	    !b->pos || !b->order) {
		order_put(b->order);
		for (int i = 0; i <= BK_IDS; i++)
			free(b->file[i]);
		free(b->pos);
		free(b);
		return NULL;
	}
	if (raw)
		b->g.hdr[BK_IMAGES] = 0; /* samples only, no .npy header */
	else
		job_npy_header(
		    j, b->g.len, BK_IMAGES, (char *)b->file[BK_IMAGES]);
	job_npy_header(j, b->g.len, BK_LABELS, (char *)b->file[BK_LABELS]);
	memcpy(b->file[BK_IDS], b->file[BK_LABELS], b->g.hdr[BK_IDS]);
	plan_batch_positions(&j->plan, k->rank, k->world, k->batch, b->pos);
	pthread_cond_init(&b->cv, NULL);
	return b;
}

struct batch *
batch_get(struct feed *f, const struct feed_key *k, bool demand, bool raw)
{
	struct job *j = &f->jobs[k->job];
	struct batch *b = batch_find(f, k, raw);
	struct batch_geom g;
	uint64_t need;

	if (b) {
		if (demand)
			sched_demand(f, b);
		b->used = ++f->tick;
		return b;
	}
	job_batch_geom(j, k->world, k->batch, &g);
	need = batch_bytes(&g, raw);
	if (!batch_make_room(f, need, demand) && !demand)
		return NULL;
	if ((b = batch_new(f, k, raw)) == NULL)
		return NULL;
	b->mem = need;
	b->demanded = demand;
	b->used = ++f->tick;
	b->hnext = f->table[key_hash(k)];
	f->table[key_hash(k)] = b;
	f->nbatches++;
	feed_mem_add(f, need);
	b->r.quota = b->g.len;
	if (j->cfg->order == CFG_ORDER_RELAXED && !raw) {
		if (relaxed_attach(f, b) != 0) {
			batch_destroy(f, b);
			return NULL;
		}
		if (b->r.quota == 0)
			return b; /* filled from the ready list */
	}
	sched_enqueue(f, b);
	return b;
}

void
batch_ready(struct feed *f, struct batch *b)
{
	b->ready = true;
	order_put(b->order);
	b->order = NULL;
	atomic_fetch_add(
	    b->err ? &b->job->st.batch_errors : &b->job->st.batches, 1);
	pthread_cond_broadcast(&b->cv);
	if (b->refs == 0 && f->mem_used > f->memory)
		batch_make_room(f, 0, false);
}
