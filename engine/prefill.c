/*
 * prefill.c - the engine (engine/): a mount's datasets opened with the
 * one pass over remote shards (see prefill.h; issue 38).  Layer: the
 * engine, called by feed.c's setup; calls the model (core/dsopen.h, the
 * tier's indexes in core/ds_tier.c, sample_fill_bytes), the datasets,
 * the cache and the budget (budget.c).
 *
 * A remote shard is indexed from one stream of all its bytes, which
 * carry every member: the one pass decodes them as they pass, so that
 * the first epoch reads its prefixes from the cache instead of fetching
 * each member again by range.  The pass runs before the mount is
 * served, while the mount still has no thread (feedfs forks to detach
 * after this, and the cache's store, RocksDB, keeps threads of its own
 * from its open on): so it runs in a child process, which opens the
 * cache (as its owner, or a client of the mount that owns it) and the
 * tier, streams the shards `streams` at a time while a pool of
 * cfg_threads workers decodes the members into them, keeps the shards'
 * indexes (cache_dir's shard-index, the tier), says how far it got on
 * the terminal, reports what it did on a pipe and exits.  The mount then
 * opens the dataset as always, from those indexes.  Only what was not
 * kept (a shard that failed, an index that could not be written) is
 * streamed again, here, without the fill; a child that dies costs the
 * same.
 *
 * First the mount looks without streaming (ds_remote_hooks.defer): a
 * remount, or a second node whose tier holds the indexes, needs no
 * child.  The pass fills while a cache has room (its admission bound,
 * cache.h; or, without a local cache, the tier); past it, the members go
 * by and are fetched by range when an epoch needs them, as before.  What
 * waits for a worker is counted in a budget (budget.h) of `memory` less
 * the cache's share, with the workers' scratch and the streams' buffers:
 * a stream whose member finds no room waits (the network waits with it).
 */
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/cluster.h"
#include "core/config.h"
#include "core/dsopen.h"
#include "core/job.h"
#include "core/node.h"
#include "core/sample.h"
#include "dataset/remote/remote.h"
#include "engine/budget.h"
#include "engine/feed.h"
#include "engine/prefill.h"
#include "util/log.h"

/* The most shards streamed at once (each a connection: the fetcher's
 * pool has 64), and what each may hold: its largest member twice (the
 * stream's buffer and the copy handed on) and its slack. */
#define PREFILL_STREAMS_MAX 16u
#define STREAM_MEM (2u * (16u << 20) + (1u << 20))
/* The pass shows its progress once it has taken this long. */
#define SHOW_AFTER_MS 2000u
#define SHOW_TTY_MS 250u
#define SHOW_LOG_MS 5000u
/* The cache's room is asked at most this often. */
#define ROOM_EVERY_MS 200u

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* `memory` less the cache's share, as feed_new divides it. */
static uint64_t
budget_of(const struct cfg *c)
{
	uint64_t cm = c->mount.cache_size ? c->mount.memory / 8 : 0;

	if (cm > (256u << 20))
		cm = 256u << 20;
	return c->mount.memory - cm;
}

/* Shards streamed at once: a quarter of the budget's worth of streams. */
static unsigned
streams_of(const struct cfg *c)
{
	uint64_t n = budget_of(c) / 4 / STREAM_MEM;

	return n < 1			 ? 1
	       : n > PREFILL_STREAMS_MAX ? PREFILL_STREAMS_MAX
					 : (unsigned)n;
}

/* ---- the progress line ------------------------------------------------- */

struct show {
	const char *name; /* the dataset's */
	bool tty, shown;
	uint64_t said;
	const _Atomic uint64_t *made; /* the child's fill's, live, or NULL */
	struct ds_pass last;	      /* the pass's counters, last said */
};

static void
show_line(struct show *s, const struct ds_pass *p, bool last)
{
	uint64_t now = now_ms(), left = 0;
	double rate = p->ms ? (double)p->streamed_bytes * 1000.0 / p->ms : 0;
	char fill[96] = "";

	if (p->ms < SHOW_AFTER_MS && !s->shown)
		return;
	if (!last && now - s->said < (s->tty ? SHOW_TTY_MS : SHOW_LOG_MS))
		return;
	s->said = now;
	if (rate > 0 && p->stream_bytes > p->streamed_bytes)
		left =
		    (uint64_t)((double)(p->stream_bytes - p->streamed_bytes) /
			       rate);
	if (s->made != NULL)
		snprintf(fill, sizeof(fill), ", %" PRIu64 " prefixes cached",
		    atomic_load(s->made));
	if (s->tty) {
		fprintf(stderr,
		    "\rfeedfs: dataset %s: %zu/%zu shards indexed, %.1f of "
		    "%.1f MB, %.1f MB/s, %" PRIu64 " s left%s\033[K%s",
		    s->name, p->done, p->shards,
		    (double)p->streamed_bytes / 1e6,
		    (double)p->stream_bytes / 1e6, rate / 1e6, left, fill,
		    last ? "\n" : "");
		fflush(stderr);
	} else
		log_info("dataset %s: %zu/%zu shards indexed, %.1f of %.1f "
			 "MB, %.1f MB/s, %" PRIu64 " s left%s",
		    s->name, p->done, p->shards,
		    (double)p->streamed_bytes / 1e6,
		    (double)p->stream_bytes / 1e6, rate / 1e6, left, fill);
	s->shown = true;
}

/* struct ds_remote_hooks' progress. */
static void
on_progress(void *arg, const struct ds_pass *p)
{
	struct show *s = arg;

	s->last = *p;
	show_line(s, p, false);
}

/* ---- the fill (in the child) ------------------------------------------- */

/* A member waiting for a worker. */
struct item {
	struct item *next;
	uint8_t *d;
	size_t len;
	uint8_t sha[32];
};

struct fill {
	struct show show; /* first: the hooks' arg is the fill */
	struct job *t;	  /* the jobs whose prefixes are made */
	size_t nt;
	struct cache *cache;  /* NULL: none */
	struct cluster *cl;   /* NULL: none */
	pthread_mutex_t lock; /* what follows, and b */
	struct budget b;
	pthread_cond_t work; /* an item, or done */
	struct item *head, **tail;
	uint64_t queued;  /* their bytes (counted in b too) */
	size_t scratch;	  /* a worker's arena's cap */
	bool done;	  /* the pass is over: drain and go */
	atomic_bool full; /* no room: members pass by */
	/* The local cache's room, as its counters said at the start and
	 * the last time they were asked (has_room). */
	uint64_t room_ms, denied0, evictions0, used0, used, admit;
	_Atomic uint64_t made, present, bad, unfilled;
	_Atomic uint64_t stored; /* the bytes of the prefixes made */
};

/*
 * Whether the local cache still has room for the next prefix (without
 * one, the tier always has: memcached evicts).  Its admission bound
 * (cache.h) counts its entries' bytes: the pass stops where they would
 * pass it, the bytes it stored counted at once (the owner applies puts
 * a moment later), the next one taken to be as large as the mean of
 * those, unless the cache is making room by deleting stale entries (its
 * evictions grow: a fill takes their room, as a cold epoch does).  It
 * stops too once a put was refused (the cache is full of what was used
 * within cache_stale) or the cache is off or on a full disk.  Locked;
 * the counters are asked at most every ROOM_EVERY_MS.
 */
static bool
has_room(struct fill *f)
{
	struct cache_stats cs = {0};
	uint64_t now = now_ms(), made, stored, est;

	if (f->full || f->cache == NULL)
		return !f->full;
	if (now - f->room_ms >= ROOM_EVERY_MS) {
		f->room_ms = now;
		cache_get_stats(f->cache, &cs);
		f->used = cs.used_bytes;
		f->admit = cs.admit_bytes;
		if (cs.disabled || cs.full || cs.denied > f->denied0)
			f->full = true;
		else if (cs.evictions > f->evictions0)
			f->admit = 0; /* stale entries make the room */
	}
	made = atomic_load(&f->made);
	stored = atomic_load(&f->stored);
	est = f->used0 + stored > f->used ? f->used0 + stored : f->used;
	if (f->admit > 0 && made > 0 && est + stored / made > f->admit)
		f->full = true;
	if (f->full) {
		log_info("dataset %s: the cache is full (about %" PRIu64
			 " of %" PRIu64 " bytes): the rest of the pass fills "
			 "nothing; those samples are fetched by range when "
			 "read",
		    f->show.name, est, f->admit);
	}
	return !f->full;
}

/* struct ds_remote_hooks' member: queued for the workers, within the
 * budget (the stream waits for room), unless there is no room left. */
static void
on_member(void *arg, uint8_t *d, size_t len, const uint8_t sha256[32])
{
	struct fill *f = arg;
	struct item *it;

	pthread_mutex_lock(&f->lock);
	while (f->nt > 0 && has_room(f) && f->queued > 0 &&
	       !budget_make_room(&f->b, len, 0, 0))
		budget_wait(&f->b);
	if (f->nt == 0 || f->full || (it = malloc(sizeof(*it))) == NULL) {
		pthread_mutex_unlock(&f->lock);
		atomic_fetch_add(&f->unfilled, 1);
		free(d);
		return;
	}
	it->next = NULL;
	it->d = d; /* transferred */
	it->len = len;
	memcpy(it->sha, sha256, 32);
	*f->tail = it;
	f->tail = &it->next;
	f->queued += len;
	budget_add(&f->b, len);
	pthread_cond_signal(&f->work);
	pthread_mutex_unlock(&f->lock);
}

/* A worker: members' prefixes made for every job, until the pass is
 * over and nothing waits. */
static void *
fill_worker(void *arg)
{
	struct fill *f = arg;
	struct xf_arena *a = xf_arena_new(f->scratch);

	xf_arena_use(a); /* NULL (no memory): malloc */
	pthread_mutex_lock(&f->lock);
	for (;;) {
		struct item *it;
		uint64_t made = 0, present = 0, bad = 0;
		bool room;

		while (f->head == NULL && !f->done)
			pthread_cond_wait(&f->work, &f->lock);
		if ((it = f->head) == NULL)
			break;
		if ((f->head = it->next) == NULL)
			f->tail = &f->head;
		/* The room is asked again: it may have gone since queued. */
		room = has_room(f);
		pthread_mutex_unlock(&f->lock);
		for (size_t k = 0; k < f->nt && room && !f->full; k++) {
			size_t sz = 0;
			int r = sample_fill_bytes(
			    &f->t[k], f->cache, it->d, it->len, it->sha, &sz);

			made += r == 0;
			present += r == 1;
			bad += r == -EIO;
			atomic_fetch_add(&f->stored, sz);
		}
		atomic_fetch_add(&f->made, made);
		atomic_fetch_add(&f->present, present);
		atomic_fetch_add(&f->bad, bad);
		if (made + present + bad == 0)
			atomic_fetch_add(&f->unfilled, 1);
		free(it->d);
		pthread_mutex_lock(&f->lock);
		f->queued -= it->len;
		budget_sub(&f->b, it->len); /* wakes a waiting stream */
		free(it);
	}
	pthread_mutex_unlock(&f->lock);
	xf_arena_use(NULL);
	xf_arena_free(a);
	return NULL;
}

/* Whether job cj makes prefixes of dataset i. */
static bool
job_reads(const struct cfg_job *cj, size_t i)
{
	if (cj->nsources == 0)
		return cj->dataset_index == i;
	for (size_t k = 0; k < cj->nsources; k++)
		if (cj->source_index[k] == i)
			return true;
	return false;
}

/* f->t: the jobs over dataset i that cache a prefix, one a key text. */
static int
fill_targets(struct fill *f, const struct cfg *c, size_t i)
{
	if ((f->t = calloc(c->njobs ? c->njobs : 1, sizeof(*f->t))) == NULL)
		return -ENOMEM;
	for (size_t k = 0; k < c->njobs; k++) {
		struct job *j = &f->t[f->nt];
		bool dup = false;

		if (!job_reads(&c->jobs[k], i))
			continue;
		if (job_init_prefix(j, &c->jobs[k]) != 0)
			return -ENOMEM;
		for (size_t m = 0; m < f->nt && !dup; m++)
			dup = strcmp(f->t[m].key_text, j->key_text) == 0;
		if (dup || j->prefix[0] == '\0') {
			job_fini(j);
			continue;
		}
		j->cluster = f->cl;
		f->nt++;
	}
	return 0;
}

static void
say_cache(bool warn, const char *msg)
{
	log_msg(
	    warn ? LOG_LVL_WARN : LOG_LVL_INFO, "cache (index pass): %s", msg);
}

/*
 * The child's cache and tier, as feed_start opens the mount's: with the
 * node's bound on cache_size = auto too (core/node.h), so that the pass
 * fills no more than the mount will keep.  The mount read the node's
 * config before (a mistake in it stopped the mount); read again here, a
 * file that went since is no bound.
 */
static void
fill_open(struct fill *f, const struct cfg *c, unsigned workers)
{
	const struct cfg_mount *m = &c->mount;
	uint64_t cm = c->mount.memory - budget_of(c);
	struct cache_opts o = {.size_bound = m->cache_size,
	    .mem_bound = cm - cm / 4,
	    .stale = m->cache_stale,
	    .label = "(the index pass of a mount)",
	    .say = say_cache,
	    .workers = workers,
	    .share_mem = cm / 4};
	struct cluster_opts co = {.auth_file = m->cluster_auth,
	    .secret_file = m->cluster_secret,
	    .pool = workers + PREFILL_STREAMS_MAX};
	struct cache_stats cs = {0};
	struct cfg_node node;
	char msg[1024];

	if (cfg_node_load(&node, msg, sizeof(msg)) == 0) {
		o.node_total = node.cache_total;
		o.node_pct = node.cache_pct;
		o.node_registry = node.path[0] ? node.registry : NULL;
		o.node_conf = node.path;
	}
	if (m->cache_size != 0 && cache_open_shared(m->cache_dir, &o, &f->cache,
				      msg, sizeof(msg)) != 0)
		f->cache = NULL; /* the mount says why, when it opens it */
	if (f->cache != NULL && cache_error(f->cache) != NULL) {
		cache_close(f->cache);
		f->cache = NULL;
	}
	if (f->cache != NULL) {
		cache_get_stats(f->cache, &cs);
		f->denied0 = cs.denied;
		f->evictions0 = cs.evictions;
		f->used0 = f->used = cs.used_bytes;
		f->admit = cs.admit_bytes;
	}
	if (m->cluster != NULL &&
	    cluster_open(m->cluster, &co, &f->cl, msg, sizeof(msg)) != 0)
		f->cl = NULL;
}

/* CPU time of this process, every thread: ns. */
static uint64_t
cpu_ns(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) *
		   1000000000u +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) *
		   1000u;
}

/*
 * The child: the pass over dataset i with the fill, its report on fd.
 * Returns the exit status.
 */
static int
child_pass(const struct cfg *c, size_t i, int index_fd, int fd)
{
	struct fill f;
	struct ds_remote_hooks h = {0};
	struct prefill_report rep = {.ran = true};
	struct dataset *ds = NULL;
	_Atomic uint64_t refused = 0;
	unsigned nw = cfg_threads(&c->mount), started = 0;
	pthread_t *th = calloc(nw, sizeof(*th));
	uint64_t t0 = now_ms(), c0 = cpu_ns();
	char err[2048];
	int r;

	memset(&f, 0, sizeof(f));
	f.show.name = c->datasets[i].name;
	f.show.tty = isatty(STDERR_FILENO);
	f.show.made = &f.made;
	f.tail = &f.head;
	pthread_mutex_init(&f.lock, NULL);
	pthread_cond_init(&f.work, NULL);
	budget_init(&f.b, budget_of(c), &f.lock);
	fill_open(&f, c, nw);
	if (th == NULL || fill_targets(&f, c, i) != 0) {
		free(th);
		return 1;
	}
	/* What the streams and the workers' scratch may hold, counted
	 * (the scratch as the mount's workers', sched.c). */
	f.scratch = f.b.memory / 8 / nw;
	if (f.scratch > (32u << 20))
		f.scratch = 32u << 20;
	pthread_mutex_lock(&f.lock);
	budget_add(&f.b,
	    (uint64_t)streams_of(c) * STREAM_MEM + (uint64_t)nw * f.scratch);
	pthread_mutex_unlock(&f.lock);
	for (; started < nw; started++)
		if (pthread_create(&th[started], NULL, fill_worker, &f) != 0)
			break;
	if (started == 0)
		f.nt = 0; /* no worker: nothing is queued */
	ds_tier_hooks(f.cl, &h);
	h.member = on_member;
	h.progress = on_progress;
	h.arg = &f;
	h.refused = &refused;
	h.streams = streams_of(c);
	r = ds_open_cfg_with(
	    &c->datasets[i], index_fd, &h, NULL, NULL, &ds, err, sizeof(err));
	rep.refused = atomic_load(&refused);
	if (ds != NULL)
		rep.pass = ds->pass;
	pthread_mutex_lock(&f.lock);
	f.done = true;
	pthread_cond_broadcast(&f.work);
	pthread_mutex_unlock(&f.lock);
	for (unsigned k = 0; k < started; k++)
		pthread_join(th[k], NULL);
	if (ds != NULL)
		show_line(&f.show, &rep.pass, true);
	rep.made = atomic_load(&f.made);
	rep.present = atomic_load(&f.present);
	rep.bad = atomic_load(&f.bad);
	rep.unfilled = atomic_load(&f.unfilled);
	ds_free(ds);
	for (size_t k = 0; k < f.nt; k++)
		job_fini(&f.t[k]);
	free(f.t);
	free(th);
	if (f.cache != NULL)
		cache_close(f.cache); /* its puts flushed */
	cluster_close(f.cl);
	budget_fini(&f.b);
	pthread_cond_destroy(&f.work);
	pthread_mutex_destroy(&f.lock);
	rep.wall_ms = now_ms() - t0;
	rep.cpu_ns = cpu_ns() - c0;
	if (write(fd, &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
		return 1;
	return r == 0 ? 0 : 1;
}

/*
 * Run the pass over dataset i in a child (prefill.c's head says why),
 * *rep its report.  0, or -errno when it could not run or did not end
 * well (the caller then streams what is missing itself).
 */
static int
run_child(
    const struct cfg *c, size_t i, int index_fd, struct prefill_report *rep)
{
	int p[2], st = 0;
	ssize_t n;
	pid_t pid;

	if (pipe(p) != 0)
		return -errno;
	fflush(NULL); /* nothing buffered is written twice */
	if ((pid = fork()) < 0) {
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if (pid == 0) {
		close(p[0]);
		_exit(child_pass(c, i, index_fd, p[1]));
	}
	close(p[1]);
	do
		n = read(p[0], rep, sizeof(*rep));
	while (n < 0 && errno == EINTR);
	close(p[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(*rep) || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0) {
		log_warn("dataset %s: the index pass %s; the shards not "
			 "indexed are streamed again, without filling the "
			 "cache",
		    c->datasets[i].name,
		    WIFSIGNALED(st) ? "was killed" : "did not end well");
		memset(rep, 0, sizeof(*rep));
		return -EIO;
	}
	return 0;
}

/* ---- the open ----------------------------------------------------------- */

/* Whether any job over dataset i caches a prefix. */
static bool
any_prefix(const struct cfg *c, size_t i)
{
	for (size_t k = 0; k < c->njobs; k++) {
		struct job j;
		bool p;

		if (!job_reads(&c->jobs[k], i) ||
		    job_init_prefix(&j, &c->jobs[k]) != 0)
			continue;
		p = j.prefix[0] != '\0';
		job_fini(&j);
		if (p)
			return true;
	}
	return false;
}

int
prefill_open(const struct cfg *c, size_t i, int index_fd,
    ds_progress_fn progress, void *arg, struct dataset **out,
    struct prefill_report *rep, char *err, size_t errlen)
{
	const struct cfg_dataset *d = &c->datasets[i];
	struct ds_remote_hooks h = {0};
	struct show sh = {.name = d->name, .tty = isatty(STDERR_FILENO)};
	struct cluster_opts co = {.auth_file = c->mount.cluster_auth,
	    .secret_file = c->mount.cluster_secret,
	    .pool = PREFILL_STREAMS_MAX};
	struct cluster *cl = NULL;
	_Atomic uint64_t refused = 0, again = 0;
	char msg[1024];
	bool fill;
	int r;

	memset(rep, 0, sizeof(*rep));
	if (d->shards == NULL || !remote_is_url(d->shards))
		return ds_open_cfg(
		    d, index_fd, progress, arg, out, err, errlen);
	/* The tier's indexes: a client for this open only (none may be
	 * left for the fork). */
	if (c->mount.cluster != NULL &&
	    cluster_open(c->mount.cluster, &co, &cl, msg, sizeof(msg)) != 0)
		cl = NULL;
	ds_tier_hooks(cl, &h);
	h.progress = on_progress;
	h.arg = &sh;
	h.refused = &refused;
	h.streams = streams_of(c);
	fill = d->remote_fill && any_prefix(c, i) &&
	       ((c->mount.cache_size != 0 && c->mount.cache_dir != NULL) ||
		   cl != NULL);
	h.defer = fill;
	r = ds_open_cfg_with(d, index_fd, &h, progress, arg, out, err, errlen);
	if (r == -EAGAIN && fill) {
		/* Shards to stream: the one pass, then the indexes it kept. */
		cluster_close(cl);
		cl = NULL;
		(void)run_child(c, i, index_fd, rep);
		/* What the first look took from the tier, it kept: the
		 * child found it kept. */
		if (rep->ran && rep->pass.kept >= sh.last.tier) {
			rep->pass.kept -= sh.last.tier;
			rep->pass.tier += sh.last.tier;
		}
		if (c->mount.cluster != NULL &&
		    cluster_open(
			c->mount.cluster, &co, &cl, msg, sizeof(msg)) != 0)
			cl = NULL;
		memset(&h, 0, sizeof(h));
		ds_tier_hooks(cl, &h);
		h.progress = on_progress;
		h.arg = &sh;
		h.refused = &again;
		h.streams = streams_of(c);
		r = ds_open_cfg_with(
		    d, index_fd, &h, progress, arg, out, err, errlen);
	}
	cluster_close(cl);
	/* The child saw every shard the first look did (and more). */
	rep->refused = (rep->ran ? rep->refused : atomic_load(&refused)) +
		       atomic_load(&again);
	if (r == 0 && !rep->ran)
		rep->pass = (*out)->pass;
	if (r == 0 && sh.shown)
		show_line(&sh, &(*out)->pass, true);
	if (r == 0 && rep->ran)
		log_info("dataset %s: one pass over %zu shards (%.1f MB) in "
			 "%.1f s: %" PRIu64 " prefixes made, %" PRIu64
			 " there already, %" PRIu64 " members not filled, "
			 "%" PRIu64 " that do not decode; CPU %.1f s",
		    d->name, rep->pass.streamed,
		    (double)rep->pass.streamed_bytes / 1e6,
		    (double)rep->wall_ms / 1e3, rep->made, rep->present,
		    rep->unfilled, rep->bad, (double)rep->cpu_ns / 1e9);
	return r;
}

int
feed_open_dataset(const struct cfg *c, size_t i, int index_fd,
    struct cluster *cl, struct dataset **out, char *err, size_t errlen)
{
	const struct cfg_dataset *d = &c->datasets[i];
	struct show sh = {.name = d->name, .tty = isatty(STDERR_FILENO)};
	struct ds_remote_hooks h = {0};
	int r;

	ds_tier_hooks(cl, &h);
	h.progress = on_progress;
	h.arg = &sh;
	h.streams = streams_of(c);
	r = ds_open_cfg_with(d, index_fd, &h, NULL, NULL, out, err, errlen);
	if (r == 0 && sh.shown)
		show_line(&sh, &(*out)->pass, true);
	return r;
}
