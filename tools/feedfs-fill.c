/*
 * feedfs-fill.c - a program (tools/, over the model in core/, the
 * datasets, cache/ and the engine's allocator setting): fill the cluster
 * tier with a job's cached prefixes, or with --batches its finished
 * batches (a batch worker: fill-batches.c), on a node with no FUSE and
 * no GPU (see feedfs-fill(8)).
 *
 *	feedfs-fill [-o KEY=VALUE[,...]] CONFIG JOB [--part K/N]
 *	    [--epochs A-B]
 *	feedfs-fill --batches [-o KEY=VALUE[,...]] CONFIG JOB [--part K/N]
 *	    [--epochs A-B [--world W]] [--window N]
 *
 * Part K of N is the samples whose id is K modulo N: stable across runs
 * while the dataset is unchanged, and every part spread over the whole
 * epoch order.  The samples are taken in the order epoch A reads them
 * (every epoch reads every sample, so that order covers epochs A..B); each
 * goes through sample_fill, which computes the key and the value (in the
 * job's cache_format) exactly as the mount does and skips what the
 * cluster already has, so a killed run restarts where it stood.  Workers
 * take the next sample of the list from one atomic counter.
 *
 * Exit status: 0 when the part is in the cluster, 1 when some sample could
 * not be stored, was not read because its remote source did not answer
 * (counted as unavailable, never as unreadable), or, with on_error = fail,
 * could not be read, 2 on usage, config and dataset errors
 * ("feedfs-fill: FILE:LINE: message").
 */
#include <sys/stat.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/cluster.h"
#include "core/config.h"
#include "core/dsopen.h"
#include "dataset/dataset.h"
#include "engine/feed.h"
#include "core/job.h"
#include "util/clock.h"
#include "util/log.h"
#include "core/plan.h"
#include "core/sample.h"
#include "tools/fill-batches.h"

#define PROG "feedfs-fill"
/* Progress: a terminal line this often, else a plain line this often. */
#define TTY_NS 250000000ull
#define PLAIN_NS 5000000000ull

struct fill {
	struct job *job;
	uint32_t *ids; /* the part, in epoch A's order */
	size_t n;
	atomic_size_t next;
	size_t ahead; /* sources read ahead of the sample a worker takes */
	bool remote;  /* remote shards: all of them asked for ahead */
	atomic_size_t asked; /* remote: samples below this asked for */
	/* Outcomes.  unavailable: a remote source did not answer (the
	 * sample is not unreadable: a run later may read it). */
	atomic_uint_fast64_t computed, present, bad, unavailable, failed;
	bool fail_on_bad; /* on_error = fail: an unreadable sample fails */
};

static void
usage(void)
{
	fprintf(stderr,
	    "usage: " PROG " [-o KEY=VALUE[,KEY=VALUE...]] CONFIG JOB "
	    "[--part K/N] [--epochs A-B]\n"
	    "       " PROG " --batches [-o KEY=VALUE[,KEY=VALUE...]] CONFIG "
	    "JOB [--part K/N]\n"
	    "           [--epochs A-B [--world W]] [--window N]\n");
	exit(2);
}

/* "K/N" or "A-B": two unsigned decimals around sep; 0 or -EINVAL. */
static int
parse_pair(const char *s, char sep, uint64_t *a, uint64_t *b)
{
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	*a = strtoull(s, &end, 10);
	if (errno != 0 || *end != sep || end[1] < '0' || end[1] > '9')
		return -EINVAL;
	*b = strtoull(end + 1, &end, 10);
	if (errno != 0 || *end != '\0')
		return -EINVAL;
	return 0;
}

/*
 * Apply one -o list: KEY=VALUE pairs separated by commas; a HOST:PORT
 * without = after cluster= continues its server list.  2 on an error
 * (said), else 0.
 */
static int
apply_opts(struct cfg *c, const char *list)
{
	char *dup = strdup(list), *tok, *save = NULL, *kv = NULL, *s;
	char err[1024];
	int ret = 0;

	if (dup == NULL) {
		fprintf(stderr, PROG ": out of memory\n");
		return 2;
	}
	for (tok = strtok_r(dup, ",", &save);;
	     tok = strtok_r(NULL, ",", &save)) {
		if (tok != NULL && kv != NULL && strchr(tok, '=') == NULL &&
		    strchr(tok, ':') != NULL &&
		    strncmp(kv, "cluster=", 8) == 0) {
			if (asprintf(&s, "%s,%s", kv, tok) < 0) {
				ret = 2;
				break;
			}
			free(kv);
			kv = s;
			continue;
		}
		if (kv != NULL) {
			char *eq = strchr(kv, '=');

			if (eq == NULL) {
				fprintf(stderr,
				    PROG ": -o %s: expected KEY=VALUE\n", kv);
				ret = 2;
				break;
			}
			*eq = '\0';
			if (cfg_set_mount(c, kv, eq + 1, err, sizeof(err)) !=
			    0) {
				fprintf(stderr, PROG ": %s\n", err);
				ret = 2;
				break;
			}
			free(kv);
			kv = NULL;
		}
		if (tok == NULL)
			break;
		if ((kv = strdup(tok)) == NULL) {
			ret = 2;
			break;
		}
	}
	free(kv);
	free(dup);
	return ret;
}

/* A worker, with a scratch arena (xf.h) as the mount's workers have. */
static void *
worker(void *arg)
{
	struct fill *fl = arg;
	struct xf_arena *a = xf_arena_new(64u << 20);
	char err[1024];
	size_t i;

	xf_arena_use(a); /* NULL (no memory): malloc */
	while ((i = atomic_fetch_add(&fl->next, 1)) < fl->n) {
		int r;

		/* The source of the sample fl->ahead further on, into the
		 * page cache while this one is read and decoded, as the
		 * mount's workers do (sched.c): every sample reads its
		 * source, for its key. */
		if (fl->remote) {
			/* Remote shards: every sample up to fl->ahead on, not
			 * asked for yet (the first ones too). */
			size_t k, end = fl->n - i > fl->ahead ? i + fl->ahead
							       : fl->n;

			while ((k = atomic_load(&fl->asked)) < end)
				if (atomic_compare_exchange_weak(
					&fl->asked, &k, k + 1) &&
				    sample_fill_ahead_worth(
					fl->job, fl->ids[k]))
					sample_prefetch_source(
					    fl->job, fl->ids[k]);
		} else if (fl->ahead < fl->n - i)
			sample_prefetch_source(fl->job, fl->ids[i + fl->ahead]);
		r = sample_fill(fl->job, fl->ids[i], err, sizeof(err));
		if (r == 1)
			atomic_fetch_add(&fl->present, 1);
		else if (r == 0)
			atomic_fetch_add(&fl->computed, 1);
		else if (r == -EIO) {
			atomic_fetch_add(&fl->bad, 1);
			log_warn("%s", err);
		} else if (r == -EHOSTDOWN) {
			atomic_fetch_add(&fl->unavailable, 1);
			log_warn("%s", err);
		} else {
			atomic_fetch_add(&fl->failed, 1);
			log_warn("%s", err);
		}
	}
	xf_arena_use(NULL);
	xf_arena_free(a);
	return NULL;
}

static uint64_t
done(struct fill *fl)
{
	return atomic_load(&fl->computed) + atomic_load(&fl->present) +
	       atomic_load(&fl->bad) + atomic_load(&fl->unavailable) +
	       atomic_load(&fl->failed);
}

/* The progress line: done/total, and images/s of the computed ones. */
static void
progress(struct fill *fl, uint64_t t0, bool tty, bool last)
{
	double s = (double)(ff_mono_ns() - t0) / 1e9;
	uint64_t d = done(fl), c = atomic_load(&fl->computed);

	fprintf(stderr,
	    "%s" PROG ": %" PRIu64 "/%zu (%.0f%%), %" PRIu64
	    " computed, %" PRIu64 " already there, %.1f img/s%s",
	    tty ? "\r" : "", d, fl->n,
	    fl->n ? 100.0 * (double)d / fl->n : 100.0, c,
	    atomic_load(&fl->present), s > 0 ? (double)c / s : 0.0,
	    tty ? (last ? "\n" : "\033[K") : "\n");
	fflush(stderr);
}

/* The command line. */
struct args {
	const char *config, *jobname;
	const char *opts[64]; /* the -o lists, in order */
	size_t nopts;
	uint64_t part, parts; /* --part K/N */
	uint64_t ea, eb;      /* --epochs A-B */
	bool have_epochs;
	bool batches;         /* --batches: a batch worker */
	uint64_t world;       /* --world W */
	uint64_t window;      /* --window N */
};

/* What main sets up and tears down, in reverse order. */
struct run {
	struct cfg *c;
	const struct cfg_job *cj;
	struct dataset *ds;
	struct cluster *cl;
	struct job job;
	bool job_ok;
};

/* Parse argv into a; exits through usage() on a bad one; 0 or 2 (said). */
static int
parse_args(int argc, char **argv, struct args *a)
{
	memset(a, 0, sizeof(*a));
	a->parts = 1;
	a->world = 1;
	a->window = FB_WINDOW_DEFAULT;
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];

		if (strcmp(s, "-o") == 0 && i + 1 < argc && a->nopts < 64)
			a->opts[a->nopts++] = argv[++i];
		else if (strncmp(s, "-o", 2) == 0 && s[2] && a->nopts < 64)
			a->opts[a->nopts++] = s + 2;
		else if (strcmp(s, "--part") == 0 && i + 1 < argc) {
			if (parse_pair(argv[++i], '/', &a->part, &a->parts) !=
				0 ||
			    a->parts == 0 || a->part >= a->parts) {
				fprintf(stderr,
				    PROG ": --part %s: expected K/N with "
					 "0 <= K < N\n",
				    argv[i]);
				return 2;
			}
		} else if (strcmp(s, "--epochs") == 0 && i + 1 < argc) {
			if (parse_pair(argv[++i], '-', &a->ea, &a->eb) != 0 ||
			    a->ea > a->eb) {
				fprintf(stderr,
				    PROG ": --epochs %s: expected A-B with "
					 "A <= B\n",
				    argv[i]);
				return 2;
			}
			a->have_epochs = true;
		} else if (strcmp(s, "--batches") == 0)
			a->batches = true;
		else if ((strcmp(s, "--world") == 0 ||
			     strcmp(s, "--window") == 0) &&
			 i + 1 < argc) {
			bool world = s[4] == 'r';
			uint64_t v, max = world ? 1024 : FB_WINDOW_MAX;
			char *end;

			errno = 0;
			v = strtoull(argv[++i], &end, 10);
			if (argv[i][0] < '0' || argv[i][0] > '9' ||
			    *end != '\0' || errno != 0 || v < 1 || v > max) {
				fprintf(stderr,
				    PROG ": %s %s: expected a count from 1 to "
					 "%" PRIu64 "\n",
				    s, argv[i], max);
				return 2;
			}
			*(world ? &a->world : &a->window) = v;
		} else if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0)
			usage();
		else if (s[0] == '-')
			usage();
		else if (a->config == NULL)
			a->config = s;
		else if (a->jobname == NULL)
			a->jobname = s;
		else
			usage();
	}
	if (a->config == NULL || a->jobname == NULL)
		usage();
	if (!a->batches && (a->world != 1 || a->window != FB_WINDOW_DEFAULT)) {
		fprintf(stderr, PROG ": --world and --window go with --batches\n");
		return 2;
	}
	if (a->world != 1 && !a->have_epochs) {
		fprintf(stderr,
		    PROG ": --world goes with --epochs (without, the readers' "
			 "rank views are followed)\n");
		return 2;
	}
	return 0;
}

/*
 * Load the config into rn->c (rn->c stays NULL when it does not load),
 * apply the -o lists and find the job (rn->cj), which must have a cluster
 * and the epochs asked for.  0 or 2 (said).
 */
static int
load_config(const struct args *a, struct run *rn)
{
	struct cfg *c;
	char err[2048];

	if (cfg_load(a->config, &rn->c, err, sizeof(err)) != 0) {
		fprintf(stderr, PROG ": %s\n", err);
		return 2;
	}
	c = rn->c;
	for (size_t i = 0; i < a->nopts; i++)
		if (apply_opts(c, a->opts[i]) != 0)
			return 2;
	for (size_t i = 0; i < c->njobs; i++)
		if (strcmp(c->jobs[i].name, a->jobname) == 0)
			rn->cj = &c->jobs[i];
	if (rn->cj == NULL) {
		fprintf(
		    stderr, PROG ": %s: no job '%s'\n", a->config, a->jobname);
		return 2;
	}
	if (c->mount.cluster == NULL) {
		fprintf(stderr,
		    PROG ": %s: no cluster: set cluster = HOST:PORT,... in "
			 "[mount] or -o cluster=...\n",
		    a->config);
		return 2;
	}
	if (a->have_epochs && a->eb >= rn->cj->epochs) {
		fprintf(stderr,
		    PROG ": --epochs %" PRIu64 "-%" PRIu64
			 ": job %s has epochs 0-%" PRIu64 "\n",
		    a->ea, a->eb, rn->cj->name, rn->cj->epochs - 1);
		return 2;
	}
	return 0;
}

/*
 * Open the job's dataset, the job (which must cache something) and the
 * cluster, into rn.  0 or 2 (said); what was opened is in rn either way.
 */
static int
open_job(struct run *rn)
{
	const struct cfg_dataset *d;
	struct cfg *c = rn->c;
	const struct cfg_job *cj = rn->cj;
	struct cluster_opts o = {0};
	char err[2048], why[5000];
	int idx, r;

	d = &c->datasets[cj->dataset_index];
	/* A handle per worker (thread_count's at most): none waits. */
	o.auth_file = c->mount.cluster_auth;
	o.secret_file = c->mount.cluster_secret;
	o.pool = cfg_threads(&c->mount);
	if (o.pool > CLUSTER_POOL_MAX)
		o.pool = CLUSTER_POOL_MAX;
	if (cluster_open(c->mount.cluster, &o, &rn->cl, err, sizeof(err)) !=
	    0) {
		fprintf(stderr, PROG ": cluster: %s\n", err);
		return 2;
	}
	/* The mount's shard index, through the same checks (dataset.h);
	 * remote shards' indexes from the tier too, where a mount or
	 * another fill put them (issue 38). */
	if ((idx = ds_index_open(c, why, sizeof(why))) < 0 && why[0] != '\0')
		fprintf(stderr, PROG ": %s\n", why);
	r = feed_open_dataset(
	    c, cj->dataset_index, idx, rn->cl, &rn->ds, err, sizeof(err));
	if (idx >= 0)
		close(idx);
	if (r != 0) {
		if (d->line > 0)
			fprintf(stderr, PROG ": %s:%d: dataset %s: %s\n",
			    c->path, d->line, d->name, err);
		else
			fprintf(stderr, PROG ": %s\n", err);
		return 2;
	}
	if (job_init(&rn->job, c, cj, rn->ds, err, sizeof(err)) != 0) {
		fprintf(stderr, PROG ": %s\n", err);
		return 2;
	}
	rn->job_ok = true;
	if (rn->job.prefix[0] == '\0') {
		fprintf(stderr,
		    PROG ": %s:%d: job %s: its pipeline has no cache op: "
			 "nothing to fill\n",
		    c->path, cj->pipeline_line, cj->name);
		return 2;
	}
	rn->job.cluster = rn->cl;
	return 0;
}

/*
 * The samples of part K of N into fl, in the order epoch A reads them
 * (fl->ids, malloc'd: the caller frees it).  0, or 1 (said) out of memory.
 */
static int
select_part(const struct args *a, struct run *rn, struct fill *fl)
{
	uint32_t *perm;
	size_t n = rn->ds->n;

	if ((perm = malloc((n ? n : 1) * sizeof(*perm))) == NULL) {
		fprintf(stderr, PROG ": out of memory\n");
		return 1;
	}
	plan_permutation(&rn->job.plan, (uint32_t)a->ea, perm);
	for (size_t i = 0; i < n; i++)
		if (perm[i] % a->parts == a->part)
			perm[fl->n++] = perm[i];
	fl->ids = perm; /* transferred */
	fl->job = &rn->job;
	fl->fail_on_bad = rn->cj->on_error == CFG_ON_ERROR_FAIL;
	return 0;
}

/* The worker threads: cfg_threads, at most one per sample. */
static unsigned
thread_count(const struct cfg *c, const struct fill *fl)
{
	unsigned nth;

	nth = cfg_threads(&c->mount);
	if (nth > fl->n && fl->n > 0)
		nth = (unsigned)fl->n;
	return nth;
}

/*
 * Run nth workers over fl, with th room for them, printing the progress
 * from t0 until they are done and joined.
 */
static void
fill_all(struct fill *fl, pthread_t *th, unsigned nth, uint64_t t0, bool tty)
{
	uint64_t last = t0;
	int r;

	for (unsigned i = 0; i < nth; i++)
		if ((r = pthread_create(&th[i], NULL, worker, fl)) != 0) {
			fprintf(
			    stderr, PROG ": pthread_create: %s\n", strerror(r));
			atomic_store(&fl->next, fl->n); /* stop the others */
			nth = i;
			break;
		}
	while (nth > 0 && done(fl) < fl->n) {
		struct timespec ts = {0, 50000000};

		nanosleep(&ts, NULL);
		if (ff_mono_ns() - last >= (tty ? TTY_NS : PLAIN_NS)) {
			progress(fl, t0, tty, false);
			last = ff_mono_ns();
		}
	}
	for (unsigned i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	if (tty)
		progress(fl, t0, true, true);
}

/* The summary line on stdout; the exit status: 0, or 1 if anything failed. */
static int
summary(const struct args *a, const struct cfg_job *cj, struct fill *fl,
    uint64_t t0)
{
	double secs = (double)(ff_mono_ns() - t0) / 1e9;

	printf(PROG ": part %" PRIu64 "/%" PRIu64 " of job %s: %zu samples, "
		    "%" PRIu64 " computed, %" PRIu64 " already there, %" PRIu64
		    " unreadable, %" PRIu64 " unavailable, %" PRIu64
		    " failed, %.1f s, %.1f img/s, "
		    "%" PRIu64 " sources prefetched\n",
	    a->part, a->parts, cj->name, fl->n, atomic_load(&fl->computed),
	    atomic_load(&fl->present), atomic_load(&fl->bad),
	    atomic_load(&fl->unavailable), atomic_load(&fl->failed), secs,
	    secs > 0 ? (double)atomic_load(&fl->computed) / secs : 0.0,
	    (uint64_t)atomic_load(&fl->job->st.prefetched));
	fflush(stdout);
	if (atomic_load(&fl->unavailable) > 0)
		fprintf(stderr,
		    PROG ": %" PRIu64 " samples were not read: their source "
			 "did not answer; run it again once it does (what is "
			 "in the cluster is skipped)\n",
		    atomic_load(&fl->unavailable));
	return done(fl) < fl->n || atomic_load(&fl->failed) > 0 ||
		       atomic_load(&fl->unavailable) > 0 ||
		       (fl->fail_on_bad && atomic_load(&fl->bad) > 0)
		   ? 1
		   : 0;
}

int
main(int argc, char **argv)
{
	struct args a;
	struct run rn = {0};
	struct fill fl = {0};
	pthread_t *th = NULL;
	unsigned nth;
	uint64_t t0;
	bool tty;
	int ret;

	if ((ret = parse_args(argc, argv, &a)) != 0)
		return ret;
	umask(077); /* what it makes (a shard index) is its user's alone */
	feed_keep_freed_memory(); /* before any thread (engine/feed.h) */
	log_init(PROG, false, false);
	signal(SIGPIPE, SIG_IGN);

	if ((ret = load_config(&a, &rn)) != 0)
		goto out;
	if (a.batches) {
		struct fb_opts fo = {a.part, a.parts, a.ea, a.eb,
		    a.have_epochs, (uint32_t)a.world, (uint32_t)a.window};

		ret = fill_batches(rn.c, rn.cj, &fo);
		goto out;
	}
	if ((ret = open_job(&rn)) != 0 ||
	    (ret = select_part(&a, &rn, &fl)) != 0)
		goto out;
	nth = thread_count(rn.c, &fl);
	fl.ahead = (size_t)SAMPLE_PREFETCH_PER_WORKER * nth;
	if (rn.ds->robjs != NULL) {
		/*
		 * Remote shards: as many ranges in flight as the fetcher's
		 * window holds of the mean member (a request takes tens of
		 * milliseconds, not a page-cache read).
		 */
		uint64_t sum = 0, w = (uint64_t)rn.c->mount.memory / 8;

		for (size_t i = 0; i < rn.ds->n; i++)
			sum += rn.ds->samples[i].size;
		if (w > (256u << 20))
			w = 256u << 20;
		ds_remote_window(rn.ds, w);
		if (sum > 0 && w / (sum / rn.ds->n + 1) > fl.ahead)
			fl.ahead = (size_t)(w / (sum / rn.ds->n + 1));
		if (fl.ahead > 4096)
			fl.ahead = 4096;
		fl.remote = true;
	}
	if ((th = calloc(nth, sizeof(*th))) == NULL) {
		fprintf(stderr, PROG ": out of memory\n");
		ret = 1;
		goto out;
	}
	tty = isatty(STDERR_FILENO);
	fprintf(stderr,
	    PROG ": job %s, prefix \"%s\": part %" PRIu64 "/%" PRIu64
		 " of %zu samples is %zu, for epochs %" PRIu64 "-%" PRIu64
		 ", %u threads\n",
	    rn.cj->name, rn.job.prefix, a.part, a.parts, rn.ds->n, fl.n, a.ea,
	    a.have_epochs ? a.eb : a.ea, nth);
	t0 = ff_mono_ns();
	fill_all(&fl, th, nth, t0, tty);
	ret = summary(&a, rn.cj, &fl, t0);
out:
	free(th);
	free(fl.ids);
	cluster_close(rn.cl);
	if (rn.job_ok)
		job_fini(&rn.job);
	ds_free(rn.ds);
	cfg_free(rn.c);
	return ret;
}
