/*
 * tier_look.c - the engine (engine/): the cluster tier's thread, which
 * looks up the batches tier_take handed over (issue 37).  Layer: the
 * engine, below feed.c (tier_start, tier_stop), above batch.c (the
 * readahead it adds), sched_queue.c, tier.c and tier_pos.c; calls
 * cache/cluster_blob.h and core/batch_tier.h.
 *
 * With cluster and cluster_batches, a batch of a strict job (not
 * gpu = on) that gets data is looked up in the tier by the tier thread
 * before its slots are queued:
 *
 *   there: fetched (its samples before the output conversion, and their
 *     ids), checked (the blob's tag, its length, every id), and its slots
 *     queued to be converted from those samples by the workers (the
 *     output conversion, random_erasing's box, then the batch op as any
 *     batch: tier_slot), at a tenth of the cost of making them;
 *   absent and free: claimed for this mount (add, expiring after three
 *     times the measured time to make a batch here), so that no worker
 *     makes it too, and made here;
 *   held by a worker: looked at again every POLL_DEMAND_MS (a reader
 *     waits for it) or POLL_AHEAD_MS (readahead), until it is there, the
 *     claim is gone (its worker died: it expires within seconds) or the
 *     wait bound runs out: then made here.  The bound
 *     (cluster_batch_wait, by default twice the measured time to make a
 *     batch here) runs from when a reader waits for the batch: before,
 *     the worker has the time the reader takes to reach it (up to
 *     TIER_WAIT_AHEAD_NS), and this mount's own readahead goes on;
 *   refused (a bad tag, another length, an id out of range) or a server
 *     failed: made here.
 *
 * A tier that is down, slow or full costs the speed of making batches
 * here, never a failed read.  Batches made here are not stored in the
 * tier: the workers make what the tier holds.
 */
#include <sys/random.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/cluster.h"
#include "cache/cluster_blob.h"
#include "core/mix.h"
#include "engine/tier_int.h"
#include "util/clock.h"
#include "util/log.h"

#define POLL_DEMAND_MS 20
#define POLL_AHEAD_MS 100
/* How far past the reader's readahead more() makes batches, at most. */
#define AHEAD_FAR 4

/*
 * The batch to look at now: the first one a reader waits for, else the
 * first one; of those due (poll <= now).  *next: when one is due next.
 */
static struct batch *
pick(struct tier *t, uint64_t now, uint64_t *next)
{
	struct batch *first = NULL;

	*next = UINT64_MAX;
	for (struct batch *b = t->head; b; b = b->t.next) {
		if (b->t.poll > now) {
			if (b->t.poll < *next)
				*next = b->t.poll;
			continue;
		}
		if (b->demanded)
			return b;
		if (first == NULL)
			first = b;
	}
	return first;
}

/* ---- the thread -------------------------------------------------------- */

/* What a look at the tier found. */
enum look { L_HIT, L_LOCAL, L_WAIT };

/*
 * Ask the tier about b (its key computed, raw room for its samples, ids
 * room for its ids): fetched (L_HIT), made here (L_LOCAL: claimed for
 * this mount, or the tier failed or refused), or held by a worker
 * (L_WAIT).  Unlocked.
 */
static enum look
ask(struct tier *t, struct batch *b, const struct tier_job *tj, uint8_t *raw,
    uint64_t rawlen, uint8_t *ids, uint64_t idlen, unsigned ttl, bool *refused)
{
	struct iovec iov[2] = {{raw, rawlen}, {ids, idlen}};
	char who[CLUSTER_WHO_MAX + 1];
	int r;

	(void)tj;
	r = cluster_blob_get(t->cl, b->t.key, iov, 2);
	if (r == 0)
		return L_HIT;
	if (r == -EACCES || r == -EBADMSG) {
		*refused = true;
		return L_LOCAL;
	}
	if (r != -ENOENT) {
		tier_failed(t, r);
		return L_LOCAL;
	}
	if ((r = cluster_claim(t->cl, b->t.key, t->who, ttl)) == 0)
		return L_LOCAL;
	if (r != -EEXIST) {
		tier_failed(t, r);
		return L_LOCAL;
	}
	/* Ours (the batch made here before, then given back)? */
	r = cluster_claim_held(t->cl, b->t.key, who);
	if (r < 0)
		tier_failed(t, r);
	if (r == 1 && strcmp(who, t->who) == 0)
		return L_LOCAL;
	return r == 0 ? L_WAIT : r == 1 ? L_WAIT : L_LOCAL;
}

/*
 * b (not demanded) turned out to be held by a worker, so this mount's
 * own work ahead of the reader is a batch short (a fetched batch is not:
 * its conversion is work here, and fetching further ahead would only
 * hold more memory): the first
 * batch after b, up to AHEAD_FAR times readahead further, that the table
 * lacks is made to exist (batch_get, BN_AHEAD: within the budget; it
 * goes to the tier first, as any).  So the mount's workers stay busy
 * while the workers' batches are on their way, and the mount and the
 * workers each make the nearest batches nobody holds.  Locked.
 */
static void
more(struct feed *f, const struct batch *b)
{
	const struct job *j = b->job;
	struct feed_key k = b->key;
	uint64_t far = f->cfg->mount.readahead * AHEAD_FAR;
	uint64_t nb = plan_nbatches(&j->plan, k.world);

	for (uint64_t i = 0; i < far; i++) {
		if (++k.batch >= nb) {
			k.batch = 0;
			if (++k.epoch >= j->cfg->epochs)
				return;
		}
		if (batch_find(f, &k) == NULL) {
			batch_get(f, &k, BN_AHEAD);
			return;
		}
	}
}

/* b's planned samples, into ids (len); false: not fixed. Locked. */
static bool
planned(const struct batch *b, uint32_t *ids)
{
	const struct job *j = b->job;

	if (b->order == NULL || b->pos == NULL || j->plan.n == 0)
		return false;
	for (uint32_t s = 0; s < b->g.len; s++)
		ids[s] = b->order->ids[b->pos[s] % j->plan.n];
	return true;
}

/*
 * Look at b (taken out of the queue): its key the first time, then the
 * tier.  Locked; unlocks around the calls.
 */
static void
look(struct tier *t, struct batch *b)
{
	struct feed *f = t->f;
	struct job *j = b->job;
	struct tier_job *tj = &t->jobs[b->key.job];
	uint32_t len = b->g.len, *plan = NULL;
	uint64_t w[MIX_MAX_SOURCES], rawlen, idlen, now;
	size_t nw = 0;
	unsigned ttl = tier_claim_ttl(f, j, len);
	uint8_t *raw = NULL, *ids = NULL;
	bool refused = false, first = b->t.since == 0;
	enum look l = L_LOCAL;

	tier_q_remove(t, b);
	b->t.busy = true;
	tier_layout(j, b->key.epoch, len, &rawlen, &idlen);
	if (!b->t.key_ok && (plan = malloc((len ? len : 1) * 4)) != NULL) {
		if (!planned(b, plan)) {
			free(plan);
			plan = NULL;
		} else if (job_is_mixture(j)) {
			nw = j->nsrc;
			memcpy(
			    w, job_weights(j, b->key.epoch), nw * sizeof(*w));
		}
	}
	raw = tier_raw(f, b, rawlen);
	ids = malloc(idlen ? idlen : 1);
	pthread_mutex_unlock(&f->lock);

	if (plan != NULL)
		b->t.key_ok = tier_batch_key(j, tj->print, b->key.epoch,
				  b->key.rank, b->key.world, b->key.batch, plan,
				  len, w, nw, b->t.key) == 0;
	if (b->t.key_ok && raw != NULL && ids != NULL)
		l = ask(t, b, tj, raw, rawlen, ids, idlen, ttl, &refused);

	pthread_mutex_lock(&f->lock);
	b->t.busy = false;
	now = ff_mono_ns();
	if (l == L_HIT &&
	    tier_ids_check(j, ids, len,
		(int64_t *)(b->file[BK_IDS] + b->g.hdr[BK_IDS])) != 0) {
		l = L_LOCAL;
		refused = true;
	}
	if (refused)
		atomic_fetch_add(&tj->refused, 1);
	if (l == L_WAIT && first && !b->demanded && !t->stop)
		more(f, b);
	if (l == L_WAIT) {
		if (b->t.since == 0) {
			b->t.since = now;
			atomic_fetch_add(&tj->waits, 1);
		}
		/* The bound runs from when a reader waits for it. */
		if (b->demanded && b->t.dsince == 0)
			b->t.dsince = now;
		if (!t->stop &&
		    (b->t.dsince ? now - b->t.dsince < tier_wait_bound(f, j, len)
				 : now - b->t.since < TIER_WAIT_AHEAD_NS)) {
			b->t.poll = now + (b->demanded ? POLL_DEMAND_MS
						       : POLL_AHEAD_MS) *
					      1000000ull;
			tier_q_push(t, b);
			goto out;
		}
		atomic_fetch_add(&tj->timeouts, 1);
		l = L_LOCAL;
	}
	if (b->t.since != 0) {
		atomic_fetch_add(&tj->wait_ns, now - b->t.since);
		b->t.since = b->t.dsince = 0;
	}
	if (l == L_HIT) {
		tier_fetched(f, b, raw, rawlen); /* still counted */
		raw = NULL;
		atomic_fetch_add(&tj->batches, 1);
		atomic_fetch_add(&tj->bytes, rawlen + idlen);
	} else
		atomic_fetch_add(&tj->local, 1);
	sched_enqueue(f, b);
out:
	tier_raw_free(f, b, raw, rawlen);
	free(ids);
	free(plan);
}

static void *
tier_main(void *arg)
{
	struct tier *t = arg;
	struct feed *f = t->f;

	pthread_mutex_lock(&f->lock);
	while (!t->stop) {
		uint64_t now = ff_mono_ns(), next, due;
		struct batch *b;

		if (tier_pos_publish(t))
			continue;
		if ((b = pick(t, now, &next)) != NULL) {
			look(t, b);
			continue;
		}
		if ((due = tier_pos_due(t)) < next)
			next = due;
		if (next == UINT64_MAX || next - now > 1000000000ull)
			next = now + 1000000000ull;
		struct timespec ts = {(time_t)(next / 1000000000ull),
		    (long)(next % 1000000000ull)};
		pthread_cond_timedwait(&t->cv, &f->lock, &ts);
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

/* ---- start and stop ----------------------------------------------------- */

int
tier_start(struct feed *f)
{
	const struct cfg_mount *m = &f->cfg->mount;
	struct cluster_stats cs;
	pthread_condattr_t ca;
	struct tier *t;
	char host[64] = "";
	size_t on = 0;
	int r;

	if (f->cluster == NULL || !m->cluster_batches)
		return 0;
	cluster_get_stats(f->cluster, &cs);
	if (cs.off) /* no server takes this node's credentials: said */
		return 0;
	if ((t = calloc(1, sizeof(*t))) == NULL ||
	    (t->jobs = calloc(f->njobs, sizeof(*t->jobs))) == NULL) {
		free(t);
		return -ENOMEM;
	}
	t->f = f;
	t->cl = f->cluster;
	for (size_t i = 0; i < f->njobs; i++) {
		const struct cfg_job *cj = f->jobs[i].cfg;

		if (cj->order != CFG_ORDER_STRICT || cj->gpu)
			continue;
		if (tier_job_print(&f->jobs[i], t->jobs[i].print) == 0) {
			t->jobs[i].on = true;
			on++;
		}
	}
	for (size_t i = 0; i < TIER_VIEWS; i++)
		t->views[i].slot = -1;
	if (getrandom(&t->mount, sizeof(t->mount), 0) != sizeof(t->mount))
		t->mount = (uint64_t)ff_mono_ns() ^ (uint64_t)getpid();
	gethostname(host, sizeof(host) - 1);
	snprintf(
	    t->who, sizeof(t->who), "mount %s pid %ld", host, (long)getpid());
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->cv, &ca);
	pthread_condattr_destroy(&ca);
	f->tier = t;
	if (on == 0)
		return 0;
	if ((r = pthread_create(&t->thread, NULL, tier_main, t)) != 0) {
		log_warn("cluster: cannot start the tier's thread (%s): "
			 "batches are made here",
		    strerror(r));
		for (size_t i = 0; i < f->njobs; i++)
			t->jobs[i].on = false;
		return 0;
	}
	t->started = true;
	log_info("cluster: finished batches from the tier for %zu job%s "
		 "(cluster_batches = yes)",
	    on, on == 1 ? "" : "s");
	return 0;
}

void
tier_stop(struct feed *f)
{
	struct tier *t = f->tier;

	if (t == NULL)
		return;
	pthread_mutex_lock(&f->lock);
	t->stop = true;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&f->lock);
	if (t->started)
		pthread_join(t->thread, NULL);
	t->started = false;
}

