/*
 * ds_tar_read.c - layer: dataset/ (the datasets), tar shard backend, its
 * reads (called by dataset.c and the engine through dataset.h; calls
 * ds_common.c and dataset/remote/).  ds_member_read reads a sample's image
 * member: with pread from a local shard, after checking that the shard did
 * not change since it was indexed, or a ranged request to a remote one;
 * the rest says what the index pass saw of a member (ds_sample_digest) and
 * passes the engine's hints to the remote reads (ds_remote_*).
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset/ds_remote.h"
#include "dataset/ds_tar_int.h"
#include "dataset/remote/remote_int.h"

int
ds_member_read(const struct dataset *ds, size_t id, size_t max, uint8_t **out,
    size_t *len, struct stat *st, char *err, size_t errlen)
{
	const struct ds_sample *sm;
	const struct ds_shard *sh;
	struct stat sb;
	uint8_t *buf;
	int fd, r;

	if (id >= ds->n || ds->nshards == 0) {
		snprintf(err, errlen, "%s: no sample %zu", ds->root, id);
		return -EINVAL;
	}
	sm = &ds->samples[id];
	sh = &ds->shards[sm->shard];
	if (sm->bad != NULL) {
		snprintf(err, errlen, "%s/%s: %s", ds->root, sm->path, sm->bad);
		return -EIO;
	}
	if (ds->robjs != NULL) {
		char why[512];

		if (sm->size > max) {
			snprintf(err, errlen,
			    "%s/%s: member too large (%" PRIu64 " bytes)",
			    ds->root, sm->path, sm->size);
			return -EFBIG;
		}
		if (sm->size == 0) {
			/* Nothing to ask for (a range cannot be empty). */
			if ((*out = malloc(1)) == NULL)
				return -ENOMEM;
		} else if ((r = remote_read(ds->remote, &ds->robjs[sm->shard],
				sm->off, sm->size, out, why, sizeof(why))) != 0) {
			snprintf(err, errlen, "%s/%s: %s", ds->root, sm->path,
			    why);
			return r == -ENOMEM || r == -EHOSTDOWN ? r : -EIO;
		}
		*len = (size_t)sm->size;
		*st = sh->st;
		return 0;
	}
	if ((fd = open(
		 sh->path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)) < 0) {
		r = -errno;
		snprintf(
		    err, errlen, "%s/%s: %s", ds->root, sm->path, strerror(-r));
		return r;
	}
	if (fstat(fd, &sb) != 0) {
		r = -errno;
		goto out_err;
	}
	if (!S_ISREG(sb.st_mode) || !ds_shard_same(&sb, &sh->st)) {
		close(fd);
		snprintf(err, errlen,
		    "%s/%s: the shard changed since it was indexed "
		    "(remount to index it again)",
		    ds->root, sm->path);
		return -EIO;
	}
	if (sm->size > max) {
		close(fd);
		snprintf(err, errlen,
		    "%s/%s: member too large (%" PRIu64 " bytes)", ds->root,
		    sm->path, sm->size);
		return -EFBIG;
	}
	if ((buf = malloc(sm->size ? (size_t)sm->size : 1)) == NULL) {
		r = -ENOMEM;
		goto out_err;
	}
	if ((r = ds_pread_all(fd, buf, (size_t)sm->size, sm->off)) != 0) {
		free(buf);
		goto out_err;
	}
	close(fd);
	*out = buf; /* transferred */
	*len = (size_t)sm->size;
	*st = sb;
	return 0;
out_err:
	close(fd);
	snprintf(err, errlen, "%s/%s: %s", ds->root, sm->path, strerror(-r));
	return r;
}

const struct ds_digest *
ds_sample_digest(const struct dataset *ds, size_t id)
{
	uint32_t k;

	if (id >= ds->n || (k = ds->samples[id].digest) == 0 ||
	    k > ds->ndigests)
		return NULL;
	return &ds->digests[k - 1];
}

const struct remote_stats *
ds_remote_stats(const struct dataset *ds)
{
	return ds->remote ? &ds->remote->st : NULL;
}

void
ds_remote_window(struct dataset *ds, uint64_t bytes)
{
	if (ds->remote != NULL)
		remote_set_window(ds->remote, bytes);
}

uint64_t
ds_remote_room(const struct dataset *ds)
{
	return ds->remote ? remote_room(ds->remote) : 0;
}

void
ds_remote_prefetch(const struct dataset *ds, size_t id)
{
	const struct ds_sample *sm = &ds->samples[id];

	if (ds->robjs != NULL && sm->bad == NULL && sm->shard < ds->nshards &&
	    sm->size > 0)
		remote_prefetch(ds->remote, &ds->robjs[sm->shard], sm->off,
		    sm->size);
}

void
ds_remote_forget(const struct dataset *ds, size_t id)
{
	const struct ds_sample *sm;

	if (ds->robjs == NULL || id >= ds->n)
		return;
	sm = &ds->samples[id];
	remote_forget(ds->remote, &ds->robjs[sm->shard], sm->off, sm->size);
}
