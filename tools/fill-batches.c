/*
 * fill-batches.c - a program's part (tools/, over the model in core/,
 * the datasets and cache/'s cluster tier): feedfs-fill --batches, a
 * batch worker on a node with no FUSE and no GPU (see feedfs-fill(8);
 * issue 37).
 *
 * It makes a job's finished batches and stores them in the cluster tier
 * under their keys (core/batch_tier.h): each (view, epoch, rank view,
 * batch) as the mount's workers make it before the output conversion
 * (sample_make_slot with raw: the same samples, substitutes and ids),
 * with the ids of its samples.  The mount converts, erases and mixes
 * them (engine/tier.c).
 *
 * What it makes: with --epochs A-B, every batch of those epochs, for each
 * rank of --world W (1), in reading order (epoch, batch, rank, view),
 * part K of N of them (--part: the batches whose place in that order is
 * K modulo N); without, the batches within --window N of each reader's
 * position (the notes mounts publish), nearest first, until it is
 * killed.  Before making one it asks the tier: a batch there is skipped;
 * one that someone holds (a claim) is skipped, and with --epochs asked
 * again later while a worker held it; otherwise it claims it (add,
 * CLAIM_TTL seconds, renewed every second while it is made, dropped when
 * it is stored or fails), so that no batch is made twice and one whose
 * worker died is made by someone else within seconds.
 *
 * Threads: cfg_threads workers make the slots of the DEPTH batches in
 * flight (the oldest first), each with a scratch arena; the main thread
 * chooses, claims, renews, stores and reports.  Prefixes come from the
 * tier, or are made (and stored there), as feedfs-fill's do.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/cluster.h"
#include "cache/cluster_blob.h"
#include "cache/codec.h"
#include "core/batch_tier.h"
#include "core/dsopen.h"
#include "core/job.h"
#include "core/plan.h"
#include "core/sample.h"
#include "tools/fill-batches_int.h"
#include "util/clock.h"
#include "util/log.h"

static volatile sig_atomic_t stopping;

static void
on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

/* ---- setup ----------------------------------------------------------- */

/* The datasets the job reads (a mixture's sources), opened into fb->ds. */
static int
open_datasets(struct fb *fb)
{
	const struct cfg_job *cj = fb->cj;
	struct cfg *c = fb->c;
	char err[2048], why[5000];
	int idx, r = 0;

	if ((fb->ds = calloc(c->ndatasets, sizeof(*fb->ds))) == NULL)
		return -ENOMEM;
	if ((idx = ds_index_open(c, why, sizeof(why))) < 0 && why[0] != '\0')
		fprintf(stderr, PROG ": %s\n", why);
	for (size_t i = 0; i < c->ndatasets && r == 0; i++) {
		const struct cfg_dataset *d = &c->datasets[i];
		bool used = cj->nsources == 0 && i == cj->dataset_index;

		for (size_t s = 0; s < cj->nsources; s++)
			used |= cj->source_index[s] == i;
		if (!used)
			continue;
		if ((r = ds_open_cfg(d, idx, NULL, NULL, &fb->ds[i], err,
			 sizeof(err))) != 0) {
			if (d->line > 0)
				fprintf(stderr,
				    PROG ": %s:%d: dataset %s: %s\n", c->path,
				    d->line, d->name, err);
			else
				fprintf(stderr, PROG ": %s\n", err);
		}
	}
	if (idx >= 0)
		close(idx);
	return r;
}

/* The job and its views, their prints and the cluster: 0 or 2 (said). */
static int
open_jobs(struct fb *fb)
{
	const struct cfg_job *cj = fb->cj;
	struct cluster_opts co = {0};
	char err[2048];
	int r;

	fb->nviews = (uint32_t)cj->views;
	fb->jobs = calloc(fb->nviews, sizeof(*fb->jobs));
	fb->job_ok = calloc(fb->nviews, sizeof(*fb->job_ok));
	fb->print = calloc(fb->nviews, sizeof(*fb->print));
	if (fb->jobs == NULL || fb->job_ok == NULL || fb->print == NULL) {
		fprintf(stderr, PROG ": out of memory\n");
		return 2;
	}
	for (uint32_t v = 0; v < fb->nviews; v++) {
		r = v == 0
			? job_init_all(&fb->jobs[0], fb->c, cj,
			      (const struct dataset *const *)fb->ds, err,
			      sizeof(err))
			: job_init_view(&fb->jobs[v], fb->c, cj,
			      fb->ds[cj->dataset_index], v, err, sizeof(err));
		if (r != 0) {
			fprintf(stderr, PROG ": %s\n", err);
			return 2;
		}
		fb->job_ok[v] = true;
		if (tier_job_print(&fb->jobs[v], fb->print[v]) != 0) {
			fprintf(stderr, PROG ": out of memory\n");
			return 2;
		}
	}
	co.auth_file = fb->c->mount.cluster_auth;
	co.secret_file = fb->c->mount.cluster_secret;
	co.pool = cfg_threads(&fb->c->mount) + 2;
	if (co.pool > CLUSTER_POOL_MAX)
		co.pool = CLUSTER_POOL_MAX;
	if (cluster_open(
		fb->c->mount.cluster, &co, &fb->cl, err, sizeof(err)) != 0) {
		fprintf(stderr, PROG ": cluster: %s\n", err);
		return 2;
	}
	for (uint32_t v = 0; v < fb->nviews; v++)
		fb->jobs[v].cluster = fb->cl;
	return 0;
}

/* ---- the workers --------------------------------------------------------- */

static void *
worker(void *arg)
{
	struct fb *fb = arg;
	struct xf_arena *a = xf_arena_new(64u << 20);

	xf_arena_use(a); /* NULL (no memory): malloc */
	pthread_mutex_lock(&fb->lock);
	while (!fb->stop) {
		struct item *it = fb->head;
		char msg[512];
		uint32_t s, id = 0;
		int r;

		while (it != NULL && it->next >= it->len)
			it = it->next_item;
		if (it == NULL) {
			pthread_cond_wait(&fb->work, &fb->lock);
			continue;
		}
		s = it->next++;
		if (it->failed) { /* hand out no more */
			it->done++;
			if (it->done == it->len)
				pthread_cond_broadcast(&fb->done);
			continue;
		}
		pthread_mutex_unlock(&fb->lock);
		r = sample_make_slot(&fb->jobs[it->view], NULL, it->epoch,
		    it->order, it->pos[s], true,
		    it->raw + (size_t)s * (it->rawlen / it->len), &id, true,
		    msg, sizeof(msg));
		pthread_mutex_lock(&fb->lock);
		if (r != 0 && !it->failed) {
			it->failed = true;
			snprintf(it->msg, sizeof(it->msg), "%s", msg);
		} else if (r == 0)
			codec_put_le64(it->ids + (size_t)s * 8, id);
		if (++it->done == it->len)
			pthread_cond_broadcast(&fb->done);
	}
	pthread_mutex_unlock(&fb->lock);
	xf_arena_use(NULL);
	xf_arena_free(a);
	return NULL;
}

/* ---- storing ----------------------------------------------------------------
 */

/* Store it (made whole) or say why not; drop its claim; free it. */
static void
finish(struct fb *fb, struct item *it)
{
	struct iovec iov[2] = {
	    {it->raw, it->rawlen}, {it->ids, 8ull * it->len}};
	struct cand c = {it->view, it->epoch, it->rank, it->world, it->batch};
	int r;

	if (it->failed) {
		log_warn("job %s: epoch %u batch %" PRIu64 " (rank %u of %u): "
			 "%s; not stored (the mount makes it itself)",
		    fb->cj->name, it->epoch, it->batch, it->rank, it->world,
		    it->msg);
		fb->failed++;
		fb_seen_note(
		    fb, &c, S_ERROR, ff_mono_ns() + 30 * HELD_AGAIN_NS);
	} else if ((r = cluster_blob_put(fb->cl, it->key, iov, 2, BLOB_TTL)) !=
		   0)
		fb_tier_failed(fb, &c, r);
	else {
		fb->made++;
		fb->images += it->len;
		fb_seen_note(fb, &c, S_THERE, UINT64_MAX);
	}
	cluster_claim_drop(fb->cl, it->key);
	fb_order_put(fb, it->order);
	free(it->pos);
	free(it->raw);
	free(it->ids);
	free(it);
}

/* Renew the claims of the items in flight that are due. */
static void
renew(struct fb *fb)
{
	uint64_t now = ff_mono_ns();

	for (struct item *it = fb->head; it; it = it->next_item)
		if (now - it->renewed >= RENEW_NS) {
			cluster_claim_renew(
			    fb->cl, it->key, fb->who, CLAIM_TTL);
			it->renewed = now;
		}
}

/* The oldest item, once every slot of it is done: out of the queue. */
static struct item *
take_done(struct fb *fb)
{
	struct item *it;

	pthread_mutex_lock(&fb->lock);
	it = fb->head;
	if (it != NULL && it->done == it->len) {
		fb->head = it->next_item;
		fb->nitems--;
	} else
		it = NULL;
	pthread_mutex_unlock(&fb->lock);
	return it;
}

/* ---- the run
 * ----------------------------------------------------------------- */

static void
progress(struct fb *fb, uint64_t t0, bool tty, bool last)
{
	double s = (double)(ff_mono_ns() - t0) / 1e9;

	fprintf(stderr,
	    "%s" PROG ": %" PRIu64 " batches made (%.1f img/s), %" PRIu64
	    " already there, %" PRIu64 " held by others, %" PRIu64 " failed%s",
	    tty ? "\r" : "", fb->made, s > 0 ? (double)fb->images / s : 0.0,
	    fb->there, fb->heldn, fb->failed + fb->put_errors,
	    tty ? (last ? "\n" : "\033[K") : "\n");
	fflush(stderr);
}

/* Wait a little for the oldest item (or a signal, or the next poll). */
static void
wait_some(struct fb *fb)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 50000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&fb->lock);
	if (fb->head == NULL || fb->head->done < fb->head->len)
		pthread_cond_timedwait(&fb->done, &fb->lock, &ts);
	pthread_mutex_unlock(&fb->lock);
}

/* The main loop; 0, or -ENOMEM. */
static int
run(struct fb *fb, uint64_t t0, bool tty)
{
	uint64_t last = t0;
	struct item *it;
	int r = 0;

	while (!stopping) {
		renew(fb);
		if ((it = take_done(fb)) != NULL) {
			finish(fb, it);
			continue;
		}
		if (fb->nitems < DEPTH) {
			r = fb->o->have_epochs ? fb_next_epochs(fb)
					       : fb_next_follow(fb);
			if (r < 0)
				break;
			if (r == 1)
				continue;
		}
		if (fb->o->have_epochs && fb->nitems == 0 && fb_epochs_done(fb))
			break;
		wait_some(fb);
		if (ff_mono_ns() - last >= (tty ? TTY_NS : PLAIN_NS)) {
			progress(fb, t0, tty, false);
			last = ff_mono_ns();
		}
	}
	return r;
}

/* Stop the workers; give back what is in flight (its claims dropped). */
static void
stop_all(struct fb *fb, pthread_t *th, unsigned nth)
{
	struct item *it;

	pthread_mutex_lock(&fb->lock);
	fb->stop = true;
	pthread_cond_broadcast(&fb->work);
	pthread_mutex_unlock(&fb->lock);
	for (unsigned i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	while ((it = fb->head) != NULL) {
		fb->head = it->next_item;
		cluster_claim_drop(fb->cl, it->key);
		fb_order_put(fb, it->order);
		free(it->pos);
		free(it->raw);
		free(it->ids);
		free(it);
	}
	fb->nitems = 0;
}

static void
teardown(struct fb *fb)
{
	for (size_t i = 0; i < ORDERS; i++)
		free(fb->ord[i].ids);
	for (uint32_t v = 0; fb->job_ok && v < fb->nviews; v++)
		if (fb->job_ok[v])
			job_fini(&fb->jobs[v]);
	cluster_close(fb->cl);
	for (size_t i = 0; fb->ds && i < fb->c->ndatasets; i++)
		ds_free(fb->ds[i]);
	free(fb->ds);
	free(fb->jobs);
	free(fb->job_ok);
	free(fb->print);
	free(fb->seen);
	free(fb->held);
	pthread_cond_destroy(&fb->work);
	pthread_cond_destroy(&fb->done);
	pthread_mutex_destroy(&fb->lock);
}

int
fill_batches(struct cfg *c, const struct cfg_job *cj, const struct fb_opts *o)
{
	struct fb fb = {.c = c, .cj = cj, .o = o};
	struct sigaction sa;
	pthread_t *th = NULL;
	unsigned nth = 0;
	char host[64] = "";
	uint64_t t0;
	bool tty = isatty(STDERR_FILENO);
	int ret = 2, r;

	pthread_mutex_init(&fb.lock, NULL);
	pthread_cond_init(&fb.work, NULL);
	pthread_cond_init(&fb.done, NULL);
	if (cj->order != CFG_ORDER_STRICT) {
		fprintf(stderr,
		    PROG ": %s:%d: job %s: order = relaxed makes other bytes "
			 "on every host: its batches are made by the mount "
			 "alone\n",
		    c->path, cj->line, cj->name);
		goto out;
	}
	if (cj->gpu) {
		fprintf(stderr,
		    PROG ": %s:%d: job %s: gpu = on: its batches are made by "
			 "the mount alone\n",
		    c->path, cj->line, cj->name);
		goto out;
	}
	if (open_datasets(&fb) != 0 || (ret = open_jobs(&fb)) != 0) {
		ret = 2;
		goto out;
	}
	ret = 1;
	if ((fb.seen = calloc(SEEN, sizeof(*fb.seen))) == NULL)
		goto nomem;
	gethostname(host, sizeof(host) - 1);
	snprintf(
	    fb.who, sizeof(fb.who), "worker %s pid %ld", host, (long)getpid());
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	nth = cfg_threads(&c->mount);
	if ((th = calloc(nth, sizeof(*th))) == NULL)
		goto nomem;
	for (unsigned i = 0; i < nth; i++)
		if ((r = pthread_create(&th[i], NULL, worker, &fb)) != 0) {
			fprintf(
			    stderr, PROG ": pthread_create: %s\n", strerror(r));
			nth = i;
			break;
		}
	if (o->have_epochs)
		fprintf(stderr,
		    PROG ": job %s: batches of epochs %" PRIu64 "-%" PRIu64
			 " (rank views of %u, part %" PRIu64 "/%" PRIu64
			 "), %u views, %u threads\n",
		    cj->name, o->ea, o->eb, o->world, o->part, o->parts,
		    fb.nviews, nth);
	else
		fprintf(stderr,
		    PROG ": job %s: batches within %u of the readers (part "
			 "%" PRIu64 "/%" PRIu64 "), %u views, %u threads, "
			 "until killed\n",
		    cj->name, o->window, o->part, o->parts, fb.nviews, nth);
	t0 = ff_mono_ns();
	r = run(&fb, t0, tty);
	stop_all(&fb, th, nth);
	if (tty)
		progress(&fb, t0, true, true);
	double secs = (double)(ff_mono_ns() - t0) / 1e9;
	printf(PROG ": job %s: batches: %" PRIu64 " made, %" PRIu64
		    " already there, %" PRIu64 " held by others, %" PRIu64
		    " failed, %" PRIu64 " not stored, %.1f s, %.1f img/s\n",
	    cj->name, fb.made, fb.there, fb.heldn, fb.failed, fb.put_errors,
	    secs, secs > 0 ? (double)fb.images / secs : 0.0);
	fflush(stdout);
	ret = r < 0 || fb.failed > 0 || fb.put_errors > 0 ? 1 : 0;
	goto out;
nomem:
	fprintf(stderr, PROG ": out of memory\n");
out:
	free(th);
	teardown(&fb);
	return ret;
}
