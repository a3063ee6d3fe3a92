/*
 * job.c - jobs: setup, batch geometry, counters (see job.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/format.h"
#include "core/job.h"
#include "core/mix.h"
#include "core/npy.h"
#include "util/sbuf.h"
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

/* The part of the setup common to every job, once ds and plan.n are set. */
static int
init_common(struct job *j, const struct cfg *c, const struct cfg_job *cj,
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
	j->nclasses = (uint32_t)j->ds->nclasses;
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
	if ((r = init_common(j, c, cj, err, errlen)) != 0)
		goto fail;
	return 0;
fail:
	job_fini(j);
	return r;
}

/* The union of the sources' classes into merged; class_src; labels. */
static int
merge_sources(struct job *j)
{
	struct dataset *m = j->merged;
	size_t maxc = 0, at = 0;

	for (size_t s = 0; s < j->nsrc; s++)
		maxc += j->src[s].ds->nclasses;
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
	j->merged->name = cj->name;
	j->merged->root = j->src[0].ds->root;
	j->merged->n = (size_t)total;
	if (merge_sources(j) != 0)
		goto nomem;
	j->ds = j->merged;
	j->plan.n =
	    cj->epoch_samples ? (size_t)cj->epoch_samples : (size_t)total;
	if ((r = init_common(j, c, cj, err, errlen)) != 0)
		goto fail;
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
	r = -ENOMEM;
fail:
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
		/* Its strings are the sources'. */
		free(j->merged->samples);
		free(j->merged->classes);
		free(j->merged);
		j->merged = NULL;
	}
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

size_t
job_npy_header(const struct job *j, uint32_t epoch, uint32_t len,
    enum batch_kind kind, char *buf)
{
	uint64_t shape[4];

	if (kind == BK_LABELS && j->soft) {
		shape[0] = len;
		shape[1] = j->nclasses;
		return npy_header(buf, "<f4", shape, 2);
	}
	if (kind != BK_IMAGES) {
		shape[0] = len;
		return npy_header(buf, "<i8", shape, 1);
	}
	memcpy(shape, job_geo(j, epoch)->shape, sizeof(shape));
	shape[0] = len;
	return npy_header(buf, j->descr, shape, 4);
}

void
job_batch_geom(const struct job *j, uint32_t epoch, uint32_t world, uint64_t b,
    struct batch_geom *g)
{
	const struct job_geo *geo = job_geo(j, epoch);
	uint64_t shape[4];

	memcpy(shape, geo->shape, sizeof(shape));
	g->len = plan_batch_len(&j->plan, world, b);
	shape[0] = g->len;
	g->hdr[BK_IMAGES] = (uint32_t)npy_header_len(j->descr, shape, 4);
	g->hdr[BK_LABELS] = g->hdr[BK_IDS] =
	    (uint32_t)npy_header_len("<i8", shape, 1);
	g->hdr[BK_CUDA] = 0;
	g->size[BK_IMAGES] =
	    g->hdr[BK_IMAGES] + (uint64_t)g->len * geo->sample_bytes;
	g->size[BK_LABELS] = g->size[BK_IDS] =
	    g->hdr[BK_LABELS] + (uint64_t)g->len * sizeof(int64_t);
	if (j->soft) {
		shape[1] = j->nclasses;
		g->hdr[BK_LABELS] = (uint32_t)npy_header_len("<f4", shape, 2);
		g->size[BK_LABELS] = g->hdr[BK_LABELS] + (uint64_t)g->len *
							     j->nclasses *
							     sizeof(float);
	}
	g->size[BK_CUDA] = 0; /* the engine's descriptor (feed_file_size) */
	g->raw_size = (uint64_t)g->len * geo->raw_bytes;
}

void
job_mix_draw(const struct job *j, uint32_t epoch, uint32_t rank, uint32_t world,
    uint64_t b, struct xf_mix *m)
{
	/* b < 10^6, rank < world <= 1024: one id each. */
	uint64_t id = b | (uint64_t)rank << 32 | (uint64_t)world << 48;
	/* The epoch's size: a resolution schedule's boxes fit its images. */
	const struct xf_pipeline *pl = job_geo(j, epoch)->pl;

	xf_mix_params(pl->batch_op,
	    rng_key(RNG_DOMAIN_BATCHMIX, j->aug_seed, epoch, id), pl->out_w,
	    pl->out_h, m);
}

int
job_soft_labels(const struct job *j, const struct xf_mix *m, const int64_t *ids,
    uint32_t len, float *out)
{
	int64_t *lab = malloc((len ? len : 1) * sizeof(*lab));

	if (lab == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < len; i++)
		lab[i] = ids[i] >= 0 && (uint64_t)ids[i] < j->ds->n
			     ? j->ds->samples[ids[i]].label
			     : -1;
	xf_mix_labels(m, lab, len, j->nclasses, out);
	free(lab);
	return 0;
}

int
job_mix_batch(const struct job *j, uint32_t epoch, uint32_t rank,
    uint32_t world, uint64_t b, uint32_t len, void *px, const int64_t *ids,
    float *labels, void *tmp)
{
	struct xf_mix m;
	int r;

	job_mix_draw(j, epoch, rank, world, b, &m);
	if ((r = job_soft_labels(j, &m, ids, len, labels)) != 0)
		return r;
	return xf_mix_images(&m, px, len, job_geo(j, epoch)->pl->out_w,
	    job_geo(j, epoch)->pl->out_h, j->cfg->dtype, j->cfg->layout, tmp);
}

static uint64_t
now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec;
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
	pthread_mutex_lock(&l->lock);
	for (size_t i = 0; i < l->n; i++)
		if (l->v[(l->start + i) % JOB_ERRORS_MAX].id == id) {
			pthread_mutex_unlock(&l->lock);
			return; /* listed: its first reason stays */
		}
	if ((s = strndup(why, 511)) == NULL) {
		pthread_mutex_unlock(&l->lock);
		return;
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
