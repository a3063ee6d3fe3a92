/*
 * feed.c - the engine of a mount (see feed.h).
 *
 * Locking: one mutex, feed.lock, protects the batch table, the queues, the
 * permutation cache and the memory count.  Workers take it only to pick a
 * slot and to hand a finished one back; decoding runs unlocked.  Each batch
 * has a condition variable (under feed.lock) that readers wait on.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "core/feed.h"
#include "core/log.h"
#include "core/npy.h"
#include "core/plan.h"
#include "gpu/gpu.h"

#define FEED_HASH 1024
#define FEED_PERMS 8 /* epoch orders kept when no batch uses them */

/* An epoch's order, shared by the batches of (job, epoch). */
struct perm {
	uint32_t job, epoch;
	uint32_t *ids;
	unsigned refs;
	uint64_t used;
	struct perm *next;
};

struct batch {
	struct feed_key key;
	struct job *job;
	bool raw;          /* uint8 HWC samples for a .cuda file, no header */
	struct perm *perm; /* held until every slot is done */
	uint32_t len;
	uint64_t size;          /* images file: header + data */
	uint8_t *buf;           /* images file */
	uint8_t *lbuf, *ibuf;   /* labels and ids files */
	size_t lsize;           /* size of each of those */
	size_t lhdr;            /* their header length */
	size_t hdr;             /* images header length */
	uint64_t *pos;          /* planned positions in the epoch order */
	uint64_t mem;           /* bytes counted in feed.mem_used */
	uint32_t next;          /* next slot to hand out */
	uint32_t inflight;      /* slots being made */
	bool ready;             /* all slots done, or failed */
	int err;                /* first failure */
	char errmsg[512];
	unsigned refs;          /* open handles */
	bool queued, demanded;  /* in a queue; opened by a reader */
	bool consumed;          /* read to its end */
	uint64_t used;          /* last use (feed.tick) */
	pthread_cond_t cv;      /* ready */
	struct batch *hnext;    /* hash chain */
	struct batch *qnext;    /* queue link */
	/* order = relaxed (rv set): slots are filled as samples finish. */
	struct rview *rv;       /* the view whose samples it takes */
	uint32_t quota;         /* samples it asks to be started */
	uint32_t filled;        /* slots delivered */
	const uint32_t *fixed;  /* chosen before (rebuilt): its ids */
	struct batch *rnext;    /* next batch waiting for samples */
};

/*
 * order = relaxed: one (job, rank view, epoch).  Its samples are started in
 * the view's order, and each finished one goes to the batch that has
 * waited longest for samples (or, with none waiting, to the ready list
 * that the next batch opened takes from first).  A slow image thus lands
 * in a later batch instead of holding back the one being read.  What a
 * batch got is kept (chosen) so that a batch released and opened again
 * holds the same samples.
 */
struct rsample {
	uint32_t id;
	int err;
	char *msg;
	uint8_t *buf; /* sample_bytes; NULL after a failure */
	struct rsample *next;
};

struct rview {
	uint32_t job, rank, world, epoch;
	uint64_t npos, started; /* positions in the view; how many started */
	uint64_t *pos;          /* the view's positions in the epoch order */
	uint64_t nbatches;
	uint32_t **chosen;      /* per batch: its ids, once complete */
	uint64_t nchosen;
	struct perm *perm;
	struct batch *wait_head, *wait_tail; /* batches being filled */
	struct rsample *ready, *ready_tail;  /* finished, not taken yet */
	unsigned live;          /* batches alive that point here */
	unsigned inflight;      /* samples being made */
	uint64_t used;
	struct rview *next;
};

struct queue {
	struct batch *head, *tail;
};

struct feed {
	struct cfg *cfg;
	struct dataset **ds; /* one per cfg dataset */
	struct job *jobs;
	size_t njobs;
	struct cache *cache; /* NULL: serve without */
	struct gpu *gpu;     /* NULL unless a job has gpu = on */
	atomic_bool cache_warned;
	char cache_err[1024]; /* why cache_open failed; set before the threads */
	struct cache_ctl *ctl; /* the cache's control socket (feedfs-cache) */
	unsigned nthreads;
	pthread_t *threads;
	uint64_t memory; /* budget for batches (the cache's share taken out) */
	uint64_t cache_mem;

	pthread_mutex_t lock;
	pthread_cond_t work; /* a queue got work, or stopping */
	bool stopping;
	struct batch *table[FEED_HASH];
	size_t nbatches;
	struct queue demand, ahead;
	struct perm *perms;
	struct rview *rviews; /* order = relaxed views, most recent first */
	size_t nrviews;
	struct rsample **rfree; /* per job: spare sample buffers */
	unsigned *nrfree;
	uint64_t mem_used, mem_peak, tick;
	uint64_t queued_slots;
};

struct feed_handle {
	struct batch *b; /* NULL: the file is in data */
	enum batch_kind kind;
	uint8_t *data;
	size_t len;
	/* BK_CUDA: the batch staged by the first read, held until release. */
	pthread_mutex_t lock; /* the three below */
	struct gpu_buf *gbuf;
	uint8_t desc[FEEDFS_CUDA_DESC_SIZE];
	int gerr;
};

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

/* ---- queues ----------------------------------------------------------- */

static void
q_push(struct queue *q, struct batch *b)
{
	b->qnext = NULL;
	if (q->tail)
		q->tail->qnext = b;
	else
		q->head = b;
	q->tail = b;
}

static void
q_remove(struct queue *q, struct batch *b)
{
	struct batch **pp = &q->head, *prev = NULL;

	for (; *pp; prev = *pp, pp = &(*pp)->qnext) {
		if (*pp != b)
			continue;
		*pp = b->qnext;
		if (q->tail == b)
			q->tail = prev;
		b->qnext = NULL;
		return;
	}
}

static void
dequeue(struct feed *f, struct batch *b)
{
	if (!b->queued)
		return;
	q_remove(b->demanded ? &f->demand : &f->ahead, b);
	b->queued = false;
}

/* ---- permutations ----------------------------------------------------- */

/* The order of (job, epoch), referenced.  Called locked. */
static struct perm *
perm_get(struct feed *f, uint32_t job, uint32_t epoch)
{
	struct perm *p, **pp, **victim = NULL;
	unsigned idle = 0;

	for (p = f->perms; p; p = p->next) {
		if (p->job == job && p->epoch == epoch) {
			p->refs++;
			p->used = ++f->tick;
			return p;
		}
		idle += p->refs == 0;
	}
	if (idle >= FEED_PERMS) {
		for (pp = &f->perms; *pp; pp = &(*pp)->next)
			if ((*pp)->refs == 0 &&
			    (!victim || (*pp)->used < (*victim)->used))
				victim = pp;
		p = *victim;
		*victim = p->next;
		free(p->ids);
		free(p);
	}
	if ((p = calloc(1, sizeof(*p))) == NULL)
		return NULL;
	if ((p->ids = malloc(f->jobs[job].plan.n * sizeof(*p->ids))) == NULL) {
		free(p);
		return NULL;
	}
	plan_permutation(&f->jobs[job].plan, epoch, p->ids);
	p->job = job;
	p->epoch = epoch;
	p->refs = 1;
	p->used = ++f->tick;
	p->next = f->perms;
	f->perms = p;
	return p;
}

static void
perm_put(struct perm *p)
{
	if (p)
		p->refs--;
}

/* ---- order = relaxed --------------------------------------------------- */

#define FEED_RVIEWS 16 /* complete relaxed views whose choices are kept */
#define FEED_RSPARE 16 /* spare sample buffers kept per job (not counted) */

/*
 * A sample buffer for job: a spare one, else malloc'd (NULL when out of
 * memory).  Spares spare the mmap, page faults and munmap that malloc
 * gives buffers this large.  Called locked.
 */
static struct rsample *
rsample_get(struct feed *f, uint32_t job)
{
	struct rsample *x = f->rfree[job];

	if (x) {
		f->rfree[job] = x->next;
		f->nrfree[job]--;
	} else if ((x = malloc(sizeof(*x) + f->jobs[job].sample_bytes)) ==
	    NULL)
		return NULL;
	x->buf = (uint8_t *)(x + 1);
	x->msg = NULL;
	x->next = NULL;
	return x;
}

/* Back to the spares, or freed.  Called locked. */
static void
rsample_put(struct feed *f, uint32_t job, struct rsample *x)
{
	free(x->msg);
	x->msg = NULL;
	if (f->nrfree[job] < FEED_RSPARE) {
		x->next = f->rfree[job];
		f->rfree[job] = x;
		f->nrfree[job]++;
	} else
		free(x);
}

static void
rview_free(struct feed *f, struct rview *rv)
{
	while (rv->ready) {
		struct rsample *x = rv->ready;

		rv->ready = x->next;
		f->mem_used -= f->jobs[rv->job].sample_bytes;
		rsample_put(f, rv->job, x);
	}
	for (uint64_t i = 0; rv->chosen && i < rv->nbatches; i++)
		free(rv->chosen[i]);
	free(rv->chosen);
	free(rv->pos);
	perm_put(rv->perm);
	free(rv);
}

/*
 * The relaxed view of k, made on first use.  Beyond FEED_RVIEWS, the least
 * recently used view that is complete and idle is forgotten: a batch of it
 * opened again is then chosen afresh.  Called locked; NULL when out of
 * memory.
 */
static struct rview *
rview_get(struct feed *f, const struct feed_key *k)
{
	struct job *j = &f->jobs[k->job];
	struct rview *rv, **pp, **victim = NULL;
	uint64_t at = 0;

	for (rv = f->rviews; rv; rv = rv->next)
		if (rv->job == k->job && rv->rank == k->rank &&
		    rv->world == k->world && rv->epoch == k->epoch) {
			rv->used = ++f->tick;
			return rv;
		}
	if (f->nrviews >= FEED_RVIEWS) {
		for (pp = &f->rviews; *pp; pp = &(*pp)->next) {
			rv = *pp;
			if (rv->live == 0 && rv->inflight == 0 &&
			    rv->nchosen == rv->nbatches &&
			    (!victim || rv->used < (*victim)->used))
				victim = pp;
		}
		if (victim) {
			rv = *victim;
			*victim = rv->next;
			f->nrviews--;
			rview_free(f, rv);
		}
	}
	if ((rv = calloc(1, sizeof(*rv))) == NULL)
		return NULL;
	rv->job = k->job;
	rv->rank = k->rank;
	rv->world = k->world;
	rv->epoch = k->epoch;
	rv->nbatches = plan_nbatches(&j->plan, k->world);
	rv->pos = malloc((plan_rank_len(&j->plan, k->world) + 1) *
	    sizeof(*rv->pos));
	rv->chosen = calloc(rv->nbatches + 1, sizeof(*rv->chosen));
	rv->perm = perm_get(f, k->job, k->epoch);
	if (!rv->pos || !rv->chosen || !rv->perm) {
		rview_free(f, rv);
		return NULL;
	}
	/* The batches' positions, so that drop_last's cut is respected. */
	for (uint64_t b = 0; b < rv->nbatches; b++)
		at += plan_batch_positions(&j->plan, k->rank, k->world, b,
		    rv->pos + at);
	rv->npos = at;
	rv->used = ++f->tick;
	rv->next = f->rviews;
	f->rviews = rv;
	f->nrviews++;
	return rv;
}

static void
rview_unwait(struct rview *rv, struct batch *b)
{
	struct batch **pp, *prev = NULL;

	for (pp = &rv->wait_head; *pp; prev = *pp, pp = &(*pp)->rnext)
		if (*pp == b) {
			*pp = b->rnext;
			if (rv->wait_tail == b)
				rv->wait_tail = prev;
			b->rnext = NULL;
			return;
		}
}

static void batch_ready(struct feed *f, struct batch *b);

/*
 * The next slot of relaxed batch b (the head of its view's waiting list)
 * gets finished sample x, which is freed.  Called locked: the copy is done
 * under the lock, which costs about a microsecond per 10 KB and keeps the
 * hand-over simple.
 */
static void
rslot_fill(struct feed *f, struct batch *b, struct rsample *x)
{
	struct job *j = b->job;
	struct rview *rv = b->rv;
	uint32_t s = b->filled++;

	if (x->err) {
		if (!b->err) {
			b->err = x->err;
			snprintf(b->errmsg, sizeof(b->errmsg), "%s",
			    x->msg ? x->msg : strerror(-x->err));
		}
	} else
		memcpy(b->buf + b->hdr + (size_t)s * j->sample_bytes, x->buf,
		    j->sample_bytes);
	((int64_t *)(b->lbuf + b->lhdr))[s] = j->ds->samples[x->id].label;
	((int64_t *)(b->ibuf + b->lhdr))[s] = x->id;
	rsample_put(f, b->key.job, x);
	if (b->filled < b->len)
		return;
	rview_unwait(rv, b);
	if (!rv->chosen[b->key.batch] &&
	    (rv->chosen[b->key.batch] = malloc(b->len * sizeof(uint32_t)))) {
		for (uint32_t i = 0; i < b->len; i++)
			rv->chosen[b->key.batch][i] =
			    (uint32_t)((int64_t *)(b->ibuf + b->lhdr))[i];
		rv->nchosen++;
	}
	batch_ready(f, b);
}

/*
 * A sample of rv finished: it goes to the batch that has waited longest,
 * or, with none waiting, to the ready list.  Called locked; takes x.
 */
static void
rview_deliver(struct feed *f, struct rview *rv, struct rsample *x)
{
	rv->inflight--;
	if (rv->wait_head) {
		rslot_fill(f, rv->wait_head, x);
		return;
	}
	x->next = NULL;
	if (rv->ready_tail)
		rv->ready_tail->next = x;
	else
		rv->ready = x;
	rv->ready_tail = x;
	f->mem_used += f->jobs[rv->job].sample_bytes;
	if (f->mem_used > f->mem_peak)
		f->mem_peak = f->mem_used;
}

/*
 * A new relaxed batch: join the waiting list and take what is ready; the
 * rest is its quota of samples to start.  Called locked.
 */
static void
rbatch_start(struct feed *f, struct batch *b)
{
	struct rview *rv = b->rv;

	if (rv->chosen[b->key.batch]) {
		b->fixed = rv->chosen[b->key.batch];
		return; /* rebuilt like a strict batch from its ids */
	}
	b->rnext = NULL;
	if (rv->wait_tail)
		rv->wait_tail->rnext = b;
	else
		rv->wait_head = b;
	rv->wait_tail = b;
	/* A ready list exists only while nothing waits: b is the head. */
	while (b->filled < b->len && rv->ready && !b->ready) {
		struct rsample *x = rv->ready;

		if ((rv->ready = x->next) == NULL)
			rv->ready_tail = NULL;
		f->mem_used -= b->job->sample_bytes;
		rslot_fill(f, b, x);
	}
	b->quota = b->len - b->filled;
}

/* ---- batches ---------------------------------------------------------- */

static struct batch *
batch_find(struct feed *f, const struct feed_key *k, bool raw)
{
	struct batch *b;

	for (b = f->table[key_hash(k)]; b; b = b->hnext)
		if (key_eq(&b->key, k) && b->raw == raw)
			return b;
	return NULL;
}

/* Bytes of the images of batch k: its .npy file, or raw uint8 samples. */
static uint64_t
batch_images(struct feed *f, const struct feed_key *k, bool raw)
{
	struct job *j = &f->jobs[k->job];

	return raw ? (uint64_t)plan_batch_len(&j->plan, k->world, k->batch) *
		j->raw_bytes
		   : feed_file_size(f, k, BK_IMAGES);
}

static uint64_t
batch_mem(struct feed *f, const struct feed_key *k, bool raw)
{
	struct job *j = &f->jobs[k->job];
	uint32_t len = plan_batch_len(&j->plan, k->world, k->batch);

	return batch_images(f, k, raw) +
	    2 * feed_file_size(f, k, BK_LABELS) + len * sizeof(uint64_t);
}

static void
batch_destroy(struct feed *f, struct batch *b)
{
	struct batch **pp;

	for (pp = &f->table[key_hash(&b->key)]; *pp; pp = &(*pp)->hnext)
		if (*pp == b) {
			*pp = b->hnext;
			break;
		}
	dequeue(f, b);
	perm_put(b->perm);
	if (b->rv) {
		rview_unwait(b->rv, b);
		b->rv->live--;
	}
	f->mem_used -= b->mem;
	f->nbatches--;
	pthread_cond_destroy(&b->cv);
	free(b->buf);
	free(b->lbuf);
	free(b->ibuf);
	free(b->pos);
	free(b);
}

/*
 * Release batches nobody holds until need more bytes fit the budget: those
 * read to their end first, then (when any is allowed) the least recently
 * used ready ones.  Returns whether it fits.  Called locked.
 */
static bool
make_room(struct feed *f, uint64_t need, bool any)
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

/*
 * Make batch k exist and queue its slots.  demand: a reader opened it (may
 * go over the budget rather than stall); else readahead (only within it).
 * raw: the uint8 HWC samples of a .cuda file (a batch of its own).
 * Called locked; returns NULL when it cannot (memory, or allocation).
 */
static struct batch *
batch_get(struct feed *f, const struct feed_key *k, bool demand, bool raw)
{
	struct job *j = &f->jobs[k->job];
	struct batch *b = batch_find(f, k, raw);
	struct rview *rv = NULL;
	uint64_t need;

	if (b) {
		if (demand && !b->demanded) {
			if (b->queued) {
				q_remove(&f->ahead, b);
				q_push(&f->demand, b);
			}
			b->demanded = true;
			pthread_cond_broadcast(&f->work);
		}
		b->used = ++f->tick;
		return b;
	}
	need = batch_mem(f, k, raw);
	if (!make_room(f, need, demand) && !demand)
		return NULL;
	if (j->cfg->order == CFG_ORDER_RELAXED && !raw &&
	    (rv = rview_get(f, k)) == NULL)
		return NULL;
	if ((b = calloc(1, sizeof(*b))) == NULL)
		return NULL;
	b->key = *k;
	b->job = j;
	b->raw = raw;
	b->len = plan_batch_len(&j->plan, k->world, k->batch);
	b->size = batch_images(f, k, raw);
	b->lsize = feed_file_size(f, k, BK_LABELS);
	b->buf = malloc(b->size);
	b->lbuf = malloc(b->lsize);
	b->ibuf = malloc(b->lsize);
	b->pos = malloc((b->len ? b->len : 1) * sizeof(*b->pos));
	b->perm = perm_get(f, k->job, k->epoch);
	if (!b->buf || !b->lbuf || !b->ibuf || !b->pos || !b->perm) {
		perm_put(b->perm);
		free(b->buf);
		free(b->lbuf);
		free(b->ibuf);
		free(b->pos);
		free(b);
		return NULL;
	}
	b->hdr = raw ? 0 : job_npy_header(j, b->len, BK_IMAGES, (char *)b->buf);
	b->lhdr = job_npy_header(j, b->len, BK_LABELS, (char *)b->lbuf);
	memcpy(b->ibuf, b->lbuf, b->lhdr);
	plan_batch_positions(&j->plan, k->rank, k->world, k->batch, b->pos);
	pthread_cond_init(&b->cv, NULL);
	b->mem = need;
	b->demanded = demand;
	b->used = ++f->tick;
	b->hnext = f->table[key_hash(k)];
	f->table[key_hash(k)] = b;
	f->nbatches++;
	f->mem_used += need;
	if (f->mem_used > f->mem_peak)
		f->mem_peak = f->mem_used;
	b->quota = b->len;
	if (rv) {
		b->rv = rv;
		rv->live++;
		rbatch_start(f, b);
		if (b->quota == 0)
			return b; /* filled from the ready list */
	}
	b->queued = true;
	f->queued_slots += b->quota;
	q_push(demand ? &f->demand : &f->ahead, b);
	pthread_cond_broadcast(&f->work);
	return b;
}

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

static void
readahead(struct feed *f, const struct feed_key *k, bool raw)
{
	struct feed_key n = *k;

	for (unsigned i = 0; i < f->cfg->mount.readahead; i++) {
		if (!next_key(f, &n))
			return;
		if (!batch_get(f, &n, false, raw))
			return; /* out of budget: the reader catches up first */
	}
}

/* ---- workers ---------------------------------------------------------- */

/*
 * Start the next sample of relaxed batch b's view, for whichever batch
 * waits when it is done.  Called locked; returns locked.
 */
static void
relaxed_start(struct feed *f, struct batch *b, char *msg, size_t msglen)
{
	struct rview *rv = b->rv;
	struct job *j = b->job;
	struct rsample *x;
	uint32_t id = 0;
	uint64_t p;
	int r;

	b->next++;
	f->queued_slots--;
	if (b->next == b->quota)
		dequeue(f, b);
	p = rv->started++;
	rv->inflight++;
	/* Memory comes back as readers finish batches: wait for it. */
	while ((x = rsample_get(f, b->key.job)) == NULL) {
		pthread_mutex_unlock(&f->lock);
		usleep(10000);
		pthread_mutex_lock(&f->lock);
	}
	pthread_mutex_unlock(&f->lock);
	r = sample_make_slot(j, f->cache, rv->epoch, rv->perm->ids,
	    rv->pos[p], x->buf, &id, true, msg, msglen);
	x->id = id;
	x->err = r;
	if (r != 0)
		x->msg = strdup(msg);
	pthread_mutex_lock(&f->lock);
	rview_deliver(f, rv, x);
}

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
			f->queued_slots -= b->len - b->next;
			b->next = b->len; /* hand out no more */
			dequeue(f, b);
		}
	} else {
		((int64_t *)(b->lbuf + b->lhdr))[s] = j->ds->samples[id].label;
		((int64_t *)(b->ibuf + b->lhdr))[s] = id;
	}
	if (b->next == b->len && b->inflight == 0)
		batch_ready(f, b);
}

/* Every slot of b is done: wake its readers.  Called locked. */
static void
batch_ready(struct feed *f, struct batch *b)
{
	b->ready = true;
	perm_put(b->perm);
	b->perm = NULL;
	atomic_fetch_add(b->err ? &b->job->st.batch_errors
				: &b->job->st.batches, 1);
	pthread_cond_broadcast(&b->cv);
	if (b->refs == 0 && f->mem_used > f->memory)
		make_room(f, 0, false);
}

static void *
worker(void *arg)
{
	struct feed *f = arg;
	char msg[512];

	pthread_mutex_lock(&f->lock);
	while (!f->stopping) {
		struct batch *b = f->demand.head ? f->demand.head
						 : f->ahead.head;
		uint32_t s, id = 0;
		int r;

		if (!b) {
			pthread_cond_wait(&f->work, &f->lock);
			continue;
		}
		if (b->rv && !b->fixed) {
			relaxed_start(f, b, msg, sizeof(msg));
			continue;
		}
		s = b->next++;
		f->queued_slots--;
		if (b->next == b->len)
			dequeue(f, b);
		b->inflight++;
		pthread_mutex_unlock(&f->lock);

		if (b->fixed) /* a relaxed batch rebuilt: its chosen ids */
			r = sample_make(b->job, f->cache, b->key.epoch,
			    id = b->fixed[s],
			    b->buf + b->hdr + (size_t)s * b->job->sample_bytes,
			    msg, sizeof(msg));
		else
			r = (b->raw ? sample_make_slot_raw : sample_make_slot)(
			    b->job, f->cache, b->key.epoch, b->perm->ids,
			    b->pos[s],
			    b->buf + b->hdr +
				(size_t)s * (b->raw ? b->job->raw_bytes
						    : b->job->sample_bytes),
			    &id, true, msg, sizeof(msg));
		if (f->cache && cache_error(f->cache) &&
		    log_first(&f->cache_warned))
			log_warn("cache: %s; serving without the cache",
			    cache_error(f->cache));

		pthread_mutex_lock(&f->lock);
		slot_done(f, b, s, r, id, msg);
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

/* ---- setup ------------------------------------------------------------ */

int
feed_new(struct cfg *c, ds_progress_fn progress, void *arg,
    struct feed **out, char *err, size_t errlen)
{
	struct feed *f;
	int r = -ENOMEM;

	if ((f = calloc(1, sizeof(*f))) == NULL) {
		cfg_free(c);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	f->cfg = c; /* transferred */
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->work, NULL);
	if ((f->ds = calloc(c->ndatasets, sizeof(*f->ds))) == NULL ||
	    (f->jobs = calloc(c->njobs, sizeof(*f->jobs))) == NULL ||
	    (f->rfree = calloc(c->njobs, sizeof(*f->rfree))) == NULL ||
	    (f->nrfree = calloc(c->njobs, sizeof(*f->nrfree))) == NULL)
		goto fail;
	for (size_t i = 0; i < c->ndatasets; i++) {
		const struct cfg_dataset *d = &c->datasets[i];
		char msg[768];

		if ((r = ds_open(d->name, d->root, d->manifest, progress, arg,
			 &f->ds[i], msg, sizeof(msg))) != 0) {
			if (d->line > 0)
				snprintf(err, errlen, "%s:%d: dataset %s: %s",
				    c->path, d->line, d->name, msg);
			else /* the default config of a dataset dir */
				snprintf(err, errlen, "%s", msg);
			goto fail;
		}
	}
	for (size_t i = 0; i < c->njobs; i++) {
		const struct cfg_job *cj = &c->jobs[i];
		size_t d;

		for (d = 0; d < c->ndatasets; d++)
			if (strcmp(c->datasets[d].name, cj->dataset) == 0)
				break;
		if (d == c->ndatasets) {
			snprintf(err, errlen, "%s:%d: unknown dataset '%s'",
			    c->path, cj->dataset_line, cj->dataset);
			r = -EINVAL;
			goto fail;
		}
		if ((r = job_init(&f->jobs[i], c, cj, f->ds[d], err,
			 errlen)) != 0)
			goto fail;
		f->njobs++;
	}
	/* RocksDB's block cache and memtables are counted in `memory`. */
	f->cache_mem = c->mount.cache_size ? c->mount.memory / 8 : 0;
	if (f->cache_mem > (256u << 20))
		f->cache_mem = 256u << 20;
	f->memory = c->mount.memory - f->cache_mem;
	*out = f;
	return 0;
fail:
	feed_free(f);
	return r;
}

int
feed_start(struct feed *f)
{
	const struct cfg_mount *m = &f->cfg->mount;
	char msg[1024];
	long ncpu;
	int r;

	if (m->cache_size == 0) {
		log_info("cache_size = 0: serving without a cache");
	} else if (cache_open(m->cache_dir, m->cache_size, f->cache_mem,
		       &f->cache, msg, sizeof(msg)) != 0) {
		log_warn("cache: %s; serving without the cache", msg);
		snprintf(f->cache_err, sizeof(f->cache_err), "%s", msg);
		f->cache = NULL;
	} else if (cache_note(f->cache) != NULL)
		log_warn("cache: %s", cache_note(f->cache));
	if (f->cache != NULL && cache_ctl_start(f->cache, m->cache_dir,
				    &f->ctl, msg, sizeof(msg)) != 0)
		log_warn("cache: no control socket for feedfs-cache: %s", msg);
	for (size_t i = 0; i < f->njobs && !f->gpu; i++) {
		if (!f->jobs[i].cfg->gpu)
			continue;
		/* After fuse_daemonize(): CUDA does not survive a fork. */
		if ((r = gpu_init(&f->gpu, m->gpu_memory, msg, sizeof(msg))) !=
		    0) {
			log_err("gpu = on (job %s): %s", f->jobs[i].cfg->name,
			    msg);
			return r;
		}
	}
	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	f->nthreads = m->threads ? m->threads : (ncpu > 0 ? (unsigned)ncpu : 1);
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
feed_free(struct feed *f)
{
	if (!f)
		return;
	pthread_mutex_lock(&f->lock);
	f->stopping = true;
	pthread_cond_broadcast(&f->work);
	pthread_mutex_unlock(&f->lock);
	for (unsigned i = 0; i < f->nthreads; i++)
		pthread_join(f->threads[i], NULL);
	free(f->threads);
	for (size_t i = 0; i < FEED_HASH; i++)
		while (f->table[i])
			batch_destroy(f, f->table[i]);
	while (f->rviews) {
		struct rview *rv = f->rviews;

		f->rviews = rv->next;
		rview_free(f, rv);
	}
	for (size_t i = 0; f->rfree && i < f->njobs; i++)
		while (f->rfree[i]) {
			struct rsample *x = f->rfree[i];

			f->rfree[i] = x->next;
			free(x);
		}
	free(f->rfree);
	free(f->nrfree);
	while (f->perms) {
		struct perm *p = f->perms;

		f->perms = p->next;
		free(p->ids);
		free(p);
	}
	cache_ctl_stop(f->ctl);
	if (f->cache)
		cache_close(f->cache);
	gpu_fini(f->gpu);
	for (size_t i = 0; i < f->njobs; i++)
		job_fini(&f->jobs[i]);
	free(f->jobs);
	for (size_t i = 0; f->ds && i < f->cfg->ndatasets; i++)
		ds_free(f->ds[i]);
	free(f->ds);
	pthread_cond_destroy(&f->work);
	pthread_mutex_destroy(&f->lock);
	cfg_free(f->cfg);
	free(f);
}

const struct cfg *
feed_cfg(const struct feed *f)
{
	return f->cfg;
}

size_t
feed_njobs(const struct feed *f)
{
	return f->njobs;
}

struct job *
feed_job(struct feed *f, size_t i)
{
	return &f->jobs[i];
}

int
feed_find_job(const struct feed *f, const char *name)
{
	for (size_t i = 0; i < f->njobs; i++)
		if (strcmp(f->jobs[i].cfg->name, name) == 0)
			return (int)i;
	return -1;
}

bool
feed_key_valid(struct feed *f, const struct feed_key *k)
{
	const struct job *j;

	if (k->job >= f->njobs || k->world < 1 || k->world > FEED_MAX_WORLD ||
	    k->rank >= k->world)
		return false;
	j = &f->jobs[k->job];
	return k->epoch < j->cfg->epochs &&
	    k->batch < plan_nbatches(&j->plan, k->world);
}

uint64_t
feed_file_size(struct feed *f, const struct feed_key *k, enum batch_kind kind)
{
	const struct job *j = &f->jobs[k->job];
	uint32_t len = plan_batch_len(&j->plan, k->world, k->batch);
	char hdr[NPY_MAX_HEADER];

	if (kind == BK_CUDA)
		return FEEDFS_CUDA_DESC_SIZE;
	return job_npy_header(j, len, kind, hdr) +
	    job_npy_data_bytes(j, len, kind);
}

/* ---- files ------------------------------------------------------------ */

/*
 * Labels and ids straight from the plan: with on_error = fail the batch
 * holds exactly its planned samples, so no decoding is needed.
 */
static int
planned_file(struct feed *f, const struct feed_key *k, enum batch_kind kind,
    struct feed_handle *h)
{
	struct job *j = &f->jobs[k->job];
	uint32_t len = plan_batch_len(&j->plan, k->world, k->batch);
	uint64_t *pos = malloc((len ? len : 1) * sizeof(*pos));
	struct perm *p;
	int64_t *v;
	size_t hdr;

	h->len = feed_file_size(f, k, kind);
	if (!pos || (h->data = malloc(h->len)) == NULL) {
		free(pos);
		return -ENOMEM;
	}
	hdr = job_npy_header(j, len, kind, (char *)h->data);
	v = (int64_t *)(h->data + hdr);
	plan_batch_positions(&j->plan, k->rank, k->world, k->batch, pos);
	pthread_mutex_lock(&f->lock);
	p = perm_get(f, k->job, k->epoch);
	for (uint32_t s = 0; p && s < len; s++) {
		uint32_t id = p->ids[pos[s]];

		v[s] = kind == BK_IDS ? (int64_t)id : j->ds->samples[id].label;
	}
	perm_put(p);
	pthread_mutex_unlock(&f->lock);
	free(pos);
	return p ? 0 : -ENOMEM;
}

int
feed_open(struct feed *f, const struct feed_key *k, enum batch_kind kind,
    struct feed_handle **out)
{
	struct feed_handle *h;
	int r;

	if (!feed_key_valid(f, k))
		return -ENOENT;
	if (kind == BK_CUDA && (!f->gpu || !f->jobs[k->job].cfg->gpu))
		return -ENOENT;
	if ((h = calloc(1, sizeof(*h))) == NULL)
		return -ENOMEM;
	h->kind = kind;
	if (kind == BK_CUDA)
		pthread_mutex_init(&h->lock, NULL);
	if ((kind == BK_LABELS || kind == BK_IDS) &&
	    f->jobs[k->job].cfg->on_error == CFG_ON_ERROR_FAIL &&
	    f->jobs[k->job].cfg->order == CFG_ORDER_STRICT) {
		if ((r = planned_file(f, k, kind, h)) != 0) {
			free(h->data);
			free(h);
			return r;
		}
		*out = h;
		return 0;
	}
	pthread_mutex_lock(&f->lock);
	h->b = batch_get(f, k, true, kind == BK_CUDA);
	if (h->b) {
		h->b->refs++;
		if (kind == BK_IMAGES || kind == BK_CUDA)
			readahead(f, k, kind == BK_CUDA);
	}
	pthread_mutex_unlock(&f->lock);
	if (!h->b) {
		if (kind == BK_CUDA)
			pthread_mutex_destroy(&h->lock);
		free(h);
		return -ENOMEM;
	}
	*out = h;
	return 0;
}

/*
 * Stage the ready raw batch of h on the device (the job's dtype, layout
 * and normalization are applied there) and make its descriptor.
 */
static int
cuda_stage(struct feed *f, struct feed_handle *h)
{
	struct batch *b = h->b;
	const struct job *j = b->job;
	struct gpu_conv cv = { j->pl->out_w, j->pl->out_h, j->cfg->dtype,
		j->cfg->layout, j->pl->normalize, { 0 }, { 0 } };
	struct feedfs_cuda_desc d;
	char msg[512];
	int r;

	memcpy(cv.mean, j->pl->mean, sizeof(cv.mean));
	memcpy(cv.std, j->pl->std, sizeof(cv.std));
	if ((r = gpu_stage(f->gpu, &cv, b->buf, b->len, &h->gbuf, msg,
		 sizeof(msg))) != 0) {
		log_err("%s/epoch-%04" PRIu32 "/batch-%06" PRIu64 ".cuda: %s",
		    j->cfg->name, b->key.epoch, b->key.batch, msg);
		return r == -ENOSPC || r == -E2BIG ? -ENOSPC : -EIO;
	}
	gpu_buf_desc(f->gpu, h->gbuf, &d);
	d.ndim = 4;
	memcpy(d.shape, j->shape, sizeof(d.shape));
	d.shape[0] = b->len;
	feedfs_cuda_encode(&d, h->desc);
	return 0;
}

/* A .cuda file: its first read waits for the batch and stages it. */
static int
cuda_read(struct feed *f, struct feed_handle *h, uint64_t off, size_t size,
    const void **ptr, size_t *len)
{
	struct batch *b = h->b;
	int r;

	pthread_mutex_lock(&h->lock);
	if (!h->gbuf && !h->gerr) {
		pthread_mutex_lock(&f->lock);
		while (!b->ready)
			pthread_cond_wait(&b->cv, &f->lock);
		r = b->err ? -EIO : 0;
		b->used = ++f->tick;
		pthread_mutex_unlock(&f->lock);
		h->gerr = r ? r : cuda_stage(f, h);
		pthread_mutex_lock(&f->lock);
		b->consumed = true; /* on the device now: release it first */
		pthread_mutex_unlock(&f->lock);
	}
	r = h->gerr;
	pthread_mutex_unlock(&h->lock);
	if (r != 0)
		return r;
	if (off >= FEEDFS_CUDA_DESC_SIZE)
		size = 0;
	else if (size > FEEDFS_CUDA_DESC_SIZE - off)
		size = (size_t)(FEEDFS_CUDA_DESC_SIZE - off);
	*ptr = h->desc + (off < FEEDFS_CUDA_DESC_SIZE ? off : 0);
	*len = size;
	return 0;
}

int
feed_read(struct feed *f, struct feed_handle *h, uint64_t off, size_t size,
    const void **ptr, size_t *len)
{
	struct batch *b = h->b;
	const uint8_t *data;
	uint64_t total, hdr;

	if (h->kind == BK_CUDA)
		return cuda_read(f, h, off, size, ptr, len);
	if (!b) {
		data = h->data;
		total = h->len;
		goto give;
	}
	total = h->kind == BK_IMAGES ? b->size : b->lsize;
	hdr = h->kind == BK_IMAGES ? b->hdr : b->lhdr;
	data = h->kind == BK_IMAGES ? b->buf
	    : h->kind == BK_LABELS  ? b->lbuf
				    : b->ibuf;
	if (off >= total) {
		*ptr = data;
		*len = 0;
		return 0;
	}
	pthread_mutex_lock(&f->lock);
	if (off + size > hdr && !b->ready) {
		struct timespec t0, t1;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		while (!b->ready)
			pthread_cond_wait(&b->cv, &f->lock);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		atomic_fetch_add(&b->job->st.read_wait_ns,
		    (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000LL +
			(t1.tv_nsec - t0.tv_nsec)));
		atomic_fetch_add(&b->job->st.read_waits, 1);
	}
	if (off + size > hdr && b->err) {
		pthread_mutex_unlock(&f->lock);
		return -EIO;
	}
	if (off + size >= total && h->kind == BK_IMAGES)
		b->consumed = true;
	b->used = ++f->tick;
	pthread_mutex_unlock(&f->lock);
give:
	if (off >= total)
		size = 0;
	else if (size > total - off)
		size = (size_t)(total - off);
	*ptr = data + (off < total ? off : 0);
	*len = size;
	return 0;
}

void
feed_release(struct feed *f, struct feed_handle *h)
{
	if (h->kind == BK_CUDA) {
		gpu_put(f->gpu, h->gbuf); /* back to the pool */
		pthread_mutex_destroy(&h->lock);
	}
	if (h->b) {
		pthread_mutex_lock(&f->lock);
		h->b->refs--;
		if (h->b->refs == 0 && f->mem_used > f->memory)
			make_room(f, 0, false);
		pthread_mutex_unlock(&f->lock);
	}
	free(h->data);
	free(h);
}

/* ---- generated text ----------------------------------------------------- */

struct sbuf {
	char *s;
	size_t len, cap;
	bool oom;
};

static void __attribute__((format(printf, 2, 3)))
sb_printf(struct sbuf *sb, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (sb->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(sb->s ? sb->s + sb->len : NULL,
		    sb->s ? sb->cap - sb->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			sb->oom = true;
			return;
		}
		if (sb->s && sb->len + (size_t)n < sb->cap) {
			sb->len += (size_t)n;
			return;
		}
		size_t cap = sb->cap ? sb->cap : 4096;
		while (cap <= sb->len + (size_t)n)
			cap *= 2;
		char *s = realloc(sb->s, cap);
		if (!s) {
			sb->oom = true;
			return;
		}
		sb->s = s;
		sb->cap = cap;
	}
}

static void
sb_json_str(struct sbuf *sb, const char *s)
{
	sb_printf(sb, "\"");
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			sb_printf(sb, "\\%c", ch);
		else if (ch < 0x20)
			sb_printf(sb, "\\u%04x", ch);
		else
			sb_printf(sb, "%c", ch);
	}
	sb_printf(sb, "\"");
}

static char *
sb_done(struct sbuf *sb, size_t *len)
{
	if (sb->oom) {
		free(sb->s);
		return NULL;
	}
	*len = sb->len;
	return sb->s;
}

char *
feed_readme(struct feed *f, size_t *len)
{
	struct sbuf sb = { 0 };

	sb_printf(&sb,
	    "This is a feedfs mount: preprocessed training batches.\n\n"
	    "Each job is a directory:\n\n");
	for (size_t i = 0; i < f->njobs; i++) {
		struct job *j = &f->jobs[i];

		sb_printf(&sb,
		    "  %s/  %zu samples of %s, %" PRIu64 " batches of %" PRIu32
		    " per epoch, %" PRIu32 " epochs\n"
		    "      pipeline: %s\n"
		    "      images: %s %s, shape (B, %" PRIu64 ", %" PRIu64
		    ", %" PRIu64 ")\n",
		    j->cfg->name, j->ds->n, j->ds->root,
		    plan_nbatches(&j->plan, 1), j->cfg->batch_size,
		    j->cfg->epochs, j->cfg->pipeline,
		    j->cfg->dtype == XF_UINT8	  ? "uint8"
			: j->cfg->dtype == XF_FLOAT16 ? "float16"
						      : "float32",
		    j->cfg->layout == XF_CHW ? "CHW" : "HWC", j->shape[1],
		    j->shape[2], j->shape[3]);
	}
	sb_printf(&sb,
	    "\nFiles of a job:\n\n"
	    "  JOB/info.json                          shape, dtype, layout, "
	    "batches per epoch, classes\n"
	    "  JOB/samples.tsv                        sample id, path, label\n"
	    "  JOB/epoch-NNNN/batch-NNNNNN.npy        images\n"
	    "  JOB/epoch-NNNN/batch-NNNNNN.labels.npy int64 labels\n"
	    "  JOB/epoch-NNNN/batch-NNNNNN.ids.npy    int64 sample ids\n"
	    "  JOB/rank-R-of-W/epoch-NNNN/...         rank R's shard of W "
	    "(1 <= W <= 1024; not listed, but there)\n\n"
	    "Reading a batch prepares it and the next ones; the bytes of a "
	    "batch are the\nsame on every read.  In Python:\n\n"
	    "  import numpy as np\n"
	    "  x = np.load('JOB/epoch-0000/batch-000000.npy')\n"
	    "  y = np.load('JOB/epoch-0000/batch-000000.labels.npy')\n\n"
	    "Counters: .feedfs/stats (Prometheus text).  See feedfs(8).\n");
	return sb_done(&sb, len);
}

char *
feed_info_json(struct feed *f, size_t ji, size_t *len)
{
	struct job *j = &f->jobs[ji];
	const struct cfg_job *c = j->cfg;
	struct sbuf sb = { 0 };

	sb_printf(&sb, "{\n  \"job\": ");
	sb_json_str(&sb, c->name);
	sb_printf(&sb, ",\n  \"dataset\": ");
	sb_json_str(&sb, c->dataset);
	sb_printf(&sb, ",\n  \"root\": ");
	sb_json_str(&sb, j->ds->root);
	sb_printf(&sb,
	    ",\n  \"samples\": %zu,\n  \"batch_size\": %" PRIu32
	    ",\n  \"batches_per_epoch\": %" PRIu64 ",\n  \"epochs\": %" PRIu32
	    ",\n  \"shape\": [%" PRIu32 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64
	    "],\n  \"sample_shape\": [%" PRIu64 ", %" PRIu64 ", %" PRIu64
	    "],\n  \"dtype\": \"%s\",\n  \"layout\": \"%s\",\n"
	    "  \"shuffle\": %s,\n  \"drop_last\": %s,\n  \"seed\": %" PRIu64
	    ",\n  \"order\": \"%s\",\n  \"on_error\": \"%s\",\n"
	    "  \"pipeline\": ",
	    j->ds->n, c->batch_size, plan_nbatches(&j->plan, 1), c->epochs,
	    c->batch_size, j->shape[1], j->shape[2], j->shape[3], j->shape[1],
	    j->shape[2], j->shape[3],
	    c->dtype == XF_UINT8       ? "uint8"
		: c->dtype == XF_FLOAT16 ? "float16"
					 : "float32",
	    c->layout == XF_CHW ? "CHW" : "HWC", c->shuffle ? "true" : "false",
	    c->drop_last ? "true" : "false", c->seed,
	    c->order == CFG_ORDER_STRICT ? "strict" : "relaxed",
	    c->on_error == CFG_ON_ERROR_FAIL ? "fail" : "substitute");
	sb_json_str(&sb, c->pipeline);
	sb_printf(&sb, ",\n  \"cached_prefix\": ");
	sb_json_str(&sb, j->prefix);
	sb_printf(&sb, ",\n  \"num_classes\": %zu,\n  \"classes\": [",
	    j->ds->nclasses);
	for (size_t i = 0; i < j->ds->nclasses; i++) {
		sb_printf(&sb, i ? ", " : "");
		sb_json_str(&sb, j->ds->classes[i]);
	}
	sb_printf(&sb, "]\n}\n");
	return sb_done(&sb, len);
}

char *
feed_samples_tsv(struct feed *f, size_t ji, size_t *len)
{
	const struct dataset *ds = f->jobs[ji].ds;
	struct sbuf sb = { 0 };

	for (size_t i = 0; i < ds->n; i++)
		sb_printf(&sb, "%zu\t%s\t%" PRId64 "\n", i, ds->samples[i].path,
		    ds->samples[i].label);
	return sb_done(&sb, len);
}

/*
 * Why the cache is off, when it failed (not when cache_size = 0): a gauge
 * whose label is the reason, in Prometheus's label escaping.
 */
static void
stats_cache_error(struct feed *f, struct sbuf *sb)
{
	const char *e = f->cache_err[0] ? f->cache_err : cache_error(f->cache);

	if (e == NULL)
		return;
	sb_printf(sb,
	    "# HELP feedfs_cache_error Why the cache is off (the label).\n"
	    "# TYPE feedfs_cache_error gauge\nfeedfs_cache_error{error=\"");
	for (; *e; e++) {
		if (*e == '"' || *e == '\\')
			sb_printf(sb, "\\%c", *e);
		else if (*e == '\n')
			sb_printf(sb, "\\n");
		else
			sb_printf(sb, "%c", *e);
	}
	sb_printf(sb, "\"} 1\n");
}

char *
feed_stats(struct feed *f, size_t *len)
{
	static const struct {
		const char *name, *help;
		size_t off;
		bool seconds;
	} ctr[] = {
#define C(n, field, h, s) { n, h, offsetof(struct job_stats, field), s }
		C("feedfs_cache_hits_total", cache_hits,
		    "Samples whose cached prefix came from the cache.", false),
		C("feedfs_cache_misses_total", cache_misses,
		    "Samples decoded because the cache lacked them.", false),
		C("feedfs_samples_total", samples, "Samples prepared.", false),
		C("feedfs_sample_errors_total", decode_errors,
		    "Samples that could not be read or decoded.", false),
		C("feedfs_substituted_total", substituted,
		    "Samples replaced by the next good one (on_error).", false),
		C("feedfs_batches_total", batches, "Batches prepared.", false),
		C("feedfs_batch_errors_total", batch_errors,
		    "Batches that failed (on_error = fail).", false),
		C("feedfs_worker_busy_seconds_total", busy_ns,
		    "Worker time spent preparing samples.", true),
		C("feedfs_job_read_wait_seconds_total", read_wait_ns,
		    "Time readers of the job waited for its batches.", true),
		C("feedfs_job_read_waits_total", read_waits,
		    "Reads of the job's batches that had to wait.", false),
#undef C
	};
	struct sbuf sb = { 0 };
	struct cache_stats cs = { 0 };
	uint64_t mem, peak, queued, nb, wait_ns = 0, waits = 0;

	for (size_t c = 0; c < sizeof(ctr) / sizeof(ctr[0]); c++) {
		sb_printf(&sb, "# HELP %s %s\n# TYPE %s counter\n",
		    ctr[c].name, ctr[c].help, ctr[c].name);
		for (size_t i = 0; i < f->njobs; i++) {
			atomic_uint_fast64_t *v =
			    (atomic_uint_fast64_t *)((char *)&f->jobs[i].st +
				ctr[c].off);
			uint64_t x = atomic_load(v);

			if (ctr[c].seconds)
				sb_printf(&sb, "%s{job=\"%s\"} %.6f\n",
				    ctr[c].name, f->jobs[i].cfg->name,
				    (double)x / 1e9);
			else
				sb_printf(&sb, "%s{job=\"%s\"} %" PRIu64 "\n",
				    ctr[c].name, f->jobs[i].cfg->name, x);
		}
	}
	sb_printf(&sb, "# HELP feedfs_images_per_second Samples prepared per "
		       "second, over the last 10 s.\n"
		       "# TYPE feedfs_images_per_second gauge\n");
	for (size_t i = 0; i < f->njobs; i++)
		sb_printf(&sb, "feedfs_images_per_second{job=\"%s\"} %.1f\n",
		    f->jobs[i].cfg->name, job_rate(&f->jobs[i].st, 10));
	/* The mount's waits are its jobs' waits. */
	for (size_t i = 0; i < f->njobs; i++) {
		wait_ns += atomic_load(&f->jobs[i].st.read_wait_ns);
		waits += atomic_load(&f->jobs[i].st.read_waits);
	}
	pthread_mutex_lock(&f->lock);
	mem = f->mem_used;
	peak = f->mem_peak;
	queued = f->queued_slots;
	nb = f->nbatches;
	pthread_mutex_unlock(&f->lock);
	sb_printf(&sb,
	    "# HELP feedfs_read_wait_seconds_total Time readers waited for "
	    "batches.\n# TYPE feedfs_read_wait_seconds_total counter\n"
	    "feedfs_read_wait_seconds_total %.6f\n"
	    "# HELP feedfs_read_waits_total Reads that had to wait.\n"
	    "# TYPE feedfs_read_waits_total counter\n"
	    "feedfs_read_waits_total %" PRIu64 "\n"
	    "# HELP feedfs_queue_depth Samples queued for the workers.\n"
	    "# TYPE feedfs_queue_depth gauge\nfeedfs_queue_depth %" PRIu64 "\n"
	    "# HELP feedfs_workers Preprocessing threads.\n"
	    "# TYPE feedfs_workers gauge\nfeedfs_workers %u\n"
	    "# HELP feedfs_batches_in_memory Batches held in memory.\n"
	    "# TYPE feedfs_batches_in_memory gauge\n"
	    "feedfs_batches_in_memory %" PRIu64 "\n"
	    "# HELP feedfs_memory_bytes Bytes of batches held in memory.\n"
	    "# TYPE feedfs_memory_bytes gauge\nfeedfs_memory_bytes %" PRIu64
	    "\n# HELP feedfs_memory_peak_bytes Highest feedfs_memory_bytes.\n"
	    "# TYPE feedfs_memory_peak_bytes gauge\n"
	    "feedfs_memory_peak_bytes %" PRIu64 "\n"
	    "# HELP feedfs_memory_limit_bytes The memory key, less the "
	    "cache's share.\n# TYPE feedfs_memory_limit_bytes gauge\n"
	    "feedfs_memory_limit_bytes %" PRIu64 "\n",
	    (double)wait_ns / 1e9, waits,
	    queued, f->nthreads, nb, mem, peak, f->memory);
	if (f->cache)
		cache_get_stats(f->cache, &cs);
	sb_printf(&sb,
	    "# HELP feedfs_cache_enabled Whether the cache is in use.\n"
	    "# TYPE feedfs_cache_enabled gauge\nfeedfs_cache_enabled %d\n"
	    "# HELP feedfs_cache_read_bytes_total Bytes read from the cache.\n"
	    "# TYPE feedfs_cache_read_bytes_total counter\n"
	    "feedfs_cache_read_bytes_total %" PRIu64 "\n"
	    "# HELP feedfs_cache_written_bytes_total Bytes written to the "
	    "cache.\n# TYPE feedfs_cache_written_bytes_total counter\n"
	    "feedfs_cache_written_bytes_total %" PRIu64 "\n"
	    "# HELP feedfs_cache_insert_failures_total Values the cache did "
	    "not take.\n# TYPE feedfs_cache_insert_failures_total counter\n"
	    "feedfs_cache_insert_failures_total %" PRIu64 "\n"
	    "# HELP feedfs_cache_disk_bytes Disk used by the cache.\n"
	    "# TYPE feedfs_cache_disk_bytes gauge\n"
	    "feedfs_cache_disk_bytes %" PRIu64 "\n",
	    f->cache && !cs.disabled, cs.bytes_read, cs.bytes_written,
	    cs.insert_failures, cs.disk_bytes);
	stats_cache_error(f, &sb);
	return sb_done(&sb, len);
}
