/*
 * feedfs-fill - fill the cluster tier with a job's cached prefixes, on a
 * node with no FUSE and no GPU (see feedfs-fill(8)).
 *
 *	feedfs-fill [-o KEY=VALUE[,...]] CONFIG JOB [--part K/N]
 *	    [--epochs A-B]
 *
 * Part K of N is the samples whose id is K modulo N: stable across runs
 * while the dataset is unchanged, and every part spread over the whole
 * epoch order.  The samples are taken in the order epoch A reads them
 * (every epoch reads every sample, so that order covers epochs A..B); each
 * goes through sample_fill, which computes the key exactly as the mount
 * does and skips what the cluster already has, so a killed run restarts
 * where it stood.  Workers take the next sample of the list from one
 * atomic counter.
 *
 * Exit status: 0 when the part is in the cluster, 1 when some sample could
 * not be stored (or, with on_error = fail, not read), 2 on usage, config
 * and dataset errors ("feedfs-fill: FILE:LINE: message").
 */
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
#include "core/dataset.h"
#include "core/job.h"
#include "core/log.h"
#include "core/plan.h"
#include "core/sample.h"

#define PROG "feedfs-fill"
/* Progress: a terminal line this often, else a plain line this often. */
#define TTY_NS 250000000ull
#define PLAIN_NS 5000000000ull

struct fill {
	struct job *job;
	uint32_t *ids; /* the part, in epoch A's order */
	size_t n;
	atomic_size_t next;
	/* Outcomes. */
	atomic_uint_fast64_t computed, present, bad, failed;
	bool fail_on_bad; /* on_error = fail: an unreadable sample fails */
};

static void
usage(void)
{
	fprintf(stderr,
	    "usage: " PROG " [-o KEY=VALUE[,KEY=VALUE...]] CONFIG JOB "
	    "[--part K/N] [--epochs A-B]\n");
	exit(2);
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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

static void *
worker(void *arg)
{
	struct fill *fl = arg;
	char err[1024];
	size_t i;

	while ((i = atomic_fetch_add(&fl->next, 1)) < fl->n) {
		int r = sample_fill(fl->job, fl->ids[i], err, sizeof(err));
		if (r == 1)
			atomic_fetch_add(&fl->present, 1);
		else if (r == 0)
			atomic_fetch_add(&fl->computed, 1);
		else if (r == -EIO) {
			atomic_fetch_add(&fl->bad, 1);
			log_warn("%s", err);
		} else {
			atomic_fetch_add(&fl->failed, 1);
			log_warn("%s", err);
		}
	}
	return NULL;
}

static uint64_t
done(struct fill *fl)
{
	return atomic_load(&fl->computed) + atomic_load(&fl->present) +
	       atomic_load(&fl->bad) + atomic_load(&fl->failed);
}

/* The progress line: done/total, and images/s of the computed ones. */
static void
progress(struct fill *fl, uint64_t t0, bool tty, bool last)
{
	double s = (double)(now_ns() - t0) / 1e9;
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

int
main(int argc, char **argv)
{
	const char *config = NULL, *jobname = NULL;
	const char *opts[64];
	size_t nopts = 0;
	uint64_t part = 0, parts = 1, ea = 0, eb = 0;
	bool have_epochs = false;
	struct cfg *c = NULL;
	struct dataset *ds = NULL;
	struct cluster *cl = NULL;
	struct job job;
	bool job_ok = false;
	struct fill fl = {0};
	const struct cfg_job *cj = NULL;
	const struct cfg_dataset *d;
	pthread_t *th = NULL;
	unsigned nth = 0;
	uint32_t *perm = NULL;
	char err[2048];
	uint64_t t0, last;
	double secs;
	bool tty;
	int ret = 2, r;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "-o") == 0 && i + 1 < argc && nopts < 64)
			opts[nopts++] = argv[++i];
		else if (strncmp(a, "-o", 2) == 0 && a[2] && nopts < 64)
			opts[nopts++] = a + 2;
		else if (strcmp(a, "--part") == 0 && i + 1 < argc) {
			if (parse_pair(argv[++i], '/', &part, &parts) != 0 ||
			    parts == 0 || part >= parts) {
				fprintf(stderr,
				    PROG ": --part %s: expected K/N with "
					 "0 <= K < N\n",
				    argv[i]);
				return 2;
			}
		} else if (strcmp(a, "--epochs") == 0 && i + 1 < argc) {
			if (parse_pair(argv[++i], '-', &ea, &eb) != 0 ||
			    ea > eb) {
				fprintf(stderr,
				    PROG ": --epochs %s: expected A-B with "
					 "A <= B\n",
				    argv[i]);
				return 2;
			}
			have_epochs = true;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
			usage();
		else if (a[0] == '-')
			usage();
		else if (config == NULL)
			config = a;
		else if (jobname == NULL)
			jobname = a;
		else
			usage();
	}
	if (config == NULL || jobname == NULL)
		usage();
	log_init(PROG, false, false);
	signal(SIGPIPE, SIG_IGN);

	if (cfg_load(config, &c, err, sizeof(err)) != 0) {
		fprintf(stderr, PROG ": %s\n", err);
		return 2;
	}
	for (size_t i = 0; i < nopts; i++)
		if (apply_opts(c, opts[i]) != 0)
			goto out;
	for (size_t i = 0; i < c->njobs; i++)
		if (strcmp(c->jobs[i].name, jobname) == 0)
			cj = &c->jobs[i];
	if (cj == NULL) {
		fprintf(stderr, PROG ": %s: no job '%s'\n", config, jobname);
		goto out;
	}
	if (c->mount.cluster == NULL) {
		fprintf(stderr,
		    PROG ": %s: no cluster: set cluster = HOST:PORT,... in "
			 "[mount] or -o cluster=...\n",
		    config);
		goto out;
	}
	if (have_epochs && eb >= cj->epochs) {
		fprintf(stderr,
		    PROG ": --epochs %" PRIu64 "-%" PRIu64
			 ": job %s has epochs 0-%" PRIu64 "\n",
		    ea, eb, cj->name, cj->epochs - 1);
		goto out;
	}
	d = &c->datasets[cj->dataset_index];
	if ((r = ds_open(d->name, d->root, d->manifest, NULL, NULL, &ds, err,
		 sizeof(err))) != 0) {
		if (d->line > 0)
			fprintf(stderr, PROG ": %s:%d: dataset %s: %s\n",
			    c->path, d->line, d->name, err);
		else
			fprintf(stderr, PROG ": %s\n", err);
		goto out;
	}
	if (job_init(&job, c, cj, ds, err, sizeof(err)) != 0) {
		fprintf(stderr, PROG ": %s\n", err);
		goto out;
	}
	job_ok = true;
	if (job.prefix[0] == '\0') {
		fprintf(stderr,
		    PROG ": %s:%d: job %s: its pipeline has no cache op: "
			 "nothing to fill\n",
		    c->path, cj->pipeline_line, cj->name);
		goto out;
	}
	if ((r = cluster_open(c->mount.cluster, c->mount.cluster_auth, &cl, err,
		 sizeof(err))) != 0) {
		fprintf(stderr, PROG ": cluster: %s\n", err);
		goto out;
	}
	job.cluster = cl;

	/* Part K of N, in the order epoch A reads it. */
	if ((perm = malloc((ds->n ? ds->n : 1) * sizeof(*perm))) == NULL) {
		fprintf(stderr, PROG ": out of memory\n");
		ret = 1;
		goto out;
	}
	plan_permutation(&job.plan, (uint32_t)ea, perm);
	for (size_t i = 0; i < ds->n; i++)
		if (perm[i] % parts == part)
			perm[fl.n++] = perm[i];
	fl.ids = perm;
	fl.job = &job;
	fl.fail_on_bad = cj->on_error == CFG_ON_ERROR_FAIL;

	nth = c->mount.threads ? (unsigned)c->mount.threads
			       : (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	if (nth < 1)
		nth = 1;
	if (nth > fl.n && fl.n > 0)
		nth = (unsigned)fl.n;
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
	    cj->name, job.prefix, part, parts, ds->n, fl.n, ea,
	    have_epochs ? eb : ea, nth);
	t0 = last = now_ns();
	for (unsigned i = 0; i < nth; i++)
		if ((r = pthread_create(&th[i], NULL, worker, &fl)) != 0) {
			fprintf(
			    stderr, PROG ": pthread_create: %s\n", strerror(r));
			atomic_store(&fl.next, fl.n); /* stop the others */
			nth = i;
			break;
		}
	while (nth > 0 && done(&fl) < fl.n) {
		struct timespec ts = {0, 50000000};

		nanosleep(&ts, NULL);
		if (now_ns() - last >= (tty ? TTY_NS : PLAIN_NS)) {
			progress(&fl, t0, tty, false);
			last = now_ns();
		}
	}
	for (unsigned i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	if (tty)
		progress(&fl, t0, true, true);
	secs = (double)(now_ns() - t0) / 1e9;
	printf(PROG ": part %" PRIu64 "/%" PRIu64 " of job %s: %zu samples, "
		    "%" PRIu64 " computed, %" PRIu64 " already there, %" PRIu64
		    " unreadable, %" PRIu64 " failed, %.1f s, %.1f img/s\n",
	    part, parts, cj->name, fl.n, atomic_load(&fl.computed),
	    atomic_load(&fl.present), atomic_load(&fl.bad),
	    atomic_load(&fl.failed), secs,
	    secs > 0 ? (double)atomic_load(&fl.computed) / secs : 0.0);
	fflush(stdout);
	ret = done(&fl) < fl.n || atomic_load(&fl.failed) > 0 ||
		      (fl.fail_on_bad && atomic_load(&fl.bad) > 0)
		  ? 1
		  : 0;
out:
	free(th);
	free(perm);
	cluster_close(cl);
	if (job_ok)
		job_fini(&job);
	ds_free(ds);
	cfg_free(c);
	return ret;
}
