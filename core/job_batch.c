/*
 * job_batch.c - the model (core/): a job's batch files: their geometry
 * and .npy headers, the float32 label rows (multi-hot, a batch op's soft
 * labels) and the draws of batch ops (see job.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/job.h"
#include "core/npy.h"
#include "transforms/rng.h"

size_t
job_npy_header(const struct job *j, uint32_t epoch, uint32_t len,
    enum batch_kind kind, char *buf)
{
	uint64_t shape[4];

	if (kind == BK_LABELS && job_float_labels(j)) {
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
	if (job_float_labels(j)) {
		shape[1] = j->nclasses;
		g->hdr[BK_LABELS] = (uint32_t)npy_header_len("<f4", shape, 2);
		g->size[BK_LABELS] = g->hdr[BK_LABELS] + (uint64_t)g->len *
							     j->nclasses *
							     sizeof(float);
	}
	g->size[BK_CUDA] = 0; /* the engine's descriptor (feed_file_size) */
	g->size[BK_TEXT] = 0; /* the captions' (feed_text_size) */
	g->hdr[BK_TEXT] = 0;
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
job_label_rows(const struct job *j, const struct xf_mix *m, const int64_t *ids,
    uint32_t len, float *out)
{
	const struct dataset *ds = j->ds;
	uint32_t k = j->nclasses;
	int64_t *lab;
	float *tmp;

	if (!j->multi) {
		/* One label a sample: xf_mix_labels, as torchvision's v2. */
		if ((lab = malloc((len ? len : 1) * sizeof(*lab))) == NULL)
			return -ENOMEM;
		for (uint32_t i = 0; i < len; i++)
			lab[i] = ids[i] >= 0 && (uint64_t)ids[i] < ds->n
				     ? ds->samples[ids[i]].label
				     : -1;
		if (m != NULL)
			xf_mix_labels(m, lab, len, k, out);
		else {
			static const struct xf_mix none = {
			    false, 1.0, 0, 0, 0, 0};

			xf_mix_labels(&none, lab, len, k, out);
		}
		free(lab);
		return 0;
	}
	memset(out, 0, (size_t)len * k * sizeof(float));
	for (uint32_t i = 0; i < len; i++) {
		const uint32_t *l = ids[i] >= 0 && (uint64_t)ids[i] < ds->n
					? ds->samples[ids[i]].labels
					: NULL;

		for (uint32_t x = 1; l != NULL && x <= l[0]; x++)
			if (l[x] < k)
				out[(size_t)i * k + l[x]] = 1.0f;
	}
	if (m == NULL || len == 0)
		return 0;
	if ((tmp = malloc((k ? k : 1) * sizeof(float))) == NULL)
		return -ENOMEM;
	xf_mix_rows(m, out, len, k, tmp);
	free(tmp);
	return 0;
}

int
job_soft_labels(const struct job *j, const struct xf_mix *m, const int64_t *ids,
    uint32_t len, float *out)
{
	return job_label_rows(j, m, ids, len, out);
}

int
job_mix_batch(const struct job *j, uint32_t epoch, uint32_t rank,
    uint32_t world, uint64_t b, uint32_t len, void *px, const int64_t *ids,
    float *labels, void *tmp)
{
	struct xf_mix m;
	int r;

	if (!j->soft) /* multi-hot rows, no batch op */
		return job_label_rows(j, NULL, ids, len, labels);
	job_mix_draw(j, epoch, rank, world, b, &m);
	if ((r = job_soft_labels(j, &m, ids, len, labels)) != 0 || px == NULL)
		return r;
	return xf_mix_images(&m, px, len, job_geo(j, epoch)->pl->out_w,
	    job_geo(j, epoch)->pl->out_h, j->cfg->dtype, j->cfg->layout, tmp);
}
