/*
 * decode-floor - the decode floor of bench/run: libjpeg-turbo decode of
 * every listed image at full size to RGB, one thread per core, in-process,
 * without feedfs.  Files are read into memory before the clock starts so
 * that what is timed is the decode alone.
 *
 *   decode-floor [--threads N] LIST     (LIST: one path per line)
 *
 * Prints "decode-floor: N images in S s = R images/s (T threads)".
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

struct file {
	unsigned char *data;
	size_t len;
};

static struct file *files;
static size_t nfiles;
static atomic_size_t next, failed;

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

static void *
worker(void *arg)
{
	unsigned char *buf = NULL;
	size_t cap = 0, i;

	(void)arg;
	while ((i = atomic_fetch_add(&next, 1)) < nfiles)
		if (decode(&files[i], &buf, &cap) != 0)
			atomic_fetch_add(&failed, 1);
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
		if ((fp = fopen(line, "rb")) == NULL || fseek(fp, 0, SEEK_END) ||
		    (sz = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET)) {
			perror(line);
			return -1;
		}
		files[nfiles].len = (size_t)sz;
		files[nfiles].data = malloc((size_t)sz);
		if (!files[nfiles].data ||
		    fread(files[nfiles].data, 1, (size_t)sz, fp) != (size_t)sz) {
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
	struct timespec t0, t1;
	pthread_t *th;
	int i = 1;

	if (argc == 4 && strcmp(argv[1], "--threads") == 0) {
		nthreads = atol(argv[2]);
		i = 3;
	}
	if (argc - i != 1 || nthreads < 1) {
		fprintf(stderr, "usage: decode-floor [--threads N] LIST\n");
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
	return failed ? 1 : 0;
}
