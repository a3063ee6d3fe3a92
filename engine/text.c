/*
 * text.c - the generated text files: README, and per job info.json and
 * samples.tsv.  They are fixed for the life of the mount, so each is made
 * once by feed_new, counted in the memory budget, and shared by every open
 * (an open of samples.tsv costs no copy, however large the dataset).
 * .feedfs/stats (stats.c), .feedfs/log (log.c's ring) and JOB/errors.tsv
 * (job.c) are made per open.  The texts made per open (these, a
 * mixture's weights) are owned: feed_owned_alloc's buffers, counted as
 * metadata until feed_text_free.  Layer: the engine (engine/), below
 * feed.c and mixture.c; calls jobs.c, stats.c, log.c, job.c and the
 * budget.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "util/log.h"
#include "core/mix.h"
#include "util/sbuf.h"

static char *
make_readme(struct feed *f, size_t *len)
{
	struct sbuf sb = {0};

	sb_printf(&sb,
	    "This is a feedfs mount: preprocessed training batches.\n\n"
	    "Each job is a directory:\n\n");
	for (size_t i = 0; i < f->nshown; i++) {
		struct job *j = &f->jobs[i];

		if (job_is_mixture(j)) {
			sb_printf(&sb,
			    "  %s/  a mixture of %zu samples per epoch from",
			    j->cfg->name, j->plan.n);
			for (size_t s = 0; s < j->nsrc; s++)
				sb_printf(&sb,
				    "%s %s (%zu samples, ids %" PRIu32
				    "..%zu, %s)",
				    s ? "," : "", j->src_names[s],
				    j->src[s].ds->n, j->src[s].start,
				    j->src[s].start + j->src[s].ds->n - 1,
				    j->src[s].ds->root);
			sb_printf(&sb,
			    "\n      weights: %s/mixture (writable: "
			    "from the next epoch not opened yet)\n"
			    "     ",
			    j->cfg->name);
		} else
			sb_printf(&sb, "  %s/  %zu samples of %s,",
			    j->cfg->name, j->ds->n, j->ds->root);
		sb_printf(&sb,
		    " %" PRIu64 " batches of %" PRIu32 " per epoch, %" PRIu64
		    " epochs\n"
		    "      pipeline: %s\n"
		    "      images: %s %s, shape (B, %" PRIu64 ", %" PRIu64
		    ", %" PRIu64 ")\n",
		    plan_nbatches(&j->plan, 1), j->plan.batch_size,
		    j->cfg->epochs, j->cfg->pipeline,
		    cfg_dtype_name(j->cfg->dtype),
		    cfg_layout_name(j->cfg->layout), job_geo(j, 0)->shape[1],
		    job_geo(j, 0)->shape[2], job_geo(j, 0)->shape[3]);
		if (j->cfg->res_line)
			sb_printf(&sb,
			    "      resolution: %" PRIu32 "..%" PRIu32
			    " @ epochs %" PRIu32 "..%" PRIu32
			    " (the shape above is epoch 0's; each epoch's size: "
			    "info.json epoch_sizes)\n",
			    j->cfg->res.lo, j->cfg->res.hi, j->cfg->res.e0,
			    j->cfg->res.e1);
		if (j->cfg->views > 1)
			sb_printf(&sb,
			    "      views: %" PRIu64 ": batch-NNNNNN.npy is "
			    "view 0, batch-NNNNNN.viewV.npy view V (info.json "
			    "views)\n",
			    j->cfg->views);
		if (j->soft) /* a batch op ends its pipeline */
			sb_printf(&sb,
			    "      labels: float32 soft labels, shape (B, "
			    "%" PRIu32 ")%s\n",
			    j->nclasses,
			    j->multi ? ", from multi-hot rows" : "");
		else if (j->multi)
			sb_printf(&sb,
			    "      labels: float32 multi-hot rows, shape (B, "
			    "%" PRIu32 ")\n",
			    j->nclasses);
		if (j->text)
			sb_printf(&sb,
			    "      captions: batch-NNNNNN.text.jsonl, one JSON "
			    "string a line, in batch order\n");
	}
	sb_printf(&sb,
	    "\nFiles of a job:\n\n"
	    "  JOB/info.json                          shape, dtype, layout, "
	    "batches per epoch, classes\n"
	    "  JOB/samples.tsv                        sample id, path, label\n"
	    "  JOB/errors.tsv                         samples that failed: "
	    "id, path, reason\n"
	    "  JOB/epoch-NNNN/batch-NNNNNN.npy        images\n"
	    "  JOB/epoch-NNNN/batch-NNNNNN.labels.npy int64 labels (B,), or "
	    "with a batch op\n"
	    "                                         (mixup, cutmix) or "
	    "lists of labels float32\n"
	    "                                         soft or multi-hot "
	    "labels (B, classes)\n"
	    "  JOB/epoch-NNNN/batch-NNNNNN.ids.npy    int64 sample ids\n"
	    "  JOB/epoch-NNNN/batch-NNNNNN.text.jsonl captions, one JSON "
	    "string a line (a job\n"
	    "                                         with text)\n"
	    "  JOB/epoch-NNNN/batch-NNNNNN.viewV.npy  view V's images (a "
	    "job with views)\n"
	    "  JOB/rank-R-of-W/epoch-NNNN/...         rank R's shard of W "
	    "(1 <= W <= 1024; not listed, but there)\n"
	    "  JOB/mixture, JOB/epoch-NNNN/mixture    a mixture's weights: "
	    "the next epochs'\n"
	    "                                         (writable), that "
	    "epoch's\n\n"
	    "Reading a batch prepares it and the next ones; the bytes of a "
	    "batch are the\nsame on every read.  In Python:\n\n"
	    "  import numpy as np\n"
	    "  x = np.load('JOB/epoch-0000/batch-000000.npy')\n"
	    "  y = np.load('JOB/epoch-0000/batch-000000.labels.npy')\n\n"
	    "Counters: .feedfs/stats (Prometheus text).  The log's last "
	    "lines: .feedfs/log.\nSee feedfs(8).\n");
	return sb_done(&sb, len);
}

/*
 * A mixture's part of info.json: the sources (name, root, their range of
 * global ids), the epoch length, the configured weights by epoch (those
 * in force per epoch, changes included, are in epoch-NNNN/mixture), and
 * the sources of each class.
 */
static void
mixture_json(const struct job *j, struct sbuf *sb)
{
	sb_printf(
	    sb, ",\n  \"epoch_samples\": %zu,\n  \"sources\": [", j->plan.n);
	for (size_t s = 0; s < j->nsrc; s++) {
		sb_printf(sb, "%s\n    {\"name\": ", s ? "," : "");
		sb_json_str(sb, j->src_names[s]);
		sb_printf(sb, ", \"root\": ");
		sb_json_str(sb, j->src[s].ds->root);
		sb_printf(sb,
		    ", \"samples\": %zu, \"first_id\": %" PRIu32
		    ", \"classes\": %zu}",
		    j->src[s].ds->n, j->src[s].start, j->src[s].ds->nclasses);
	}
	sb_printf(sb, "\n  ],\n  \"schedule\": [");
	for (size_t k = 0; k < j->cfg->nsteps; k++) {
		sb_printf(sb, "%s\n    {\"epoch\": %" PRIu32 ", \"weights\": {",
		    k ? "," : "", j->cfg->steps[k].epoch);
		for (size_t s = 0; s < j->nsrc; s++) {
			uint64_t w = j->cfg->steps[k].w[s];

			sb_printf(sb, "%s", s ? ", " : "");
			sb_json_str(sb, j->src_names[s]);
			sb_printf(sb, ": %" PRIu64 ".%06" PRIu64,
			    (uint64_t)(w / MIX_ONE), (uint64_t)(w % MIX_ONE));
		}
		sb_printf(sb, "}}");
	}
	sb_printf(sb, "\n  ],\n  \"class_sources\": [");
	for (size_t c = 0; c < j->ds->nclasses; c++) {
		bool first = true;

		sb_printf(sb, "%s[", c ? ", " : "");
		for (size_t s = 0; s < j->nsrc; s++)
			if (j->class_src[c] & (1ULL << s)) {
				sb_printf(sb, "%s", first ? "" : ", ");
				sb_json_str(sb, j->src_names[s]);
				first = false;
			}
		sb_printf(sb, "]");
	}
	sb_printf(sb, "]");
}

/* The seeds of the shuffle and of the random ops (both seed unless set). */
static void
seeds_json(const struct job *j, struct sbuf *sb)
{
	sb_printf(sb,
	    ",\n  \"shuffle_seed\": %" PRIu64 ",\n  \"aug_seed\": %" PRIu64,
	    cfg_job_shuffle_seed(j->cfg), cfg_job_aug_seed(j->cfg));
}

/*
 * A resolution schedule: its terms (FFCV's names) and the output size of
 * every epoch (H = W); "shape" above is epoch 0's.  null without one.
 */
static void
res_json(const struct job *j, struct sbuf *sb)
{
	const struct cfg_job *c = j->cfg;

	if (c->res_line == 0) {
		sb_printf(sb, ",\n  \"resolution\": null");
		return;
	}
	sb_printf(sb,
	    ",\n  \"resolution\": {\"min_res\": %" PRIu32
	    ", \"max_res\": %" PRIu32 ", \"start_ramp\": %" PRIu32
	    ", \"end_ramp\": %" PRIu32
	    ", \"multiple\": 32, \"rule\": \"min_res up to start_ramp, "
	    "max_res from end_ramp, between them int(np.round(np.interp("
	    "epoch, [start_ramp, end_ramp], [min_res, max_res]) / 32)) * "
	    "32\"}"
	    ",\n  \"epoch_sizes\": [",
	    c->res.lo, c->res.hi, c->res.e0, c->res.e1);
	for (uint32_t e = 0; e < c->epochs; e++)
		sb_printf(sb, "%s%" PRIu32, e ? ", " : "", cfg_job_res(c, e));
	sb_printf(sb, "]");
}

/*
 * The views of job ji: each one's file name, pipeline, epoch 0's shape
 * and whether the resolution schedule sets its size.
 */
static void
views_json(struct feed *f, size_t ji, struct sbuf *sb)
{
	const struct job *j0 = &f->jobs[ji];

	sb_printf(sb, ",\n  \"views\": [");
	for (uint32_t v = 0; v < j0->cfg->views; v++) {
		const struct job *j = &f->jobs[feed_job_view(f, ji, v)];
		const struct job_geo *g = job_geo(j, 0);
		char file[48];

		if (v == 0)
			snprintf(file, sizeof(file), "batch-NNNNNN.npy");
		else
			snprintf(
			    file, sizeof(file), "batch-NNNNNN.view%u.npy", v);
		sb_printf(sb,
		    "%s\n    {\"view\": %u, \"file\": \"%s\", \"pipeline\": ",
		    v ? "," : "", v, file);
		sb_json_str(sb, j->cfg->view_text && j->cfg->view_text[v]
				    ? j->cfg->view_text[v]
				    : j->cfg->pipeline);
		sb_printf(sb,
		    ", \"shape\": [%" PRIu64 ", %" PRIu64 ", %" PRIu64
		    ", %" PRIu64 "], \"scheduled\": %s}",
		    g->shape[0], g->shape[1], g->shape[2], g->shape[3],
		    j->ngeos ? "true" : "false");
	}
	sb_printf(sb, "\n  ]");
}

/*
 * What the samples carry besides one label: captions ("text": each batch
 * has a .text.jsonl), and lists of labels ("multi_label": labels.npy is
 * multi-hot float32 (B, num_classes), num_classes from classes = FILE,
 * the largest index + 1, or for a mixture the union of its sources').
 */
static void
meta_json(const struct job *j, struct sbuf *sb)
{
	sb_printf(sb, ",\n  \"text\": %s", j->text ? "true" : "false");
	if (j->text)
		sb_printf(
		    sb, ",\n  \"text_file\": \"batch-NNNNNN.text.jsonl\"");
	sb_printf(sb, ",\n  \"multi_label\": %s", j->multi ? "true" : "false");
	if (j->multi)
		sb_printf(sb, ",\n  \"num_classes_from\": \"%s\"",
		    job_is_mixture(j)      ? "sources"
		    : j->ds->classes_file ? "classes_file"
					  : "largest_index");
}

static char *
make_info_json(struct feed *f, size_t ji, size_t *len)
{
	struct job *j = &f->jobs[ji];
	const struct cfg_job *c = j->cfg;
	const struct job_geo *g0 = job_geo(j, 0);
	struct sbuf sb = {0};

	sb_printf(&sb, "{\n  \"job\": ");
	sb_json_str(&sb, c->name);
	if (job_is_mixture(j))
		sb_printf(&sb, ",\n  \"dataset\": null,\n  \"root\": null");
	else {
		sb_printf(&sb, ",\n  \"dataset\": ");
		sb_json_str(&sb, c->dataset);
		sb_printf(&sb, ",\n  \"root\": ");
		sb_json_str(&sb, j->ds->root);
	}
	sb_printf(&sb,
	    ",\n  \"samples\": %zu,\n  \"batch_size\": %" PRIu64
	    ",\n  \"batches_per_epoch\": %" PRIu64 ",\n  \"epochs\": %" PRIu64
	    ",\n  \"shape\": [%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64
	    "],\n  \"sample_shape\": [%" PRIu64 ", %" PRIu64 ", %" PRIu64
	    "],\n  \"dtype\": \"%s\",\n  \"layout\": \"%s\",\n"
	    "  \"shuffle\": %s,\n  \"drop_last\": %s,\n  \"seed\": %" PRIu64
	    ",\n  \"order\": \"%s\",\n  \"on_error\": \"%s\",\n"
	    "  \"pipeline\": ",
	    j->ds->n, c->batch_size, plan_nbatches(&j->plan, 1), c->epochs,
	    c->batch_size, g0->shape[1], g0->shape[2], g0->shape[3],
	    g0->shape[1], g0->shape[2], g0->shape[3], cfg_dtype_name(c->dtype),
	    cfg_layout_name(c->layout), c->shuffle ? "true" : "false",
	    c->drop_last ? "true" : "false", c->seed, cfg_order_name(c->order),
	    cfg_on_error_name(c->on_error));
	sb_json_str(&sb, c->pipeline);
	sb_printf(&sb, ",\n  \"cached_prefix\": ");
	sb_json_str(&sb, j->prefix);
	sb_printf(&sb, ",\n  \"num_classes\": %zu,\n  \"classes\": [",
	    j->ds->nclasses);
	for (size_t i = 0; i < j->ds->nclasses; i++) {
		sb_printf(&sb, i ? ", " : "");
		sb_json_str(&sb, j->ds->classes[i]);
	}
	/* Every label (samples.tsv, labels.npy, a soft label's column) is
	 * the index of its class in classes: a shard's 7 may be class 3. */
	sb_printf(&sb, "],\n  \"label_is\": \"class_index\"");
	meta_json(j, &sb);
	/* The labels' files: int64 (B,), or float32 (B, classes) rows: a
	 * batch op's soft labels, multi-hot. */
	if (job_float_labels(j))
		sb_printf(&sb,
		    ",\n  \"labels_dtype\": \"float32\",\n"
		    "  \"labels_shape\": [%" PRIu64 ", %" PRIu32 "]",
		    c->batch_size, j->nclasses);
	else
		sb_printf(&sb,
		    ",\n  \"labels_dtype\": \"int64\",\n"
		    "  \"labels_shape\": [%" PRIu64 "]",
		    c->batch_size);
	if (job_is_mixture(j))
		mixture_json(j, &sb);
	seeds_json(j, &sb);
	res_json(j, &sb);
	views_json(f, ji, &sb);
	sb_printf(&sb, "\n}\n");
	return sb_done(&sb, len);
}

static char *
make_samples_tsv(struct feed *f, size_t ji, size_t *len)
{
	const struct dataset *ds = f->jobs[ji].ds;
	struct sbuf sb = {0};

	const struct job *j = &f->jobs[ji];
	size_t src = 0;

	/* A mixture's lines end with a fourth field: the sample's source. */
	for (size_t i = 0; i < ds->n; i++) {
		const uint32_t *l = ds->samples[i].labels;

		sb_printf(&sb, "%zu\t", i);
		sb_tsv_field(&sb, ds->samples[i].path);
		if (!ds->multi)
			sb_printf(&sb, "\t%" PRId64, ds->samples[i].label);
		else if (l == NULL) /* a bad sample */
			sb_printf(&sb, "\t-1");
		else {
			/* Multi-label: its classes, by commas ("" for none). */
			sb_printf(&sb, "\t");
			for (uint32_t k = 1; k <= l[0]; k++)
				sb_printf(
				    &sb, "%s%" PRIu32, k > 1 ? "," : "", l[k]);
		}
		if (job_is_mixture(j)) {
			while (src + 1 < j->nsrc && j->src[src + 1].start <= i)
				src++;
			sb_printf(&sb, "\t");
			sb_tsv_field(&sb, j->src_names[src]);
		}
		sb_printf(&sb, "\n");
	}
	return sb_done(&sb, len);
}

int
feed_text_init(struct feed *f)
{
	if ((f->readme.s = make_readme(f, &f->readme.len)) == NULL ||
	    (f->info = calloc(f->njobs, sizeof(*f->info))) == NULL ||
	    (f->samples = calloc(f->njobs, sizeof(*f->samples))) == NULL)
		return -ENOMEM;
	feed_mem_add(f, f->readme.len);
	for (size_t i = 0; i < f->nshown; i++) {
		if ((f->info[i].s = make_info_json(f, i, &f->info[i].len)) ==
			NULL ||
		    (f->samples[i].s =
			    make_samples_tsv(f, i, &f->samples[i].len)) == NULL)
			return -ENOMEM;
		feed_mem_add(f, f->info[i].len + f->samples[i].len);
	}
	return 0;
}

void
feed_text_fini(struct feed *f)
{
	free(f->readme.s);
	for (size_t i = 0; f->info && i < f->njobs; i++)
		free(f->info[i].s);
	for (size_t i = 0; f->samples && i < f->njobs; i++)
		free(f->samples[i].s);
	free(f->info);
	free(f->samples);
}

static const struct text *
fixed_text(const struct feed *f, enum feed_text t, size_t job)
{
	return t == FT_README ? &f->readme
	       : t == FT_INFO ? &f->info[job]
			      : &f->samples[job];
}

size_t
feed_text_len(const struct feed *f, enum feed_text t, size_t job)
{
	return FEED_TEXT_LIVE(t) ? 0 : fixed_text(f, t, job)->len;
}

/* A live text's bytes (malloc'd), or NULL. */
static char *
live_text(struct feed *f, enum feed_text t, size_t job, size_t *len)
{
	char *s;

	switch (t) {
	case FT_STATS:
		return feed_stats(f, len);
	case FT_ERRORS:
		return job_errors_tsv(&f->jobs[job], len);
	default: /* FT_LOG */
		if ((s = malloc(LOG_RING_BYTES)) != NULL)
			*len = log_ring_copy(s, LOG_RING_BYTES);
		return s;
	}
}

int
feed_text(struct feed *f, enum feed_text t, size_t job, const char **text,
    size_t *len, char **owned)
{
	const struct text *x;

	*owned = NULL;
	if (FEED_TEXT_LIVE(t)) {
		char *s = live_text(f, t, job, len);

		/* Counted while open: a copy into a counted buffer. */
		if (s == NULL ||
		    (*owned = feed_owned_alloc(f, *len + 1)) == NULL) {
			free(s);
			return -ENOMEM;
		}
		memcpy(*owned, s, *len);
		(*owned)[*len] = '\0';
		free(s);
		*text = *owned;
		return 0;
	}
	x = fixed_text(f, t, job);
	*text = x->s;
	*len = x->len;
	return 0;
}

/* An open text file's bytes: OWNED_HDR bytes that hold what is counted
 * (a uint64_t), then size bytes, the caller's. */
#define OWNED_HDR 16

char *
feed_owned_alloc(struct feed *f, size_t size)
{
	uint64_t n = OWNED_HDR + (uint64_t)size;
	char *p;

	pthread_mutex_lock(&f->lock);
	if (!feed_meta_room(f, n) || (p = malloc(n)) == NULL) {
		pthread_mutex_unlock(&f->lock);
		return NULL;
	}
	feed_meta_add(f, n);
	pthread_mutex_unlock(&f->lock);
	memcpy(p, &n, sizeof(n));
	return p + OWNED_HDR;
}

void
feed_text_free(struct feed *f, char *text)
{
	uint64_t n;

	if (text == NULL)
		return;
	text -= OWNED_HDR;
	memcpy(&n, text, sizeof(n));
	pthread_mutex_lock(&f->lock);
	feed_meta_sub(f, n);
	pthread_mutex_unlock(&f->lock);
	free(text);
}
