/*
 * job.c - the model (core/): a job's setup and teardown, the geometry of
 * its samples and the texts of its cache keys (see job.h).  A mixture's
 * sources are job_mix.c's, its batch files job_batch.c's, its counters
 * job_stats.c's.
 */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/format.h"
#include "core/job.h"
#include "core/job_int.h"
#include "transforms/rng.h"
/* asprintf, with *out NULL on failure. */
static int __attribute__((format(printf, 2, 3)))
strf(char **out, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(out, fmt, ap);
	va_end(ap);
	if (n < 0)
		*out = NULL;
	return n < 0 ? -ENOMEM : 0;
}

/* The text of keys of entries whose index text is text. */
static int
key_text(const struct cfg_job *cj, const char *text, char **out)
{
	return strf(out, "%s\nmax_pixels %" PRIu64 "\n%s", text,
	    cj->max_pixels, xf_decoder_id());
}

int
job_cache_texts(const struct cfg_job *cj, char **index, char **key)
{
	size_t plen = xf_prefix_text(cj->pl, NULL, 0);
	char sfx[64], *prefix;
	int r;

	*index = *key = NULL;
	if ((prefix = malloc(plen + 1)) == NULL)
		return -ENOMEM;
	xf_prefix_text(cj->pl, prefix, plen + 1);
	cache_fmt_suffix(cj->cache_format, sfx, sizeof(sfx));
	if ((r = strf(index, "%s%s", prefix, sfx)) == 0 &&
	    (r = key_text(cj, *index, key)) != 0) {
		free(*index);
		*index = NULL;
	}
	free(prefix);
	return r;
}

/* The texts of the job's cache keys (see job.h). */
static int
key_texts(struct job *j, const struct cfg_job *cj)
{
	return job_cache_texts(cj, &j->cache_text, &j->key_text);
}

/* g for pipeline pl of job cj. */
static void
geo_set(
    struct job_geo *g, const struct cfg_job *cj, const struct xf_pipeline *pl)
{
	g->pl = pl;
	g->sample_bytes = xf_sample_bytes(pl, cj->dtype);
	g->raw_bytes = xf_sample_bytes(pl, XF_UINT8);
	g->slot_bytes = cj->gpu ? g->raw_bytes : g->sample_bytes;
	g->shape[0] = cj->batch_size;
	if (cj->layout == XF_CHW) {
		g->shape[1] = 3;
		g->shape[2] = pl->out_h;
		g->shape[3] = pl->out_w;
	} else {
		g->shape[1] = pl->out_h;
		g->shape[2] = pl->out_w;
		g->shape[3] = 3;
	}
}

/* With a resolution schedule (that applies to this view: one of the
 * pipeline's own tail), a geometry per size it takes. */
static int
init_geos(struct job *j, const struct cfg_job *cj)
{
	if (cj->res_line == 0 || j->pl != cj->pl)
		return 0;
	for (uint32_t e = 0; e < cj->epochs; e++) {
		uint32_t s = cfg_job_res(cj, e);
		struct xf_pipeline *pl;
		struct job_geo *g;
		size_t i;
		int r;

		for (i = 0; i < j->ngeos && j->geos[i].pl->out_w != s; i++)
			;
		if (i < j->ngeos)
			continue;
		if ((g = realloc(j->geos, (j->ngeos + 1) * sizeof(*g))) == NULL)
			return -ENOMEM;
		j->geos = g;
		if ((r = xf_pipeline_sized(cj->pl, s, &pl)) != 0)
			return r;
		geo_set(&j->geos[j->ngeos++], cj, pl);
		if (j->geos[i].slot_bytes > j->slot_bytes)
			j->slot_bytes = j->geos[i].slot_bytes;
	}
	return 0;
}

const struct job_geo *
job_geo(const struct job *j, uint32_t epoch)
{
	uint32_t s;

	if (j->ngeos == 0)
		return &j->geo0;
	s = cfg_job_res(j->cfg, epoch);
	for (size_t i = 0; i < j->ngeos; i++)
		if (j->geos[i].pl->out_w == s)
			return &j->geos[i];
	return &j->geos[0]; /* an epoch past the job's: not served */
}

uint64_t
job_sample_key(const struct job *j, uint32_t epoch, uint32_t id)
{
	uint64_t k = rng_key(RNG_DOMAIN_SAMPLE, j->aug_seed, epoch, id);

	/* View 0's stream is the job's (a job without views keeps its
	 * bytes); view v's is apart from it and from every other view's. */
	return j->view == 0 ? k
			    : rng_mix(k ^ rng_mix(RNG_DOMAIN_VIEW + j->view));
}

int
job_init_common(struct job *j, const struct cfg *c, const struct cfg_job *cj,
    char *err, size_t errlen)
{
	size_t plen;
	int r;

	j->cfg = cj;
	j->pl =
	    cj->view_pl && cj->view_pl[j->view] ? cj->view_pl[j->view] : cj->pl;
	j->aug_seed = cfg_job_aug_seed(cj);
	r = j->view ? asprintf(&j->name, "%s.view%u", cj->name, j->view)
		    : ((j->name = strdup(cj->name)) != NULL ? 0 : -1);
	if (r < 0) {
		j->name = NULL;
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (cj->gpu && j->pl->batch_op != NULL) {
		snprintf(err, errlen,
		    "%s:%d: gpu = on: the device converts uint8 samples one "
		    "by one, and cannot apply batch op %s: use gpu = off",
		    c->path, cj->pipeline_line,
		    j->pl->batch_op->kind == XF_OP_MIXUP    ? "mixup"
		    : j->pl->batch_op->kind == XF_OP_CUTMIX ? "cutmix"
							    : "mixup_cutmix");
		return -EINVAL;
	}
	j->soft = j->pl->batch_op != NULL;
	j->multi = j->ds->multi;
	j->text = j->ds->text;
	j->nclasses = (uint32_t)j->ds->nclasses;
	if (j->multi && j->ds->nclasses > CFG_MAX_CLASSES) {
		snprintf(err, errlen,
		    "%s:%d: job %s: multi-hot labels over %zu classes (at "
		    "most %u)",
		    c->path, cj->line, cj->name, j->ds->nclasses,
		    CFG_MAX_CLASSES);
		return -EINVAL;
	}
	if (j->soft &&
	    (j->ds->nclasses == 0 || j->ds->nclasses > CFG_MAX_CLASSES)) {
		snprintf(err, errlen,
		    "%s:%d: a batch op makes soft labels over the dataset's "
		    "classes, and job %s's dataset has %zu",
		    c->path, cj->pipeline_line, cj->name, j->ds->nclasses);
		return -EINVAL;
	}
	for (size_t i = 0; cj->gpu && i < j->pl->nops; i++)
		if (j->pl->ops[i].kind == XF_OP_RANDOM_ERASING) {
			/* The device converts raw samples: nothing erases. */
			snprintf(err, errlen,
			    "%s:%d: gpu = on: random_erasing is not supported "
			    "(the device conversion would not erase); use gpu "
			    "= off with it",
			    c->path, cj->line);
			return -EINVAL;
		}
	plen = xf_prefix_text(j->pl, NULL, 0);
	if ((j->prefix = malloc(plen + 1)) == NULL ||
	    (j->logged = calloc((j->ds->n + 7) / 8, 1)) == NULL ||
	    (j->errlog = calloc(1, sizeof(*j->errlog))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&j->errlog->lock, NULL);
	xf_prefix_text(j->pl, j->prefix, plen + 1);
	if ((r = key_texts(j, cj)) != 0) {
		snprintf(err, errlen, "out of memory");
		return r;
	}
	j->plan.batch_size = (uint32_t)cj->batch_size;
	j->plan.seed = cfg_job_shuffle_seed(cj);
	j->plan.shuffle = cj->shuffle;
	j->plan.drop_last = cj->drop_last;
	if (plan_nbatches(&j->plan, 1) > 999999) {
		snprintf(err, errlen,
		    "%s:%d: %zu samples make %" PRIu64 " batches of %" PRIu64
		    " per epoch; batch names have six "
		    "digits: use a larger batch_size",
		    c->path, cj->line, j->plan.n, plan_nbatches(&j->plan, 1),
		    cj->batch_size);
		return -EINVAL;
	}
	geo_set(&j->geo0, cj, j->pl);
	j->sample_bytes = j->geo0.sample_bytes;
	j->raw_bytes = j->geo0.raw_bytes;
	j->slot_bytes = j->geo0.slot_bytes;
	memcpy(j->shape, j->geo0.shape, sizeof(j->shape));
	j->descr = cj->dtype == XF_UINT8     ? "|u1"
		   : cj->dtype == XF_FLOAT16 ? "<f2"
					     : "<f4";
	if ((r = init_geos(j, cj)) != 0) {
		snprintf(err, errlen, "out of memory");
		return r;
	}
	return 0;
}

int
job_init(struct job *j, const struct cfg *c, const struct cfg_job *cj,
    const struct dataset *ds, char *err, size_t errlen)
{
	return job_init_view(j, c, cj, ds, 0, err, errlen);
}

int
job_init_view(struct job *j, const struct cfg *c, const struct cfg_job *cj,
    const struct dataset *ds, uint32_t view, char *err, size_t errlen)
{
	int r;

	memset(j, 0, sizeof(*j));
	j->view = view;
	if (cj->nsources > 0) {
		snprintf(err, errlen,
		    "%s:%d: job %s is a mixture: this tool serves jobs over "
		    "one dataset",
		    c->path, cj->line, cj->name);
		return -EINVAL;
	}
	j->ds = ds;
	j->nsrc = 1;
	if ((j->src = calloc(1, sizeof(*j->src))) == NULL ||
	    (j->src_names = calloc(1, sizeof(*j->src_names))) == NULL) {
		snprintf(err, errlen, "out of memory");
		r = -ENOMEM;
		goto fail;
	}
	j->src[0].ds = ds;
	j->src_names[0] = c->datasets[cj->dataset_index].name;
	j->plan.n = ds->n;
	if ((r = job_init_common(j, c, cj, err, errlen)) != 0)
		goto fail;
	return 0;
fail:
	job_fini(j);
	return r;
}

int
job_init_prefix(struct job *j, const struct cfg_job *cj)
{
	size_t plen = xf_prefix_text(cj->pl, NULL, 0);
	int r;

	memset(j, 0, sizeof(*j));
	j->cfg = cj;
	j->pl = cj->pl;
	if ((j->prefix = malloc(plen + 1)) == NULL)
		return -ENOMEM;
	xf_prefix_text(j->pl, j->prefix, plen + 1);
	if ((r = key_texts(j, cj)) != 0)
		job_fini(j);
	return r;
}

void
job_fini(struct job *j)
{
	for (size_t i = 0; i < j->ngeos; i++)
		xf_pipeline_free((struct xf_pipeline *)j->geos[i].pl);
	free(j->geos);
	j->geos = NULL;
	j->ngeos = 0;
	free(j->name);
	j->name = NULL;
	free(j->prefix);
	free(j->cache_text);
	free(j->key_text);
	j->cache_text = j->key_text = NULL;
	free(j->logged);
	j->prefix = NULL;
	j->logged = NULL;
	if (j->errlog) {
		for (size_t i = 0; i < j->errlog->n; i++)
			free(j->errlog
				 ->v[(j->errlog->start + i) % JOB_ERRORS_MAX]
				 .why);
		pthread_mutex_destroy(&j->errlog->lock);
		free(j->errlog);
		j->errlog = NULL;
	}
	if (j->merged) {
		/* Its strings are the sources', its label lists mlabels. */
		free(j->merged->samples);
		free(j->merged->classes);
		free(j->merged);
		j->merged = NULL;
	}
	free(j->mlabels);
	j->mlabels = NULL;
	free(j->class_src);
	free(j->src);
	free(j->src_names);
	for (size_t i = 0; i < j->nsteps; i++)
		free(j->steps[i].w);
	free(j->steps);
	j->class_src = NULL;
	j->src = NULL;
	j->src_names = NULL;
	j->steps = NULL;
	j->nsteps = 0;
}
