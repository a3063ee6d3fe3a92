/*
 * engine.h - the engine's state, shared by the files of engine/ that make
 * up a mount's engine and private to them.  Layer: the engine (engine/);
 * no product file outside engine/ includes it (fs/ and tools/ use feed.h
 * and ns.h; the engine's tests do):
 *
 *	feed.c     setup and teardown, the nodes' metadata
 *	prefill.c  the datasets opened, with the one pass over remote
 *	           shards (prefill.h; a budget of its own, in a child)
 *	files.c    open/read/release of batch files
 *	jobs.c     the jobs as fs/ sees them, batch files' keys and sizes
 *	mixture.c  a mixture's weights files, read and written
 *	pin.c      a reader's hold on a batch: pin, wait until ready, unpin
 *	batch.c    the batch table
 *	budget.c   the memory budget (budget.h), below the others
 *	bufpool.c  large batch buffers kept for reuse
 *	sched.c    readahead and the worker threads
 *	sched_queue.c  the work queues, a batch's slots done
 *	idle.c     an idle mount gives back what only speed needs
 *	relaxed.c  order = relaxed: batches filled as samples finish
 *	relaxed_reclaim.c  what relaxed views give back; forgotten epochs
 *	order.c    the epochs' orders, shared by their batches
 *	stage.c    .cuda files: staging a batch on the device
 *	tier_look.c  the cluster tier's thread: finished batches of batch
 *	           workers looked up, fetched, waited for (issue 37)
 *	tier.c     the batch table's and the workers' side of it (tier_take,
 *	           a fetched batch's slots); tier_pos.c the readers'
 *	           positions it publishes
 *	text.c     README, info.json, samples.tsv, owned texts;
 *	stats.c    .feedfs/stats
 *	batch_text.c  a batch's .text.jsonl: its size, open and reads
 *
 * Locking: one mutex, feed.lock, protects the batch table, the queues, the
 * orders, the relaxed views and the memory count.  Workers take it only
 * to pick a slot and to hand a finished one back; decoding runs unlocked.
 * Each batch has a condition variable (under feed.lock) that readers wait
 * on.  Functions here marked "locked" are called with feed.lock held.
 * Lock order: a handle's lock (stage.c), then feed.lock; nothing is
 * called with feed.lock held that takes another lock of ours (the cache
 * and the transforms take none).
 *
 * The memory budget is budget.c's (budget.h says what is counted where):
 * feed.budget, under feed.lock.  The holders of memory above count what
 * they hold in it and register a reclaimer each (batch_budget,
 * bufpool_budget, order_budget, relaxed_budget), which the budget asks
 * in a fixed order when room is needed; the budget calls nothing else of
 * the engine.  Calls run one way down: feed.c, files.c and mixture.c,
 * then tier_look.c, sched.c (readahead, workers), batch.c, tier.c,
 * relaxed.c, relaxed_reclaim.c, sched_queue.c, order.c, bufpool.c, and
 * budget.c at the bottom; prefill.c (over budget.c), text.c and stats.c
 * below feed.c, batch_text.c below files.c and ns.c (over pin.c),
 * tier_pos.c below files.c and tier_look.c, jobs.c below them all.
 */
#ifndef FEEDFS_ENGINE_H
#define FEEDFS_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "engine/budget.h"
#include "engine/feed.h"
#include "engine/prefill.h"
#include "core/node.h"
#include "core/job.h"
#include "gpu/feedfs_cuda.h"
#include "util/clock.h"

#define FEED_HASH 1024

struct cache;
struct cache_ctl;
struct cluster;
struct tier;
struct gpu;
struct gpu_buf;
struct rforgot;
struct rview;

/* An epoch's order, shared by the batches of (job, epoch). */
struct order {
	uint32_t job, epoch;
	uint32_t *ids; /* ids[pos]: the sample at position pos */
	unsigned refs;
	uint64_t used;
	struct order *next;
};

/* A batch of order = relaxed (rv set) takes samples as they finish. */
struct rpart {
	struct rview *rv;     /* the view whose samples it takes */
	uint32_t quota;       /* samples it asks to be started */
	uint32_t filled;      /* slots delivered */
	const uint32_t *fixed; /* chosen before (rebuilt): its ids */
	struct batch *rnext;  /* next batch waiting for samples */
	uint64_t reserved;    /* metadata counted for its choice, until made */
};

/*
 * A batch's state with the cluster tier's finished batches (tier.c):
 * looked up there before its slots are queued, waited for while a worker
 * holds it, and once fetched its slots converted from the worker's
 * samples (raw) instead of made.
 */
struct batch_tier {
	uint8_t *raw;        /* fetched samples (uint8 HWC), until converted
				(lazy: until its data is dropped) */
	uint64_t raw_len;    /* their bytes, counted in the budget */
	uint64_t since;      /* ns: its wait on a worker's claim began; 0 */
	uint64_t dsince;     /* ns: a reader began to wait for it; 0 */
	uint64_t poll;       /* ns: the tier thread looks again then */
	bool queued, busy;   /* in the tier queue; the tier thread has it */
	bool key_ok;         /* key computed */
	bool looked;         /* looked up once (not again when made here) */
	bool lazy;           /* its images converted as they are read
				(tier_read), mixed with this draw: */
	struct xf_mix mix;
	uint8_t key[32];     /* core/batch_tier.h's */
	struct batch *next;  /* the tier queue */
};

/*
 * A batch: the three .npy files of (job, rank view, epoch, batch).  Its
 * struct lives while it is in the table; its data (files, slot positions)
 * only while it is built or ready: an idle batch that a reader holds open
 * can lose its data under memory pressure (empty) and is built again, to
 * the same bytes, at its next read.  With gpu = on the slots are uint8
 * HWC samples (raw), which a .cuda file stages as they are; the .npy
 * images are converted from them at the first read of the .npy file.
 */
struct batch {
	struct feed_key key;
	struct job *job;
	struct batch_geom g;
	uint8_t *file[BK_IDS + 1]; /* images, labels, ids; images NULL with
				      gpu = on until the .npy is read */
	uint8_t *raw;              /* gpu = on: the uint8 HWC samples */
	uint64_t img_buf;          /* bytes of its images buffer (batch.c:
				      a short batch's is a full one's) */
	uint64_t mem;              /* bytes counted in feed.mem_used */
	/* The slots: planned positions in the epoch's order. */
	struct order *order;       /* held until every slot is done */
	uint64_t *pos;
	uint32_t next;             /* next slot to hand out */
	uint32_t ahead;            /* remote shards: slots below this were
				      asked for ahead (sched.c) */
	uint32_t inflight;         /* slots being made */
	/* State, under feed.lock. */
	bool empty;                /* no data: not built, or dropped */
	bool ready;                /* all slots done, or failed */
	bool converting;           /* gpu = on: images being made from raw */
	bool mixq;                 /* complete, in the mix queue (a batch op) */
	int err;                   /* first failure (of this build) */
	char errmsg[512];
	unsigned refs;             /* open handles */
	unsigned active;           /* reads in progress: data pinned */
	bool queued, demanded;     /* in a queue; read by a reader */
	bool consumed;             /* read to its end */
	uint64_t used;             /* last use (feed.tick) */
	uint64_t read_ns;          /* when its last read ended (feed_unpin,
				      feed_mono_ns); 0: never read */
	pthread_cond_t cv;         /* ready, converted */
	struct batch *hnext;       /* hash chain */
	struct batch *qnext;       /* queue link */
	struct rpart r;            /* order = relaxed only */
	/* The cluster tier's finished batches (tier.c), under feed.lock. */
	struct batch_tier t;
};

struct queue {
	struct batch *head, *tail;
};

struct pooled;

/* A finished sample waiting for a batch. */
struct rsample {
	uint32_t id;
	int err;
	char *msg;
	uint8_t *buf; /* the job's slot_bytes; unused after a failure */
	uint64_t elem; /* its element of the view's list */
	struct rsample *next;
};

/* A batch's choice: its ids. */
struct rchosen {
	uint64_t batch;
	uint32_t *ids;
};

/*
 * A relaxed view (relaxed.c): one (job, rank view, epoch).  Its list's
 * elements are started in order (element e is at plan_position(e) of the
 * epoch order); while idle it keeps only chosen, started and owed.
 */
struct rview {
	uint32_t job, rank, world, epoch;
	uint64_t npos, started; /* elements of the view's list; started */
	uint64_t ahead;		/* remote shards: elements below this were
				   asked for ahead (relaxed_start) */
	uint64_t *owed;		/* started, given back: started again first */
	uint32_t nowed, cowed;
	struct rchosen *chosen; /* by batch, sorted */
	uint64_t nchosen, cchosen;
	struct order *order; /* held while a batch waits or a sample is
				made */
	struct batch *wait_head, *wait_tail; /* batches being filled */
	struct rsample *ready, *ready_tail;  /* finished, not taken yet */
	unsigned live;			     /* batches alive that point here */
	unsigned inflight;		     /* samples being made */
	uint64_t mem;			     /* metadata counted */
	uint64_t used;
	struct rview *next;
};

/* A generated text file. */
struct text {
	char *s;
	size_t len;
};

struct feed {
	struct cfg *cfg;
	struct dataset **ds; /* one per cfg dataset */
	struct prefill_report *pass; /* each one's index pass (prefill.h) */
	struct job *jobs;
	size_t njobs;  /* the config's jobs, then their views 1..N-1 */
	size_t nshown; /* the config's jobs: jobs[0..nshown) (feed_njobs) */
	struct cache *cache; /* NULL: serve without */
	struct cluster *cluster; /* the cluster tier; NULL: none */
	struct tier *tier;       /* its finished batches (tier.c); NULL: off */
	struct gpu *gpu;     /* NULL unless a job has gpu = on */
	atomic_bool cache_warned;
	char cache_err[1024]; /* why cache_open failed; set before the threads */
	struct cfg_node node; /* the node's bound on cache_size = auto */
	char *mountpoint;     /* feed_set_mountpoint's; NULL: not told */
	struct cache_ctl *ctl; /* the cache's control socket (feedfs-cache) */
	unsigned nthreads;
	pthread_t *threads;
	uint64_t cache_mem;

	pthread_mutex_t lock;
	pthread_cond_t work; /* a queue got work, or stopping */
	bool stopping;
	struct batch *table[FEED_HASH];
	size_t nbatches;
	struct queue demand, ahead;
	struct queue mix; /* complete batches for their batch op (sched.c) */
	struct order *orders;
	struct rview *rviews; /* order = relaxed views, most recent first */
	size_t nrviews;
	struct rforgot *rforgot; /* relaxed_reclaim.c: epochs whose views were
				    forgotten, per (job, rank view) */
	uint64_t rforgotten;     /* views forgotten; opens refused so */
	uint64_t rstale;
	struct rsample **rfree; /* per job: spare sample buffers */
	unsigned *nrfree;
	/* The memory budget (budget.h): memory, mem_used, meta_used,
	 * meta_cap, room...; as f->budget, and as f->mem_used etc. */
	union {
		struct budget budget;
		struct {
			BUDGET_MEMBERS;
		};
	};
	uint64_t tick;
	uint64_t spare_bytes;          /* relaxed.c's spares, in mem_used */
	uint64_t node_bytes;           /* fs/nodes.c's, in meta_used */
	uint64_t queued_slots;
	struct starved starved; /* any reader's: job.h */

	struct text readme, *info, *samples; /* text.c; info, samples: per job */
	struct pooled *pool; /* bufpool.c: buffers kept for reuse */
	unsigned npool;
	uint64_t pool_bytes; /* theirs, counted in mem_used */
	uint64_t pool_reused, pool_allocated; /* bufpool_get's, for stats */
	/* The workers' scratch arenas (sched.c): each worker's cap, all
	 * caps (counted in mem_used), their bytes now, buffers reused and
	 * blocks mapped. */
	uint64_t scratch_cap, scratch_reserved;
	uint64_t scratch_bytes, scratch_reused, scratch_fresh;
	uint64_t scratch_outside; /* their buffers too large for them,
				     counted in mem_used while held */
	/* Remote shards (dataset/remote/remote.h): the fetchers' windows of bytes
	 * fetched ahead of the workers, counted in mem_used from
	 * sched_start to sched_stop; remote: some dataset has them. */
	uint64_t remote_reserved;
	bool remote;
	/* idle.c: the last open or read (CLOCK_MONOTONIC ns), the workers
	 * waiting for work, whether the mount was trimmed since that read,
	 * the trims' generation (each worker trims its arena once per
	 * generation) and the workers yet to; the trims done (every worker's
	 * arena too), the bytes they gave back, the last one's. */
	uint64_t idle_used_ns;
	unsigned idle_waiting, idle_pending;
	bool idle_trimmed;
	uint64_t idle_gen, idle_trims, idle_bytes, idle_last;
	uint64_t idle_rss0; /* resident bytes when the last trim began */
	/* Reads refused for want of room that nothing else would free
	 * (batch_wait_room): the batch and the metadata held, over
	 * the budget. */
	uint64_t room_refused;
};

/* An open batch file. */
struct feed_handle {
	struct batch *b; /* referenced; NULL: the file is in data */
	enum batch_kind kind;
	uint8_t *data;   /* labels, ids or text made from the plan alone;
			    BK_TEXT with b: made by the first read (lock) */
	size_t len;
	uint64_t meta;   /* counted in feed.meta_used: the handle, data */
	/* BK_CUDA: the batch staged by the first read, held until release;
	 * BK_TEXT with b: data made by the first read. */
	pthread_mutex_t lock; /* the three below, or data */
	struct gpu_buf *gbuf;
	uint8_t desc[FEEDFS_CUDA_DESC_SIZE];
	int gerr;
};

/* order.c: the order of (job, epoch), referenced (NULL: no memory). */
struct order *order_get(struct feed *f, uint32_t job, uint32_t epoch);
void order_put(struct order *o); /* NULL is fine */
/* The order of (job, epoch) referenced if it exists, else NULL. */
struct order *order_hold(struct feed *f, uint32_t job, uint32_t epoch);
void order_free_all(struct feed *f);

/* batch.c */
enum batch_need {
	BN_AHEAD, /* readahead: only within the budget, else not made */
	BN_OPEN,  /* an open: the struct always, the data within the budget */
	BN_READ,  /* a read: the data, waiting for room if need be */
};
struct batch *batch_find(struct feed *f, const struct feed_key *k);
/*
 * Batch k as need asks (see enum batch_need), its slots queued when it
 * gets data.  NULL when it cannot (BN_AHEAD out of budget, or no memory).
 * With BN_READ the data is there (being built or ready) when it returns
 * non-NULL.  Locked; BN_READ may wait for room (unlocking meanwhile).
 */
struct batch *batch_get(struct feed *f, const struct feed_key *k,
    enum batch_need need);
/*
 * The most bytes a read of job's batches needs at once: its largest
 * batch over the epochs (world 1, batch 0), with its slot positions, its
 * epoch's order, and with gpu = on the images made from the raw samples;
 * *epoch: the first epoch that needs them.  Geometry only: unlocked.
 */
uint64_t batch_need_max(const struct feed *f, size_t job, uint32_t *epoch);
/* Whether what a read of b waits for room for was made meanwhile, by
 * another reader: its data, or (images) its images from the raw ones. */
bool batch_made_meanwhile(const struct batch *b, bool images);
/*
 * Room for need more bytes for b's read (buf: the size of its large
 * buffer, a kept one of which counts as room): 0, or -ENOMEM when the
 * budget cannot make it (batch.c).  Locked; waits unlocked.
 */
int batch_wait_room(
    struct feed *f, struct batch *b, uint64_t need, size_t buf, bool images);
/*
 * The buffer of b's images, if fill() left it to the first slot or read
 * that needs it (a strict batch, no kept buffer of its size then): from
 * the kept ones, else mapped, its npy header written.  0, or -ENOMEM.
 * The budget counted it with b's data.  Locked.
 */
int batch_images_buf(struct feed *f, struct batch *b);
void batch_destroy(struct feed *f, struct batch *b);
/* No reader holds b any more (refs dropped to 0).  Locked. */
void batch_unref(struct feed *f, struct batch *b);
/*
 * If b failed because a source was unavailable (sample_unavailable: a
 * server that did not answer, a dataset root gone) and no read is in
 * progress, give back its data (its struct stays) so that the next
 * batch_get makes it again: such a failure lasts no longer than the
 * source's outage.  Whether it did.  Locked.
 */
bool batch_renew(struct feed *f, struct batch *b);

/*
 * The reclaimers of the memory budget (budget.h), registered by feed_new:
 * batch.c's (consumed batches, idle batches, unheld batch structs),
 * bufpool.c's (kept buffers), order.c's (unused orders), relaxed_reclaim.c's
 * (spare and finished samples; idle views, finished epochs' choices).
 */
void batch_budget(struct feed *f);
void bufpool_budget(struct feed *f);
void order_budget(struct feed *f);
void relaxed_budget(struct feed *f);

/*
 * f's budget as feed.c, files.c, text.c and the engine's test spell it
 * (budget.h has the contract): counting, the metadata cap, and room made
 * (with any, idle batches held open may lose their data).  Locked.
 */
#define feed_mem_add(f, n) budget_add(&(f)->budget, (n))
#define feed_mem_sub(f, n) budget_sub(&(f)->budget, (n))
#define feed_meta_room(f, n) budget_meta_room(&(f)->budget, (n))
#define feed_meta_add(f, n) budget_meta_add(&(f)->budget, (n))
#define feed_meta_sub(f, n) budget_meta_sub(&(f)->budget, (n))
#define batch_make_room(f, need, any)                                         \
	budget_make_room(&(f)->budget, (need), (any) ? BUDGET_ANY : 0, 0)

/* bufpool.c: a buffer of size bytes (reused when one was given back);
 * give one back; whether one of size is kept (size, or 0); free all.
 * Locked. */
void *bufpool_get(struct feed *f, size_t size);
void bufpool_put(struct feed *f, void *p, size_t size);
size_t bufpool_has(struct feed *f, size_t size);
void bufpool_free_all(struct feed *f);

/* sched_queue.c: queue b's slots not handed out yet; take it out of its
 * queue.  Locked. */
void sched_enqueue(struct feed *f, struct batch *b);
void sched_dequeue(struct feed *f, struct batch *b);
/* b was opened by a reader: its slots go first.  Locked. */
void sched_demand(struct feed *f, struct batch *b);
/* Where slot s of b's samples goes (raw with gpu = on, else the images). */
uint8_t *sched_slot(struct batch *b, uint32_t s);
/* Every slot of b is done: wake its readers.  Locked. */
void sched_ready(struct feed *f, struct batch *b);
/* Every slot of b is done: sched_ready, or with float labels (a batch
 * op, multi-hot rows) and no failure into the mix queue, where a worker
 * makes its label rows and mixes it unlocked and then makes it ready
 * (sched.c).  Locked. */
void sched_complete(struct feed *f, struct batch *b);

/*
 * idle.c: an idle mount gives back what only speed needs.  idle_touch: a
 * file was opened or read now.  idle_wait: a worker without work waits
 * (instead of on feed.work alone), and, the last to wait once the mount
 * was idle for idle_trim seconds, gives back the engine's memory; it
 * returns what the worker must trim then, unlocked, with idle_scratch:
 * its arena (IDLE_SCRATCH), and the heap too (IDLE_HEAP), then tell
 * idle_scratched: the trim counts (feedfs_idle_trims_total) once every
 * worker has.  gen: the worker's, 0 at its start.  Locked, but
 * idle_scratch.
 */
enum { IDLE_NOTHING, IDLE_SCRATCH, IDLE_HEAP };
void idle_touch(struct feed *f);
int idle_wait(struct feed *f, uint64_t *gen);
void idle_scratch(struct xf_arena *a, int what);
void idle_scratched(struct feed *f);

/*
 * Remote shards: the samples a worker asks for ahead of its slot (in
 * sched.c's strict order, relaxed.c's view order), at most
 * REMOTE_AHEAD_MAX a take, in bytes within the fetchers' windows
 * (ds_remote_room), only while sample_ahead_worth (else a mark would
 * move past samples never asked for).  Then, unlocked:
 * sample_prefetch_remote of each, which passes over a sample the local
 * cache holds.
 */
#define REMOTE_AHEAD_MAX 64
struct ahead {
	struct job *j;
	uint32_t id;
};

/* sched.c: queue the batches after k within the budget (readahead).
 * Locked. */
void sched_readahead(struct feed *f, const struct feed_key *k);
int sched_start(struct feed *f);
void sched_stop(struct feed *f);
/* What sched_start counts in the budget from the start: the workers'
 * scratch arenas (an eighth of it at most) and the remote datasets'
 * windows. */
uint64_t sched_fixed_bytes(const struct feed *f);

/* relaxed.c */
/* Metadata of rv: counted in rv->mem and the budget (relaxed.c and
 * relaxed_reclaim.c).  Locked. */
static inline void
rview_meta_add(struct feed *f, struct rview *rv, uint64_t bytes)
{
	rv->mem += bytes;
	budget_meta_add(&f->budget, bytes);
}
/* Attach batch b (getting data) to its relaxed view and take what is
 * ready.  Locked; -ENOMEM when the view cannot be made. */
int relaxed_attach(struct feed *f, struct batch *b);
/* b loses its data: leave the view, handing on the samples it owed. */
void relaxed_detach(struct feed *f, struct batch *b);
/* Start the next sample of b's view.  Locked; returns locked. */
void relaxed_start(struct feed *f, struct batch *b, char *msg,
    size_t msglen);
/* relaxed_reclaim.c: whether k's epoch was forgotten (its batches are
 * refused: -ESTALE).  Locked. */
bool relaxed_forgotten(struct feed *f, const struct feed_key *k);
/* k's view, if any, counts as used now: the room made for an open of one
 * of its batches is not taken from it first.  Locked. */
void relaxed_touch(struct feed *f, const struct feed_key *k);
void relaxed_free_all(struct feed *f);

/*
 * feed.c: stop the workers and give back every batch, relaxed view, order
 * and pooled buffer (what feed_free does first; the engine's tests then
 * check that every counted byte was uncounted).  Not locked.
 */
void feed_drain(struct feed *f);

/*
 * batch_text.c: whether the plan fixes batch k's content (strict order,
 * on_error = fail: its labels, ids and text come from the plan); the
 * planned text into h->data and h->len (not
 * counted: the caller does); the text of h's batch made into h->data by
 * its first read (BK_TEXT with h->b; waits until the batch is ready,
 * -EIO when it failed), counted in h->meta.  Not locked.  A stat's size
 * is feed_text_size's (feed.h).
 */
bool feed_batch_planned(const struct feed *f, const struct feed_key *k);
int feed_text_plan_file(
    struct feed *f, const struct feed_key *k, struct feed_handle *h);
int feed_text_read(struct feed *f, struct feed_handle *h);
/* A mixture's epoch k->epoch is opened: its weights fixed.  Not locked. */
void feed_epoch_opened(struct feed *f, const struct feed_key *k);

/* text.c: size bytes for an owned text, counted as metadata until
 * feed_text_free (NULL: no memory, or metadata at its cap). */
char *feed_owned_alloc(struct feed *f, size_t size);

/* text.c: make the fixed text files (feed_new); free them. */
int feed_text_init(struct feed *f);
void feed_text_fini(struct feed *f);
/* stats.c: .feedfs/stats, malloc'd (NULL: no memory). */
char *feed_stats(struct feed *f, size_t *len);

/* pin.c: pin h's batch's data for a read (whole: its samples too, and
 * with gpu = on its images), and unpin it.  Locked. */
int feed_pin(struct feed *f, struct feed_handle *h, bool whole);
void feed_unpin(struct feed *f, struct batch *b);
/* CLOCK_MONOTONIC in ns: the clock of the readers' waits (starved) and
 * of their pauses (batch.c's reading()).  Here, not in pin.c, so that
 * batch.c, below pin.c, calls nothing above it. */
static inline uint64_t
feed_mono_ns(void)
{
	return ff_mono_ns();
}

/*
 * The cluster tier's finished batches (cluster_batches).  tier_look.c:
 * tier_start opens it after the cluster (feed_start; NULL-safe: off
 * without a cluster) and starts its thread; tier_stop joins it (before
 * the workers stop).  tier.c: tier_free frees it.  Locked: tier_take (fill hands
 * b over before queueing its slots: false, make it here), tier_opened
 * (a reader opened k: its position), tier_drop (b loses its data),
 * tier_done (every slot of b is made).  Unlocked: tier_slot makes slot s
 * of a fetched batch from its raw samples (*id its sample); tier_read
 * makes bytes [off, off + size) of a lazy batch's images file (b pinned,
 * ready) in a buffer of the calling thread's, valid until its next call.
 */
int tier_start(struct feed *f);
void tier_stop(struct feed *f);
void tier_free(struct feed *f);
bool tier_take(struct feed *f, struct batch *b);
void tier_opened(struct feed *f, const struct feed_key *k);
void tier_drop(struct feed *f, struct batch *b);
void tier_done(struct feed *f, struct batch *b);
int tier_slot(struct feed *f, struct batch *b, uint32_t s, uint32_t *id);
int tier_read(struct feed *f, struct batch *b, uint64_t off, size_t size,
    const void **ptr);
/* stats.c's part of tier.c: the tier's counters. */
struct sbuf;
void tier_stats(struct feed *f, struct sbuf *sb);

/* stage.c: whether a device serves job cj (0 at once for gpu = off),
 * asked in a child process (gpu_probe) before anything is mounted; else
 * "FILE:LINE: gpu = on: why" in err (feed_new, after the job's setup). */
int stage_probe(
    const struct cfg *c, const struct cfg_job *cj, char *err, size_t errlen);
/* stage.c: every gpu = on job's device pool, made at mount (feed_start);
 * the read of a .cuda file; its release. */
int stage_start(struct feed *f);
int stage_read(struct feed *f, struct feed_handle *h, uint64_t off,
    size_t size, const void **ptr, size_t *len);
void stage_release(struct feed *f, struct feed_handle *h);

#endif
