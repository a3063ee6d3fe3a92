/*
 * fill-choose.c - a program's part (tools/): feedfs-fill --batches, which
 * batches to make (see fill-batches.c): with --epochs, every batch of
 * them in reading order (part K of N), those a worker held asked again
 * later; else the nearest batches within --window of the readers'
 * positions (the notes mounts publish, read every POLL_NS).  Each one is
 * asked of the tier (there: skipped), claimed (held: skipped, a mount's
 * for good) and queued for the workers.  Over core/batch_tier.h and
 * cache/cluster_blob.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/cluster.h"
#include "cache/cluster_blob.h"
#include "core/plan.h"
#include "tools/fill-batches_int.h"
#include "util/clock.h"
#include "util/log.h"

/* ---- orders ------------------------------------------------------------ */

/* The order of epoch, held (order_put); NULL: no memory. */
const uint32_t *
fb_order_get(struct fb *fb, uint32_t epoch)
{
	size_t n = fb->jobs[0].plan.n, victim = ORDERS;

	for (size_t i = 0; i < ORDERS; i++)
		if (fb->ord[i].ids != NULL && fb->ord[i].epoch == epoch) {
			fb->ord[i].refs++;
			fb->ord[i].used = ++fb->tick;
			return fb->ord[i].ids;
		}
	for (size_t i = 0; i < ORDERS; i++)
		if (fb->ord[i].refs == 0 &&
		    (victim == ORDERS || fb->ord[i].ids == NULL ||
			(fb->ord[victim].ids != NULL &&
			    fb->ord[i].used < fb->ord[victim].used)))
			victim = i;
	if (victim == ORDERS)
		return NULL;
	free(fb->ord[victim].ids);
	fb->ord[victim].ids = malloc((n ? n : 1) * sizeof(uint32_t));
	if (fb->ord[victim].ids == NULL ||
	    job_order(&fb->jobs[0], epoch, fb->ord[victim].ids) != 0) {
		free(fb->ord[victim].ids);
		fb->ord[victim].ids = NULL;
		return NULL;
	}
	fb->ord[victim].epoch = epoch;
	fb->ord[victim].refs = 1;
	fb->ord[victim].used = ++fb->tick;
	return fb->ord[victim].ids;
}

void
fb_order_put(struct fb *fb, const uint32_t *ids)
{
	for (size_t i = 0; i < ORDERS; i++)
		if (fb->ord[i].ids == ids && fb->ord[i].refs > 0)
			fb->ord[i].refs--;
}

/* ---- candidates ---------------------------------------------------------- */

static bool
cand_eq(const struct cand *a, const struct cand *b)
{
	return a->view == b->view && a->epoch == b->epoch &&
	       a->rank == b->rank && a->world == b->world &&
	       a->batch == b->batch;
}

static struct seen *
seen_find(struct fb *fb, const struct cand *c)
{
	for (size_t i = 0; i < fb->nseen; i++)
		if (cand_eq(&fb->seen[i].c, c))
			return &fb->seen[i];
	return NULL;
}

void
fb_seen_note(struct fb *fb, const struct cand *c, uint8_t state, uint64_t until)
{
	struct seen *s = seen_find(fb, c);

	if (s == NULL) {
		if (fb->nseen < SEEN)
			s = &fb->seen[fb->nseen++];
		else
			s = &fb->seen[fb->seen_at++ % SEEN];
	}
	s->c = *c;
	s->state = state;
	s->until = until;
}

void
fb_tier_failed(struct fb *fb, const struct cand *c, int r)
{
	char msg[256];

	if (fb->put_errors++ == 0) {
		cluster_last_error(fb->cl, msg, sizeof(msg));
		log_warn("cluster: %s; the batches it concerns are not stored "
			 "(the mounts make them)",
		    r == -EIO && msg[0] ? msg : strerror(-r));
	}
	fb_seen_note(fb, c, S_ERROR, ff_mono_ns() + HELD_AGAIN_NS);
}

/*
 * The planned samples of candidate c into ids (len of them), its
 * positions into pos, its key into key.  0, or -errno.
 */
static int
cand_key(struct fb *fb, const struct cand *c, const uint32_t *order,
    uint64_t *pos, uint32_t len, uint8_t key[TIER_KEY_LEN])
{
	struct job *j = &fb->jobs[c->view];
	uint32_t *ids = malloc((len ? len : 1) * sizeof(*ids));
	const uint64_t *w = NULL;
	size_t nw = 0;
	int r;

	if (ids == NULL)
		return -ENOMEM;
	plan_batch_positions(&j->plan, c->rank, c->world, c->batch, pos);
	for (uint32_t s = 0; s < len; s++)
		ids[s] = order[pos[s] % j->plan.n];
	if (job_is_mixture(&fb->jobs[0])) {
		w = job_weights(&fb->jobs[0], c->epoch);
		nw = fb->jobs[0].nsrc;
	}
	r = tier_batch_key(j, fb->print[c->view], c->epoch, c->rank, c->world,
	    c->batch, ids, len, w, nw, key);
	free(ids);
	return r;
}

/* Whether c is one of the items in flight. */
static bool
in_flight(struct fb *fb, const struct cand *c)
{
	for (struct item *it = fb->head; it; it = it->next_item) {
		struct cand x = {
		    it->view, it->epoch, it->rank, it->world, it->batch};

		if (cand_eq(&x, c))
			return true;
	}
	return false;
}

/*
 * Try to take candidate c: asked of the tier, claimed and queued for the
 * workers (1), or not (0: there, held, failing).  -ENOMEM.
 */
static int
take(struct fb *fb, const struct cand *c)
{
	struct job *j = &fb->jobs[c->view];
	uint32_t len = plan_batch_len(&j->plan, c->world, c->batch);
	char who[CLUSTER_WHO_MAX + 1];
	struct item *it;
	uint64_t idlen, now = ff_mono_ns();
	struct seen *s = seen_find(fb, c);
	int r;

	if (len == 0 || in_flight(fb, c) ||
	    (s != NULL &&
		(s->state == S_THERE || s->state == S_MOUNT ||
		    (s->state == S_ERROR && fb->o->have_epochs) ||
		    s->until > now)))
		return 0;
	if ((it = calloc(1, sizeof(*it))) == NULL)
		return -ENOMEM;
	it->view = c->view;
	it->epoch = c->epoch;
	it->rank = c->rank;
	it->world = c->world;
	it->batch = c->batch;
	it->len = len;
	tier_layout(j, c->epoch, len, &it->rawlen, &idlen);
	if ((it->order = fb_order_get(fb, c->epoch)) == NULL ||
	    (it->pos = malloc(len * sizeof(*it->pos))) == NULL) {
		r = -ENOMEM;
		goto drop;
	}
	if ((r = cand_key(fb, c, it->order, it->pos, len, it->key)) != 0) {
		if (r == -ENOENT) { /* a sample gone: the mount says why */
			fb->failed++;
			fb_seen_note(fb, c, S_ERROR, now + 10 * HELD_AGAIN_NS);
		}
		r = r == -ENOMEM ? r : 0;
		goto drop;
	}
	if ((r = cluster_blob_has(fb->cl, it->key)) != 0) {
		if (r == 1) {
			fb->there++;
			fb_seen_note(fb, c, S_THERE, UINT64_MAX);
		} else
			fb_tier_failed(fb, c, r);
		r = 0;
		goto drop;
	}
	r = cluster_claim(fb->cl, it->key, fb->who, CLAIM_TTL);
	if (r != 0 && r != -EEXIST) {
		fb_tier_failed(fb, c, r);
		r = 0;
		goto drop;
	}
	if (r != 0) {
		bool mount = false;

		if (r == -EEXIST &&
		    cluster_claim_held(fb->cl, it->key, who) == 1)
			mount = strncmp(who, "mount ", 6) == 0;
		/* A mount makes it for itself: never in the tier. */
		fb_seen_note(
		    fb, c, mount ? S_MOUNT : S_HELD, now + HELD_AGAIN_NS);
		if (r == -EEXIST && s == NULL)
			fb->heldn++;
		r = 0;
		goto drop;
	}
	it->raw = malloc(it->rawlen ? it->rawlen : 1);
	it->ids = malloc(idlen ? idlen : 1);
	if (it->raw == NULL || it->ids == NULL) {
		cluster_claim_drop(fb->cl, it->key);
		r = -ENOMEM;
		goto drop;
	}
	it->renewed = now;
	pthread_mutex_lock(&fb->lock);
	struct item **pp = &fb->head;
	while (*pp != NULL)
		pp = &(*pp)->next_item;
	*pp = it;
	fb->nitems++;
	pthread_cond_broadcast(&fb->work);
	pthread_mutex_unlock(&fb->lock);
	return 1;
drop:
	if (it->order != NULL)
		fb_order_put(fb, it->order);
	free(it->pos);
	free(it->raw);
	free(it->ids);
	free(it);
	return r;
}

/* --epochs: the candidate at place seq of the order; false past the end. */
static bool
epochs_cand(struct fb *fb, uint64_t seq, struct cand *c)
{
	const struct fb_opts *o = fb->o;
	uint64_t nb = plan_nbatches(&fb->jobs[0].plan, o->world);
	uint64_t per = nb * o->world * fb->nviews;

	if (per == 0 || seq >= per * (o->eb - o->ea + 1))
		return false;
	c->epoch = (uint32_t)(o->ea + seq / per);
	seq %= per;
	c->batch = seq / ((uint64_t)o->world * fb->nviews);
	seq %= (uint64_t)o->world * fb->nviews;
	c->rank = (uint32_t)(seq / fb->nviews);
	c->view = (uint32_t)(seq % fb->nviews);
	c->world = o->world;
	return true;
}

/*
 * Whether c is in this worker's part (--part K/N): by its place among
 * the (epoch, batch, rank) of its world, the views of a batch together.
 */
static bool
in_part(struct fb *fb, const struct cand *c)
{
	uint64_t nb = plan_nbatches(&fb->jobs[0].plan, c->world);
	uint64_t unit =
	    ((uint64_t)c->epoch * nb + c->batch) * c->world + c->rank;

	return unit % fb->o->parts == fb->o->part;
}

/* --epochs: the next candidate to take (1), none now (0), -ENOMEM. */
int
fb_next_epochs(struct fb *fb)
{
	struct cand c;
	int r;

	while (epochs_cand(fb, fb->seq, &c)) {
		fb->seq++;
		if (!in_part(fb, &c))
			continue;
		if ((r = take(fb, &c)) != 0)
			return r;
		struct seen *s = seen_find(fb, &c);

		if (s != NULL && s->state == S_HELD) {
			if (fb->nheld == fb->cheld) {
				size_t n = fb->cheld ? 2 * fb->cheld : 64;
				struct cand *h =
				    realloc(fb->held, n * sizeof(*h));

				if (h == NULL)
					return -ENOMEM;
				fb->held = h;
				fb->cheld = n;
			}
			fb->held[fb->nheld++] = c;
		}
	}
	/* The ones a worker held: asked again until there or taken. */
	for (size_t i = 0; i < fb->nheld; i++) {
		struct seen *s = seen_find(fb, &fb->held[i]);

		if (s != NULL && s->state != S_HELD) {
			fb->held[i--] = fb->held[--fb->nheld];
			continue;
		}
		if ((r = take(fb, &fb->held[i])) != 0) {
			fb->held[i] = fb->held[--fb->nheld];
			return r;
		}
	}
	return 0;
}

/* --epochs: whether nothing is left to take or wait for. */
bool
fb_epochs_done(struct fb *fb)
{
	struct cand c;

	return !epochs_cand(fb, fb->seq, &c) && fb->nheld == 0;
}

/* ---- following the readers ------------------------------------------------
 */

static void
pos_found(void *arg, size_t i, const uint8_t *v, size_t len)
{
	struct fb *fb = arg;
	struct tier_pos p;
	uint64_t now = (uint64_t)time(NULL);

	(void)i;
	if (tier_pos_decode(v, len, &p) != 0 || p.epoch >= fb->cj->epochs ||
	    p.time + NOTE_AGE < now || fb->npos >= TIER_SLOTS)
		return;
	fb->pos[fb->npos++] = p;
}

/* Read the readers' positions again (every POLL_NS). */
static void
read_positions(struct fb *fb)
{
	char names[TIER_SLOTS][TIER_NOTE_NAME];
	const char *np[TIER_SLOTS];
	int r;

	fb->npos = 0;
	for (unsigned i = 0; i < TIER_SLOTS; i++) {
		tier_pos_name(fb->print[0], i, names[i]);
		np[i] = names[i];
	}
	if ((r = cluster_note_get(fb->cl, np, TIER_SLOTS, pos_found, fb)) < 0)
		fb->npos = 0;
	fb->positions_at = ff_mono_ns();
}

/*
 * Follow: the nearest batch of any view that the tier lacks and nobody
 * holds, among the --window nearest ahead of each reader's position that
 * no mount holds (the batches a mount makes for itself do not count: a
 * mount's readahead runs ahead of the workers' as it needs), taken (1);
 * none now (0); -ENOMEM.
 */
int
fb_next_follow(struct fb *fb)
{
	uint32_t epochs = (uint32_t)fb->cj->epochs, left[TIER_SLOTS];
	uint32_t far = fb->o->window * FOLLOW_FAR;
	int r;

	if (ff_mono_ns() - fb->positions_at >= POLL_NS)
		read_positions(fb);
	for (size_t i = 0; i < fb->npos; i++)
		left[i] = fb->o->window;
	for (uint32_t d = 1; d <= far; d++)
		for (size_t i = 0; i < fb->npos; i++) {
			const struct tier_pos *p = &fb->pos[i];
			uint64_t nb =
			    plan_nbatches(&fb->jobs[0].plan, p->world);
			uint64_t at = (uint64_t)p->epoch * nb + p->batch + d;
			struct seen *s;
			struct cand c;

			if (left[i] == 0 || nb == 0 || at / nb >= epochs)
				continue;
			c.epoch = (uint32_t)(at / nb);
			c.batch = at % nb;
			c.rank = p->rank;
			c.world = p->world;
			if (!in_part(fb, &c))
				continue;
			for (c.view = 0; c.view < fb->nviews; c.view++)
				if ((r = take(fb, &c)) != 0)
					return r;
			c.view = 0;
			if ((s = seen_find(fb, &c)) == NULL || s->state != S_MOUNT)
				left[i]--;
		}
	return 0;
}
