/*
 * tier-recv - what a trainer's CPU pays for a finished batch that comes
 * from the cluster tier (issue 37), in process, against a memcached the
 * caller started:
 *
 *   tier-recv SERVERS [-b BATCH] [-s SIZE] [-r ROUNDS] [-k SECRET_FILE]
 *
 * One batch of BATCH (256) images of SIZE x SIZE (224) is stored twice
 * through the tier's blobs (cache/cluster_blob.h): as float32 CHW (what
 * the .npy holds) and as uint8 HWC (what workers store: the samples
 * before the output conversion).  Then ROUNDS (5) times, on one thread:
 *
 *   float32   cluster_blob_get of the float32 batch
 *   uint8     cluster_blob_get of the uint8 batch
 *   convert   xf_convert of each uint8 sample to float32 CHW, normalized
 *             (imagenet), into a batch buffer: what the mount's workers do
 *             to a fetched batch
 *   mix       xf_mix_images (mixup) of the converted batch: a batch op,
 *             paid wherever the batch is made
 *   as read   xf_convert_range of the batch a FUSE request (1 MiB) at a
 *             time into one 2 MiB buffer, plain and with mixup: what
 *             the mount does for a batch from the tier as it is read
 *             (engine/tier.c's tier_read); each request's bytes are then
 *             copied on to a batch buffer, as the kernel copies a reply
 *             to the reader (not timed)
 *
 * Times are the thread's CPU (CLOCK_THREAD_CPUTIME_ID), the kernel's
 * receive work done in its context included; the best round of each, in
 * microseconds per image, and the bytes per image.  With -k the blobs
 * carry cluster_secret's GMAC (and are checked).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/cluster.h"
#include "cache/cluster_blob.h"
#include "transforms/xf.h"

#define REQ ((size_t)1 << 20) /* a FUSE read request (fs.c) */

static double
cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
usage(void)
{
	fprintf(stderr, "usage: tier-recv SERVERS [-b BATCH] [-s SIZE] "
			"[-r ROUNDS] [-k SECRET_FILE]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	static const float mean[3] = {0.485f, 0.456f, 0.406f};
	static const float sd[3] = {0.229f, 0.224f, 0.225f};
	struct cluster_opts o = {0};
	struct cluster *c = NULL;
	unsigned batch = 256, size = 224, rounds = 5;
	uint8_t kf[32] = {1}, ku[32] = {2};
	double best[6] = {1e9, 1e9, 1e9, 1e9, 1e9, 1e9};
	char err[512];
	int opt;

	while ((opt = getopt(argc, argv, "b:s:r:k:")) != -1) {
		switch (opt) {
		case 'b':
			batch = (unsigned)atoi(optarg);
			break;
		case 's':
			size = (unsigned)atoi(optarg);
			break;
		case 'r':
			rounds = (unsigned)atoi(optarg);
			break;
		case 'k':
			o.secret_file = optarg;
			break;
		default:
			usage();
		}
	}
	if (optind + 1 != argc || batch == 0 || size == 0 || rounds == 0)
		usage();
	if (cluster_open(argv[optind], &o, &c, err, sizeof(err)) != 0) {
		fprintf(stderr, "tier-recv: %s\n", err);
		return 1;
	}
	size_t px = (size_t)size * size * 3, nu = px * batch, nf = nu * 4;
	uint8_t *u8 = malloc(nu), *uin = malloc(nu);
	float *f32 = malloc(nf), *tmp = malloc(px * 4);
	/* A FUSE thread's reply buffer (engine/tier.c's bounce): */
	uint8_t *bounce = aligned_alloc(2u << 20, 2u << 20);
	/* Page-aligned, as a batch buffer (mapped) is: */
	float *fin = aligned_alloc(4096, (nf + 4095) & ~(size_t)4095);
	struct iovec vf = {fin, nf}, vu = {uin, nu};
	struct xf_mix mix = {false, 0.7, 0, 0, 0, 0};

	if (!u8 || !uin || !f32 || !fin || !tmp || !bounce) {
		fprintf(stderr, "tier-recv: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < nu; i++)
		u8[i] = (uint8_t)(i * 2654435761u >> 13);
	for (unsigned s = 0; s < batch; s++) {
		struct xf_image im = {.w = size, .h = size, .px = u8 + s * px};

		xf_convert(&im, true, mean, sd, XF_FLOAT32, XF_CHW,
		    f32 + s * px);
	}
	struct iovec pf = {f32, nf}, pu = {u8, nu};
	if (cluster_blob_put(c, kf, &pf, 1, 600) != 0 ||
	    cluster_blob_put(c, ku, &pu, 1, 600) != 0) {
		cluster_last_error(c, err, sizeof(err));
		fprintf(stderr, "tier-recv: cannot store the batches: %s "
				"(memcached -m too small?)\n",
		    err);
		return 1;
	}
	for (unsigned r = 0; r < rounds; r++) {
		double t0 = cpu_now(), t1, t2, t3, t4, t5, t6, t7;
		int e1, e2;

		e1 = cluster_blob_get(c, kf, &vf, 1);
		t1 = cpu_now();
		e2 = cluster_blob_get(c, ku, &vu, 1);
		t2 = cpu_now();
		for (unsigned s = 0; s < batch; s++) {
			struct xf_image im = {
			    .w = size, .h = size, .px = uin + s * px};

			xf_convert(&im, true, mean, sd, XF_FLOAT32, XF_CHW,
			    fin + s * px);
		}
		t3 = cpu_now();
		xf_mix_images(&mix, fin, batch, size, size, XF_FLOAT32, XF_CHW,
		    tmp);
		t4 = cpu_now();
		t5 = cpu_now();
		/* As a mount reads a batch from the tier: a request (1 MiB)
		 * at a time into one buffer, plain, then mixup. */
		for (int mixed = 0; mixed < 2; mixed++) {
			double conv_t = 0;
			size_t per = px * 4, total = per * batch;

			for (size_t at = 0; at < total; at += REQ) {
				size_t end = at + REQ < total ? at + REQ : total;

				double q0 = cpu_now();
				for (size_t v = at / 4; v < end / 4;) {
					size_t s = v / px, v0 = v % px,
					       v1 = end / 4 - s * px < px
							? end / 4 - s * px
							: px;
					struct xf_image im = {.w = size,
					    .h = size,
					    .px = uin + s * px},
							prev = im;

					prev.px = uin +
						  (s ? s - 1 : batch - 1) * px;
					xf_convert_range(&im, &prev,
					    mixed ? &mix : NULL, true, mean, sd,
					    XF_FLOAT32, XF_CHW, v0, v1,
					    bounce + (v * 4 - at));
					v += v1 - v0;
				}
				conv_t += cpu_now() - q0;
				/* The kernel's copy to the reader (untimed):
				 * it evicts what the next request reads. */
				memcpy((uint8_t *)fin + at, bounce, end - at);
			}
			if (mixed)
				t7 = t6 + conv_t;
			else
				t6 = t5 + conv_t;
		}
		if (e1 != 0 || e2 != 0) {
			fprintf(stderr, "tier-recv: get: %s\n",
			    strerror(-(e1 ? e1 : e2)));
			return 1;
		}
		double d[6] = {
		    t1 - t0, t2 - t1, t3 - t2, t4 - t3, t6 - t5, t7 - t6};
		for (int k = 0; k < 6; k++)
			if (d[k] < best[k])
				best[k] = d[k];
	}
	printf("tier-recv: %u images of %ux%u, %s, best of %u rounds "
	       "(thread CPU, us/image)\n",
	    batch, size, size, o.secret_file ? "GMAC" : "XXH3-128", rounds);
	printf("  float32 from the tier  %8.1f us  (%zu bytes/image)\n",
	    best[0] * 1e6 / batch, nf / batch);
	printf("  uint8 from the tier    %8.1f us  (%zu bytes/image)\n",
	    best[1] * 1e6 / batch, nu / batch);
	printf("  convert uint8->float32 %8.1f us\n", best[2] * 1e6 / batch);
	printf("  uint8 + convert        %8.1f us\n",
	    (best[1] + best[2]) * 1e6 / batch);
	printf("  mixup (either way)     %8.1f us\n", best[3] * 1e6 / batch);
	printf("  convert + mixup        %8.1f us\n",
	    (best[2] + best[3]) * 1e6 / batch);
	printf("  convert as read        %8.1f us\n", best[4] * 1e6 / batch);
	printf("  convert + mixup as read%8.1f us\n", best[5] * 1e6 / batch);
	free(u8);
	free(uin);
	free(f32);
	free(fin);
	free(tmp);
	free(bounce);
	cluster_close(c);
	return 0;
}
