/*
 * ds_common.c - layer: dataset/ (the datasets), its bottom (under dataset.c
 * and its backends ds_scan.c and the tar shard files ds_tar*.c,
 * ds_shard_list.c, ds_label.c; calls nothing of them, only dataset/remote/ to
 * close a dataset's remote reader).  What they share: freeing a dataset and
 * its samples, the ".." test of a relative path, and a pread of all of a
 * range.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset/ds_int.h"
#include "dataset/remote/remote_int.h"

void
ds_free_samples(struct ds_sample *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].path);
		free(v[i].open_path);
		free(v[i].text);
		free(v[i].labels);
	}
	free(v);
}

void
ds_free(struct dataset *ds)
{
	if (ds == NULL)
		return;
	ds_free_samples(ds->samples, ds->n);
	for (size_t i = 0; i < ds->nleft; i++) {
		free(ds->left[i].path);
		free(ds->left[i].target);
	}
	free(ds->left);
	for (size_t i = 0; i < ds->nguards; i++) {
		free(ds->guards[i].groups);
		free(ds->guards[i].okdir);
	}
	free(ds->guards);
	if (ds->remote != NULL || ds->robjs != NULL)
		remote_close(ds->remote, ds->robjs, ds->nshards);
	for (size_t i = 0; i < ds->nshards; i++)
		free(ds->shards[i].path);
	free(ds->shards);
	free(ds->digests);
	for (size_t i = 0; ds->classes != NULL && i < ds->nclasses; i++)
		free(ds->classes[i]);
	free(ds->classes);
	free(ds->root);
	free(ds->name);
	free(ds);
}

bool
ds_has_dotdot(const char *path)
{
	for (const char *p = path; p != NULL; p = strchr(p, '/')) {
		if (*p == '/')
			p++;
		if (p[0] == '.' && p[1] == '.' && (p[2] == '/' || p[2] == '\0'))
			return true;
	}
	return false;
}

int
ds_pread_all(int fd, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;

	while (got < n) {
		ssize_t k = pread(
		    fd, (uint8_t *)buf + got, n - got, (off_t)(off + got));

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			return -EIO;
		got += (size_t)k;
	}
	return 0;
}
