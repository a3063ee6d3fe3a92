/*
 * config_job.c - the model (core/): the checks of a [job NAME] section
 * once the whole file is read (see config.h): its dataset or mixture
 * (sources, weights, mixture_schedule), its pipeline parsed once, its
 * resolution schedule and its views.  Errors are "FILE:LINE: message"
 * (cfg_perr).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config_int.h"
#include "core/mix.h"

/* Add the step (epoch, w) to j's schedule, taking w; keeps it sorted. */
static int
add_step(struct cfg_job *j, uint32_t epoch, uint64_t *w)
{
	struct cfg_mix_step *st;
	size_t i;

	for (i = 0; i < j->nsteps && j->steps[i].epoch < epoch; i++)
		;
	if (i < j->nsteps && j->steps[i].epoch == epoch) {
		free(j->steps[i].w);
		j->steps[i].w = w; /* transferred */
		return 0;
	}
	if ((st = realloc(j->steps, (j->nsteps + 1) * sizeof(*st))) == NULL) {
		free(w);
		return -ENOMEM;
	}
	j->steps = st;
	memmove(st + i + 1, st + i, (j->nsteps - i) * sizeof(*st));
	st[i].epoch = epoch;
	st[i].w = w; /* transferred */
	j->nsteps++;
	return 0;
}

/*
 * A mixture job's sources (datasets of this file), its weights and its
 * schedule: "EPOCH:NAME:W[,NAME:W...]" steps separated by blanks, epochs
 * increasing and below the job's epochs.
 */
static int
check_mixture(struct parser *p, struct cfg_job *j)
{
	struct cfg *c = p->c;
	const char *names[MIX_MAX_SOURCES];
	struct mix_pair *pv = NULL;
	char msg[512], *sched = NULL, *save = NULL, *tok;
	uint64_t *w = NULL;
	long last = -1;
	size_t np, k;
	int r;

	if (j->dataset)
		return cfg_perr(p, j->mixture_line,
		    "[job %s] has both dataset (line %d) and mixture: "
		    "a job takes one or the other",
		    j->name, j->dataset_line);
	if ((r = mix_split(j->mixture, &pv, &np, msg, sizeof(msg))) != 0) {
		if (r == -EINVAL)
			r = cfg_perr(p, j->mixture_line, "mixture: %s", msg);
		return r;
	}
	if ((j->source_index = calloc(np, sizeof(*j->source_index))) == NULL ||
	    (w = calloc(np, sizeof(*w))) == NULL) {
		r = -ENOMEM;
		goto out;
	}
	j->nsources = np;
	for (size_t i = 0; i < np; i++) {
		for (k = 0; k < c->ndatasets; k++)
			if (strcmp(c->datasets[k].name, pv[i].name) == 0)
				break;
		if (k == c->ndatasets) {
			r = cfg_perr(p, j->mixture_line,
			    "mixture: unknown dataset '%s'", pv[i].name);
			goto out;
		}
		j->source_index[i] = k;
		names[i] = c->datasets[k].name;
		w[i] = pv[i].w;
	}
	/* Captions: every source has them, or none (a batch's text file
	 * would lack some samples' lines). */
	for (size_t i = 1; i < np; i++) {
		const struct cfg_dataset *a = &c->datasets[j->source_index[0]],
					 *b = &c->datasets[j->source_index[i]];

		if (cfg_dataset_text(a) != cfg_dataset_text(b)) {
			r = cfg_perr(p, j->mixture_line,
			    "mixture: dataset %s has captions (text =) and %s "
			    "has none: every source or none",
			    cfg_dataset_text(a) ? a->name : b->name,
			    cfg_dataset_text(a) ? b->name : a->name);
			goto out;
		}
	}
	/* The sum is checked by mix_weights over the sources' names. */
	if (mix_weights(j->mixture, names, np, w, msg, sizeof(msg)) != 0) {
		r = cfg_perr(p, j->mixture_line, "mixture: %s", msg);
		goto out;
	}
	j->dataset_index = j->source_index[0];
	if ((r = add_step(j, 0, w)) != 0) {
		w = NULL;
		goto out;
	}
	w = NULL;
	if (j->mixture_schedule &&
	    (sched = strdup(j->mixture_schedule)) == NULL) {
		r = -ENOMEM;
		goto out;
	}
	for (tok = sched ? strtok_r(sched, " \t", &save) : NULL; tok;
	     tok = strtok_r(NULL, " \t", &save)) {
		char *colon = strchr(tok, ':'), *end;
		long e;

		errno = 0;
		e = strtol(tok, &end, 10);
		if (colon == NULL || end != colon || tok[0] < '0' ||
		    tok[0] > '9' || errno != 0) {
			r = cfg_perr(p, j->schedule_line,
			    "mixture_schedule: '%s': expected "
			    "EPOCH:NAME:W[,NAME:W...]",
			    tok);
			goto out;
		}
		if (e <= last || (uint64_t)e >= j->epochs) {
			r = cfg_perr(p, j->schedule_line,
			    "mixture_schedule: epoch %ld %s", e,
			    e <= last ? "does not follow the step before it"
				      : "is past the job's last epoch");
			goto out;
		}
		last = e;
		if ((w = calloc(np, sizeof(*w))) == NULL) {
			r = -ENOMEM;
			goto out;
		}
		if (mix_weights(colon + 1, names, np, w, msg, sizeof(msg)) !=
		    0) {
			r = cfg_perr(p, j->schedule_line,
			    "mixture_schedule: epoch %ld: %s", e, msg);
			goto out;
		}
		r = add_step(j, (uint32_t)e, w);
		w = NULL;
		if (r != 0)
			goto out;
	}
	r = 0;
out:
	free(w);
	free(pv);
	free(sched);
	return r;
}

/* The resolution schedule of j: its pipeline's size op can take it. */
static int
check_res(struct parser *p, struct cfg_job *j)
{
	struct xf_pipeline *t;
	int r;

	if (j->res_line == 0)
		return 0;
	if (j->pl->size_at < j->pl->cache_at && j->pl->cache_at < j->pl->nops)
		return cfg_perr(p, j->res_line,
		    "resolution: the op that fixes the output size (op %zu of "
		    "the pipeline) comes before cache; a schedule needs it "
		    "after cache, where the cached prefix does not change "
		    "with the size",
		    j->pl->size_at + 1);
	if (j->pl->out_w != j->pl->out_h)
		return cfg_perr(p, j->res_line,
		    "resolution: the pipeline's output is %ux%u; a schedule "
		    "sets square sizes (end it with random_resized_crop(S), "
		    "center_crop(S) or resize(S,S))",
		    j->pl->out_w, j->pl->out_h);
	if ((r = xf_pipeline_sized(j->pl, cfg_job_res(j, 0), &t)) != 0)
		return r;
	xf_pipeline_free(t);
	return 0;
}

/*
 * A job's views: views = N, its view.K lines inside 1..N-1, each tail
 * parsed after the pipeline's cached prefix ("PREFIX cache TAIL"), which
 * the views share; the rules of a view's job.
 */
static int
check_views(struct parser *p, struct cfg_job *j)
{
	char msg[512];
	size_t plen;
	char *prefix;
	int r;

	for (size_t i = 0; i < j->nvdefs; i++)
		if (j->vdefs[i].hi >= j->views)
			return cfg_perr(p, j->vdefs[i].line,
			    "view.%u: the job has %" PRIu64 " view%s (views = "
			    "%" PRIu64 "): views 0 to %" PRIu64,
			    j->vdefs[i].hi, j->views, j->views == 1 ? "" : "s",
			    j->views, j->views - 1);
	if (j->views == 1)
		return 0;
	if (j->pl->cache_at >= j->pl->nops)
		return cfg_perr(p, j->views_line,
		    "views: the pipeline has no cache op; the views share "
		    "the prefix before it and differ in the ops after it");
	if (j->order == CFG_ORDER_RELAXED)
		return cfg_perr(p, j->views_line,
		    "views: order = relaxed chooses each batch's samples as "
		    "they finish, so views would differ in content; views "
		    "need order = strict");
	if (j->mixture)
		return cfg_perr(p, j->views_line,
		    "views: a mixture job cannot have views (its weights "
		    "change by writes of JOB/mixture)");
	if (j->gpu)
		return cfg_perr(p, j->views_line,
		    "views: gpu = on serves view 0 only; set gpu = off");
	/*
	 * A batch op's soft labels are one file per batch, which the views
	 * share, and a cutmix box (and so its lambda) depends on each view's
	 * size: refused rather than labels that fit one view only.
	 */
	if (j->pl->batch_op != NULL)
		return cfg_perr(p, j->views_line,
		    "views: the pipeline ends in batch op %s, whose soft "
		    "labels (one file per batch, shared by the views) would "
		    "fit view 0 only; batch ops with views are not supported",
		    j->pl->batch_op->kind == XF_OP_MIXUP    ? "mixup"
		    : j->pl->batch_op->kind == XF_OP_CUTMIX ? "cutmix"
							    : "mixup_cutmix");
	if ((j->view_pl = calloc(j->views, sizeof(*j->view_pl))) == NULL ||
	    (j->view_text = calloc(j->views, sizeof(*j->view_text))) == NULL)
		return -ENOMEM;
	plen = xf_prefix_text(j->pl, NULL, 0);
	if ((prefix = malloc(plen + 1)) == NULL)
		return -ENOMEM;
	xf_prefix_text(j->pl, prefix, plen + 1);
	r = 0;
	for (size_t i = 0; i < j->nvdefs && r == 0; i++) {
		struct cfg_vdef *v = &j->vdefs[i];

		for (uint32_t k = v->lo; k <= v->hi && r == 0; k++) {
			if (asprintf(&j->view_text[k], "%s cache %s", prefix,
				v->tail) < 0) {
				j->view_text[k] = NULL;
				r = -ENOMEM;
				break;
			}
			if ((r = xf_pipeline_parse(j->view_text[k],
				 &j->view_pl[k], msg, sizeof(msg))) != 0) {
				r = r == -EINVAL ? cfg_perr(p, v->line,
						       "view.%u: pipeline "
						       "(after the cached "
						       "prefix): %s",
						       k, msg)
						 : r;
				break;
			}
			if (xf_check_output(j->view_pl[k], j->dtype, msg,
				sizeof(msg)) != 0) {
				r = cfg_perr(p, v->line, "view.%u: %s", k, msg);
				break;
			}
			if (j->view_pl[k]->batch_op != NULL) {
				r = cfg_perr(p, v->line,
				    "view.%u: a batch op (mixup, cutmix, "
				    "mixup_cutmix) in a view's tail: the views "
				    "share one labels file per batch, and "
				    "batch ops with views are not supported",
				    k);
				break;
			}
			j->view_pl[k]->max_pixels = j->max_pixels;
		}
	}
	free(prefix);
	return r;
}

int
cfg_check_job(struct parser *p, struct cfg_job *j)
{
	struct cfg *c = p->c;
	char msg[512];
	size_t k;
	int r;

	if (j->mixture) {
		if ((r = check_mixture(p, j)) != 0)
			return r;
		goto pipeline;
	}
	if (j->mixture_schedule)
		return cfg_perr(
		    p, j->schedule_line, "mixture_schedule without mixture");
	if (j->epoch_samples)
		return cfg_perr(p, j->epoch_samples_line,
		    "epoch_samples needs a mixture (a job over one dataset "
		    "serves each of its samples once per epoch)");
	if (!j->dataset) {
		if (c->ndatasets > 1)
			return cfg_perr(p, j->line,
			    "[job %s] needs a dataset key: "
			    "this file has %zu datasets",
			    j->name, c->ndatasets);
		if (!(j->dataset = strdup(c->datasets[0].name)))
			return -ENOMEM;
	}
	for (k = 0; k < c->ndatasets; k++)
		if (strcmp(c->datasets[k].name, j->dataset) == 0)
			break;
	if (k == c->ndatasets)
		return cfg_perr(
		    p, j->dataset_line, "unknown dataset '%s'", j->dataset);
	j->dataset_index = k;
pipeline:
	if (!j->pipeline && !(j->pipeline = strdup(DEFAULT_TRAIN_PIPELINE)))
		return -ENOMEM;
	if (xf_pipeline_parse(j->pipeline, &j->pl, msg, sizeof(msg)) != 0)
		return cfg_perr(p, j->pipeline_line, "pipeline: %s", msg);
	if (xf_check_output(j->pl, j->dtype, msg, sizeof(msg)) != 0)
		return cfg_perr(p, j->pipeline_line, "%s", msg);
	j->pl->max_pixels = j->max_pixels;
	if ((r = check_res(p, j)) != 0 || (r = check_views(p, j)) != 0)
		return r;
	return 0;
}
