/*
 * decode-floor - the decode floor of bench/run: libjpeg-turbo decode of
 * every listed image at full size to RGB, one thread per core, in-process,
 * without feedfs.  Files are read into memory before the clock starts so
 * that what is timed is the decode alone.
 *
 *   decode-floor [--threads N] [--pipeline TEXT [--dtype uint8|float32]
 *       [--layout HWC|CHW]] LIST          (LIST: one path per line)
 *
 * With --pipeline, each image goes through feedfs's own transforms
 * instead (xf_run_prefix, then xf_run_suffix into a sample of dtype and
 * layout, random draws keyed by the image's index; a scratch arena per
 * thread, as the mount's workers have): what that pipeline costs in
 * process, without the cache, FUSE or the kernel, to set beside the
 * floor and the mount's epochs.
 *
 * Prints "decode-floor: N images in S s = R images/s (T threads, F failed)".
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jpeglib.h>

#include "transforms/xf.h"

struct file {
	unsigned char *data;
	size_t len;
};

static struct file *files;
static size_t nfiles;
static atomic_size_t next, failed;
static struct xf_pipeline *pl; /* --pipeline: feedfs's transforms */
static enum xf_dtype dtype = XF_FLOAT32;
static enum xf_layout layout = XF_CHW;

struct jerr {
	struct jpeg_error_mgr pub;
	jmp_buf jb;
};

static void
on_error(j_common_ptr cinfo)
{
	longjmp(((struct jerr *)cinfo->err)->jb, 1);
}

static int
decode(const struct file *f, unsigned char **buf, size_t *cap)
{
	struct jpeg_decompress_struct d;
	struct jerr je;

	d.err = jpeg_std_error(&je.pub);
	je.pub.error_exit = on_error;
	if (setjmp(je.jb)) {
		jpeg_destroy_decompress(&d);
		return -1;
	}
	jpeg_create_decompress(&d);
	jpeg_mem_src(&d, f->data, f->len);
	jpeg_read_header(&d, TRUE);
	d.out_color_space = JCS_RGB;
	if (d.jpeg_color_space == JCS_CMYK || d.jpeg_color_space == JCS_YCCK)
		d.out_color_space = JCS_CMYK;
	jpeg_start_decompress(&d);
	size_t stride = (size_t)d.output_width * d.output_components;
	size_t need = stride * d.output_height;
	if (need > *cap) {
		free(*buf);
		if ((*buf = malloc(need)) == NULL) {
			jpeg_destroy_decompress(&d);
			return -1;
		}
		*cap = need;
	}
	while (d.output_scanline < d.output_height) {
		JSAMPROW row = *buf + stride * d.output_scanline;
		jpeg_read_scanlines(&d, &row, 1);
	}
	jpeg_finish_decompress(&d);
	jpeg_destroy_decompress(&d);
	return 0;
}

/* Image i through the pipeline into dst (a sample's bytes). */
static int
transform(size_t i, void *dst)
{
	struct xf_image img = {0};
	char err[256];

	if (xf_run_prefix(
		pl, files[i].data, files[i].len, &img, err, sizeof(err)) != 0) {
		fprintf(stderr, "decode-floor: image %zu: %s\n", i, err);
		return -1;
	}
	return xf_run_suffix(pl, &img, i, dtype, layout, dst);
}

static void *
worker(void *arg)
{
	unsigned char *buf = NULL;
	size_t cap = 0, i;
	struct xf_arena *a = NULL;

	(void)arg;
	if (pl != NULL) {
		cap = xf_sample_bytes(pl, dtype);
		if ((buf = malloc(cap)) == NULL) {
			atomic_fetch_add(&failed, nfiles);
			return NULL;
		}
		a = xf_arena_new(64u << 20);
		xf_arena_use(a); /* NULL (no memory): malloc */
	}
	while ((i = atomic_fetch_add(&next, 1)) < nfiles)
		if ((pl ? transform(i, buf) : decode(&files[i], &buf, &cap)) !=
		    0)
			atomic_fetch_add(&failed, 1);
	if (pl != NULL) {
		xf_arena_use(NULL);
		xf_arena_free(a);
	}
	free(buf);
	return NULL;
}

static int
load(const char *list)
{
	char *line = NULL;
	size_t cap = 0, fcap = 0;
	ssize_t n;
	FILE *lp = fopen(list, "r");

	if (!lp) {
		perror(list);
		return -1;
	}
	while ((n = getline(&line, &cap, lp)) > 0) {
		FILE *fp;
		long sz;

		if (line[n - 1] == '\n')
			line[n - 1] = '\0';
		if (nfiles == fcap) {
			fcap = fcap ? 2 * fcap : 1024;
			files = realloc(files, fcap * sizeof(*files));
			if (!files)
				return -1;
		}
		if ((fp = fopen(line, "rb")) == NULL ||
		    fseek(fp, 0, SEEK_END) || (sz = ftell(fp)) < 0 ||
		    fseek(fp, 0, SEEK_SET)) {
			perror(line);
			return -1;
		}
		files[nfiles].len = (size_t)sz;
		files[nfiles].data = malloc((size_t)sz);
		if (!files[nfiles].data || fread(files[nfiles].data, 1,
					       (size_t)sz, fp) != (size_t)sz) {
			perror(line);
			return -1;
		}
		fclose(fp);
		nfiles++;
	}
	free(line);
	fclose(lp);
	return 0;
}

int
main(int argc, char **argv)
{
	long nthreads = sysconf(_SC_NPROCESSORS_ONLN);
	const char *pipeline = NULL;
	struct timespec t0, t1;
	pthread_t *th;
	char err[256];
	int i = 1;

	for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
		const char *o = argv[i], *v = argv[i + 1];

		if (strcmp(o, "--threads") == 0)
			nthreads = atol(v);
		else if (strcmp(o, "--pipeline") == 0)
			pipeline = v;
		else if (strcmp(o, "--dtype") == 0 && strcmp(v, "uint8") == 0)
			dtype = XF_UINT8;
		else if (strcmp(o, "--dtype") == 0 && strcmp(v, "float32") == 0)
			dtype = XF_FLOAT32;
		else if (strcmp(o, "--layout") == 0 && strcmp(v, "HWC") == 0)
			layout = XF_HWC;
		else if (strcmp(o, "--layout") == 0 && strcmp(v, "CHW") == 0)
			layout = XF_CHW;
		else
			break;
	}
	if (argc - i != 1 || nthreads < 1) {
		fprintf(stderr, "usage: decode-floor [--threads N] [--pipeline "
				"TEXT [--dtype uint8|float32] [--layout "
				"HWC|CHW]] LIST\n");
		return 2;
	}
	if (pipeline != NULL &&
	    (xf_pipeline_parse(pipeline, &pl, err, sizeof(err)) != 0 ||
		xf_check_output(pl, dtype, err, sizeof(err)) != 0)) {
		fprintf(stderr, "decode-floor: %s\n", err);
		return 2;
	}
	if (load(argv[i]) != 0)
		return 1;
	th = calloc((size_t)nthreads, sizeof(*th));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long k = 0; k < nthreads; k++)
		pthread_create(&th[k], NULL, worker, NULL);
	for (long k = 0; k < nthreads; k++)
		pthread_join(th[k], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) +
		   (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	printf("decode-floor: %zu images in %.2f s = %.0f images/s (%ld "
	       "threads, %zu failed)\n",
	    nfiles, s, (double)nfiles / s, nthreads, (size_t)failed);
	xf_pipeline_free(pl);
	return failed ? 1 : 0;
}
