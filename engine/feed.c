/*
 * feed.c - the engine of a mount: setup and teardown (see feed.h; the
 * parts are listed in engine.h), and the metadata that fs/'s nodes count
 * in the budget.  Layer: the engine (engine/), its top: fs/ and tools/
 * call it; it calls the parts below it (engine.h) and opens the
 * datasets (core/dsopen.c), the cache and the GPU.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/cluster.h"
#include "cache/format.h"
#include "core/cachefit.h"
#include "engine/engine.h"
#include "engine/prefill.h"
#include "util/log.h"
#include "core/dsopen.h"
#include "gpu/gpu.h"

/* Samples without a caption, and the classes of multi-hot labels. */
static void
say_meta(const struct dataset *ds)
{
	const struct ds_sample *first = NULL;
	size_t none = 0;

	for (size_t i = 0; ds->text && i < ds->n; i++)
		if (ds->samples[i].text == NULL && none++ == 0)
			first = &ds->samples[i];
	if (none > 0)
		log_warn("dataset %s: %zu of %zu samples have no caption that "
			 "can be served (the first: %s/%s: %s); they fail when "
			 "read, and on_error decides",
		    ds->name, none, ds->n, ds->root, first->path,
		    first->bad ? first->bad : "?");
	if (ds->multi)
		log_info("dataset %s: labels are lists: multi-hot rows of %zu "
			 "classes (%s)",
		    ds->name, ds->nclasses,
		    ds->classes_file ? "the lines of classes = FILE"
				     : "the largest index + 1");
}

/*
 * What the scan of an ImageFolder dataset left out, said at mount time
 * (on the terminal): every file not served, counted by why (not JPEG,
 * PNG or WebP by its name, a dangling link, a loop...), and class
 * directories without an image (their label is never served); for any
 * dataset, say_meta's.
 */
static void
say_dataset(const struct dataset *ds)
{
	char text[1024];
	size_t *per, none = 0;

	if (ds_skipped_total(ds) > 0) {
		ds_skipped_text(ds, text, sizeof(text));
		log_warn("dataset %s: %zu files under %s are not served: %s "
			 "(feedfs --check lists them)",
		    ds->name, ds_skipped_total(ds), ds->root, text);
	}
	say_meta(ds);
	if (ds->manifest || ds->nshards > 0 || ds->nclasses == 0 ||
	    (per = calloc(ds->nclasses, sizeof(*per))) == NULL)
		return;
	for (size_t i = 0; i < ds->n; i++)
		if (ds->samples[i].label >= 0 &&
		    (size_t)ds->samples[i].label < ds->nclasses)
			per[ds->samples[i].label]++;
	for (size_t k = 0; k < ds->nclasses; k++)
		if (per[k] == 0 && none++ < 10)
			log_warn("dataset %s: class folder %s/%s has no images "
				 "(class %zu is never served)",
			    ds->name, ds->root, ds->classes[k], k);
	if (none > 10)
		log_warn("dataset %s: %zu class folders have no images in all",
		    ds->name, none);
	free(per);
}

/* Open the datasets of c and make its jobs. */
static int
load_jobs(struct feed *f, ds_progress_fn progress, void *arg, char *err,
    size_t errlen)
{
	struct cfg *c = f->cfg;
	char why[5000];
	int r, idx;

	/* Through the cache's checks of cache_dir, before anything is kept. */
	if ((idx = ds_index_open(c, why, sizeof(why))) < 0 && why[0] != '\0')
		log_warn("%s", why);
	for (size_t i = 0; i < c->ndatasets; i++) {
		const struct cfg_dataset *d = &c->datasets[i];
		char msg[768];

		if ((r = prefill_open(c, i, idx, progress, arg, &f->ds[i],
			 &f->pass[i], msg, sizeof(msg))) != 0) {
			if (d->line > 0)
				snprintf(err, errlen, "%s:%d: dataset %s: %s",
				    c->path, d->line, d->name, msg);
			else /* the default config of a dataset dir */
				snprintf(err, errlen, "%s", msg);
			if (idx >= 0)
				close(idx);
			return r;
		}
	}
	if (idx >= 0)
		close(idx);
	for (size_t i = 0; i < c->ndatasets; i++)
		say_dataset(f->ds[i]);
	for (size_t i = 0; i < c->njobs; i++) {
		const struct cfg_job *cj = &c->jobs[i];

		if ((r = job_init_all(&f->jobs[i], c, cj,
			 (const struct dataset *const *)f->ds, err, errlen)) !=
		    0)
			return r;
		f->njobs++;
		if ((r = stage_probe(c, cj, err, errlen)) != 0)
			return r;
	}
	f->nshown = f->njobs;
	/* The views 1..N-1 of each job with views, after the jobs. */
	for (size_t i = 0; i < c->njobs; i++) {
		const struct cfg_job *cj = &c->jobs[i];

		f->jobs[i].view_base = (uint32_t)f->njobs;
		for (uint32_t v = 1; v < cj->views; v++) {
			struct job *vj = &f->jobs[f->njobs];

			if ((r = job_init_view(vj, c, cj,
				 f->ds[cj->dataset_index], v, err, errlen)) !=
			    0)
				return r;
			vj->view_main = (uint32_t)i;
			f->njobs++;
		}
	}
	return 0;
}

/*
 * Refuse a job whose largest batch does not fit in what the budget
 * leaves for one: `memory` less the cache's share, the text files and
 * what sched_start counts from the start (the workers' scratch arenas,
 * the remote windows).  Such a batch could only be made past the budget,
 * which is what keeps the daemon inside its cgroup.  Every batch's size
 * is known now: the output size of a pipeline is fixed (a resolution
 * schedule's, per epoch).
 */
static int
check_batches(struct feed *f, char *err, size_t errlen)
{
	const struct cfg *c = f->cfg;
	uint64_t fixed = f->mem_used + sched_fixed_bytes(f), room, need;
	char at[PATH_MAX + 96], sz[4][32];
	uint32_t e;

	room = f->memory > fixed ? f->memory - fixed : 0;
	for (size_t i = 0; i < f->njobs; i++) {
		const struct job *j = &f->jobs[i];
		const struct cfg_job *cj = j->cfg;
		const uint64_t *shape;

		if ((need = batch_need_max(f, i, &e)) <= room)
			continue;
		shape = job_geo(j, e)->shape;
		if (cj->batch_size_line > 0 || cj->line > 0)
			snprintf(at, sizeof(at), "%s:%d: ", c->path,
			    cj->batch_size_line > 0 ? cj->batch_size_line
						    : cj->line);
		else
			snprintf(at, sizeof(at), "%s",
			    cj->batch_size_line < 0 ? "-o batch_size: " : "");
		cfg_size_text(need, sz[0], sizeof(sz[0]));
		cfg_size_text(c->mount.memory, sz[1], sizeof(sz[1]));
		cfg_size_text(room, sz[2], sizeof(sz[2]));
		cfg_size_text(fixed + f->cache_mem, sz[3], sizeof(sz[3]));
		snprintf(err, errlen,
		    "%sjob %s: a batch%s needs %s (%" PRIu64 " samples of "
		    "%" PRIu64 "x%" PRIu64 "x%" PRIu64 " %s%s, its labels, ids "
		    "and the epoch's order), more than memory = %s leaves for "
		    "one: %s (%s go to the cache, the workers' scratch and the "
		    "text files); lower batch_size or raise memory "
		    "(feedfs.conf(5) says how far it may go)",
		    at, j->name, cj->res_line ? " of its largest epoch" : "",
		    sz[0], shape[0] < j->plan.n ? shape[0] : j->plan.n,
		    shape[1], shape[2], shape[3], cfg_dtype_name(cj->dtype),
		    cj->gpu ? ", with gpu = on twice: raw and converted" : "",
		    sz[1], sz[2], sz[3]);
		return -EINVAL;
	}
	return 0;
}

int
feed_new(struct cfg *c, ds_progress_fn progress, void *arg, struct feed **out,
    char *err, size_t errlen)
{
	struct feed *f;
	size_t njobs = 0;
	int r = -ENOMEM;

	for (size_t i = 0; i < c->njobs; i++)
		njobs += c->jobs[i].views;
	if ((f = calloc(1, sizeof(*f))) == NULL) {
		cfg_free(c);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	f->cfg = c; /* transferred */
	pthread_mutex_init(&f->lock, NULL);
	{
		/* idle.c's deadline is on the monotonic clock */
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&f->work, &ca);
		pthread_condattr_destroy(&ca);
	}
	budget_init(&f->budget, 0, &f->lock);
	batch_budget(f); /* the budget's reclaimers: budget.h */
	bufpool_budget(f);
	order_budget(f);
	relaxed_budget(f);
	if ((f->ds = calloc(c->ndatasets, sizeof(*f->ds))) == NULL ||
	    (f->pass = calloc(c->ndatasets, sizeof(*f->pass))) == NULL ||
	    (f->jobs = calloc(njobs, sizeof(*f->jobs))) == NULL ||
	    (f->rfree = calloc(njobs, sizeof(*f->rfree))) == NULL ||
	    (f->nrfree = calloc(njobs, sizeof(*f->nrfree))) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	/* A mistake in the node's config stops the mount as one in c. */
	if ((r = cfg_node_load(&f->node, err, errlen)) != 0 ||
	    (r = load_jobs(f, progress, arg, err, errlen)) != 0)
		goto fail;
	/* RocksDB's block cache and memtables are counted in `memory`. */
	f->cache_mem = c->mount.cache_size ? c->mount.memory / 8 : 0;
	if (f->cache_mem > (256u << 20))
		f->cache_mem = 256u << 20;
	f->memory = c->mount.memory - f->cache_mem;
	/* Metadata: a quarter of it (engine.h). */
	f->meta_cap = f->memory / 4;
	if ((r = feed_text_init(f)) != 0) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if ((r = check_batches(f, err, errlen)) != 0)
		goto fail;
	*out = f;
	return 0;
fail:
	feed_free(f);
	return r;
}

static void
cache_say(bool warn, const char *msg)
{
	log_msg(warn ? LOG_LVL_WARN : LOG_LVL_INFO, "cache: %s", msg);
}

/*
 * The cache, shared with the other mounts of cache_dir (its owner, or a
 * client of it: cache.h); failures leave the mount cacheless.
 */
static void
open_cache(struct feed *f)
{
	const struct cfg_mount *m = &f->cfg->mount;
	char msg[1024];

	if (m->cache_size == 0) {
		log_info("cache_size = 0: serving without a cache");
		return;
	}
	/*
	 * The cache's share of `memory`: three quarters to RocksDB, a
	 * quarter to what an owner holds for the other mounts (their
	 * queued inserts, the requests it is reading).  A client keeps a
	 * connection per worker.  cache_size = auto is passed on as is:
	 * the owner chooses it.
	 */
	_Static_assert(CFG_SIZE_AUTO == CACHE_SIZE_AUTO, "cache_size = auto");
	struct cache_opts o = {.size_bound = m->cache_size,
	    .mem_bound = f->cache_mem - f->cache_mem / 4,
	    .stale = m->cache_stale,
	    .label = f->mountpoint,
	    .say = cache_say,
	    .workers = cfg_threads(m),
	    .share_mem = f->cache_mem / 4,
	    .node_total = f->node.cache_total,
	    .node_pct = f->node.cache_pct,
	    .node_registry = f->node.path[0] ? f->node.registry : NULL,
	    .node_conf = f->node.path};

	if (cache_open_shared(m->cache_dir, &o, &f->cache, msg, sizeof(msg)) !=
	    0) {
		log_warn("cache: %s; serving without the cache", msg);
		snprintf(f->cache_err, sizeof(f->cache_err), "%s", msg);
		f->cache = NULL;
	} else if (cache_error(f->cache) && log_first(&f->cache_warned))
		/* Opened and left alone (a newer format): said at mount. */
		log_warn("cache: %s; serving without the cache",
		    cache_error(f->cache));
}

/* Whether job i's prefix is an earlier job's (the same cache entries). */
static bool
same_prefix(const struct cfg *c, size_t i)
{
	char a[1024], b[1024];

	xf_prefix_text(c->jobs[i].pl, a, sizeof(a));
	for (size_t k = 0; k < i; k++) {
		const struct cfg_job *x = &c->jobs[k], *y = &c->jobs[i];

		xf_prefix_text(x->pl, b, sizeof(b));
		if (strcmp(a, b) == 0 && x->cache_format == y->cache_format &&
		    x->dataset_index == y->dataset_index && x->nsources == 0 &&
		    y->nsources == 0)
			return true;
	}
	return false;
}

/*
 * What each job's prefix needs in its cache_format against cache_size,
 * estimated as --check estimates it (cachefit.h), from 16 of its images
 * (remote ones are not fetched for it): a warning for each job the cache
 * is too small for, or for the jobs together; else one line in the log.
 */
static void
say_cache_fit(struct feed *f)
{
	const struct cfg *c = f->cfg;
	uint64_t size, total = 0;
	char v[512], need[32], name[32];
	bool warned = false;
	size_t njobs = 0;

	if (f->cache == NULL)
		return;
	size = c->mount.cache_size;
	if (size == CFG_SIZE_AUTO) {
		struct cache_stats st;

		/* the bound the owner chose: admit_bytes is 19/20 of it */
		cache_get_stats(f->cache, &st);
		size = st.admit_bytes + st.admit_bytes / 19;
	}
	for (size_t i = 0; i < c->njobs; i++) {
		const struct cfg_job *cj = &c->jobs[i];
		struct cachefit fit;
		uint64_t bytes;
		size_t nok;

		if (cj->pl->cache_at >= cj->pl->nops || same_prefix(c, i) ||
		    cachefit_job(cj, f->ds, &fit, &nok) != 0)
			continue;
		bytes = cachefit_bytes(&fit, fit.own, UINT64_MAX, nok, NULL);
		total += bytes;
		njobs++;
		if (cachefit_verdict(size, NULL, bytes, v, sizeof(v)))
			continue;
		cachefit_human(bytes, need, sizeof(need));
		cache_fmt_name(cj->cache_format, name, sizeof(name));
		log_warn("job %s needs ~%s in cache_format %s (%zu of its "
			 "%zu images run through its prefix, as feedfs --check "
			 "estimates): %s",
		    cj->name, need, name, fit.done, nok, v);
		warned = true;
	}
	if (warned || njobs == 0)
		return;
	cachefit_human(total, need, sizeof(need));
	if (cachefit_verdict(size, NULL, total, v, sizeof(v)))
		log_info("the jobs' prefixes need ~%s of cache (estimated "
			 "from 16 images of each, as feedfs --check does): %s",
		    need, v);
	else
		log_warn("the jobs' prefixes together need ~%s of cache "
			 "(estimated from 16 images of each, as feedfs --check "
			 "does): %s",
		    need, v);
}

/* The cluster tier; a failure (an auth file refused) serves without. */
static void
open_cluster(struct feed *f)
{
	const struct cfg_mount *m = &f->cfg->mount;
	/* A handle per worker: none of them waits for one. */
	struct cluster_opts o = {.auth_file = m->cluster_auth,
	    .secret_file = m->cluster_secret,
	    .pool = cfg_threads(m) + 1, /* and the tier's thread */
	    .probe = true};
	char msg[1024];

	if (m->cluster == NULL)
		return;
	if (o.pool > CLUSTER_POOL_MAX)
		o.pool = CLUSTER_POOL_MAX;
	if (cluster_open(m->cluster, &o, &f->cluster, msg, sizeof(msg)) != 0) {
		log_warn("cluster: %s; serving without the cluster tier", msg);
		return;
	}
	if (cluster_problem(f->cluster) != NULL) /* SASL refused: said */
		log_warn("cluster: %s", cluster_problem(f->cluster));
	for (size_t i = 0; i < f->njobs; i++)
		f->jobs[i].cluster = f->cluster;
}

/*
 * glibc hands freed memory back to the kernel: blocks above its mmap
 * threshold are unmapped when freed, and a heap's free top is trimmed
 * past 2x that threshold.  Memory given back is faulted in and cleared
 * again (clear_page) at its next use, and in a cold epoch the same
 * memory is freed and taken again all the time: a memtable's worth of
 * values that RocksDB copies in after every flush, the write batch of
 * each put, libjpeg's coefficient buffers of a progressive image.  That
 * was 15 page faults per image in a steady cold epoch (the samples' own
 * buffers aside, which xf.h's arenas keep).  Fixed thresholds keep it:
 * what the process holds is then the high-water mark of what it used,
 * which the memory budget and the cache's share bound already.  Blocks
 * of 32 MB and more (batch buffers: bufpool.c keeps them) are still
 * mapped apart.
 */
void
feed_keep_freed_memory(void)
{
	mallopt(M_MMAP_THRESHOLD, 32 << 20); /* glibc's largest */
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

int
feed_set_mountpoint(struct feed *f, const char *path)
{
	char *s = strdup(path);

	if (s == NULL)
		return -ENOMEM;
	free(f->mountpoint);
	f->mountpoint = s;
	return 0;
}

int
feed_start(struct feed *f)
{
	char msg[1024];
	int r;

	open_cache(f);
	say_cache_fit(f);
	open_cluster(f);
	if ((r = tier_start(f)) != 0)
		return r;
	for (size_t i = 0; i < f->njobs && !f->gpu; i++) {
		if (!f->jobs[i].cfg->gpu)
			continue;
		/* After fuse_daemonize(): CUDA does not survive a fork. */
		if ((r = gpu_init(&f->gpu, f->cfg->mount.gpu_memory, msg,
			 sizeof(msg))) != 0) {
			log_err(
			    "gpu = on (job %s): %s", f->jobs[i].cfg->name, msg);
			return r;
		}
	}
	if ((r = stage_start(f)) != 0)
		return r;
	return sched_start(f);
}

void
feed_drain(struct feed *f)
{
	tier_stop(f); /* before the batches it looks at go */
	sched_stop(f);
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < FEED_HASH; i++)
		while (f->table[i])
			batch_destroy(f, f->table[i]);
	relaxed_free_all(f);
	order_free_all(f);
	bufpool_free_all(f);
	pthread_mutex_unlock(&f->lock);
}

void
feed_free(struct feed *f)
{
	if (!f)
		return;
	feed_drain(f);
	free(f->rfree);
	free(f->nrfree);
	cache_ctl_stop(f->ctl);
	if (f->cache)
		cache_close(f->cache);
	tier_free(f);
	cluster_close(f->cluster);
	gpu_fini(f->gpu);
	feed_text_fini(f);
	for (size_t i = 0; i < f->njobs; i++)
		job_fini(&f->jobs[i]);
	free(f->jobs);
	for (size_t i = 0; f->ds && i < f->cfg->ndatasets; i++)
		ds_free(f->ds[i]);
	free(f->ds);
	free(f->pass);
	budget_fini(&f->budget);
	pthread_cond_destroy(&f->work);
	pthread_mutex_destroy(&f->lock);
	cfg_free(f->cfg);
	free(f->mountpoint);
	free(f);
}

/* The nodes' share of the metadata cap, and what pruning aims at. */
#define NODES_SHARE(f) ((f)->meta_cap / 2)
#define NODES_AIM(f) ((f)->meta_cap * 3 / 8)

bool
feed_nodes_add(struct feed *f, uint64_t bytes)
{
	bool over;

	pthread_mutex_lock(&f->lock);
	f->node_bytes += bytes;
	feed_meta_add(f, bytes);
	over = f->node_bytes > NODES_SHARE(f);
	pthread_mutex_unlock(&f->lock);
	return over;
}

void
feed_nodes_sub(struct feed *f, uint64_t bytes)
{
	pthread_mutex_lock(&f->lock);
	f->node_bytes -= bytes;
	feed_meta_sub(f, bytes);
	pthread_mutex_unlock(&f->lock);
}

uint64_t
feed_nodes_excess(struct feed *f)
{
	uint64_t n;

	pthread_mutex_lock(&f->lock);
	n = f->node_bytes > NODES_AIM(f) ? f->node_bytes - NODES_AIM(f) : 0;
	pthread_mutex_unlock(&f->lock);
	return n;
}
