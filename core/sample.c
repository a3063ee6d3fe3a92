/*
 * sample.c - one sample from source file to output bytes (see sample.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include "util/log.h"
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
		 * A tar member, by pread (dataset/ds_tar.c), which checks that
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
 * The pixels a cached value v (of the local cache, its owner or the
 * cluster tier) serves: 0 and img set when v is an image of the job's
 * cache_format, else -EBADMSG (a miss).  For raw, img->px is v->data (the
 * caller gives up v->data); else img->px is decoded into its own buffer and
 * v->data stays the caller's.  A value of another format under the job's
 * key (the key names the format) is damaged or forged: a miss.  So is one
 * over the job's max_pixels, which no prefix makes, refused before it is
 * decoded: a few KB of zstd or JPEG from the tier would else decode into
 * any size the envelope claims (65535 x 65535 x 3 bytes).
 */
static int
val_pixels(const struct job *j, const struct cache_val *v, struct xf_image *img)
{
	uint8_t *px;
	size_t n;

	/* w * h * 3 must not wrap: a damaged (or forged) entry claiming
	 * 2^32-1 x 2^32-1 would else pass with a few bytes of payload. */
	if (v->c != 3 || v->dtype != 0 || v->enc != j->cfg->cache_format ||
	    v->w == 0 || v->h == 0 ||
	    __builtin_mul_overflow((size_t)v->w, (size_t)v->h, &n) ||
	    (j->cfg->max_pixels != 0 && n > j->cfg->max_pixels) ||
	    __builtin_mul_overflow(n, (size_t)3, &n))
		return -EBADMSG;
	if (v->enc == 0) {
		if (v->len != n)
			return -EBADMSG;
		px = v->data;
	} else if (cache_fmt_decode(
		       v->enc, v->w, v->h, v->data, v->len, &px) != 0)
		return -EBADMSG; /* checks w x h against the bytes */
	img->w = v->w;
	img->h = v->h;
	img->px = px;
	return 0;
}

/* Free what of v's payload val_pixels did not hand to img. */
static void
val_done(struct cache_val *v, const struct xf_image *img)
{
	if (img == NULL || v->data != img->px)
		free(v->data);
	v->data = NULL;
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
 * The value under key in the cluster tier, as it is stored (the job's
 * cache_format) in *v, and the pixels it serves in img: 0, else a miss.
 * cluster_get has checked the envelope against key (and its MAC with a
 * secret); what is left is that it is an image of the job's (val_pixels).
 * The caller calls val_done(v, img).
 */
static int
tier_get(struct job *j, const uint8_t key[CACHE_KEY_LEN], struct cache_val *v,
    struct xf_image *img)
{
	int r;

	if ((r = cluster_get(j->cluster, key, v)) != 0) {
		if (r == -EIO)
			tier_warn(j->cluster);
		return r;
	}
	if ((r = val_pixels(j, v, img)) != 0)
		val_done(v, NULL);
	return r;
}

/*
 * Store ev (an image in the job's cache_format, to_format's) under key in
 * the cluster tier (cluster_put's return), sealed in the envelope by
 * cluster_put: the tier holds what the local cache holds.
 */
static int
tier_put(struct cluster *cl, const uint8_t key[CACHE_KEY_LEN],
    const struct cache_val *ev)
{
	int r;

	if ((r = cluster_put(cl, key, ev)) == -EIO)
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
 * The job's cache_format of the prefix image img, made once per miss:
 * *ev is what the caches store (ev->data: img->px for raw, else the
 * encoded bytes, malloc'd; the caller frees them with ev_done), and with a
 * lossy format (jpeg) img's pixels are replaced by the decode of those
 * bytes, which every hit of them serves: a miss, a hit, a tier hit and a
 * read without a cache (off, refused, full or broken) serve the same
 * bytes.  store: whether a cache will take ev; without, a lossless format
 * has nothing to do.  0, and *stored whether ev holds a value to store; a
 * format that cannot hold the image (jpeg over 65500 pixels a side, the
 * same on every read) serves img as it is, stored nowhere.  -EAGAIN when
 * out of memory (a transient error: never the raw pixels instead).  The
 * CPU time goes to the job's put_ns.
 */
static int
to_format(struct job *j, struct xf_image *img, bool store, struct cache_val *ev,
    bool *stored)
{
	uint32_t enc = j->cfg->cache_format;
	uint64_t t0 = thread_ns();
	uint8_t *bytes = NULL, *served = NULL;
	size_t len = 0;
	int r = 0;

	*ev = (struct cache_val){.w = img->w, .h = img->h, .c = 3,
	    .dtype = 0, .data = img->px, .len = (size_t)img->w * img->h * 3,
	    .prefix = j->cache_text, .enc = 0};
	*stored = store && enc == 0;
	if (enc == 0 || (!store && !cache_fmt_lossy(enc)))
		return 0;
	r = cache_fmt_encode_served(
	    enc, img->w, img->h, img->px, &bytes, &len, &served);
	if (r == -ENOMEM) {
		r = -EAGAIN;
		goto out;
	}
	if (r != 0) {
		/* Lossless: the pixels are the same; lossy: never a hit. */
		*stored = false;
		r = 0;
		goto out;
	}
	if (served != NULL) {
		xf_free(img->px);
		img->px = served; /* transferred */
	}
	ev->data = bytes; /* transferred */
	ev->len = len;
	ev->enc = enc;
	*stored = store;
out:
	atomic_fetch_add(&j->st.put_ns, thread_ns() - t0);
	return r;
}

/* Free what to_format allocated for ev (its bytes, not img's pixels). */
static void
ev_done(struct cache_val *ev)
{
	if (ev->enc != 0)
		free(ev->data);
	ev->data = NULL;
}

/*
 * Keep ev (as to_format or the tier gave it: the job's cache_format) in
 * the local cache under key; a failure is only counted.  Its CPU time goes
 * to the job's put_ns.
 */
static void
local_put(struct job *j, struct cache *c, const uint8_t key[CACHE_KEY_LEN],
    const struct cache_val *ev)
{
	struct cache_val v = *ev;
	uint64_t t0 = thread_ns();

	v.prefix = j->cache_text;
	cache_put(c, key, &v);
	atomic_fetch_add(&j->st.put_ns, thread_ns() - t0);
}

/*
 * A cache key whose text names the decoder of the source: a PNG's (WebP's)
 * key text is the job's with libspng's (libwebp's) id added
 * (xf_src_decoder_id), so a decoder upgrade misses on that kind's entries
 * only and JPEG keys stay as they were.
 */
void
sample_cache_key(const uint8_t digest[32], const char *text, enum xf_src kind,
    uint8_t key[CACHE_KEY_LEN])
{
	const char *dec = xf_src_decoder_id(kind);
	char *t;

	if (dec == NULL) {
		cache_key(digest, text, key);
		return;
	}
	if (asprintf(&t, "%s\n%s", text, dec) < 0) {
		/* Never a key of a JPEG's text: one no entry has. */
		memset(key, 0xff, CACHE_KEY_LEN);
		return;
	}
	cache_key(digest, t, key);
	free(t);
}

/* The memo name's prefix of a kind of source ("" for JPEG). */
static const char *
memo_prefix(enum xf_src kind)
{
	return kind == XF_SRC_PNG ? "png:" : kind == XF_SRC_WEBP ? "webp:" : "";
}

/*
 * The digest memo of the source named name.  A PNG's is kept under
 * "png:" + name, a WebP's under "webp:" + name, so that a hit tells which
 * decoder's key to look up without reading the source: a JPEG costs one
 * memo lookup as before, a PNG two, a WebP three.
 */
bool
sample_memo_get(struct cache *c, const char *name, const struct stat *st,
    uint8_t digest[32], enum xf_src *kind)
{
	static const enum xf_src kinds[] = {
	    XF_SRC_JPEG, XF_SRC_PNG, XF_SRC_WEBP};
	char alt[4200];

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if ((size_t)snprintf(alt, sizeof(alt), "%s%s",
			memo_prefix(kinds[i]), name) < sizeof(alt) &&
		    cache_get_digest(c, alt, st, digest) == 0) {
			*kind = kinds[i];
			return true;
		}
	}
	return false;
}

static void
memo_put(struct cache *c, const char *name, const struct stat *st,
    const uint8_t digest[32], enum xf_src kind)
{
	char alt[4200];

	if ((size_t)snprintf(alt, sizeof(alt), "%s%s", memo_prefix(kind),
		name) < sizeof(alt))
		cache_put_digest(c, alt, st, digest);
}

/*
 * Look key up in the local cache c (may be NULL), then in the cluster
 * tier; a value from the cluster is kept locally too, as the tier holds
 * it (the job's cache_format: the same bytes, so a later local hit serves
 * what the tier hit did).  0 with img filled on a hit (counted); -ENOENT
 * on a miss of both (counted by the caller once the sample is made).
 */
static int
lookup(struct job *j, struct cache *c, uint32_t epoch,
    const uint8_t key[CACHE_KEY_LEN], struct xf_image *img)
{
	struct cache_val v;

	if (c != NULL && cache_get(c, key, &v) == 0) {
		if (val_pixels(j, &v, img) == 0) {
			val_done(&v, img);
			atomic_fetch_add(&j->st.cache_hits, 1);
			epoch_count(j, epoch, true);
			cache_note_use(c, j->cache_text, true);
			return 0;
		}
		val_done(&v, NULL);
	}
	if (j->cluster == NULL || tier_get(j, key, &v, img) != 0)
		return -ENOENT;
	if (c != NULL) {
		count_miss(j, c, epoch);
		local_put(j, c, key, &v);
	}
	val_done(&v, img);
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
	uint8_t digest[32], key[CACHE_KEY_LEN];
	struct cache_val ev;
	struct stat st;
	uint8_t *src = NULL;
	size_t len = 0;
	char msg[384];
	bool cached = (c != NULL || j->cluster != NULL) && j->prefix[0] != '\0';
	bool have_digest = false, steady = false, stored = false;
	enum xf_src kind = XF_SRC_JPEG;
	int r;

	/* A remembered digest: a hit in either tier reads no source. */
	if (cached && c != NULL && sample_stat(j, id, &st) == 0 &&
	    sample_memo_get(c, path, &st, digest, &kind)) {
		have_digest = true;
		sample_cache_key(digest, j->key_text, kind, key);
		if (lookup(j, c, epoch, key, img) == 0) {
			uint32_t local;
			const struct dataset *ds =
			    job_source_of(j, id, &local)->ds;

			atomic_store_explicit(
			    &j->reads_source, false, memory_order_relaxed);
			/* A range fetched ahead for it is not needed. */
			ds_remote_forget(ds, local);
			return 0;
		}
	}
	atomic_store_explicit(&j->reads_source, true, memory_order_relaxed);
	if ((r = read_sample(j, id, &src, &len, &st, &steady, err, errlen)) !=
	    0)
		return r;
	if (cached && !have_digest) {
		kind = xf_src_kind(src, len);
		cache_sha256(src, len, digest);
		if (c != NULL && steady)
			memo_put(c, path, &st, digest, kind);
		sample_cache_key(digest, j->key_text, kind, key);
		if (lookup(j, c, epoch, key, img) == 0) {
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
	/* What a hit would serve, cached or not (to_format). */
	if ((r = to_format(j, img, cached, &ev, &stored)) != 0) {
		xf_free(img->px);
		img->px = NULL;
		snprintf(err, errlen, "%s: out of memory", path);
		return r;
	}
	if (cached && c != NULL) {
		count_miss(j, c, epoch);
		if (stored)
			local_put(j, c, key, &ev);
	}
	if (cached && j->cluster != NULL) {
		atomic_fetch_add(&j->st.cluster_misses, 1);
		if (stored)
			tier_put(j->cluster, key, &ev);
	}
	ev_done(&ev);
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
	struct cache_val v;
	char path[4096], msg[512];
	uint8_t *src = NULL;
	size_t len = 0;
	struct stat st;
	bool stored = false;
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
	/* The mount's key and format: the tier holds what a mount's does. */
	sample_cache_key(digest, j->key_text, xf_src_kind(src, len), key);
	/* Already there (and whole): skipped.  A damaged value is redone. */
	if (tier_get(j, key, &v, &img) == 0) {
		val_done(&v, &img);
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
	if ((r = to_format(j, &img, true, &v, &stored)) == 0)
		r = stored ? tier_put(j->cluster, key, &v) : -EFBIG;
	ev_done(&v);
	xf_free(img.px);
	if (r == -EAGAIN) {
		snprintf(err, errlen, "%s: out of memory", path);
		r = -ENOMEM;
	} else if (r == -EFBIG)
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
	if ((r = read_sample(j, id, &src, &len, &st, NULL, err, errlen)) != 0)
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
		r = run_whole(j, pl, id, path, job_sample_key(j, epoch, id),
		    raw, dst, err, errlen);
		goto out;
	}
	if ((r = prefix_image(j, c, epoch, id, path, &img, err, errlen)) != 0)
		goto out;
	r = xf_run_suffix(pl, &img, job_sample_key(j, epoch, id),
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

bool
sample_prefetch_remote(struct job *j, struct cache *c, uint32_t gid)
{
	char path[PATH_MAX], err[8];
	uint8_t digest[32], key[CACHE_KEY_LEN];
	enum xf_src kind;
	struct stat st;

	if (!atomic_load_explicit(&j->reads_source, memory_order_relaxed))
		return false;
	/*
	 * A sample whose digest is remembered and whose value the cache
	 * holds is a hit: its bytes are not fetched ahead (a miss after
	 * all reads them on demand).
	 */
	if (c != NULL && j->prefix[0] != '\0' &&
	    sample_path(j, gid, path, sizeof(path), err, sizeof(err)) == 0 &&
	    sample_stat(j, gid, &st) == 0 &&
	    sample_memo_get(c, path, &st, digest, &kind)) {
		sample_cache_key(digest, j->key_text, kind, key);
		if (cache_has(c, key))
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
