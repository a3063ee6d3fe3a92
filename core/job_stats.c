/*
 * job_stats.c - the model (core/): a job's counters: the per-second rate
 * of finished samples and the log of failed ones (JOB/errors.tsv; see
 * job.h).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/job.h"
#include "util/clock.h"
#include "util/sbuf.h"

static uint64_t
now_sec(void)
{
	return ff_mono_ns() / 1000000000u;
}

void
job_rate_add(struct job_stats *st)
{
	uint64_t sec = now_sec(), old;
	unsigned i = (unsigned)(sec % JOB_RATE_SECS);

	/*
	 * The first sample of a new second claims the bucket and restarts
	 * its count; a count that races with the claim may be lost, which
	 * a rate gauge can afford.
	 */
	old = atomic_load(&st->rate_sec[i]);
	if (old != sec &&
	    atomic_compare_exchange_strong(&st->rate_sec[i], &old, sec))
		atomic_store(&st->rate_n[i], 0);
	atomic_fetch_add(&st->rate_n[i], 1);
}

double
job_rate(struct job_stats *st, unsigned secs)
{
	uint64_t sec = now_sec(), n = 0;

	for (unsigned i = 0; i < JOB_RATE_SECS; i++) {
		uint64_t s = atomic_load(&st->rate_sec[i]);

		if (s < sec && s + secs >= sec)
			n += atomic_load(&st->rate_n[i]);
	}
	return (double)n / secs;
}

void
job_note_error(struct job *j, uint32_t id, const char *why)
{
	struct job_errlog *l = j->errlog;
	struct job_error *e;
	char *s;

	if (l == NULL)
		return;
	if ((s = strndup(why, 511)) == NULL)
		return;
	pthread_mutex_lock(&l->lock);
	/*
	 * Listed already: its old entry goes, and it is listed again at the
	 * end with this reason (a source that stopped answering, then a
	 * corrupt member: the reader is told the latest).
	 */
	for (size_t i = 0; i < l->n; i++) {
		struct job_error *old = &l->v[(l->start + i) % JOB_ERRORS_MAX];

		if (old->id != id)
			continue;
		free(old->why);
		for (size_t k = i; k + 1 < l->n; k++)
			l->v[(l->start + k) % JOB_ERRORS_MAX] =
			    l->v[(l->start + k + 1) % JOB_ERRORS_MAX];
		l->n--;
		l->total--; /* counted again below */
		break;
	}
	if (l->n == JOB_ERRORS_MAX) {
		free(l->v[l->start].why);
		l->start = (l->start + 1) % JOB_ERRORS_MAX;
		l->n--;
	}
	e = &l->v[(l->start + l->n) % JOB_ERRORS_MAX];
	e->id = id;
	e->why = s;
	l->n++;
	l->total++;
	pthread_mutex_unlock(&l->lock);
}

char *
job_errors_tsv(struct job *j, size_t *len)
{
	struct job_errlog *l = j->errlog;
	struct sbuf sb = {0};

	sb_printf(&sb, "# id\tpath\treason\n");
	if (l == NULL)
		return sb_done(&sb, len);
	pthread_mutex_lock(&l->lock);
	if (l->total > l->n)
		sb_printf(&sb, "# %" PRIu64 " older failures not listed\n",
		    l->total - l->n);
	for (size_t i = 0; i < l->n; i++) {
		const struct job_error *e =
		    &l->v[(l->start + i) % JOB_ERRORS_MAX];
		const char *path = j->ds->samples[e->id].path, *why = e->why;
		const char *at = strstr(why, path);

		/* The reason without the "ROOT/PATH: " it starts with. */
		if (at != NULL && strncmp(at + strlen(path), ": ", 2) == 0)
			why = at + strlen(path) + 2;
		sb_printf(&sb, "%" PRIu32 "\t", e->id);
		sb_tsv_field(&sb, path);
		sb_printf(&sb, "\t");
		sb_tsv_field(&sb, why);
		sb_printf(&sb, "\n");
	}
	pthread_mutex_unlock(&l->lock);
	return sb_done(&sb, len);
}
