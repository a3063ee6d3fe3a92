/*
 * xfrun - run a pipeline on one JPEG, for tests that compare with
 * PIL/torchvision.
 *
 *   xfrun PIPELINE JPEG OUT [--dtype uint8|float16|float32]
 *       [--layout HWC|CHW] [--key N] [--prefix-only] [--print-rrc]
 *       [--rrc-only] [--count N] [--print-params]
 *
 * Writes the raw sample bytes to OUT.  With --prefix-only it writes the
 * prefix image (raw HWC uint8) instead and prints "W H" (and "SW SH",
 * its frame, when shrink set one).  --print-rrc prints "x y w h", the box
 * of the first random_resized_crop, computed on the prefix image in its
 * frame (the source's pixels after shrink; right when that op is the
 * first one after the prefix), a line for each of the --count keys;
 * --rrc-only prints them and stops there (nothing is written to OUT).
 * --count N runs the ops after the prefix N times, with keys KEY .. KEY +
 * N - 1, on copies of the prefix image, and writes the N samples one after
 * the other.  --print-params prints, for each of those keys, a line of the
 * draws of its gaussian_blur and random_erasing ops: "sigma S" (%.9g) and
 * "erase TOP LEFT H W" or "erase -" for none; --params-only then stops
 * there (neither JPEG nor OUT is touched).
 * Exit 0, 1 on error with the message on stderr, 2 on bad usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transforms/xf.h"

static void
usage(void)
{
	fprintf(stderr, "usage: xfrun PIPELINE JPEG OUT [--dtype "
			"uint8|float16|float32] [--layout HWC|CHW] [--key N] "
			"[--prefix-only] [--print-rrc] [--rrc-only] "
			"[--count N] [--print-params] [--params-only]\n");
}

static int
read_all(const char *path, uint8_t **buf, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	uint8_t *b = NULL;
	size_t n = 0, cap = 0, got;

	if (fp == NULL)
		return -errno;
	for (;;) {
		if (n == cap) {
			uint8_t *nb;

			cap = cap ? 2 * cap : 65536;
			if ((nb = realloc(b, cap)) == NULL) {
				free(b);
				fclose(fp);
				return -ENOMEM;
			}
			b = nb;
		}
		got = fread(b + n, 1, cap - n, fp);
		n += got;
		if (got == 0)
			break;
	}
	if (ferror(fp)) {
		free(b);
		fclose(fp);
		return -EIO;
	}
	fclose(fp);
	*buf = b;
	*len = n;
	return 0;
}

static int
write_all(const char *path, const void *buf, size_t len)
{
	FILE *fp = fopen(path, "wb");

	if (fp == NULL || fwrite(buf, 1, len, fp) != len) {
		if (fp)
			fclose(fp);
		return -1;
	}
	return fclose(fp) == 0 ? 0 : -1;
}

int
main(int argc, char **argv)
{
	const char *pipeline, *in, *outpath;
	enum xf_dtype dtype = XF_UINT8;
	enum xf_layout layout = XF_HWC;
	uint64_t key = 0;
	bool prefix_only = false, print_rrc = false, print_params = false;
	bool params_only = false, rrc_only = false;
	uint64_t count = 1;
	struct xf_pipeline *pl = NULL;
	struct xf_image img = {0};
	uint8_t *src = NULL;
	void *dst = NULL;
	size_t len = 0, bytes;
	char err[512];
	int r, ret = 1;

	if (argc < 4) {
		usage();
		return 2;
	}
	pipeline = argv[1];
	in = argv[2];
	outpath = argv[3];
	for (int i = 4; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--prefix-only") == 0)
			prefix_only = true;
		else if (strcmp(a, "--print-rrc") == 0)
			print_rrc = true;
		else if (strcmp(a, "--rrc-only") == 0)
			print_rrc = rrc_only = true;
		else if (strcmp(a, "--print-params") == 0)
			print_params = true;
		else if (strcmp(a, "--params-only") == 0)
			print_params = params_only = true;
		else if (v == NULL) {
			usage();
			return 2;
		} else if (strcmp(a, "--dtype") == 0) {
			i++;
			if (strcmp(v, "uint8") == 0)
				dtype = XF_UINT8;
			else if (strcmp(v, "float16") == 0)
				dtype = XF_FLOAT16;
			else if (strcmp(v, "float32") == 0)
				dtype = XF_FLOAT32;
			else {
				usage();
				return 2;
			}
		} else if (strcmp(a, "--layout") == 0) {
			i++;
			if (strcmp(v, "HWC") == 0)
				layout = XF_HWC;
			else if (strcmp(v, "CHW") == 0)
				layout = XF_CHW;
			else {
				usage();
				return 2;
			}
		} else if (strcmp(a, "--key") == 0) {
			i++;
			key = strtoull(v, NULL, 0);
		} else if (strcmp(a, "--count") == 0) {
			i++;
			count = strtoull(v, NULL, 0);
			if (count == 0 || count > 1000000) {
				usage();
				return 2;
			}
		} else {
			usage();
			return 2;
		}
	}

	if (xf_pipeline_parse(pipeline, &pl, err, sizeof(err)) != 0 ||
	    (!prefix_only &&
		xf_check_output(pl, dtype, err, sizeof(err)) != 0)) {
		fprintf(stderr, "xfrun: %s\n", err);
		goto out;
	}
	if (print_params)
		for (uint64_t n = 0; n < count; n++) {
			for (size_t i = 0; i < pl->nops; i++) {
				const struct xf_op *op = &pl->ops[i];
				uint32_t t, l, eh, ew;

				if (op->kind == XF_OP_GAUSSIAN_BLUR)
					printf("sigma %.9g ",
					    (double)xf_blur_sigma(op, key + n,
						(uint64_t)i << 32));
				if (op->kind != XF_OP_RANDOM_ERASING)
					continue;
				if (xf_erasing_params(op, pl->out_w, pl->out_h,
					key + n, (uint64_t)i << 32, &t, &l, &eh,
					&ew))
					printf(
					    "erase %u %u %u %u ", t, l, eh, ew);
				else
					printf("erase - ");
			}
			printf("\n");
		}
	if (params_only) {
		ret = 0;
		goto out;
	}
	if ((r = read_all(in, &src, &len)) != 0) {
		fprintf(stderr, "xfrun: %s: %s\n", in, strerror(-r));
		goto out;
	}
	if (xf_run_prefix(pl, src, len, &img, err, sizeof(err)) != 0) {
		fprintf(stderr, "xfrun: %s: %s\n", in, err);
		goto out;
	}
	if (print_rrc) {
		for (size_t i = 0; i < pl->nops; i++) {
			const struct xf_op *op = &pl->ops[i];
			int32_t x, y;
			uint32_t cw, ch;

			if (op->kind != XF_OP_RRC)
				continue;
			for (uint64_t n = 0; n < count; n++) {
				xf_rrc_box(
				    pl, i, &img, key + n, &x, &y, &cw, &ch);
				printf("%" PRId32 " %" PRId32 " %" PRIu32
				       " %" PRIu32 "\n",
				    x, y, cw, ch);
			}
			break;
		}
		if (rrc_only) {
			ret = 0;
			goto out;
		}
	}
	if (prefix_only) {
		printf("%" PRIu32 " %" PRIu32, img.w, img.h);
		if (img.src_w != 0)
			printf(" %" PRIu32 " %" PRIu32, img.src_w, img.src_h);
		printf("\n");
		if (write_all(outpath, img.px, (size_t)img.w * img.h * 3) !=
		    0) {
			fprintf(stderr, "xfrun: %s: %s\n", outpath,
			    strerror(errno));
			goto out;
		}
		ret = 0;
		goto out;
	}
	bytes = xf_sample_bytes(pl, dtype);
	if ((dst = malloc(bytes * count)) == NULL) {
		fprintf(stderr, "xfrun: out of memory\n");
		goto out;
	}
	for (uint64_t n = 0; n < count; n++) {
		struct xf_image copy = img;

		if (n + 1 < count) {
			size_t sz = (size_t)img.w * img.h * 3;

			if ((copy.px = xf_alloc(sz)) == NULL) {
				fprintf(stderr, "xfrun: out of memory\n");
				goto out;
			}
			memcpy(copy.px, img.px, sz);
		} else
			img.px = NULL; /* consumed */
		r = xf_run_suffix(
		    pl, &copy, key + n, dtype, layout, (char *)dst + n * bytes);
		if (r != 0) {
			fprintf(stderr, "xfrun: %s: %s\n", in, strerror(-r));
			goto out;
		}
	}
	if (write_all(outpath, dst, bytes * count) != 0) {
		fprintf(stderr, "xfrun: %s: %s\n", outpath, strerror(errno));
		goto out;
	}
	ret = 0;
out:
	free(img.px);
	free(dst);
	free(src);
	xf_pipeline_free(pl);
	return ret;
}
