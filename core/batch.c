/*
 * batch.c - the batch table and the memory budget (see engine.h).
 *
 * Batches live in a hash table keyed by feed_key.  Every byte a batch
 * holds is counted in feed.mem_used while it holds it.  The budget
 * (feed.memory) bounds what readers can make the daemon hold, whatever
 * they open: opening a file makes only the batch's struct, and its data
 * only if it fits; a read makes the data, waiting for room while other
 * batches are being built or read; batch_make_room gives memory back from
 * idle batches, dropping the data of those held open (they are built
 * again, to the same bytes, when read again).  Metadata has a cap of its
 * own (feed_meta_room; engine.h says what is counted where).  Every
 * function is called with feed.lock held.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "core/log.h"

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

void
feed_meta_add(struct feed *f, uint64_t bytes)
{
	f->meta_used += bytes;
	if (f->meta_used > f->meta_peak)
		f->meta_peak = f->meta_used;
	feed_mem_add(f, bytes);
}

void
feed_meta_sub(struct feed *f, uint64_t bytes)
{
	f->meta_used -= bytes;
	feed_mem_sub(f, bytes);
}

static bool evictable(const struct batch *b);
static bool better_victim(const struct batch *a, const struct batch *b);

/* Destroy the best idle batch that no file holds (its struct is metadata
 * too); false: none. */
static bool
destroy_unheld(struct feed *f)
{
	struct batch *victim = NULL;

	for (size_t i = 0; i < FEED_HASH; i++)
		for (struct batch *b = f->table[i]; b; b = b->hnext)
			if (b->refs == 0 && evictable(b) &&
			    (!victim || better_victim(b, victim)))
				victim = b;
	if (victim)
		batch_destroy(f, victim);
	return victim != NULL;
}

/* Whether bytes more metadata fit, after giving back what can be made
 * again: idle views that chose nothing, then batches no file holds. */
static bool
meta_fits(struct feed *f, uint64_t bytes)
{
	while (f->meta_used + bytes > f->meta_cap)
		if (!relaxed_reclaim(f, true) && !destroy_unheld(f))
			return false;
	return true;
}

static bool make_room(struct feed *f, uint64_t need, bool any, size_t keep);

bool
feed_meta_room(struct feed *f, uint64_t bytes)
{
	if (meta_fits(f, bytes)) {
		/* Within the cap, batches' data gives way to it. */
		make_room(f, bytes, true, 0);
		return true;
	}
	if (f->meta_refused++ % 1000 == 0)
		log_warn("memory: metadata at its cap of %" PRIu64 " bytes "
			 "(open files, batches, relaxed views, names): %" PRIu64
			 " refused with ENOMEM so far; raise `memory`",
		    f->meta_cap, f->meta_refused);
	return false;
}

struct batch *
batch_find(struct feed *f, const struct feed_key *k)
{
	struct batch *b;

	for (b = f->table[key_hash(k)]; b; b = b->hnext)
		if (key_eq(&b->key, k))
			return b;
	return NULL;
}

/* Bytes of a batch's data: its files (or raw samples) and slot positions. */
static uint64_t
data_bytes(const struct batch *b)
{
	return (b->job->cfg->gpu ? b->g.raw_size : b->g.size[BK_IMAGES]) +
	       b->g.size[BK_LABELS] + b->g.size[BK_IDS] +
	       (uint64_t)b->g.len * sizeof(uint64_t);
}

/* The size of b's large buffer: its raw samples or its images. */
static size_t
main_buf(const struct batch *b)
{
	return b->job->cfg->gpu ? b->g.raw_size : b->g.size[BK_IMAGES];
}

/* Free b's data (it is idle: ready, or never queued). */
static void
drop_data(struct feed *f, struct batch *b)
{
	if (b->empty)
		return;
	sched_dequeue(f, b);
	if (b->r.rv)
		relaxed_detach(f, b);
	order_put(b->order);
	b->order = NULL;
	feed_mem_sub(f, b->mem);
	bufpool_put(f, b->file[BK_IMAGES], b->g.size[BK_IMAGES]);
	bufpool_put(f, b->raw, b->g.raw_size);
	for (int i = BK_LABELS; i <= BK_IDS; i++)
		free(b->file[i]);
	free(b->pos);
	memset(b->file, 0, sizeof(b->file));
	b->raw = NULL;
	b->pos = NULL;
	b->mem = 0;
	b->empty = true;
	b->ready = false;
	b->err = 0;
	b->next = 0;
	b->consumed = false;
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
	drop_data(f, b);
	f->nbatches--;
	feed_meta_sub(f, sizeof(*b));
	pthread_cond_destroy(&b->cv);
	free(b);
}

void
batch_unref(struct feed *f, struct batch *b)
{
	if (b->refs > 0)
		return;
	if (b->empty)
		batch_destroy(f, b);
	else if (f->mem_used > f->memory)
		batch_make_room(f, 0, false);
}

/*
 * Whether b's data may be given back now: idle (ready, no read in
 * progress), and, for a relaxed batch, its content chosen, so that it is
 * built again the same.
 */
static bool
evictable(const struct batch *b)
{
	return !b->empty && b->ready && b->active == 0 && !b->converting &&
	       (!b->r.rv || b->r.fixed || b->err);
}

/* Preference of victim a over b: unheld before held, read to the end
 * before not, then least recently used. */
static bool
better_victim(const struct batch *a, const struct batch *b)
{
	if ((a->refs == 0) != (b->refs == 0))
		return a->refs == 0;
	if (a->consumed != b->consumed)
		return a->consumed;
	return a->used < b->used;
}

/* batch_make_room, sparing a kept buffer of size keep (the new batch's). */
static bool
make_room(struct feed *f, uint64_t need, bool any, size_t keep)
{
	/* Kept buffers are room: batches go only when they are not enough. */
	while (f->mem_used - f->pool_bytes + need > f->memory) {
		struct batch *victim = NULL;

		for (size_t i = 0; i < FEED_HASH; i++)
			for (struct batch *b = f->table[i]; b; b = b->hnext) {
				if (!evictable(b))
					continue;
				if (!any && (b->refs || !b->consumed))
					continue;
				if (!victim || better_victim(b, victim))
					victim = b;
			}
		/*
		 * Finished samples, spares and orders that nothing uses are
		 * made again at little cost: they go before any batch but one
		 * read to its end that no file holds.
		 */
		if ((!victim || victim->refs || !victim->consumed) &&
		    (relaxed_reclaim(f, false) || order_reclaim(f)))
			continue;
		if (!victim)
			return false;
		if (victim->refs == 0)
			batch_destroy(f, victim);
		else
			drop_data(f, victim);
	}
	bufpool_trim(f, need - keep, keep);
	return true;
}

bool
batch_make_room(struct feed *f, uint64_t need, bool any)
{
	return make_room(f, need, any, 0);
}

/* Whether a batch other than b is being built or read: memory will come
 * back when it is done. */
static bool
others_busy(struct feed *f, const struct batch *b)
{
	for (size_t i = 0; i < FEED_HASH; i++)
		for (struct batch *x = f->table[i]; x; x = x->hnext)
			if (x != b && !x->empty &&
			    (!x->ready || x->active || x->converting))
				return true;
	return false;
}

/* The struct of a new batch k, in the table, without data (NULL: no
 * memory, or metadata at its cap; readahead is not refused: it stops). */
static struct batch *
batch_new(struct feed *f, const struct feed_key *k, enum batch_need need)
{
	struct batch *b;

	if (!(need == BN_AHEAD ? meta_fits(f, sizeof(*b))
			       : feed_meta_room(f, sizeof(*b))) ||
	    (b = calloc(1, sizeof(*b))) == NULL)
		return NULL;
	feed_meta_add(f, sizeof(*b));
	b->key = *k;
	b->job = &f->jobs[k->job];
	b->empty = true;
	job_batch_geom(b->job, k->world, k->batch, &b->g);
	pthread_cond_init(&b->cv, NULL);
	b->hnext = f->table[key_hash(k)];
	f->table[key_hash(k)] = b;
	f->nbatches++;
	return b;
}

/* Give empty b its data (the room is made) and queue its slots. */
static int
fill(struct feed *f, struct batch *b)
{
	struct job *j = b->job;
	bool gpu = j->cfg->gpu;

	if (!gpu)
		b->file[BK_IMAGES] = bufpool_get(f, b->g.size[BK_IMAGES]);
	else
		b->raw = bufpool_get(f, b->g.raw_size);
	b->file[BK_LABELS] = malloc(b->g.size[BK_LABELS]);
	b->file[BK_IDS] = malloc(b->g.size[BK_IDS]);
	b->pos = malloc((b->g.len ? b->g.len : 1) * sizeof(*b->pos));
	b->order = order_get(f, b->key.job, b->key.epoch);
	b->empty = false;
	b->ready = false;
	b->next = b->inflight = 0;
	b->mem = data_bytes(b);
	feed_mem_add(f, b->mem);
	if ((!gpu && !b->file[BK_IMAGES]) || (gpu && !b->raw) ||
	    !b->file[BK_LABELS] || !b->file[BK_IDS] || !b->pos || !b->order) {
		drop_data(f, b);
		return -ENOMEM;
	}
	if (!gpu)
		job_npy_header(
		    j, b->g.len, BK_IMAGES, (char *)b->file[BK_IMAGES]);
	job_npy_header(j, b->g.len, BK_LABELS, (char *)b->file[BK_LABELS]);
	memcpy(b->file[BK_IDS], b->file[BK_LABELS], b->g.hdr[BK_IDS]);
	plan_batch_positions(
	    &j->plan, b->key.rank, b->key.world, b->key.batch, b->pos);
	b->r.quota = b->g.len;
	b->r.filled = 0;
	if (j->cfg->order == CFG_ORDER_RELAXED) {
		if (relaxed_attach(f, b) != 0) {
			drop_data(f, b);
			return -ENOMEM;
		}
		if (b->r.quota == 0)
			return 0; /* filled from the ready list */
	}
	sched_enqueue(f, b);
	return 0;
}

/* Room for need more bytes for b's read: wait while other batches are
 * being built or read; over the budget only when nothing else can give
 * memory back (one batch larger than the budget still gets made). */
static void
wait_room(struct feed *f, struct batch *b, uint64_t need, size_t buf)
{
	size_t keep = bufpool_has(f, buf);

	while (!make_room(f, need, true, keep) && !f->stopping &&
	       others_busy(f, b)) {
		pthread_cond_wait(&f->room, &f->lock);
		keep = bufpool_has(f, buf);
	}
}

/*
 * Fresh pages cost a fault and a clear per 4 KB (a fifth of a cold
 * epoch's CPU): when no kept buffer fits b, take one from a batch that
 * was read to its end and that no file holds, even with room to spare.
 * Such a batch is rarely read again, and is made again if it is.
 */
static void
recycle(struct feed *f, const struct batch *b)
{
	size_t size = main_buf(b);
	struct batch *victim = NULL;

	if (size == 0 || bufpool_has(f, size))
		return;
	for (size_t i = 0; i < FEED_HASH; i++)
		for (struct batch *x = f->table[i]; x; x = x->hnext)
			if (x != b && x->refs == 0 && x->consumed &&
			    evictable(x) && main_buf(x) == size &&
			    (!victim || x->used < victim->used))
				victim = x;
	if (victim)
		batch_destroy(f, victim);
}

struct batch *
batch_get(struct feed *f, const struct feed_key *k, enum batch_need need)
{
	struct batch *b = batch_find(f, k);
	bool made = false;
	struct order *o;
	uint64_t bytes;
	int r;

	if (!b) {
		if ((b = batch_new(f, k, need)) == NULL)
			return NULL;
		made = true;
	}
	b->used = ++f->tick;
	if (need == BN_READ)
		sched_demand(f, b);
	if (!b->empty)
		return b;
	recycle(f, b);
	/* Room for its data, and for its epoch's order if that must be
	 * made; an order that exists is held meanwhile (not given back). */
	o = order_hold(f, k->job, k->epoch);
	bytes =
	    data_bytes(b) + (o ? 0 : f->jobs[k->job].plan.n * sizeof(*o->ids));
	if (need == BN_READ) {
		b->active++; /* not destroyed while we wait */
		wait_room(f, b, bytes, main_buf(b));
		b->active--;
		r = b->empty ? fill(f, b) : 0;
		order_put(o);
		return r == 0 ? b : NULL;
	}
	if (!make_room(f, bytes, false, bufpool_has(f, main_buf(b))) ||
	    fill(f, b) != 0) {
		order_put(o);
		if (made && need == BN_AHEAD)
			batch_destroy(f, b);
		return need == BN_OPEN ? b : NULL;
	}
	order_put(o);
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
	pthread_cond_broadcast(&f->room);
	if (b->refs == 0 && f->mem_used > f->memory)
		batch_make_room(f, 0, false);
}

int
batch_images(struct feed *f, struct batch *b)
{
	struct job *j = b->job;
	uint8_t *img;

	while (b->converting)
		pthread_cond_wait(&b->cv, &f->lock);
	if (b->file[BK_IMAGES] || b->err)
		return b->err ? -EIO : 0;
	wait_room(f, b, b->g.size[BK_IMAGES], b->g.size[BK_IMAGES]);
	if ((img = bufpool_get(f, b->g.size[BK_IMAGES])) == NULL)
		return -ENOMEM;
	b->converting = true;
	b->mem += b->g.size[BK_IMAGES];
	feed_mem_add(f, b->g.size[BK_IMAGES]);
	pthread_mutex_unlock(&f->lock);
	job_npy_header(j, b->g.len, BK_IMAGES, (char *)img);
	for (uint32_t s = 0; s < b->g.len; s++) {
		struct xf_image im = {j->pl->out_w, j->pl->out_h,
		    b->raw + (size_t)s * j->raw_bytes};

		xf_convert(&im, j->pl->normalize, j->pl->mean, j->pl->std,
		    j->cfg->dtype, j->cfg->layout,
		    img + b->g.hdr[BK_IMAGES] + (size_t)s * j->sample_bytes);
	}
	pthread_mutex_lock(&f->lock);
	b->file[BK_IMAGES] = img;
	b->converting = false;
	pthread_cond_broadcast(&b->cv);
	return 0;
}
