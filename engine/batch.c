/*
 * batch.c - the batch table (see engine.h).  Layer: the engine
 * (engine/), above budget.c, bufpool.c, order.c, relaxed.c and sched.c's
 * queues.
 *
 * Batches live in a hash table keyed by feed_key.  Every byte a batch
 * holds is counted in the memory budget (budget.h) while it holds it.
 * The budget bounds what readers can make the daemon hold, whatever they
 * open: opening a file makes only the batch's struct, and its data only
 * if it fits; a read makes the data, waiting for room while other
 * batches are being built or read, and is refused (ENOMEM) when the
 * rest is held by what cannot be given back (metadata).  The budget
 * asks batch.c's reclaimers for room: batches read to their end that no
 * file holds, then idle batches, dropping the data of those held open
 * (they are built again, to the same bytes, when read again, but not
 * while a reader is in the middle of one: reading()), and, for
 * metadata, the structs of batches no file holds.  Every function is
 * called with feed.lock held.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "util/log.h"
#include "core/sample.h"

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

struct batch *
batch_find(struct feed *f, const struct feed_key *k)
{
	struct batch *b;

	for (b = f->table[key_hash(k)]; b; b = b->hnext)
		if (key_eq(&b->key, k))
			return b;
	return NULL;
}

/* Bytes of the data of a batch of j of geometry g: its files (or raw
 * samples) and slot positions. */
static uint64_t
geom_bytes(const struct job *j, const struct batch_geom *g)
{
	return (j->cfg->gpu ? g->raw_size : g->size[BK_IMAGES]) +
	       g->size[BK_LABELS] + g->size[BK_IDS] +
	       (uint64_t)g->len * sizeof(uint64_t);
}

static uint64_t
data_bytes(const struct batch *b)
{
	return geom_bytes(b->job, &b->g) + (b->img_buf - b->g.size[BK_IMAGES]);
}

uint64_t
batch_need_max(const struct feed *f, size_t job, uint32_t *epoch)
{
	const struct job *j = &f->jobs[job];
	uint64_t most = 0;
	struct batch_geom g;

	*epoch = 0;
	for (uint32_t e = 0; e < j->cfg->epochs; e++) {
		uint64_t n;

		job_batch_geom(j, e, 1, 0, &g);
		n = geom_bytes(j, &g) + (uint64_t)j->plan.n * sizeof(uint32_t) +
		    (j->cfg->gpu ? g.size[BK_IMAGES] : 0);
		if (n > most) {
			most = n;
			*epoch = e;
		}
		if (j->cfg->res_line == 0)
			break; /* every epoch the same */
	}
	return most;
}

/* The size of b's large buffer: its raw samples or its images. */
static size_t
main_buf(const struct batch *b)
{
	return b->job->cfg->gpu ? b->g.raw_size : b->img_buf;
}

/*
 * Whether x waits for its images buffer (fill, batch_images_buf): filled,
 * strict, not gpu, no slot made, none mapped.
 */
static bool
deferred(const struct batch *x, size_t size)
{
	return !x->empty && !x->ready && !x->job->cfg->gpu &&
	       x->job->cfg->order == CFG_ORDER_STRICT &&
	       x->file[BK_IMAGES] == NULL && x->img_buf == size;
}

/* Deferred batch to takes img, a buffer of its images' size from a
 * batch given back: its npy header written.  Locked. */
static void
images_to(struct feed *f, struct batch *to, uint8_t *img)
{
	job_npy_header(
	    to->job, to->key.epoch, to->g.len, BK_IMAGES, (char *)img);
	to->file[BK_IMAGES] = img;
	f->pool_reused++; /* feedfs_batch_buffers_reused_total */
}

/*
 * Give img (size bytes of images, from a batch given back) to a deferred
 * batch: of those in the first hash bucket that holds any, one a reader
 * waits for, else the least recently asked for.  False: none waits; the
 * caller keeps it.  Locked.  (A batch that asks for its buffer takes its
 * victim's itself: recycle.)
 *
 * Not the nearest of the whole table, measured: scanning every bucket
 * for it (a921d9f, reverted) or taking the workers' queue order mapped
 * 3-4 fresh buffers in bench/disagg-bench's from-tier epochs against
 * 1-2 this way, and cost that row 0.04-0.06 ms an image (of 0.25-0.33);
 * in a local job's cold epoch the whole-table scan mapped 3 against 5.
 */
static bool
hand_over(struct feed *f, uint8_t *img, size_t size)
{
	struct batch *to = NULL;

	for (size_t i = 0; i < FEED_HASH && to == NULL; i++)
		for (struct batch *x = f->table[i]; x; x = x->hnext)
			if (deferred(x, size) &&
			    (to == NULL || (x->demanded && !to->demanded) ||
				(x->demanded == to->demanded &&
				    x->used < to->used)))
				to = x;
	if (to == NULL)
		return false;
	images_to(f, to, img);
	return true;
}

/* Free b's data (it is idle: ready, or never queued). */
static void
drop_data(struct feed *f, struct batch *b)
{
	if (b->empty)
		return;
	sched_dequeue(f, b);
	tier_drop(f, b);
	if (b->r.rv)
		relaxed_detach(f, b);
	order_put(b->order);
	b->order = NULL;
	budget_sub(&f->budget, b->mem);
	if (b->file[BK_IMAGES] == NULL ||
	    !hand_over(f, b->file[BK_IMAGES], b->img_buf))
		bufpool_put(f, b->file[BK_IMAGES], b->img_buf);
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
	b->next = b->ahead = 0;
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
	budget_meta_sub(&f->budget, sizeof(*b));
	pthread_cond_destroy(&b->cv);
	free(b);
}

void
batch_unref(struct feed *f, struct batch *b)
{
	if (b->refs > 0)
		return;
	if (b->consumed)
		budget_wake(&f->budget); /* release_near's waiters */
	if (b->empty)
		batch_destroy(f, b);
	else if (budget_over(&f->budget))
		budget_make_room(&f->budget, 0, 0, 0);
}

/*
 * A reader is in the middle of b: held open, not read to its end, its
 * last read ended less than READ_PAUSE_NS before now.  Its data is not
 * given back to make room for another batch: with room for one batch
 * and two readers on two batches (a 512M cgroup, batches of 147 MiB),
 * each read request took the other reader's batch, and each was made
 * again at every request (two sha256sum readers took more than 10
 * minutes for an epoch of two batches).  So readers take turns, batch by
 * batch; a reader that pauses longer loses its batch's data, as before,
 * and one that never reads on holds nothing for long.
 */
#define READ_PAUSE_NS 1000000000ull

static bool
reading(const struct batch *b, uint64_t now)
{
	return b->refs > 0 && !b->consumed && b->ready && b->read_ns != 0 &&
	       now < b->read_ns + READ_PAUSE_NS; /* read_ns may be > now */
}

/*
 * Whether b's data may be dropped now: idle (ready, no read in
 * progress), and, for a relaxed batch, its content chosen, so that it is
 * built again the same.
 */
static bool
idle(const struct batch *b)
{
	return !b->empty && b->ready && b->active == 0 && !b->converting &&
	       (!b->r.rv || b->r.fixed || b->err);
}

/* Whether b's data may be given back to make room: idle, and no reader
 * in the middle of it. */
static bool
evictable(const struct batch *b, uint64_t now)
{
	return idle(b) && !reading(b, now);
}

bool
batch_renew(struct feed *f, struct batch *b)
{
	/* Its own reader may be in the middle of it: made again anyway. */
	if (!b->err || !sample_unavailable(b->err) || !idle(b))
		return false;
	drop_data(f, b);
	return true;
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

/* The best batch whose data may be given back (better_victim): of those
 * no file holds if unheld, and read to their end if done; NULL: none. */
static struct batch *
victim(struct feed *f, bool unheld, bool done)
{
	struct batch *v = NULL;
	uint64_t now = feed_mono_ns();

	for (size_t i = 0; i < FEED_HASH; i++)
		for (struct batch *b = f->table[i]; b; b = b->hnext)
			if (evictable(b, now) && (!unheld || b->refs == 0) &&
			    (!done || b->consumed) &&
			    (!v || better_victim(b, v)))
				v = b;
	return v;
}

/* Give back v: whole if no file holds it, else its data (its struct
 * stays, and is built again when read).  False: v is NULL. */
static bool
give_back(struct feed *f, struct batch *v)
{
	if (v == NULL)
		return false;
	if (v->refs == 0)
		batch_destroy(f, v);
	else
		drop_data(f, v);
	return true;
}

/*
 * The budget's reclaimers (budget.h): BUDGET_DONE_BATCHES, the least
 * recently used batch read to its end that no file holds;
 * BUDGET_IDLE_BATCHES, the best idle batch, held open or not;
 * BUDGET_META_BATCHES, the best idle batch that no file holds (its struct
 * is metadata too).
 */
static bool
reclaim_done(void *arg, const struct budget_ask *ask)
{
	(void)ask;
	return give_back(arg, victim(arg, true, true));
}

static bool
reclaim_idle(void *arg, const struct budget_ask *ask)
{
	(void)ask;
	return give_back(arg, victim(arg, false, false));
}

static bool
reclaim_unheld(void *arg, const struct budget_ask *ask)
{
	(void)ask;
	return give_back(arg, victim(arg, true, false));
}

void
batch_budget(struct feed *f)
{
	struct budget_reclaimer done = {"consumed batches", reclaim_done, NULL,
	    f},
				idle = {"idle batches", reclaim_idle, NULL, f},
				meta = {"unheld batch structs", reclaim_unheld,
				    NULL, f};

	budget_register(&f->budget, BUDGET_DONE_BATCHES, &done);
	budget_register(&f->budget, BUDGET_IDLE_BATCHES, &idle);
	budget_register(&f->budget, BUDGET_META_BATCHES, &meta);
}

/* Whether a batch other than b is being built or read, or a reader is
 * in the middle of it: memory will come back when it is done. */
static bool
others_busy(struct feed *f, const struct batch *b)
{
	uint64_t now = feed_mono_ns();

	for (size_t i = 0; i < FEED_HASH; i++)
		for (struct batch *x = f->table[i]; x; x = x->hnext)
			if (x != b && !x->empty &&
			    (!x->ready || x->active || x->converting ||
				reading(x, now)))
				return true;
	return false;
}

/*
 * The size of b's images buffer: a full batch's of its epoch, for the
 * short last batch too, so that every buffer of a job's epoch is one
 * size, and the buffer of any batch read to its end fits the next one.
 * Sized to their batch, the short batch's buffer fitted no other batch,
 * and it took none of theirs: bench/run's default job (5000 images,
 * batch 256) mapped it besides the full ones, 82 MB of fresh pages in
 * the cold epoch and a sixth buffer in all, where five do (the batch
 * read and four ahead).  gpu = on: its .npy's own size (the large
 * buffer there is the raw samples').
 */
static uint64_t
images_buf_size(const struct batch *b)
{
	struct batch_geom full;

	if (b->job->cfg->gpu)
		return b->g.size[BK_IMAGES];
	job_batch_geom(b->job, b->key.epoch, b->key.world, 0, &full);
	return full.size[BK_IMAGES] > b->g.size[BK_IMAGES]
		   ? full.size[BK_IMAGES]
		   : b->g.size[BK_IMAGES];
}

/* The struct of a new batch k, in the table, without data (NULL: no
 * memory, or metadata at its cap; readahead is not refused: it stops). */
static struct batch *
batch_new(struct feed *f, const struct feed_key *k, enum batch_need need)
{
	struct batch *b;

	if (!(need == BN_AHEAD ? budget_meta_fits(&f->budget, sizeof(*b))
			       : budget_meta_room(&f->budget, sizeof(*b))) ||
	    (b = calloc(1, sizeof(*b))) == NULL)
		return NULL;
	budget_meta_add(&f->budget, sizeof(*b));
	b->key = *k;
	b->job = &f->jobs[k->job];
	b->empty = true;
	job_batch_geom(b->job, k->epoch, k->world, k->batch, &b->g);
	b->img_buf = images_buf_size(b);
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

	/*
	 * A strict batch's images: a kept buffer now, else one at its first
	 * slot (batch_images_buf): a buffer a read batch gives back
	 * meanwhile (drop_data hands it to the unstarted batch nearest to
	 * the workers), a kept one, or a fresh one.  Mapped here, the fresh
	 * buffers of a cold epoch's queued batches were mapped long before
	 * the workers reached them, and their pages cost their first touch
	 * (clear_page: 14% of a cold epoch's CPU on this VM).  The budget
	 * counts the images from here either way; a deferred batch and a
	 * kept buffer are never both counted for long, since a buffer given
	 * back goes to a deferred batch before it is kept.
	 */
	if (gpu)
		b->raw = bufpool_get(f, b->g.raw_size);
	else if (j->cfg->order != CFG_ORDER_STRICT ||
		 bufpool_has(f, b->img_buf))
		b->file[BK_IMAGES] = bufpool_get(f, b->img_buf);
	b->file[BK_LABELS] = malloc(b->g.size[BK_LABELS]);
	b->file[BK_IDS] = malloc(b->g.size[BK_IDS]);
	b->pos = malloc((b->g.len ? b->g.len : 1) * sizeof(*b->pos));
	b->order = order_get(f, b->key.job, b->key.epoch);
	b->empty = false;
	b->ready = false;
	b->next = b->ahead = b->inflight = 0;
	b->mem = data_bytes(b);
	budget_add(&f->budget, b->mem);
	if ((!gpu && !b->file[BK_IMAGES] &&
		j->cfg->order != CFG_ORDER_STRICT) ||
	    (gpu && !b->raw) || !b->file[BK_LABELS] || !b->file[BK_IDS] ||
	    !b->pos || !b->order) {
		drop_data(f, b);
		return -ENOMEM;
	}
	if (!gpu && b->file[BK_IMAGES])
		job_npy_header(j, b->key.epoch, b->g.len, BK_IMAGES,
		    (char *)b->file[BK_IMAGES]);
	job_npy_header(
	    j, b->key.epoch, b->g.len, BK_LABELS, (char *)b->file[BK_LABELS]);
	job_npy_header(
	    j, b->key.epoch, b->g.len, BK_IDS, (char *)b->file[BK_IDS]);
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
	/* The cluster tier's finished batches first (tier.c). */
	if (!tier_take(f, b))
		sched_enqueue(f, b);
	return 0;
}

/* How long a read waits for metadata to go (a file closed) when nothing
 * else it could wait for holds memory. */
#define ROOM_GRACE_NS 1000000000ull

/* Say why b's read is refused: need bytes do not fit.  Locked. */
static int
refuse(struct feed *f, const struct batch *b, uint64_t need)
{
	if (f->room_refused++ % 1000 == 0)
		log_warn(
		    "memory: job %s, epoch %" PRIu32 ", batch %" PRIu64
		    "%s needs %" PRIu64 " bytes, and the budget of %" PRIu64
		    " has %" PRIu64 " in use that nothing can give back "
		    "now (metadata %" PRIu64 ": open files, relaxed views, "
		    "names; the workers' scratch %" PRIu64 "): its read "
		    "fails with ENOMEM (%" PRIu64 " so far); close files, "
		    "lower batch_size or raise memory",
		    b->job->name, b->key.epoch, b->key.batch,
		    b->key.world > 1 ? " of a rank view" : "", need, f->memory,
		    f->mem_used, f->meta_used,
		    f->scratch_reserved + f->scratch_outside, f->room_refused);
	return -ENOMEM;
}

bool
batch_made_meanwhile(const struct batch *b, bool images)
{
	return images ? b->file[BK_IMAGES] != NULL || b->converting || b->err
		      : !b->empty;
}

/*
 * Room for need more bytes for b's read: wait while other batches are
 * being built or read, and then a moment for metadata to go; when that
 * is not enough the read is refused (-ENOMEM), never made past the
 * budget: the budget is what keeps the daemon inside its cgroup.  A
 * batch that could never fit is refused at mount (feed.c).  Done as
 * soon as another reader made what this one waits for
 * (batch_made_meanwhile): the room is then held by b itself.
 */
int
batch_wait_room(
    struct feed *f, struct batch *b, uint64_t need, size_t buf, bool images)
{
	size_t keep = bufpool_has(f, buf);
	uint64_t until = 0, now;

	while (!batch_made_meanwhile(b, images) &&
	       !budget_make_room(&f->budget, need, BUDGET_ANY, keep) &&
	       !f->stopping) {
		if (others_busy(f, b)) {
			/* Timed: a reader's pause (reading()) ends unsaid. */
			until = 0;
			budget_wait_ns(&f->budget, READ_PAUSE_NS / 10);
		} else {
			now = feed_mono_ns();
			if (until == 0)
				until = now + ROOM_GRACE_NS;
			else if (now >= until)
				return refuse(f, b, need);
			budget_wait_ns(&f->budget, ROOM_GRACE_NS / 10);
		}
		keep = bufpool_has(f, buf);
	}
	return 0;
}

/*
 * Fresh pages cost a fault and a clear per 4 KB (a fifth of a cold
 * epoch's CPU): when no kept buffer fits b, take one from a batch that
 * was read to its end and that no file holds, even with room to spare.
 * Such a batch is rarely read again, and is made again if it is.  A b
 * that waits for its images (batch_images_buf) takes the victim's images
 * buffer itself; else drop_data keeps it or hands it on.
 */
static void
recycle(struct feed *f, struct batch *b)
{
	size_t size = main_buf(b);
	struct batch *victim = NULL;
	uint64_t now = feed_mono_ns();

	if (size == 0 || bufpool_has(f, size))
		return;
	for (size_t i = 0; i < FEED_HASH; i++)
		for (struct batch *x = f->table[i]; x; x = x->hnext)
			if (x != b && x->refs == 0 && x->consumed &&
			    evictable(x, now) && main_buf(x) == size &&
			    (!victim || x->used < victim->used))
				victim = x;
	if (victim == NULL)
		return;
	if (victim->file[BK_IMAGES] != NULL &&
	    deferred(b, victim->img_buf)) {
		uint8_t *img = victim->file[BK_IMAGES];

		victim->file[BK_IMAGES] = NULL; /* b's, not kept */
		batch_destroy(f, victim);
		images_to(f, b, img);
		return;
	}
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
		r = batch_wait_room(f, b, bytes, main_buf(b), false);
		b->active--;
		if (r == 0 && b->empty)
			r = fill(f, b);
		order_put(o);
		return r == 0 ? b : NULL;
	}
	if (!budget_make_room(
		&f->budget, bytes, 0, bufpool_has(f, main_buf(b))) ||
	    fill(f, b) != 0) {
		order_put(o);
		if (made && need == BN_AHEAD)
			batch_destroy(f, b);
		return need == BN_OPEN ? b : NULL;
	}
	order_put(o);
	return b;
}

/* How long batch_images_buf waits at most for a batch release_near
 * finds to be given back, before it maps a fresh buffer. */
#define RELEASE_WAIT_NS 20000000ull

/*
 * Whether a batch whose buffer would fit b is being finished: read to
 * its end, and either a read of it still in progress (mostly its last
 * part, whose reply the reader already has: it may have closed the file
 * already) or a file still holding it though its last read ended under
 * RELEASE_WAIT_NS ago (its reader is closing it; the kernel's release
 * follows the close by a moment).  A worker that takes the next batch's
 * first slot then finds nothing to recycle.  Mapping a fresh buffer then
 * gave 4 of 6 mounts of bench/run's default job that paused between
 * epochs a sixth 154 MB buffer in a warm epoch (~0.4 s of CPU for its
 * first touch here), where five do; waiting, none of 6.  A batch read
 * again by a second reader looks the same: the wait is bounded.
 */
static bool
release_near(struct feed *f, const struct batch *b, uint64_t now)
{
	for (size_t i = 0; i < FEED_HASH; i++)
		for (struct batch *x = f->table[i]; x; x = x->hnext)
			if (x != b && x->consumed &&
			    x->file[BK_IMAGES] != NULL &&
			    main_buf(x) == main_buf(b) &&
			    (x->active > 0 ||
				(x->refs > 0 && x->read_ns != 0 &&
				    now < x->read_ns + RELEASE_WAIT_NS)))
				return true;
	return false;
}

int
batch_images_buf(struct feed *f, struct batch *b)
{
	uint8_t *img;

	if (b->empty || b->job->cfg->gpu || b->file[BK_IMAGES] != NULL)
		return 0;
	recycle(f, b); /* a batch read meanwhile: its buffer */
	/* None: the release of one being closed, if it comes soon. */
	for (uint64_t now = feed_mono_ns(), until = now + RELEASE_WAIT_NS;
	     b->file[BK_IMAGES] == NULL && !bufpool_has(f, b->img_buf) &&
	     !f->stopping && now < until && release_near(f, b, now);
	     now = feed_mono_ns()) {
		budget_wait_ns(&f->budget, RELEASE_WAIT_NS / 4);
		if (b->file[BK_IMAGES] == NULL) /* else handed over */
			recycle(f, b);
	}
	if (b->file[BK_IMAGES] != NULL)
		return 0;
	if ((img = bufpool_get(f, b->img_buf)) == NULL)
		return -ENOMEM;
	job_npy_header(b->job, b->key.epoch, b->g.len, BK_IMAGES, (char *)img);
	b->file[BK_IMAGES] = img;
	return 0;
}
