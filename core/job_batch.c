/*
 * job_batch.c - the model (core/): a job's batch files: their geometry
 * and .npy headers, and the draws and soft labels of batch ops (see
 * job.h).
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
