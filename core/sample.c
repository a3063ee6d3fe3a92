/*
 * sample.c - one sample from source file to output bytes (see sample.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/cluster.h"
#include "cache/format.h"
#include "core/log.h"
#include "core/sample.h"
#include "transforms/rng.h"

/* Source files larger than this are refused (no JPEG of a sane image is). */
#define SAMPLE_MAX_FILE (512u << 20)
/* on_error = substitute tries at most this many samples for one slot. */
#define SAMPLE_SUBST_MAX 64
/* A transient failure (out of descriptors, memory) is retried this often. */
#define SAMPLE_RETRIES 3

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

/*
 * Sample id's file (a global id of j: its source's), read whole into a
 * buffer from xf_alloc (freed with xf_free); *st gets its fstat.  The open
 * follows no link and refuses anything but a regular file
 * (ds_sample_open).  -EIO for a broken or missing sample, -EAGAIN for a
 * transient failure, -ENODEV when the dataset's root itself is gone.  With steady: whether a digest memo of what was read may
 * be made (cache_memo_trusted: the fstat after the read agrees with *st,
 * and the file's times are older than the clock before the open by more
 * than their granularity).
 */
static int
read_sample(const struct job *j, uint32_t gid, uint8_t **out, size_t *len,
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
		 * A tar member, by pread (core/ds_tar.c), which checks that
		 * the shard is still the one indexed; *st is the shard's.
		 * The racy rule holds for the shard's times.
		 */
		r = ds_member_read(
		    ds, id, SAMPLE_MAX_FILE, out, len, st, err, errlen);
		if (r == 0 && steady != NULL)
			*steady = cache_memo_trusted(st, st, &t0);
		return r == 0 ? 0 : transient(-r) ? -EAGAIN : -EIO;
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

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * A cached value this version can use, decoded from its cache_format into
 * v->data (else freed: a miss).
 */
static bool
usable(struct cache_val *v)
{
	uint8_t *px;
	size_t n;

	if (v->c != 3 || v->dtype != 0)
		goto bad;
	if (v->enc != 0) {
		/* cache_fmt_decode checks w x h against the bytes. */
		if (cache_fmt_decode(v->enc, v->w, v->h, v->data, v->len, &px) !=
		    0)
			goto bad;
		free(v->data);
		v->data = px;
		v->len = (size_t)v->w * v->h * 3;
		v->enc = 0;
		return true;
	}
	/* w * h * 3 must not wrap: a damaged (or forged) entry claiming
	 * 2^32-1 x 2^32-1 would else pass with a few bytes of payload. */
	if (v->w > 0 && v->h > 0 &&
	    !__builtin_mul_overflow((size_t)v->w, (size_t)v->h, &n) &&
	    !__builtin_mul_overflow(n, (size_t)3, &n) && v->len == n)
		return true;
bad:
	free(v->data);
	return false;
}

/* Count a local hit or miss of epoch (job.h's per-epoch slots). */
static void
epoch_count(struct job *j, uint32_t epoch, bool hit)
{
	uint64_t e1 = (uint64_t)epoch + 1, cur;
	__typeof__(j->st.ep[0]) *s = &j->st.ep[epoch % JOB_EPOCH_SLOTS];

	cur = atomic_load(&s->epoch1);
	while (cur < e1) {
		if (atomic_compare_exchange_weak(&s->epoch1, &cur, e1)) {
			atomic_store(&s->hits, 0);
			atomic_store(&s->misses, 0);
			cur = e1;
		}
	}
	if (cur != e1)
		return; /* a late sample of an epoch whose slot went on */
	atomic_fetch_add(hit ? &s->hits : &s->misses, 1);
}

/* A miss of the local cache c (counted per job, epoch and prefix). */
static void
count_miss(struct job *j, struct cache *c, uint32_t epoch)
{
	atomic_fetch_add(&j->st.cache_misses, 1);
	epoch_count(j, epoch, false);
	cache_note_use(c, j->cache_text, false);
}

/* Say the cluster's first server failure, once per cluster. */
static void
tier_warn(struct cluster *cl)
{
	char msg[512];

	if (cluster_error_once(cl, msg, sizeof(msg)))
		log_warn("cluster: %s; values on that server are misses until "
			 "it answers (said once; counted in "
			 "feedfs_cluster_errors_total)",
		    msg);
}

/*
 * The prefix image under key in the cluster tier: 0, else a miss.
 * cluster_get has checked the envelope against key (and its MAC with a
 * secret); what is left is that it is an image of ours (usable).
 */
static int
tier_get(
    struct cluster *cl, const uint8_t key[CACHE_KEY_LEN], struct xf_image *img)
{
	struct cache_val v;
	int r;

	if ((r = cluster_get(cl, key, &v)) != 0) {
		if (r == -EIO)
			tier_warn(cl);
		return r;
	}
	if (!usable(&v))
		return -EBADMSG; /* usable freed it */
	img->w = v.w;
	img->h = v.h;
	img->px = v.data; /* transferred */
	return 0;
}

/*
 * Store img under key in the cluster tier (cluster_put's return): raw
 * uint8 pixels, h x w x 3, sealed in the envelope by cluster_put.
 */
static int
tier_put(struct cluster *cl, const uint8_t key[CACHE_KEY_LEN],
    const struct xf_image *img)
{
	struct cache_val v = {.w = img->w, .h = img->h, .c = 3, .dtype = 0,
	    .data = img->px, .len = (size_t)img->w * img->h * 3, .enc = 0};
	int r;

	if ((r = cluster_put(cl, key, &v)) == -EIO)
		tier_warn(cl);
	return r;
}

/* CPU time of the calling thread, in ns. */
static uint64_t
thread_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Keep img in the local cache under key, in the job's cache_format (a
 * failure is only counted).  Its CPU time goes to the job's put_ns.
 */
static void
local_put(struct job *j, struct cache *c, const uint8_t key[CACHE_KEY_LEN],
    const struct xf_image *img)
{
	struct cache_val v;
	uint8_t *enc = NULL;
	uint64_t t0 = thread_ns();

	v.w = img->w;
	v.h = img->h;
	v.c = 3;
	v.dtype = 0;
	v.data = img->px;
	v.len = (size_t)img->w * img->h * 3;
	v.prefix = j->cache_text;
	v.enc = j->cfg->cache_format;
	if (v.enc != 0) {
		if (cache_fmt_encode(
			v.enc, img->w, img->h, img->px, &enc, &v.len) != 0)
			return;
		v.data = enc;
	}
	cache_put(c, key, &v);
	free(enc);
	atomic_fetch_add(&j->st.put_ns, thread_ns() - t0);
}

/*
 * A cache key whose text names the decoder of the source: a PNG's key
 * text is the job's with libspng's id added (xf_png_decoder_id), so a
 * libspng upgrade misses on PNG entries only and JPEG keys stay as they
 * were.
 */
void
sample_cache_key(const uint8_t digest[32], const char *text, bool png,
    uint8_t key[CACHE_KEY_LEN])
{
	char *t;

	if (!png) {
		cache_key(digest, text, key);
		return;
	}
	if (asprintf(&t, "%s\n%s", text, xf_png_decoder_id()) < 0) {
		/* Never a key of a JPEG's text: one no entry has. */
		memset(key, 0xff, CACHE_KEY_LEN);
		return;
	}
	cache_key(digest, t, key);
	free(t);
}

/*
 * The digest memo of the source named name.  A PNG's is kept under
 * "png:" + name, so that a hit tells which decoder's key to look up
 * without reading the source: a JPEG costs one memo lookup as before, a
 * PNG two.
 */
bool
sample_memo_get(struct cache *c, const char *name, const struct stat *st,
    uint8_t digest[32], bool *png)
{
	char alt[4200];

	if (cache_get_digest(c, name, st, digest) == 0) {
		*png = false;
		return true;
	}
	if ((size_t)snprintf(alt, sizeof(alt), "png:%s", name) < sizeof(alt) &&
	    cache_get_digest(c, alt, st, digest) == 0) {
		*png = true;
		return true;
	}
	return false;
}

static void
memo_put(struct cache *c, const char *name, const struct stat *st,
    const uint8_t digest[32], bool png)
{
	char alt[4200];

	if (!png)
		cache_put_digest(c, name, st, digest);
	else if ((size_t)snprintf(alt, sizeof(alt), "png:%s", name) <
		 sizeof(alt))
		cache_put_digest(c, alt, st, digest);
}

/*
 * The keys of digest: key for the local cache (the prefix and its
 * cache_format), tkey for the cluster tier (the prefix: the tier keeps raw
 * pixels).  Equal for raw.
 */
static void
sample_keys(const struct job *j, const uint8_t digest[32], bool png,
    uint8_t key[CACHE_KEY_LEN], uint8_t tkey[CACHE_KEY_LEN])
{
	sample_cache_key(digest, j->key_text, png, key);
	if (j->cfg->cache_format == 0)
		memcpy(tkey, key, CACHE_KEY_LEN);
	else
		sample_cache_key(digest, j->tier_text, png, tkey);
}

/*
 * Look key up in the local cache c (may be NULL), then tkey in the
 * cluster tier; a value from the cluster is kept locally too.  0 with img
 * filled on a hit (counted); -ENOENT on a miss of both (counted by the
 * caller once the sample is made).
 */
static int
lookup(struct job *j, struct cache *c, uint32_t epoch,
    const uint8_t key[CACHE_KEY_LEN], const uint8_t tkey[CACHE_KEY_LEN],
    struct xf_image *img)
{
	struct cache_val v;

	if (c != NULL && cache_get(c, key, &v) == 0 && usable(&v)) {
		atomic_fetch_add(&j->st.cache_hits, 1);
		epoch_count(j, epoch, true);
		cache_note_use(c, j->cache_text, true);
		img->w = v.w;
		img->h = v.h;
		img->px = v.data; /* transferred */
		return 0;
	}
	if (j->cluster == NULL || tier_get(j->cluster, tkey, img) != 0)
		return -ENOENT;
	if (c != NULL) {
		count_miss(j, c, epoch);
		local_put(j, c, key, img);
	}
	atomic_fetch_add(&j->st.cluster_hits, 1);
	return 0;
}

/*
 * What the digest memo of sample id is keyed by, with its name: the
 * file's stat, or for a tar member its shard's (ds_sample_stat).  The
 * name "ROOT/SHARD:MEMBER" tells members apart; a file of that name is
 * another inode, so never a stale hit.
 */
static int
sample_stat(const struct job *j, uint32_t gid, struct stat *st)
{
	uint32_t id;
	const struct dataset *ds = job_source_of(j, gid, &id)->ds;

	return ds_sample_stat(ds, id, st);
}

/*
 * The prefix image of sample id: from the local cache or the cluster tier
 * when one holds it, else decoded (and stored in both).  Errors name the
 * file.
 */
static int
prefix_image(struct job *j, struct cache *c, uint32_t epoch, uint32_t id,
    const char *path, struct xf_image *img, char *err, size_t errlen)
{
	uint8_t digest[32], key[CACHE_KEY_LEN], tkey[CACHE_KEY_LEN];
	struct stat st;
	uint8_t *src = NULL;
	size_t len = 0;
	char msg[384];
	bool cached = (c != NULL || j->cluster != NULL) && j->prefix[0] != '\0';
	bool have_digest = false, steady = false, png = false;
	int r;

	/* A remembered digest: a hit in either tier reads no source. */
	if (cached && c != NULL && sample_stat(j, id, &st) == 0 &&
	    sample_memo_get(c, path, &st, digest, &png)) {
		have_digest = true;
		sample_keys(j, digest, png, key, tkey);
		if (lookup(j, c, epoch, key, tkey, img) == 0) {
			atomic_store_explicit(
			    &j->reads_source, false, memory_order_relaxed);
			return 0;
		}
	}
	atomic_store_explicit(&j->reads_source, true, memory_order_relaxed);
	if ((r = read_sample(j, id, &src, &len, &st, &steady, err, errlen)) !=
	    0)
		return r;
	if (cached && !have_digest) {
		png = xf_is_png(src, len);
		cache_sha256(src, len, digest);
		if (c != NULL && steady)
			memo_put(c, path, &st, digest, png);
		sample_keys(j, digest, png, key, tkey);
		if (lookup(j, c, epoch, key, tkey, img) == 0) {
			xf_free(src);
			return 0;
		}
	}
	r = xf_run_prefix(j->pl, src, len, img, msg, sizeof(msg));
	xf_free(src);
	if (r != 0) {
		snprintf(err, errlen, "%s: %s", path, msg);
		return -EIO;
	}
	if (cached && c != NULL) {
		count_miss(j, c, epoch);
		local_put(j, c, key, img);
	}
	if (cached && j->cluster != NULL) {
		atomic_fetch_add(&j->st.cluster_misses, 1);
		tier_put(j->cluster, tkey, img);
	}
	return 0;
}

/* The path of sample id in path (PATH_MAX); -EIO and err if too long. */
static int
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

int
sample_fill(struct job *j, uint32_t id, char *err, size_t errlen)
{
	uint8_t digest[32], key[CACHE_KEY_LEN];
	struct xf_image img = {0};
	char path[4096], msg[512];
	uint8_t *src = NULL;
	size_t len = 0;
	struct stat st;
	int r;

	if (j->cluster == NULL || j->prefix[0] == '\0') {
		snprintf(err, errlen, "job %s: nothing to fill", j->cfg->name);
		return -EINVAL;
	}
	if ((r = sample_path(j, id, path, sizeof(path), err, errlen)) != 0)
		return r;
	if ((r = read_sample(j, id, &src, &len, &st, NULL, err, errlen)) != 0)
		return -EIO;
	cache_sha256(src, len, digest);
	sample_cache_key(digest, j->tier_text, xf_is_png(src, len), key);
	/* Already there (and whole): skipped.  A damaged value is redone. */
	if (tier_get(j->cluster, key, &img) == 0) {
		xf_free(img.px);
		xf_free(src);
		return 1;
	}
	r = xf_run_prefix(j->pl, src, len, &img, msg, sizeof(msg));
	xf_free(src);
	if (r != 0) {
		snprintf(err, errlen, "%s: %s", path, msg);
		return -EIO;
	}
	r = tier_put(j->cluster, key, &img);
	xf_free(img.px);
	if (r == -EFBIG)
		snprintf(err, errlen,
		    "%s: its prefix is too large for the cluster tier", path);
	else if (r != 0) {
		cluster_last_error(j->cluster, msg, sizeof(msg));
		snprintf(err, errlen, "%s: not stored: %s", path,
		    r == -EIO ? msg : strerror(-r));
		r = r == -EIO ? -ECOMM : r;
	}
	return r;
}

/* A sample of a pipeline without cache, from the file in one call. */
static int
run_whole(struct job *j, uint32_t id, const char *path, uint64_t key, bool raw,
    void *dst, char *err, size_t errlen)
{
	uint8_t *src = NULL;
	size_t len = 0;
	struct stat st;
	char msg[384];
	int r;

	atomic_store_explicit(&j->reads_source, true, memory_order_relaxed);
	if ((r = read_sample(j, id, &src, &len, &st, NULL, err, errlen)) != 0)
		return r;
	r = xf_run(j->pl, src, len, key, raw ? XF_UINT8 : j->cfg->dtype,
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
	struct xf_image img = {0};
	char path[4096];
	uint64_t t0 = now_ns();
	int r;

	if ((r = sample_path(j, id, path, sizeof(path), err, errlen)) != 0)
		return r;
	if (j->prefix[0] == '\0') {
		/*
		 * No cache op: nothing to store, so the whole pipeline runs
		 * on the file's bytes (xf_run decodes only the box of a
		 * leading random_resized_crop).
		 */
		r = run_whole(j, id, path,
		    rng_key(RNG_DOMAIN_SAMPLE, j->cfg->seed, epoch, id), raw,
		    dst, err, errlen);
		goto out;
	}
	if ((r = prefix_image(j, c, epoch, id, path, &img, err, errlen)) != 0)
		goto out;
	r = xf_run_suffix(j->pl, &img,
	    rng_key(RNG_DOMAIN_SAMPLE, j->cfg->seed, epoch, id),
	    raw ? XF_UINT8 : j->cfg->dtype, raw ? XF_HWC : j->cfg->layout, dst);
	if (r != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(-r));
		r = -EIO;
	}
out:
	atomic_fetch_add(&j->st.busy_ns, now_ns() - t0);
	if (r == 0) {
		uint32_t local;

		atomic_fetch_add(&j->st.samples, 1);
		atomic_fetch_add(&job_source_of(j, id, &local)->samples, 1);
		job_rate_add(&j->st);
	}
	return r;
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

int
sample_make_slot(struct job *j, struct cache *c, uint32_t epoch,
    const uint32_t *order, uint64_t pos, bool raw, void *dst, uint32_t *id_out,
    bool log, char *err, size_t errlen)
{
	size_t n = j->plan.n, /* the order's length */
	    tries = n < SAMPLE_SUBST_MAX ? n : SAMPLE_SUBST_MAX;
	char last[512] = "";
	int r = -EIO;

	for (size_t k = 0; k < tries; k++) {
		uint32_t id = order[(pos + k) % n];
		uint8_t bit = (uint8_t)(1u << (id & 7));

		if ((r = make_retrying(
			 j, c, epoch, id, raw, dst, err, errlen)) == 0) {
			if (k > 0)
				atomic_fetch_add(&j->st.substituted, 1);
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
		if (r == -ENODEV || r == -EAGAIN) {
			/* Not the sample's fault: fail, never substitute. */
			if (r == -EAGAIN)
				snprintf(err + strlen(err),
				    errlen - strlen(err),
				    " (a transient error: not substituted)");
			if (log && log_first(&j->source_logged))
				log_err("job %s: %s", j->cfg->name, err);
			return -EIO;
		}
		if (j->cfg->on_error == CFG_ON_ERROR_FAIL) {
			if (log)
				log_err("%s", err);
			return r;
		}
		if (log && !(atomic_fetch_or(&j->logged[id >> 3], bit) & bit))
			log_warn(
			    "%s (substituted by the next good sample)", err);
		snprintf(last, sizeof(last), "%s", err);
	}
	snprintf(err, errlen,
	    "job %s: %zu samples in a row cannot be read, "
	    "giving up on this batch (the last: %s)",
	    j->cfg->name, tries, last);
	if (log && log_first(&j->source_logged))
		log_err("%s", err);
	return -EIO;
}
