/*
 * job_mix.c - the model (core/): a mixture job (mixture =, see job.h):
 * its sources merged into one dataset at setup, the weights in force per
 * epoch, and the epoch's order drawn by them (mix.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/job.h"
#include "core/job_int.h"
#include "core/mix.h"

static int
by_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * A multi-label sample's list x->labels of its source's classes, mapped
 * through map into the union's at *at (mlabels), sorted again.
 */
static void
map_list(struct ds_sample *x, const size_t *map, uint32_t **at)
{
	uint32_t *l = *at, n;

	if (x->labels == NULL)
		return;
	n = x->labels[0];
	l[0] = n;
	for (uint32_t i = 1; i <= n; i++)
		l[i] = (uint32_t)map[x->labels[i]];
	qsort(l + 1, n, sizeof(*l), by_u32);
	x->labels = l;
	*at = l + n + 1;
}

/* The union of the sources' classes into merged; class_src; labels. */
static int
merge_sources(struct job *j)
{
	struct dataset *m = j->merged;
	size_t maxc = 0, at = 0, nl = 0;
	uint32_t *lat;

	for (size_t s = 0; s < j->nsrc; s++) {
		const struct dataset *ds = j->src[s].ds;

		maxc += ds->nclasses;
		for (size_t i = 0; ds->multi && i < ds->n; i++)
			if (ds->samples[i].labels != NULL)
				nl += ds->samples[i].labels[0] + 1;
	}
	m->text = j->src[0].ds->text;
	m->multi = j->src[0].ds->multi;
	if ((j->mlabels = lat = malloc((nl ? nl : 1) * sizeof(uint32_t))) ==
	    NULL)
		return -ENOMEM;
	if ((m->classes = calloc(maxc ? maxc : 1, sizeof(*m->classes))) ==
		NULL ||
	    (j->class_src = calloc(maxc ? maxc : 1, sizeof(*j->class_src))) ==
		NULL ||
	    (m->samples = calloc(m->n, sizeof(*m->samples))) == NULL)
		return -ENOMEM;
	for (size_t s = 0; s < j->nsrc; s++) {
		const struct dataset *ds = j->src[s].ds;
		size_t *map =
		    calloc(ds->nclasses ? ds->nclasses : 1, sizeof(*map));

		if (map == NULL)
			return -ENOMEM;
		for (size_t c = 0; c < ds->nclasses; c++) {
			size_t u;

			for (u = 0; u < m->nclasses; u++)
				if (strcmp(m->classes[u], ds->classes[c]) == 0)
					break;
			if (u == m->nclasses)
				m->classes[m->nclasses++] = ds->classes[c];
			j->class_src[u] |= 1ULL << s;
			map[c] = u;
		}
		for (size_t i = 0; i < ds->n; i++) {
			struct ds_sample *x = &m->samples[at++];

			*x = ds->samples[i]; /* the strings stay the source's */
			x->label =
			    x->label >= 0 && (size_t)x->label < ds->nclasses
				? (int64_t)map[x->label]
				: x->label;
			map_list(x, map, &lat);
		}
		free(map);
	}
	return 0;
}

int
job_init_all(struct job *j, const struct cfg *c, const struct cfg_job *cj,
    const struct dataset *const *ds, char *err, size_t errlen)
{
	uint64_t total = 0;
	int r = -ENOMEM;

	if (cj->nsources == 0)
		return job_init(j, c, cj, ds[cj->dataset_index], err, errlen);
	memset(j, 0, sizeof(*j));
	j->nsrc = cj->nsources;
	if ((j->src = calloc(j->nsrc, sizeof(*j->src))) == NULL ||
	    (j->src_names = calloc(j->nsrc, sizeof(*j->src_names))) == NULL ||
	    (j->merged = calloc(1, sizeof(*j->merged))) == NULL ||
	    (j->steps = calloc(cj->nsteps, sizeof(*j->steps))) == NULL)
		goto nomem;
	for (size_t s = 0; s < j->nsrc; s++) {
		const struct dataset *d = ds[cj->source_index[s]];

		j->src[s].ds = d;
		j->src[s].start = (uint32_t)total;
		j->src_names[s] = c->datasets[cj->source_index[s]].name;
		total += d->n;
		if (total > UINT32_MAX) {
			snprintf(err, errlen,
			    "%s:%d: mixture: more than 4294967295 samples in "
			    "all",
			    c->path, cj->mixture_line);
			r = -EINVAL;
			goto fail;
		}
	}
	for (size_t i = 0; i < cj->nsteps; i++) {
		j->steps[i].epoch = cj->steps[i].epoch;
		if ((j->steps[i].w = malloc(j->nsrc * sizeof(uint64_t))) ==
		    NULL)
			goto nomem;
		memcpy(
		    j->steps[i].w, cj->steps[i].w, j->nsrc * sizeof(uint64_t));
		j->nsteps++;
	}
	/* Multi-hot rows and one label a sample do not mix. */
	for (size_t s = 1; s < j->nsrc; s++)
		if (j->src[s].ds->multi != j->src[0].ds->multi) {
			snprintf(err, errlen,
			    "%s:%d: mixture: dataset %s has lists of labels "
			    "(multi-hot) and %s one label a sample: every "
			    "source or none",
			    c->path, cj->mixture_line,
			    j->src[0].ds->multi ? j->src_names[0]
						: j->src_names[s],
			    j->src[0].ds->multi ? j->src_names[s]
						: j->src_names[0]);
			r = -EINVAL;
			goto fail;
		}
	j->merged->name = cj->name;
	j->merged->root = j->src[0].ds->root;
	j->merged->n = (size_t)total;
	if (merge_sources(j) != 0)
		goto nomem;
	j->ds = j->merged;
	j->plan.n =
	    cj->epoch_samples ? (size_t)cj->epoch_samples : (size_t)total;
	if ((r = job_init_common(j, c, cj, err, errlen)) != 0)
		goto fail;
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
	r = -ENOMEM;
fail:
	job_fini(j);
	return r;
}

bool
job_is_mixture(const struct job *j)
{
	return j->merged != NULL;
}

struct job_source *
job_source_of(const struct job *j, uint32_t id, uint32_t *local)
{
	size_t lo = 0, hi = j->nsrc;

	/* The last source starting at or before id. */
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;

		if (j->src[mid].start <= id)
			lo = mid;
		else
			hi = mid;
	}
	*local = id - j->src[lo].start;
	return &j->src[lo];
}

const uint64_t *
job_weights(const struct job *j, uint32_t epoch)
{
	size_t i = 0;

	while (i + 1 < j->nsteps && j->steps[i + 1].epoch <= epoch)
		i++;
	return j->steps[i].w;
}

int
job_set_weights(struct job *j, uint32_t from, const uint64_t *w)
{
	struct job_step *st;
	uint64_t *copy;
	size_t i;

	if ((copy = malloc(j->nsrc * sizeof(*copy))) == NULL)
		return -ENOMEM;
	memcpy(copy, w, j->nsrc * sizeof(*copy));
	for (i = 0; i < j->nsteps && j->steps[i].epoch < from; i++)
		;
	if (i < j->nsteps && j->steps[i].epoch == from) {
		free(j->steps[i].w);
		j->steps[i].w = copy;
		return 0;
	}
	if ((st = realloc(j->steps, (j->nsteps + 1) * sizeof(*st))) == NULL) {
		free(copy);
		return -ENOMEM;
	}
	j->steps = st;
	memmove(st + i + 1, st + i, (j->nsteps - i) * sizeof(*st));
	st[i].epoch = from;
	st[i].w = copy;
	j->nsteps++;
	return 0;
}

int
job_order(const struct job *j, uint32_t epoch, uint32_t *ids)
{
	size_t size[MIX_MAX_SOURCES];

	if (!job_is_mixture(j)) {
		plan_permutation(&j->plan, epoch, ids);
		return 0;
	}
	for (size_t s = 0; s < j->nsrc; s++)
		size[s] = j->src[s].ds->n;
	return mix_order(
	    &j->plan, epoch, size, job_weights(j, epoch), j->nsrc, ids);
}
