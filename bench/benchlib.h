/*
 * benchlib.h - what the C benchmarks share: the JPEGs of an ImageFolder
 * tree (make-dataset's), read whole, in name order.
 */
#ifndef FEEDFS_BENCHLIB_H
#define FEEDFS_BENCHLIB_H

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline int
bench_read_all(const char *path, uint8_t **buf, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	long sz;

	if (fp == NULL)
		return -errno;
	if (fseek(fp, 0, SEEK_END) != 0 || (sz = ftell(fp)) < 0 ||
	    fseek(fp, 0, SEEK_SET) != 0 ||
	    (*buf = malloc((size_t)sz ? (size_t)sz : 1)) == NULL) {
		fclose(fp);
		return -EIO;
	}
	if (fread(*buf, 1, (size_t)sz, fp) != (size_t)sz) {
		free(*buf);
		fclose(fp);
		return -EIO;
	}
	fclose(fp);
	*len = (size_t)sz;
	return 0;
}

static inline int
bench_by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/*
 * Each .jpg of dir's class directories, in name order, read whole and
 * handed to take(arg, path, bytes, len) until max of them were taken
 * (take returns 0: taken; else skipped).  Returns how many were taken.
 */
static inline size_t
bench_load_jpegs(const char *dir, size_t max,
    int (*take)(void *arg, const char *path, const uint8_t *buf, size_t len),
    void *arg)
{
	struct dirent **cls = NULL;
	size_t n = 0;
	int nc = scandir(dir, &cls, NULL, bench_by_name);

	for (int c = 0; c < nc; c++) {
		struct dirent **fs = NULL;
		char path[4096];
		int nf;

		if (cls[c]->d_name[0] == '.') {
			free(cls[c]);
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s", dir, cls[c]->d_name);
		nf = scandir(path, &fs, NULL, bench_by_name);
		for (int f = 0; f < nf; f++) {
			char file[8192];
			uint8_t *buf = NULL;
			size_t len = 0;

			snprintf(
			    file, sizeof(file), "%s/%s", path, fs[f]->d_name);
			if (n < max && strstr(fs[f]->d_name, ".jpg") != NULL &&
			    bench_read_all(file, &buf, &len) == 0) {
				if (take(arg, file, buf, len) == 0)
					n++;
				free(buf);
			}
			free(fs[f]);
		}
		free(fs);
		free(cls[c]);
	}
	free(cls);
	return n;
}

#endif
