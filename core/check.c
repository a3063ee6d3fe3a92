/*
 * check.c - `feedfs --check`: every dataset of a config opened as a mount
 * opens it, every sample's header read, a report, an exit status (see
 * check.h).  Layer: core/ (the model).  The parts are in check_int.h:
 * one sample (check_sample.c, which asks transforms/' header probes),
 * the tree (check_tree.c), the jobs' caches (check_job.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/check.h"
#include "core/check_int.h"
#include "core/config.h"
#include "core/dsopen.h"
#include "dataset/dataset.h"

int
check_run(const struct cfg *c, bool full, FILE *out, char *err, size_t errlen)
{
	struct run r = {.out = out, .full = full, .shard_fd = -1};
	struct dsres *res;
	size_t total = 0, problems;
	int ret = -ENOMEM;

	if ((res = calloc(c->ndatasets, sizeof(*res))) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	/* The bound each dataset is read against: its jobs' least. */
	for (size_t i = 0; i < c->njobs; i++) {
		const size_t *src;
		size_t n = check_job_sources(&c->jobs[i], &src);

		for (size_t k = 0; k < n; k++) {
			uint64_t m = c->jobs[i].max_pixels,
				 *d = &res[src[k]].max_pixels;

			if (m != 0 && (*d == 0 || m < *d))
				*d = m;
		}
	}
	fprintf(out, "feedfs --check%s %s\n", full ? "=full" : "", c->path);
	if (c->layout != NULL)
		fprintf(out, "%s\n", c->layout);
	for (size_t i = 0; i < c->ndatasets; i++) {
		const struct cfg_dataset *cd = &c->datasets[i];
		struct dsres *d = &res[i];
		int e;

		if ((e = ds_open_cfg(
			 cd, -1, NULL, NULL, &d->ds, err, errlen)) != 0) {
			char msg[4600];

			snprintf(msg, sizeof(msg), "%s", err);
			snprintf(err, errlen, "%s:%d: dataset %s: %s", c->path,
			    cd->line, cd->name, msg);
			ret = e;
			goto out;
		}
		if ((d->w = calloc(d->ds->n, sizeof(*d->w))) == NULL ||
		    (d->h = calloc(d->ds->n, sizeof(*d->h))) == NULL ||
		    (d->kind = calloc(d->ds->n, 1)) == NULL) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		fprintf(out, "dataset %s: %s: %zu samples, %zu classes\n",
		    cd->name, d->ds->root, d->ds->n, d->ds->nclasses);
		for (size_t id = 0, asked = 0; id < d->ds->n; id++) {
			/* Remote members: the next ones asked for ahead, as
			 * far as the fetcher's window has room. */
			while (d->ds->robjs != NULL && asked < d->ds->n &&
			       (asked <= id || d->ds->samples[asked].size <=
						   ds_remote_room(d->ds)))
				ds_sample_prefetch(d->ds, asked++);
			check_sample(&r, d, id);
		}
		check_skipped(&r, d->ds);
		check_classes(&r, d);
		total += d->ds->n;
	}
	if (r.shard_fd >= 0)
		close(r.shard_fd);
	r.shard_fd = -1;
	for (size_t i = 0; i < c->njobs; i++)
		check_job(&r, c, &c->jobs[i], res);
	problems = r.empty;
	for (int k = K_UNREADABLE; k < K_NKINDS; k++)
		problems += r.counts[k];
	if (problems == 0)
		fprintf(out, "no problems in %zu samples%s\n", total,
		    r.skipped ? " (some files skipped: see above)" : "");
	else
		fprintf(out,
		    "%zu problems in %zu samples: %zu unreadable, %zu "
		    "unsupported, %zu truncated, %zu corrupt, %zu empty "
		    "classes\n",
		    problems, total, r.counts[K_UNREADABLE],
		    r.counts[K_UNSUPPORTED], r.counts[K_TRUNCATED],
		    r.counts[K_CORRUPT], r.empty);
	ret = problems ? 1 : 0;
out:
	if (r.shard_fd >= 0)
		close(r.shard_fd);
	for (size_t i = 0; res != NULL && i < c->ndatasets; i++) {
		free(res[i].w);
		free(res[i].h);
		free(res[i].kind);
		if (res[i].ds != NULL)
			ds_free(res[i].ds);
	}
	free(res);
	return ret;
}
