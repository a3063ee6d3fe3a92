/*
 * tier_pos.c - the engine (engine/): the readers' positions that a
 * mount publishes in the cluster tier, for the batch workers to follow
 * (issue 37); and the tier's failures and clock.  Layer: the engine,
 * below tier.c (whose thread calls it) and files.c (feed_open tells it
 * what a reader opened); calls only jobs.c of the engine.
 *
 * Per (job, rank view) a reader opens, the position is the batch it
 * opened last in reading order: the highest, or one much lower (a
 * reader that started the epochs over).  It goes to one of the job's
 * TIER_SLOTS notes (core/batch_tier.h): the note that already names
 * that rank view (another mount of it shares it), else a free one (add),
 * else the one its rank view hashes to.  It is sent when it moves and
 * every REFRESH_NS else; a note lives NOTE_TTL seconds, so that the
 * positions of readers gone fade out.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cache/cluster.h"
#include "cache/cluster_blob.h"
#include "engine/tier_int.h"
#include "util/clock.h"
#include "util/log.h"

#define REFRESH_NS 30000000000ull
#define NOTE_TTL 600
/* A reader this far behind its last position started over. */
#define BACK_BATCHES 64

void
tier_failed(struct tier *t, int r)
{
	char msg[256];

	if (r != -EIO)
		return;
	atomic_fetch_add(&t->errors, 1);
	/* Once per client, whether its prefixes or its batches met it. */
	if (cluster_error_once(t->cl, msg, sizeof(msg)))
		log_warn("cluster: %s; the batches and values on that server "
			 "are made here until it answers (counted in "
			 "feedfs_cluster_errors_total and "
			 "feedfs_cluster_batch_errors_total)",
		    msg[0] ? msg : "a server failed");
}

/* The place of (epoch, batch) in a rank view's reading order. */
static uint64_t
order_of(struct feed *f, uint32_t job, uint32_t world, uint32_t epoch,
    uint64_t batch)
{
	return (uint64_t)epoch * feed_job_nbatches(f, job, world) + batch;
}

void
tier_opened(struct feed *f, const struct feed_key *k)
{
	struct tier *t = f->tier;
	struct tier_view *v = NULL, *lru = NULL;
	uint32_t job = k->job;
	uint64_t at, was;

	if (t == NULL || !t->jobs[k->job].on || !t->started)
		return;
	if (f->jobs[job].view > 0)
		job = f->jobs[job].view_main;
	for (size_t i = 0; i < TIER_VIEWS && v == NULL; i++) {
		struct tier_view *x = &t->views[i];

		if (x->used && x->job == job && x->world == k->world &&
		    x->rank == k->rank)
			v = x;
		else if (lru == NULL || !x->used ||
			 (lru->used && x->touched < lru->touched))
			lru = x;
	}
	if (v == NULL) {
		v = lru;
		memset(v, 0, sizeof(*v));
		v->used = true;
		v->slot = -1;
		v->job = job;
		v->world = k->world;
		v->rank = k->rank;
		v->epoch = k->epoch;
		v->batch = k->batch;
		v->dirty = true;
	}
	v->touched = ++t->tick;
	at = order_of(f, job, k->world, k->epoch, k->batch);
	was = order_of(f, job, v->world, v->epoch, v->batch);
	if (at > was || was - at > BACK_BATCHES) {
		v->epoch = k->epoch;
		v->batch = k->batch;
		v->dirty = true;
		pthread_cond_signal(&t->cv);
	}
}

uint64_t
tier_pos_due(const struct tier *t)
{
	uint64_t due = UINT64_MAX;

	for (size_t i = 0; i < TIER_VIEWS; i++) {
		const struct tier_view *v = &t->views[i];

		if (!v->used)
			continue;
		if (v->dirty)
			return 0;
		if (v->sent_ns + REFRESH_NS < due)
			due = v->sent_ns + REFRESH_NS;
	}
	return due;
}

/* What the scan of a job's notes found. */
struct scan {
	const struct tier_view *v;
	int same; /* the note naming v's rank view */
	bool present[TIER_SLOTS];
};

static void
scan_one(void *arg, size_t i, const uint8_t *val, size_t len)
{
	struct scan *s = arg;
	struct tier_pos p;

	if (i >= TIER_SLOTS)
		return;
	s->present[i] = true;
	if (tier_pos_decode(val, len, &p) == 0 && p.world == s->v->world &&
	    p.rank == s->v->rank && s->same < 0)
		s->same = (int)i;
}

/*
 * The slot of v's position (v a copy; unlocked): the note naming its
 * rank view, else a free one taken with add, else its hash's.
 */
static int
find_slot(struct tier *t, const struct tier_view *v, const uint8_t *jp,
    const uint8_t *val)
{
	char names[TIER_SLOTS][TIER_NOTE_NAME];
	const char *np[TIER_SLOTS];
	struct scan s = {v, -1, {false}};
	int r;

	for (unsigned i = 0; i < TIER_SLOTS; i++) {
		tier_pos_name(jp, i, names[i]);
		np[i] = names[i];
	}
	if ((r = cluster_note_get(t->cl, np, TIER_SLOTS, scan_one, &s)) < 0) {
		tier_failed(t, r);
		return -1;
	}
	if (s.same >= 0)
		return s.same;
	for (unsigned i = 0; i < TIER_SLOTS; i++) {
		if (s.present[i])
			continue;
		r = cluster_note_add(t->cl, np[i], val, TIER_POS_LEN, NOTE_TTL);
		if (r == 0)
			return (int)i;
		if (r != -EEXIST) {
			tier_failed(t, r);
			return -1;
		}
	}
	return (int)((v->world * 1031u + v->rank) % TIER_SLOTS);
}

bool
tier_pos_publish(struct tier *t)
{
	struct feed *f = t->f;
	uint64_t now = ff_mono_ns();
	struct tier_view *v = NULL, copy;
	struct tier_pos p;
	uint8_t val[TIER_POS_LEN];
	char name[TIER_NOTE_NAME];
	const uint8_t *jp;
	int slot, r;

	for (size_t i = 0; i < TIER_VIEWS && v == NULL; i++)
		if (t->views[i].used &&
		    (t->views[i].dirty ||
			t->views[i].sent_ns + REFRESH_NS <= now))
			v = &t->views[i];
	if (v == NULL)
		return false;
	v->dirty = false;
	v->sent_ns = now;
	copy = *v;
	jp = t->jobs[copy.job].print; /* fixed from the start */
	pthread_mutex_unlock(&f->lock);

	p = (struct tier_pos){copy.world, copy.rank, copy.epoch, copy.batch,
	    (uint64_t)time(NULL), t->mount};
	tier_pos_encode(&p, val);
	slot = copy.slot;
	if (slot < 0)
		slot = find_slot(t, &copy, jp, val);
	if (slot >= 0) {
		tier_pos_name(jp, (unsigned)slot, name);
		if ((r = cluster_note_set(
			 t->cl, name, val, sizeof(val), NOTE_TTL)) != 0) {
			tier_failed(t, r);
			slot = -1; /* found again next time */
		}
	}

	pthread_mutex_lock(&f->lock);
	if (v->used && v->job == copy.job && v->world == copy.world &&
	    v->rank == copy.rank)
		v->slot = slot;
	return true;
}
