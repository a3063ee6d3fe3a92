/*
 * feedfs-ref - the files of an epoch computed in-process, without FUSE,
 * threads or the cache: the reference that mounted bytes are compared with.
 * It serves what every read of a mount serves, also with a cache_format:
 * for jpeg(Q) the decode of the JPEG (sample_make without a cache, the
 * path of a mount whose cache is off).
 *
 *   feedfs-ref [--rank R --world W] [--view V] CONFIG|DATASET_DIR JOB EPOCH
 *       OUTDIR
 *
 * Writes OUTDIR/batch-NNNNNN.npy, .labels.npy and .ids.npy for every batch
 * of the epoch (of rank R of W), and .text.jsonl for a job with captions
 * (job_batch_text, the mount's own function); with --view V (>= 1) of a
 * job with views, batch-NNNNNN.viewV.npy instead.  A job with a batch op:
 * its batches mixed (job_mix_batch) and soft labels; multi-hot labels
 * (job_mix_batch makes their rows).  Exit 1 with a message on error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/config.h"
#include "core/dsopen.h"
#include "dataset/dataset.h"
#include "core/job.h"
#include "core/plan.h"
#include "core/sample.h"

static int
write_file(const char *dir, uint64_t b, const char *suffix, const void *hdr,
    size_t hlen, const void *data, size_t dlen)
{
	char path[4096];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/batch-%06" PRIu64 "%s", dir, b,
	    suffix);
	if ((fp = fopen(path, "wb")) == NULL ||
	    fwrite(hdr, 1, hlen, fp) != hlen ||
	    (dlen && fwrite(data, 1, dlen, fp) != dlen) || fclose(fp) != 0) {
		fprintf(stderr, "feedfs-ref: %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * The whole batch b of rank/world for epoch, sequentially: images gets
 * len * sample_bytes bytes, labels and ids len entries; on_error is
 * followed as the mount follows it.  Returns the count, or -EIO.
 */
static int
batch_make(struct job *j, uint32_t epoch, uint32_t rank, uint32_t world,
    uint64_t b, void *images, int64_t *labels, int64_t *ids, char *err,
    size_t errlen)
{
	uint32_t len = plan_batch_len(&j->plan, world, b);
	uint32_t *order = malloc(j->plan.n * sizeof(*order));
	uint64_t *pos = malloc((len ? len : 1) * sizeof(*pos));
	int r = 0;

	if (order == NULL || pos == NULL) {
		snprintf(err, errlen, "out of memory");
		r = -ENOMEM;
		goto out;
	}
	if (order && job_order(j, epoch, order) != 0) {
		snprintf(err, errlen, "out of memory");
		r = -ENOMEM;
		goto out;
	}
	plan_batch_positions(&j->plan, rank, world, b, pos);
	for (uint32_t s = 0; s < len; s++) {
		uint32_t id;

		r = sample_make_slot(j, NULL, epoch, order, pos[s], false,
		    (uint8_t *)images +
			(size_t)s * job_geo(j, epoch)->sample_bytes,
		    &id, false, err, errlen);
		if (r != 0)
			goto out;
		labels[s] = j->ds->samples[id].label;
		ids[s] = id;
	}
	r = (int)len;
out:
	free(order);
	free(pos);
	return r;
}

int
main(int argc, char **argv)
{
	unsigned long rank = 0, world = 1, view = 0;
	struct cfg *c = NULL;
	struct dataset **ds = NULL;
	struct job j;
	struct stat st;
	char err[2048];
	const struct cfg_job *cj = NULL;
	const struct cfg_dataset *cd = NULL;
	int i = 1, r;

	for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
		if (strcmp(argv[i], "--rank") == 0)
			rank = strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--world") == 0)
			world = strtoul(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--view") == 0)
			view = strtoul(argv[i + 1], NULL, 10);
		else
			break;
	}
	if (argc - i != 4 || world < 1 || rank >= world) {
		fprintf(stderr, "usage: feedfs-ref [--rank R --world W] "
				"[--view V] CONFIG|DATASET_DIR JOB EPOCH "
				"OUTDIR\n");
		return 2;
	}
	if ((stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) ||
	    cfg_is_tar(argv[i]))
		r = cfg_default(argv[i], &c, err, sizeof(err));
	else
		r = cfg_load(argv[i], &c, err, sizeof(err));
	if (r != 0) {
		fprintf(stderr, "feedfs-ref: %s\n", err);
		return 1;
	}
	for (size_t k = 0; k < c->njobs; k++)
		if (strcmp(c->jobs[k].name, argv[i + 1]) == 0)
			cj = &c->jobs[k];
	if (!cj) {
		fprintf(stderr, "feedfs-ref: no job %s\n", argv[i + 1]);
		return 1;
	}
	/* The job's datasets: its one, or a mixture's sources. */
	if ((ds = calloc(c->ndatasets, sizeof(*ds))) == NULL) {
		fprintf(stderr, "feedfs-ref: out of memory\n");
		return 1;
	}
	for (size_t s = 0; s < (cj->nsources ? cj->nsources : 1); s++) {
		size_t k =
		    cj->nsources ? cj->source_index[s] : cj->dataset_index;

		cd = &c->datasets[k];
		/* Shards scanned here, never through a kept index. */
		if (ds[k] == NULL && ds_open_cfg(cd, -1, NULL, NULL, &ds[k],
					 err, sizeof(err)) != 0) {
			fprintf(stderr, "feedfs-ref: %s\n", err);
			return 1;
		}
	}
	if (view >= cj->views) {
		fprintf(stderr, "feedfs-ref: job %s has %" PRIu64 " views\n",
		    cj->name, cj->views);
		return 1;
	}
	if ((view > 0
		    ? job_init_view(&j, c, cj, ds[cj->dataset_index],
			  (uint32_t)view, err, sizeof(err))
		    : job_init_all(&j, c, cj, (const struct dataset *const *)ds,
			  err, sizeof(err))) != 0) {
		fprintf(stderr, "feedfs-ref: %s\n", err);
		return 1;
	}
	uint32_t epoch = (uint32_t)strtoul(argv[i + 2], NULL, 10);
	const char *out = argv[i + 3];
	uint64_t nb = plan_nbatches(&j.plan, (uint32_t)world);
	size_t sample_bytes = job_geo(&j, epoch)->sample_bytes;
	void *images = malloc((size_t)cj->batch_size * sample_bytes);
	char vsuffix[32];
	int64_t *labels = malloc(cj->batch_size * sizeof(int64_t));
	int64_t *ids = malloc(cj->batch_size * sizeof(int64_t));
	bool fl = job_float_labels(&j);
	float *soft = fl ? malloc(cj->batch_size * j.nclasses * 4 + 4) : NULL;
	void *tmp = malloc(sample_bytes ? sample_bytes : 1);
	char hdr[256];
	int ret = 0;

	mkdir(out, 0755);
	for (uint64_t b = 0; b < nb && ret == 0; b++) {
		size_t hl;

		r = batch_make(&j, epoch, (uint32_t)rank,
		    (uint32_t)world, b, images, labels, ids, err, sizeof(err));
		if (r < 0) {
			fprintf(stderr, "feedfs-ref: batch %" PRIu64 ": %s\n",
			    b, err);
			ret = 1;
			break;
		}
		if (fl && (soft == NULL || tmp == NULL ||
				  job_mix_batch(&j, epoch, (uint32_t)rank,
				      (uint32_t)world, b, (uint32_t)r, images,
				      ids, soft, tmp) != 0)) {
			fprintf(stderr, "feedfs-ref: out of memory\n");
			ret = 1;
			break;
		}
		hl = job_npy_header(&j, epoch, (uint32_t)r, BK_IMAGES, hdr);
		snprintf(vsuffix, sizeof(vsuffix), ".view%lu.npy", view);
		if (write_file(out, b, view ? vsuffix : ".npy", hdr, hl, images,
			(size_t)r * sample_bytes) != 0)
			ret = 1;
		if (view > 0)
			continue;
		hl = job_npy_header(&j, epoch, (uint32_t)r, BK_LABELS, hdr);
		if (write_file(out, b, ".labels.npy", hdr, hl,
			fl ? (void *)soft : (void *)labels,
			fl ? (size_t)r * j.nclasses * 4 : (size_t)r * 8) != 0)
			ret = 1;
		hl = job_npy_header(&j, epoch, (uint32_t)r, BK_IDS, hdr);
		if (write_file(
			out, b, ".ids.npy", hdr, hl, ids, (size_t)r * 8) != 0)
			ret = 1;
		if (j.text) {
			uint64_t tl = job_batch_text_len(&j, ids, (uint32_t)r);
			char *t = malloc(tl ? (size_t)tl : 1);

			if (t == NULL) {
				fprintf(stderr, "feedfs-ref: out of memory\n");
				ret = 1;
				break;
			}
			job_batch_text(&j, ids, (uint32_t)r, t);
			if (write_file(out, b, ".text.jsonl", t, (size_t)tl,
				NULL, 0) != 0)
				ret = 1;
			free(t);
		}
	}
	free(soft);
	free(tmp);
	free(images);
	free(labels);
	free(ids);
	job_fini(&j);
	for (size_t k = 0; k < c->ndatasets; k++)
		ds_free(ds[k]);
	free(ds);
	cfg_free(c);
	return ret;
}
