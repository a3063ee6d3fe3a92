/*
 * sample_source.c - the model (core/): a sample's source file: its path,
 * the stat its digest memo is keyed by, its bytes read whole
 * (sample_read, see sample_int.h), and its reads ahead (sample_prefetch,
 * see sample.h).  Below sample.c and sample_cache.c; calls neither.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "core/sample.h"
#include "core/sample_int.h"

/* Source files larger than this are refused (no JPEG of a sane image is). */
#define SAMPLE_MAX_FILE (512u << 20)

/*
 * Whether an error of reading a source may go away by itself (the process
 * is out of descriptors or memory): such a sample is retried or fails its
 * batch, never substituted, since a substitution changes the batch.
 */
static bool
transient(int e)
{
	return e == EMFILE || e == ENFILE || e == ENOMEM || e == ENOBUFS ||
	       e == EAGAIN || e == EINTR;
}

int
sample_read(const struct job *j, uint32_t gid, uint8_t **out, size_t *len,
    struct stat *st, bool *steady, char *err, size_t errlen)
{
	struct timespec t0;
	struct stat after;
	uint32_t id;
	const struct dataset *ds = job_source_of(j, gid, &id)->ds;
	uint8_t *buf = NULL;
	size_t got = 0;
	int fd, r;

	clock_gettime(CLOCK_REALTIME, &t0);
	if (ds->nshards > 0) {
		/*
		 * A tar member, by pread (dataset/ds_tar.c), which checks that
		 * the shard is still the one indexed; *st is the shard's.
		 * The racy rule holds for the shard's times.
		 */
		r = ds_member_read(
		    ds, id, SAMPLE_MAX_FILE, out, len, st, err, errlen);
		if (r == 0 && steady != NULL)
			*steady = cache_memo_trusted(st, st, &t0);
		return r == 0		     ? 0
		       : transient(-r)	     ? -EAGAIN
		       : r == -EHOSTDOWN ? r /* a remote source down */
					     : -EIO;
	}
	if ((r = ds_sample_open(ds, id, &fd, st, err, errlen)) != 0) {
		struct stat rs;

		if (transient(-r))
			return -EAGAIN;
		if (stat(ds->root, &rs) != 0 || !S_ISDIR(rs.st_mode)) {
			snprintf(err, errlen, "dataset root %s: %s", ds->root,
			    strerror(errno ? errno : ENOTDIR));
			return -ENODEV;
		}
		return -EIO;
	}
	if (st->st_size > SAMPLE_MAX_FILE) {
		snprintf(err, errlen, "%s/%s: file too large (%jd bytes)",
		    ds->root, ds->samples[id].path, (intmax_t)st->st_size);
		r = -EIO;
		goto out;
	}
	if ((buf = xf_alloc(st->st_size ? (size_t)st->st_size : 1)) == NULL) {
		snprintf(err, errlen, "%s/%s: out of memory", ds->root,
		    ds->samples[id].path);
		r = -EAGAIN;
		goto out;
	}
	while (got < (size_t)st->st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st->st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = transient(errno) ? -EAGAIN : -EIO;
			snprintf(err, errlen, "%s/%s: %s", ds->root,
			    ds->samples[id].path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break; /* shrank under us: decode what is there */
		got += (size_t)n;
	}
	if (steady != NULL)
		*steady = fstat(fd, &after) == 0 &&
			  cache_memo_trusted(st, &after, &t0);
	*out = buf; /* transferred */
	*len = got;
	buf = NULL;
	r = 0;
out:
	xf_free(buf);
	close(fd);
	return r;
}

int
sample_stat(const struct job *j, uint32_t gid, struct stat *st)
{
	uint32_t id;
	const struct dataset *ds = job_source_of(j, gid, &id)->ds;

	return ds_sample_stat(ds, id, st);
}

int
sample_path(const struct job *j, uint32_t id, char *path, size_t len, char *err,
    size_t errlen)
{
	uint32_t local;
	const struct dataset *ds = job_source_of(j, id, &local)->ds;

	id = local;
	if ((size_t)snprintf(
		path, len, "%s/%s", ds->root, ds->samples[id].path) >= len) {
		snprintf(err, errlen, "%s/%s: path too long", ds->root,
		    ds->samples[id].path);
		return -EIO;
	}
	return 0;
}

void
sample_prefetch_source(struct job *j, uint32_t gid)
{
	uint32_t id;
	const struct dataset *ds;

	ds = job_source_of(j, gid, &id)->ds;
	ds_sample_prefetch(ds, id); /* it checks the id */
	atomic_fetch_add(&j->st.prefetched, 1);
}

void
sample_prefetch(struct job *j, uint32_t gid)
{
	if (atomic_load_explicit(&j->reads_source, memory_order_relaxed))
		sample_prefetch_source(j, gid);
}
