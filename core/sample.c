/*
 * sample.c - the model (core/): one sample from source file to output
 * bytes (see sample.h): the whole pipeline or the suffix after its prefix
 * (sample_make), a batch slot with on_error's retries and substitutes
 * (sample_make_slot), and a remote shard's read ahead unless the cache
 * holds the sample.  Over sample_cache.c (the prefix through the caches)
 * and sample_source.c (the source file).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "util/clock.h"
#include "util/log.h"
#include "core/sample.h"
#include "core/sample_int.h"

/* on_error = substitute tries at most this many samples for one slot. */
#define SAMPLE_SUBST_MAX 64
/* A transient failure (out of descriptors, memory) is retried this often. */
#define SAMPLE_RETRIES 3

/* A sample of a pipeline without cache, from the file in one call. */
static int
run_whole(struct job *j, const struct xf_pipeline *pl, uint32_t id,
    const char *path, uint64_t key, bool raw, void *dst, char *err,
    size_t errlen)
{
	uint8_t *src = NULL;
	size_t len = 0;
	struct stat st;
	char msg[384];
	int r;

	atomic_store_explicit(&j->reads_source, true, memory_order_relaxed);
	if ((r = sample_read(j, id, &src, &len, &st, NULL, err, errlen)) != 0)
		return r;
	r = xf_run(pl, src, len, key, raw ? XF_UINT8 : j->cfg->dtype,
	    raw ? XF_HWC : j->cfg->layout, dst, msg, sizeof(msg));
	xf_free(src);
	if (r != 0) {
		snprintf(err, errlen, "%s: %s", path, msg);
		return -EIO;
	}
	return 0;
}

int
sample_make(struct job *j, struct cache *c, uint32_t epoch, uint32_t id,
    bool raw, void *dst, char *err, size_t errlen)
{
	const struct xf_pipeline *pl = job_geo(j, epoch)->pl;
	struct xf_image img = {0};
	struct cache_val held = {0};
	char path[4096];
	uint64_t t0 = ff_mono_ns();
	int r;

	if ((r = sample_path(j, id, path, sizeof(path), err, errlen)) != 0)
		return r;
	if (id < j->ds->n && j->ds->samples[id].bad != NULL) {
		/*
		 * Known bad at the index (a member that cannot be served, no
		 * label, no caption): it fails before any cache is asked, so
		 * that a prefix cached under the same image (another job,
		 * another dataset) does not serve it without what it lacks.
		 */
		snprintf(err, errlen, "%s: %s", path, j->ds->samples[id].bad);
		r = -EIO;
		goto out;
	}
	if (j->prefix[0] == '\0') {
		/*
		 * No cache op: nothing to store, so the whole pipeline runs
		 * on the file's bytes (xf_run decodes only the box of a
		 * leading random_resized_crop).
		 */
		r = run_whole(j, pl, id, path, job_sample_key(j, epoch, id),
		    raw, dst, err, errlen);
		goto out;
	}
	if ((r = sample_prefix(
		 j, c, epoch, id, path, &img, &held, err, errlen)) != 0)
		goto out;
	r = xf_run_suffix(pl, &img, job_sample_key(j, epoch, id),
	    raw ? XF_UINT8 : j->cfg->dtype, raw ? XF_HWC : j->cfg->layout, dst);
	cache_val_release(&held); /* what img read in place */
	if (r != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(-r));
		r = -EIO;
	}
out:
	atomic_fetch_add(&j->st.busy_ns, ff_mono_ns() - t0);
	if (r == 0) {
		uint32_t local;

		atomic_fetch_add(&j->st.samples, 1);
		atomic_fetch_add(&job_source_of(j, id, &local)->samples, 1);
		job_rate_add(&j->st);
	}
	return r;
}

bool
sample_ahead_worth(struct job *j)
{
	return j->cluster == NULL ||
	       atomic_load_explicit(&j->reads_source, memory_order_relaxed);
}

bool
sample_fill_ahead_worth(struct job *j, uint32_t id)
{
	uint8_t digest[32];
	enum xf_src kind;

	return atomic_load_explicit(&j->reads_source, memory_order_relaxed) ||
	       !sample_index_digest(j, id, digest, &kind);
}

bool
sample_prefetch_remote(struct job *j, struct cache *c, uint32_t gid)
{
	char path[PATH_MAX], err[8];
	uint8_t digest[32], key[CACHE_KEY_LEN];
	enum xf_src kind;
	struct stat st;

	if (!sample_ahead_worth(j))
		return false;
	/*
	 * A sample whose digest is remembered and whose value the cache
	 * holds is a hit: its bytes are not fetched ahead (a miss after
	 * all reads them on demand).  Where the cache cannot tell (its
	 * store is another mount's), the memo alone says it was made.  A
	 * digest its shard's index names says nothing of that: there the
	 * last sample made tells (did it read its source?).
	 */
	if (c != NULL && j->prefix[0] != '\0' &&
	    sample_index_digest(j, gid, digest, &kind)) {
		int h;

		sample_cache_key(digest, j->key_text, kind, key);
		h = cache_holds(c, key);
		if (h > 0 || (h < 0 && !atomic_load_explicit(&j->reads_source,
					   memory_order_relaxed)))
			return false;
	} else if (c != NULL && j->prefix[0] != '\0' &&
		   sample_path(j, gid, path, sizeof(path), err, sizeof(err)) ==
		       0 &&
		   sample_stat(j, gid, &st) == 0 &&
		   sample_memo_get(c, path, &st, digest, &kind)) {
		sample_cache_key(digest, j->key_text, kind, key);
		if (cache_holds(c, key) != 0)
			return false;
	}
	sample_prefetch_source(j, gid);
	return true;
}

/* sample_make, retrying a transient failure a few times. */
static int
make_retrying(struct job *j, struct cache *c, uint32_t epoch, uint32_t id,
    bool raw, void *dst, char *err, size_t errlen)
{
	int r;

	for (unsigned i = 0;; i++) {
		r = sample_make(j, c, epoch, id, raw, dst, err, errlen);
		if (r != -EAGAIN || i == SAMPLE_RETRIES)
			return r;
		usleep(10000u << i); /* 10, 20, 40 ms */
	}
}

/* Whether sample id's failure is said for the first time (j->logged). */
static bool
first_time(struct job *j, uint32_t id)
{
	uint8_t bit = (uint8_t)(1u << (id & 7));

	return !(atomic_fetch_or(&j->logged[id >> 3], bit) & bit);
}

/*
 * A source that does not answer (-EHOSTDOWN: a remote shard's server) is
 * said at most once a minute per job, with what becomes of its samples:
 * an outage fails thousands of them, and errors.tsv lists each.
 */
static void
say_unavailable(struct job *j, const char *err)
{
	struct timespec ts;
	uint64_t now, last;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec;
	last = atomic_load(&j->unavail_said);
	if ((last != 0 && now < last + 60) ||
	    !atomic_compare_exchange_strong(&j->unavail_said, &last, now))
		return;
	log_warn("job %s: %s (the source does not answer: %s; each such "
		 "sample is counted in feedfs_sample_unavailable_total and "
		 "listed in errors.tsv; said once a minute)",
	    j->cfg->name, err,
	    j->cfg->on_error == CFG_ON_ERROR_FAIL
		? "its batches fail until it does, and each is made again "
		  "at its next read"
		: "its samples are substituted while others can be read; "
		  "a batch that cannot be filled fails, and is made again "
		  "at its next read");
}

int
sample_make_slot(struct job *j, struct cache *c, uint32_t epoch,
    const uint32_t *order, uint64_t pos, bool raw, void *dst, uint32_t *id_out,
    bool log, char *err, size_t errlen)
{
	size_t n = j->plan.n, /* the order's length */
	    tries = n < SAMPLE_SUBST_MAX ? n : SAMPLE_SUBST_MAX;
	uint32_t planned = n ? order[pos % n] : 0;
	char first[512] = "", last[512] = "";
	bool unavailable = false;
	int r = -EIO;

	/* A failure's slot names the planned sample (relaxed order's ids). */
	*id_out = planned;
	for (size_t k = 0; k < tries; k++) {
		uint32_t id = order[(pos + k) % n];

		if ((r = make_retrying(
			 j, c, epoch, id, raw, dst, err, errlen)) == 0) {
			if (k > 0) {
				atomic_fetch_add(&j->st.substituted, 1);
				/* Said once per sample, once it is done. */
				if (log && !unavailable &&
				    first_time(j, planned))
					log_warn("job %s: sample %" PRIu32
						 " (%s) substituted by sample "
						 "%" PRIu32,
					    j->cfg->name, planned, first, id);
			}
			/* Said once per outage: say it ended. */
			if (log && atomic_load(&j->source_logged) &&
			    atomic_exchange(&j->source_logged, false))
				log_info(
				    "job %s: the dataset can be read again",
				    j->cfg->name);
			*id_out = id;
			return 0;
		}
		atomic_fetch_add(&j->st.decode_errors, 1);
		if (r == -EHOSTDOWN) {
			atomic_fetch_add(&j->st.unavailable, 1);
			unavailable = true;
			if (log)
				say_unavailable(j, err);
		}
		if (log)
			job_note_error(j, id, err);
		if (r == -ENODEV || r == -EAGAIN) {
			/* Not the sample's fault: fail, never substitute. */
			if (r == -EAGAIN)
				snprintf(err + strlen(err),
				    errlen - strlen(err),
				    " (a transient error: not substituted)");
			if (log && log_first(&j->source_logged))
				log_err("job %s: %s", j->cfg->name, err);
			return r;
		}
		if (j->cfg->on_error == CFG_ON_ERROR_FAIL) {
			if (log && r != -EHOSTDOWN)
				log_err("%s", err);
			return r;
		}
		if (k == 0)
			snprintf(first, sizeof(first), "%s", err);
		snprintf(last, sizeof(last), "%s", err);
	}
	snprintf(err, errlen,
	    "job %s: %zu samples in a row cannot be read, "
	    "giving up on this batch (the last: %s)",
	    j->cfg->name, tries, last);
	if (log && !unavailable && log_first(&j->source_logged))
		log_err("%s", err);
	/* Another read may fill it once the source answers again. */
	return unavailable ? -EHOSTDOWN : -EIO;
}
