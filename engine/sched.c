/*
 * sched.c - the scheduler's top: the readahead and the worker threads
 * that make the slots of the queued batches (see engine.h).  Layer: the
 * engine (engine/), below feed.c and files.c: the workers call batch.c
 * (readahead), relaxed.c (a relaxed view's next sample) and the queues
 * (sched_queue.c); their scratch memory is counted in the budget.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"
#include "engine/engine.h"
#include "util/log.h"
#include "core/sample.h"

/* The batch after k in reading order (next epoch's first after the last). */
static bool
next_key(struct feed *f, struct feed_key *k)
{
	struct job *j = &f->jobs[k->job];

	if (++k->batch < plan_nbatches(&j->plan, k->world))
		return true;
	k->batch = 0;
	return ++k->epoch < j->cfg->epochs &&
	       plan_nbatches(&j->plan, k->world) > 0;
}

void
sched_readahead(struct feed *f, const struct feed_key *k)
{
	struct feed_key n = *k;

	for (uint64_t i = 0; i < f->cfg->mount.readahead; i++) {
		struct batch *b;

		if (!next_key(f, &n))
			return;
		/* Failed while a source was unavailable: made again ahead. */
		if ((b = batch_find(f, &n)) != NULL)
			batch_renew(f, b);
		if (!batch_get(f, &n, BN_AHEAD))
			return; /* out of budget: the reader catches up first */
	}
}

/* Slot s of b is done (r: its result, id: the sample used).  Locked. */
static void
slot_done(struct feed *f, struct batch *b, uint32_t s, int r, uint32_t id,
    const char *msg)
{
	struct job *j = b->job;

	b->inflight--;
	if (r != 0) {
		if (!b->err) {
			b->err = r;
			snprintf(b->errmsg, sizeof(b->errmsg), "%s", msg);
			f->queued_slots -= b->g.len - b->next;
			b->next = b->g.len; /* hand out no more */
			sched_dequeue(f, b);
		}
	} else {
		if (!job_float_labels(j)) /* else made from the ids once
					     complete */
			((int64_t *)(b->file[BK_LABELS] +
				     b->g.hdr[BK_LABELS]))[s] =
			    j->ds->samples[id].label;
		((int64_t *)(b->file[BK_IDS] + b->g.hdr[BK_IDS]))[s] = id;
	}
	if (b->next == b->g.len && b->inflight == 0) {
		tier_done(f, b);
		sched_complete(f, b);
	}
}

/* Make slot s of b (unlocked). */
static int
make_slot(struct feed *f, struct batch *b, uint32_t s, uint32_t *id, char *msg,
    size_t msglen)
{
	struct job *j = b->job;
	bool raw = j->cfg->gpu;

	if (b->t.raw) /* fetched from the cluster tier: converted */
		return tier_slot(f, b, s, id);
	if (b->r.fixed) /* a relaxed batch rebuilt: its chosen ids */
		return sample_make(j, f->cache, b->key.epoch,
		    *id = b->r.fixed[s], raw, sched_slot(b, s), msg, msglen);
	return sample_make_slot(j, f->cache, b->key.epoch, b->order->ids,
	    b->pos[s], raw, sched_slot(b, s), id, true, msg, msglen);
}

/* The sample of slot t of b, if it is fixed now (not a relaxed view's
 * choice still to make).  Locked. */
static bool
slot_sample(const struct batch *b, uint32_t t, uint32_t *id)
{
	if (b->empty || t >= b->g.len)
		return false;
	if (b->r.fixed) {
		*id = b->r.fixed[t];
		return true;
	}
	if (b->r.rv || b->order == NULL || b->pos == NULL ||
	    b->job->plan.n == 0)
		return false;
	*id = b->order->ids[b->pos[t] % b->job->plan.n];
	return true;
}

/* The batch the workers take slots of after b's: b's successor in its
 * queue (demand, then ahead), or the queues' head once b has left them. */
static const struct batch *
next_queued(const struct feed *f, const struct batch *b)
{
	if (!b->queued)
		return f->demand.head ? f->demand.head : f->ahead.head;
	if (b->qnext)
		return b->qnext;
	return b->demanded ? f->ahead.head : NULL;
}

/*
 * The job and sample SAMPLE_PREFETCH_PER_WORKER (sample.h) slots per
 * worker after slot s of b in the order the workers take them: later in
 * b, else in the batches queued after it.  Locked.
 */
static struct job *
prefetch_target(struct feed *f, const struct batch *b, uint32_t s,
    uint32_t *id)
{
	const struct batch *x = b;
	uint32_t t = s + SAMPLE_PREFETCH_PER_WORKER * f->nthreads;

	/* A queue holds few batches: readahead, and the ones opened. */
	for (unsigned hops = 0; t >= x->g.len; hops++) {
		t -= x->g.len;
		x = next_queued(f, x);
		if (x == NULL || x == b || hops == 64)
			return NULL;
		t += x->next;
	}
	return slot_sample(x, t, id) ? x->job : NULL;
}

/*
 * Remote shards: the samples after slot s of b (later in b, then in the
 * batches queued after it) not yet asked for ahead, as many as the
 * fetchers' windows have room for in bytes (ds_remote_room), at most
 * max: the window, sized in bytes, covers the requests' latency.  Each
 * batch's ahead mark moves past them; not past a batch whose job is not
 * worth it now (sample_ahead_worth), which sample_prefetch_remote would
 * decline.  Locked.
 */
static size_t
remote_ahead(struct feed *f, struct batch *b, uint32_t s, struct ahead *out,
    size_t max)
{
	struct batch *x = b;
	uint64_t asked = 0;
	size_t n = 0;

	for (unsigned hops = 0; x != NULL && n < max && hops < 64; hops++) {
		uint32_t t = x->ahead > x->next ? x->ahead : x->next;

		if (!sample_ahead_worth(x->job))
			break;
		if (x == b && t <= s)
			t = s + 1;
		for (; t < x->g.len && n < max; t++) {
			uint32_t gid, id;
			const struct dataset *ds;

			if (!slot_sample(x, t, &gid))
				break;
			ds = job_source_of(x->job, gid, &id)->ds;
			if (ds->robjs != NULL) {
				uint64_t sz = ds->samples[id].size;

				if (asked + sz > ds_remote_room(ds))
					return n; /* the window is full */
				asked += sz;
				out[n].j = x->job;
				out[n++].id = gid;
			}
			x->ahead = t + 1;
		}
		if (t < x->g.len)
			break;
		const struct batch *nx = next_queued(f, x);
		if (nx == b || nx == NULL)
			break;
		/* The next epoch of a job whose prefix the cache keeps is
		 * served from it: nothing to fetch ahead there. */
		if (nx->job == x->job && nx->key.epoch != x->key.epoch &&
		    f->cache != NULL && x->job->prefix[0] != '\0')
			break;
		x = (struct batch *)nx;
	}
	return n;
}

/*
 * The stats of the worker's arena: what it holds now, buffers reused and
 * blocks mapped, as changes from what was counted before (updated).
 * Locked.
 */
static void
scratch_count(struct feed *f, struct xf_arena *a, uint64_t *counted,
    uint64_t *reused, uint64_t *fresh)
{
	uint64_t now = xf_arena_bytes(a), r, n;

	xf_arena_counts(a, &r, &n);
	f->scratch_reused += r - *reused;
	f->scratch_fresh += n - *fresh;
	f->scratch_bytes += now - *counted; /* wraps back when it shrinks */
	*reused = r;
	*fresh = n;
	*counted = now;
}

/* A worker's count of its buffers too large for its arena. */
struct outside {
	struct feed *f;
	uint64_t held; /* bytes counted now, under feed.lock */
};

/*
 * A buffer of a sample too large for the worker's arena (a large image
 * decoded, its copies): counted in the budget while it is held (so that
 * readahead stops for it), after what is cheap to give back made room
 * for it (batches read to their end, kept buffers; not batches still to
 * be read, which it would make the workers build twice).  Past the
 * budget, a worker that holds none waits while other workers hold some
 * (theirs come back when their samples are made); one that holds some
 * never waits, so that no two wait on each other: the budget is passed
 * by one sample's buffers at most, as by one batch larger than it.
 */
static void
scratch_outside(void *arg, size_t n, bool held)
{
	struct outside *o = arg;
	struct feed *f = o->f;

	pthread_mutex_lock(&f->lock);
	if (held) {
		while (!budget_make_room(&f->budget, n, 0, 0) &&
		       o->held == 0 && f->scratch_outside > 0 && !f->stopping)
			budget_wait(&f->budget);
		o->held += n;
		f->scratch_outside += n;
		budget_add(&f->budget, n);
	} else {
		o->held -= n;
		f->scratch_outside -= n;
		budget_sub(&f->budget, n);
	}
	pthread_mutex_unlock(&f->lock);
}

/*
 * The head of the mix queue: a complete batch of a job with a batch op
 * (or multi-hot labels: its rows made here), mixed here unlocked (its
 * slots are done and it is not ready: nothing else touches its data),
 * with one sample of scratch from the worker's arena, then made ready.
 * Locked; returns locked.
 */
static void
mix_one(struct feed *f)
{
	struct batch *b = f->mix.head;
	const struct job *j = b->job;
	size_t sb = job_geo(j, b->key.epoch)->sample_bytes; /* its epoch's */
	void *tmp;
	int r = -ENOMEM;

	sched_dequeue(f, b);
	pthread_mutex_unlock(&f->lock);
	if ((tmp = xf_alloc(sb ? sb : 1)) != NULL)
		r = job_mix_batch(j, b->key.epoch, b->key.rank, b->key.world,
		    b->key.batch, b->g.len,
		    b->t.lazy ? NULL /* mixed as read: tier_read */
			      : b->file[BK_IMAGES] + b->g.hdr[BK_IMAGES],
		    (const int64_t *)(b->file[BK_IDS] + b->g.hdr[BK_IDS]),
		    (float *)(b->file[BK_LABELS] + b->g.hdr[BK_LABELS]), tmp);
	xf_free(tmp);
	pthread_mutex_lock(&f->lock);
	if (r != 0 && !b->err) {
		b->err = r;
		snprintf(b->errmsg, sizeof(b->errmsg), "%s: batch op: %s",
		    j->cfg->name, strerror(-r));
	}
	sched_ready(f, b);
}

/*
 * A worker: makes slots while there are any, with a scratch arena of its
 * own for the samples' buffers (no fresh pages per sample: xf.h), whose
 * cap sched_start counted in the memory budget; buffers too large for it
 * are counted while held (scratch_outside).
 */
static void *
worker(void *arg)
{
	struct feed *f = arg;
	struct xf_arena *a = xf_arena_new(f->scratch_cap);
	struct outside out = {f, 0};
	uint64_t counted = 0, reused = 0, fresh = 0, gen = 0;
	struct ahead ahead[REMOTE_AHEAD_MAX];
	size_t nahead;
	char msg[512];

	if (a != NULL)
		xf_arena_count(a, scratch_outside, &out);
	xf_arena_use(a); /* NULL (no memory): malloc, uncounted */
	pthread_mutex_lock(&f->lock);
	while (!f->stopping) {
		struct batch *b =
		    f->demand.head ? f->demand.head : f->ahead.head;
		struct job *pj;
		uint32_t s, id = 0, pid = 0;
		int r;

		if (f->mix.head) { /* readers wait for it: first */
			mix_one(f);
			scratch_count(f, a, &counted, &reused, &fresh);
			continue;
		}
		if (!b) {
			int what = idle_wait(f, &gen);

			if (what != IDLE_NOTHING) {
				pthread_mutex_unlock(&f->lock);
				idle_scratch(a, what);
				pthread_mutex_lock(&f->lock);
				scratch_count(f, a, &counted, &reused, &fresh);
				idle_scratched(f);
			}
			continue;
		}
		if (b->r.rv && !b->r.fixed) {
			relaxed_start(f, b, msg, sizeof(msg));
			continue;
		}
		s = b->next++;
		f->queued_slots--;
		if (b->next == b->g.len)
			sched_dequeue(f, b);
		b->inflight++;
		/*
		 * Its first slot maps the images (batch.c: fill).  Failed:
		 * as a source out of memory, made again at its next read.
		 */
		if (batch_images_buf(f, b) != 0) {
			snprintf(msg, sizeof(msg),
			    "%s: no memory for a batch's images (%" PRIu64
			    " bytes)",
			    b->job->name, (uint64_t)b->g.size[BK_IMAGES]);
			slot_done(f, b, s, -EAGAIN, 0, msg);
			continue;
		}
		pj = prefetch_target(f, b, s, &pid);
		if (pj != NULL && f->remote) {
			uint32_t local;

			/* A remote sample is asked for by remote_ahead. */
			if (job_source_of(pj, pid, &local)->ds->robjs != NULL)
				pj = NULL;
		}
		nahead = f->remote ? remote_ahead(f, b, s, ahead,
					 REMOTE_AHEAD_MAX)
				   : 0;
		pthread_mutex_unlock(&f->lock);

		if (pj != NULL)
			sample_prefetch(pj, pid);
		for (size_t k = 0; k < nahead; k++)
			sample_prefetch_remote(ahead[k].j, f->cache, ahead[k].id);
		r = make_slot(f, b, s, &id, msg, sizeof(msg));
		if (f->cache && cache_error(f->cache) &&
		    log_first(&f->cache_warned))
			log_warn("cache: %s; serving without the cache",
			    cache_error(f->cache));

		pthread_mutex_lock(&f->lock);
		scratch_count(f, a, &counted, &reused, &fresh);
		slot_done(f, b, s, r, id, msg);
	}
	pthread_mutex_unlock(&f->lock);
	xf_arena_use(NULL);
	xf_arena_free(a); /* unlocked: it may call scratch_outside */
	pthread_mutex_lock(&f->lock);
	scratch_count(f, NULL, &counted, &reused, &fresh);
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

/*
 * The remote datasets' windows: an eighth of the budget in all (at least
 * 4 MiB, at most 256 MiB), shared equally, counted in it from the start
 * as the scratch arenas are: what waits for a worker is within `memory`.
 * Each one's window; *n: how many (0: none).
 */
static uint64_t
remote_window(const struct feed *f, size_t *n)
{
	uint64_t w = f->memory / 8;

	*n = 0;
	for (size_t i = 0; i < f->cfg->ndatasets; i++)
		*n += f->ds[i] != NULL && f->ds[i]->robjs != NULL;
	if (*n == 0)
		return 0;
	if (w < (4u << 20))
		w = 4u << 20;
	if (w > (256u << 20))
		w = 256u << 20;
	return w / *n;
}

/* Give the remote datasets their windows, counted.  Locked. */
static void
remote_reserve(struct feed *f)
{
	size_t n;
	uint64_t each = remote_window(f, &n);

	f->remote = n > 0;
	if (n == 0)
		return;
	for (size_t i = 0; i < f->cfg->ndatasets; i++)
		if (f->ds[i] != NULL)
			ds_remote_window(f->ds[i], each);
	f->remote_reserved = each * n;
	budget_add(&f->budget, f->remote_reserved);
}

/*
 * A worker's buffers for one sample are a few megabytes (a decoded
 * photo, its resized copy, the resize's rows): its arena keeps up to 32
 * MB, and all of them an eighth of the budget at most, counted in it
 * from the start (batches get the rest).  Larger images' buffers are
 * malloc'd and freed as before.
 */
static uint64_t
scratch_cap(const struct feed *f, unsigned nthreads)
{
	uint64_t cap = f->memory / 8 / nthreads;

	return cap > (32u << 20) ? 32u << 20 : cap;
}

uint64_t
sched_fixed_bytes(const struct feed *f)
{
	unsigned n = cfg_threads(&f->cfg->mount);
	size_t nremote;
	uint64_t each = remote_window(f, &nremote);

	return scratch_cap(f, n) * n + each * nremote;
}

int
sched_start(struct feed *f)
{
	int r;

	f->nthreads = cfg_threads(&f->cfg->mount);
	f->scratch_cap = scratch_cap(f, f->nthreads);
	pthread_mutex_lock(&f->lock);
	f->idle_used_ns = feed_mono_ns(); /* idle from the start on */
	f->scratch_reserved = f->scratch_cap * f->nthreads;
	budget_add(&f->budget, f->scratch_reserved);
	remote_reserve(f);
	pthread_mutex_unlock(&f->lock);
	if ((f->threads = calloc(f->nthreads, sizeof(*f->threads))) == NULL)
		return -ENOMEM;
	for (unsigned i = 0; i < f->nthreads; i++) {
		if ((r = pthread_create(&f->threads[i], NULL, worker, f)) !=
		    0) {
			log_err("cannot start worker thread: %s", strerror(r));
			f->nthreads = i;
			return -r;
		}
	}
	return 0;
}

void
sched_stop(struct feed *f)
{
	pthread_mutex_lock(&f->lock);
	f->stopping = true;
	pthread_cond_broadcast(&f->work);
	budget_wake(&f->budget);
	pthread_mutex_unlock(&f->lock);
	for (unsigned i = 0; i < f->nthreads; i++)
		pthread_join(f->threads[i], NULL);
	pthread_mutex_lock(&f->lock);
	budget_sub(&f->budget, f->scratch_reserved);
	f->scratch_reserved = 0;
	budget_sub(&f->budget, f->remote_reserved);
	f->remote_reserved = 0;
	pthread_mutex_unlock(&f->lock);
	free(f->threads);
	f->threads = NULL;
	f->nthreads = 0;
}
