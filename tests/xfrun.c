/*
 * xfrun - run a pipeline on one JPEG, for tests that compare with
 * PIL/torchvision.
 *
 *   xfrun PIPELINE JPEG OUT [--dtype uint8|float16|float32]
 *       [--layout HWC|CHW] [--key N] [--prefix-only] [--print-rrc]
 *
 * Writes the raw sample bytes to OUT.  With --prefix-only it writes the
 * prefix image (raw HWC uint8) instead and prints "W H".  --print-rrc
 * prints "x y w h", the box of the first random_resized_crop, computed on
 * the prefix image (right when that op is the first one after the prefix).
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
			"[--prefix-only] [--print-rrc]\n");
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
	bool prefix_only = false, print_rrc = false;
	struct xf_pipeline *pl = NULL;
	struct xf_image img = {0};
	uint8_t *src = NULL;
	void *dst = NULL;
	size_t len = 0;
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
			xf_rrc_params(img.w, img.h, op->scale, op->ratio, key,
			    (uint64_t)i << 32, &x, &y, &cw, &ch);
			printf("%" PRId32 " %" PRId32 " %" PRIu32 " %" PRIu32
			       "\n",
			    x, y, cw, ch);
			break;
		}
	}
	if (prefix_only) {
		printf("%" PRIu32 " %" PRIu32 "\n", img.w, img.h);
		if (write_all(outpath, img.px, (size_t)img.w * img.h * 3) !=
		    0) {
			fprintf(stderr, "xfrun: %s: %s\n", outpath,
			    strerror(errno));
			goto out;
		}
		ret = 0;
		goto out;
	}
	if ((dst = malloc(xf_sample_bytes(pl, dtype))) == NULL) {
		fprintf(stderr, "xfrun: out of memory\n");
		goto out;
	}
	if ((r = xf_run_suffix(pl, &img, key, dtype, layout, dst)) != 0) {
		fprintf(stderr, "xfrun: %s: %s\n", in, strerror(-r));
		goto out;
	}
	if (write_all(outpath, dst, xf_sample_bytes(pl, dtype)) != 0) {
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
