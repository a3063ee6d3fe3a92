/*
 * sample_cache.c - the model (core/): a sample's prefix image through the
 * caches (see sample.h): the local cache, then the cluster tier, else
 * decoded and stored in both in the job's cache_format; the digest memos
 * and cache keys of sources; feedfs-fill's step (sample_fill).  Over
 * sample_source.c; sample.c calls it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cache/cache.h"
#include "cache/cluster.h"
#include "cache/format.h"
#include "util/clock.h"
#include "util/log.h"
#include "core/sample.h"
#include "core/sample_int.h"

/*
 * The pixels a cached value v (of the local cache, its owner or the
 * cluster tier) serves: 0 and img set when v is an image of the job's
 * cache_format, else -EBADMSG (a miss).  For raw, img->px is v->data (the
 * caller gives up v->data); else img->px is decoded into its own buffer and
 * v->data stays the caller's.  A value of another format under the job's
 * key (the key names the format) is damaged or forged: a miss.  So is one
 * over the job's max_pixels, which no prefix makes, refused before it is
 * decoded: a few KB of zstd or JPEG from the tier would else decode into
 * any size the envelope claims (65535 x 65535 x 3 bytes); and so is a
 * frame (the source's size, after shrink) over max_pixels, which no
 * source passed.
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
	    (j->cfg->max_pixels != 0 &&
		(uint64_t)v->src_w * v->src_h > j->cfg->max_pixels) ||
	    __builtin_mul_overflow(n, (size_t)3, &n))
		return -EBADMSG;
	if (v->enc == 0) {
		if (v->len != n)
			return -EBADMSG;
		px = v->data;
	} else if (cache_fmt_decode(
		       v->enc, v->w, v->h, v->data, v->len, &px) != 0)
		return -EBADMSG; /* checks w x h against the bytes */
	*img = (struct xf_image){.w = v->w,
	    .h = v->h,
	    .px = px,
	    .src_w = v->src_w,
	    .src_h = v->src_h};
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
	return ff_clock_ns(CLOCK_THREAD_CPUTIME_ID);
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

	*ev = (struct cache_val){.w = img->w,
	    .h = img->h,
	    .c = 3,
	    .dtype = 0,
	    .data = img->px,
	    .len = (size_t)img->w * img->h * 3,
	    .prefix = j->cache_text,
	    .enc = 0,
	    .src_w = img->src_w,
	    .src_h = img->src_h};
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

bool
sample_index_digest(
    const struct job *j, uint32_t id, uint8_t digest[32], enum xf_src *kind)
{
	uint32_t local;
	const struct dataset *ds = job_source_of(j, id, &local)->ds;
	const struct ds_digest *dg = ds_sample_digest(ds, local);

	if (dg == NULL)
		return false;
	memcpy(digest, dg->sha256, 32);
	*kind = xf_src_kind(dg->head, dg->hlen);
	return true;
}

/*
 * Whether the bytes read of a source whose index gave its digest are the
 * bytes it names: a member of a shard is served under its index's key
 * only then (a stale or forged index, a tier's, would else put another
 * member's pixels under it).  Else err says so.
 */
static bool
digest_holds(const uint8_t *src, size_t len, const uint8_t digest[32],
    const char *path, char *err, size_t errlen)
{
	uint8_t got[32];

	cache_sha256(src, len, got);
	if (memcmp(got, digest, 32) == 0)
		return true;
	snprintf(err, errlen,
	    "%s: its bytes are not those its shard's index names (an index "
	    "of another version of the shard, or a forged one): not served",
	    path);
	return false;
}

/*
 * Look key up in the local cache c (may be NULL), then in the cluster
 * tier; a value from the cluster is kept locally too, as the tier holds
 * it (the job's cache_format: the same bytes, so a later local hit serves
 * what the tier hit did).  0 with img filled on a hit (counted); -ENOENT
 * on a miss of both (counted by the caller once the sample is made).  A
 * raw local hit is read in place: img is borrowed from *held, which the
 * caller gives back (cache_val_release) once img is consumed; else
 * held->data and held->pin are NULL.
 */
static int
lookup(struct job *j, struct cache *c, uint32_t epoch,
    const uint8_t key[CACHE_KEY_LEN], struct xf_image *img,
    struct cache_val *held)
{
	struct cache_val v;

	if (c != NULL && cache_get_pinned(c, key, &v) == 0) {
		if (val_pixels(j, &v, img) == 0) {
			if (img->px == v.data) {
				img->borrowed = true;
				*held = v; /* transferred */
			} else
				cache_val_release(&v);
			atomic_fetch_add(&j->st.cache_hits, 1);
			epoch_count(j, epoch, true);
			cache_note_use(c, j->cache_text, true);
			return 0;
		}
		cache_val_release(&v);
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

int
sample_prefix(struct job *j, struct cache *c, uint32_t epoch, uint32_t id,
    const char *path, struct xf_image *img, struct cache_val *held, char *err,
    size_t errlen)
{
	uint8_t digest[32], key[CACHE_KEY_LEN];
	struct cache_val ev;
	struct stat st;
	uint8_t *src = NULL;
	size_t len = 0;
	char msg[384];
	bool cached = (c != NULL || j->cluster != NULL) && j->prefix[0] != '\0';
	bool have_digest = false, steady = false, stored = false;
	bool indexed = false;
	enum xf_src kind = XF_SRC_JPEG;
	int r;

	/*
	 * A digest its shard's index carries, or a remembered one: a hit in
	 * either tier reads no source.
	 */
	if (cached && (indexed = sample_index_digest(j, id, digest, &kind)))
		have_digest = true;
	else if (cached && c != NULL && sample_stat(j, id, &st) == 0 &&
		 sample_memo_get(c, path, &st, digest, &kind))
		have_digest = true;
	if (have_digest) {
		sample_cache_key(digest, j->key_text, kind, key);
		if (lookup(j, c, epoch, key, img, held) == 0) {
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
	if ((r = sample_read(j, id, &src, &len, &st, &steady, err, errlen)) !=
	    0)
		return r;
	if (indexed && !digest_holds(src, len, digest, path, err, errlen)) {
		xf_free(src);
		return -EIO;
	}
	if (cached && !have_digest) {
		kind = xf_src_kind(src, len);
		cache_sha256(src, len, digest);
		if (c != NULL && steady)
			memo_put(c, path, &st, digest, kind);
		sample_cache_key(digest, j->key_text, kind, key);
		if (lookup(j, c, epoch, key, img, held) == 0) {
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
	bool stored = false, indexed;
	enum xf_src kind;
	int r;

	if (j->cluster == NULL || j->prefix[0] == '\0') {
		snprintf(err, errlen, "job %s: nothing to fill", j->cfg->name);
		return -EINVAL;
	}
	if ((r = sample_path(j, id, path, sizeof(path), err, errlen)) != 0)
		return r;
	/* Its shard's index names its digest: the tier is asked first, and
	 * what it holds needs no read of the source. */
	if ((indexed = sample_index_digest(j, id, digest, &kind))) {
		sample_cache_key(digest, j->key_text, kind, key);
		if (tier_get(j, key, &v, &img) == 0) {
			val_done(&v, &img);
			xf_free(img.px);
			atomic_store_explicit(
			    &j->reads_source, false, memory_order_relaxed);
			return 1;
		}
	}
	atomic_store_explicit(&j->reads_source, true, memory_order_relaxed);
	if ((r = sample_read(j, id, &src, &len, &st, NULL, err, errlen)) != 0)
		return r == -EHOSTDOWN ? r : -EIO;
	if (indexed && !digest_holds(src, len, digest, path, err, errlen)) {
		xf_free(src);
		return -EIO;
	}
	cache_sha256(src, len, digest);
	/* The mount's key and format: the tier holds what a mount's does. */
	sample_cache_key(digest, j->key_text, xf_src_kind(src, len), key);
	/* Already there (and whole): skipped.  A damaged value is redone. */
	if (!indexed && tier_get(j, key, &v, &img) == 0) {
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

int
sample_fill_bytes(struct job *j, struct cache *c, const uint8_t *src,
    size_t len, const uint8_t sha256[32], size_t *stored_bytes)
{
	uint8_t key[CACHE_KEY_LEN];
	struct xf_image img = {0};
	struct cache_val v;
	char msg[384];
	bool stored = false;
	int r;

	sample_cache_key(sha256, j->key_text, xf_src_kind(src, len), key);
	/* There already (a remount, another job of the same prefix). */
	if (c != NULL && (r = cache_holds(c, key)) != 0) {
		if (r > 0)
			return 1;
		if (cache_get(c, key, &v) == 0) {
			free(v.data);
			return 1;
		}
	}
	/* In the tier: kept locally too, as a cold epoch's lookup does. */
	if (j->cluster != NULL && tier_get(j, key, &v, &img) == 0) {
		if (c != NULL)
			local_put(j, c, key, &v);
		val_done(&v, &img);
		xf_free(img.px);
		return 1;
	}
	if (xf_run_prefix(j->pl, src, len, &img, msg, sizeof(msg)) != 0)
		return -EIO; /* the epoch's read says why, and on_error acts */
	if ((r = to_format(j, &img, true, &v, &stored)) == 0 && stored) {
		if (c != NULL)
			local_put(j, c, key, &v);
		if (j->cluster != NULL)
			tier_put(j->cluster, key, &v);
		if (stored_bytes != NULL)
			*stored_bytes = v.len;
	}
	ev_done(&v);
	xf_free(img.px);
	return r != 0 ? -EAGAIN : 0;
}
