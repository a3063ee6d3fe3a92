/*
 * ds_tar.c - layer: dataset/ (the datasets), tar shard backend, its top
 * (called by dataset.c's ds_open_cfg; calls the others: ds_shard_list.c,
 * ds_tar_index.c, ds_tar_walk.c, ds_label.c, and ds_common.c).  WebDataset
 * tar shards read in place (see dataset.h): ds_open_shards finds the shards,
 * indexes each (the kept index, else a walk of its headers), groups its
 * members into samples by key and labels them; ds_member_read reads a
 * member's bytes with pread, after checking that the shard did not change.
 *
 * Nothing here creates a file named by a member: names only ever label
 * samples.  Members that are not plain files (links, devices, FIFOs,
 * sparse files) and unsafe names (absolute, "..") become samples that fail
 * when read, so that on_error decides, and the log says why.
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
#include <strings.h>
#include <unistd.h>

#include "dataset/ds_remote.h"
#include "dataset/ds_tar_int.h"
#include "dataset/remote/remote_int.h"
#include "util/log.h"

/* A member of a shard's index, by key then extension then offset. */
struct mref {
	const struct tar_member *m;
	size_t keylen;
	const char *ext;
};

static int
by_key(const void *a, const void *b)
{
	const struct mref *x = a, *y = b;
	size_t n = x->keylen < y->keylen ? x->keylen : y->keylen;
	int c = memcmp(x->m->name, y->m->name, n);

	if (c != 0)
		return c;
	if (x->keylen != y->keylen)
		return x->keylen < y->keylen ? -1 : 1;
	if ((c = strcmp(x->ext, y->ext)) != 0)
		return c;
	return x->m->off < y->m->off ? -1 : x->m->off > y->m->off;
}

/*
 * The digest of img (its index saw its bytes) appended to ds->digests
 * (*dcap their room): its record's number + 1 in *at.  0 or -ENOMEM.
 */
static int
add_digest(struct dataset *ds, const struct tar_member *img, size_t *dcap,
    uint32_t *at)
{
	struct ds_digest *d;

	if (ds->ndigests == *dcap) {
		size_t c = *dcap ? *dcap * 2 : 1024;

		if ((d = realloc(ds->digests, c * sizeof(*d))) == NULL)
			return -ENOMEM;
		ds->digests = d;
		*dcap = c;
	}
	d = &ds->digests[ds->ndigests++];
	memcpy(d->sha256, img->digest, 32);
	memcpy(d->head, img->head, img->hlen);
	d->hlen = img->hlen;
	*at = (uint32_t)ds->ndigests;
	return 0;
}

/* Room for one more sample in *v (*cap of it): 0 or -ENOMEM. */
static int
grow(struct ds_sample **v, size_t n, size_t *cap)
{
	if (n == *cap) {
		size_t c = *cap ? *cap * 2 : 1024;
		struct ds_sample *nv = realloc(*v, c * sizeof(*nv));

		if (nv == NULL)
			return -ENOMEM;
		*v = nv;
		*cap = c;
	}
	return 0;
}

/* What the samples of a dataset's shards are added with. */
struct adder {
	struct dataset *ds;
	const struct ds_label *lb;
	size_t rootlen;
	size_t cap, dcap; /* ds->samples', ds->digests' room */
	ds_progress_fn progress;
	void *arg;
};

/* Samples of one shard's index appended to ad->ds's. */
static int
shard_samples(const struct tar_index *ix, uint32_t shard, const char *rel,
    struct adder *ad)
{
	const struct ds_label *lb = ad->lb;
	struct ds_sample **v = &ad->ds->samples;
	size_t *n = &ad->ds->n, *cap = &ad->cap;
	const char *want = ds_label_ext(lb);
	struct mref *g;
	size_t k = 0;
	int r = 0;

	if (ix->n == 0)
		return 0;
	if ((g = calloc(ix->n, sizeof(*g))) == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < ix->n; i++) {
		size_t kl;
		const char *ext = ds_tar_member_ext(ix->m[i].name, &kl);

		if (ext == NULL)
			continue;
		g[k].m = &ix->m[i];
		g[k].keylen = kl;
		g[k].ext = ext;
		k++;
	}
	qsort(g, k, sizeof(*g), by_key);
	for (size_t a = 0, b; a < k; a = b) {
		const struct tar_member *img = NULL, *lm = NULL;
		size_t nimg = 0, nlm = 0;
		const char *bad;
		int64_t label;
		struct ds_sample *s;

		for (b = a + 1;
		     b < k && g[b].keylen == g[a].keylen &&
		     memcmp(g[b].m->name, g[a].m->name, g[a].keylen) == 0;
		     b++)
			;
		for (size_t i = a; i < b; i++) {
			if (ds_tar_is_image_ext(g[i].ext)) {
				if (img == NULL)
					img = g[i].m;
				nimg++;
			} else if (want != NULL &&
				   strcmp(g[i].ext, want) == 0) {
				lm = g[i].m;
				nlm++;
			}
		}
		if (img == NULL)
			continue; /* no image: not a sample */
		if ((r = ds_label_of(lb, lm, nlm, &label, &bad)) != 0)
			break;
		if (img->kind != TM_FILE)
			bad = ds_tm_why(img->kind);
		else if (nimg > 1)
			bad = "duplicate key: more than one image member";
		if ((r = grow(v, *n, cap)) != 0)
			break;
		s = &(*v)[*n];
		memset(s, 0, sizeof(*s));
		if (asprintf(&s->path, "%s:%s", rel, img->name) < 0) {
			r = -ENOMEM;
			break;
		}
		(*n)++;
		s->label = bad ? -1 : label;
		s->shard = shard;
		s->off = img->off;
		s->size = img->size;
		s->bad = bad;
		if (bad == NULL && img->has_digest &&
		    (r = add_digest(ad->ds, img, &ad->dcap, &s->digest)) != 0)
			break;
	}
	free(g);
	return r;
}

static int
by_spath(const void *a, const void *b)
{
	return strcmp(((const struct ds_sample *)a)->path,
	    ((const struct ds_sample *)b)->path);
}

static int
by_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* Log what the index of a shard says is wrong with it, once per open. */
static void
log_shard(const char *path, const struct tar_index *ix)
{
	size_t nbad = 0;
	const struct tar_member *first = NULL;

	if (ix->status != TS_COMPLETE)
		log_warn("shard %s: %s at offset %" PRIu64
			 ": members from there on are not indexed%s",
		    path, ds_ts_why(ix->status), ix->status_off,
		    ix->status == TS_READ
			? " (the index is not kept: the next mount reads the "
			  "shard again)"
			: "");
	for (size_t i = 0; i < ix->n; i++)
		if (ix->m[i].kind != TM_FILE && nbad++ == 0)
			first = &ix->m[i];
	if (nbad > 0)
		log_warn("shard %s: %zu member(s) cannot be served, the first "
			 "'%s': %s",
		    path, nbad, first->name, ds_tm_why(first->kind));
}

int
ds_open_shards(const char *name, const char *shards, const char *label,
    int index_fd, ds_progress_fn progress, void *arg, struct dataset **out,
    char *err, size_t errlen)
{
	return ds_open_shards_remote(name, shards, label, NULL, NULL, index_fd,
	    progress, arg, out, err, errlen);
}

/* Why a shard that could not be indexed fails its sample (the log has
 * the failure itself). */
static const char not_indexed[] =
    "its shard could not be indexed (the log says why); the next mount "
    "indexes it again";

/*
 * A shard's samples (ds_shard_add_fn): of its index ix, or for a shard
 * that failed, one sample named "SHARD:" that fails when read.
 */
static int
add_shard(void *arg, size_t i, const struct tar_index *ix, const char *why)
{
	struct adder *ad = arg;
	struct dataset *ds = ad->ds;
	const char *path = ds->shards[i].path;
	struct ds_sample *s;
	int r;

	if (ix != NULL) {
		log_shard(path, ix);
		r = shard_samples(ix, (uint32_t)i, path + ad->rootlen, ad);
	} else {
		log_warn("%s; its samples fail (on_error) until a mount "
			 "indexes it",
		    why);
		if ((r = grow(&ds->samples, ds->n, &ad->cap)) != 0)
			return r;
		s = &ds->samples[ds->n];
		memset(s, 0, sizeof(*s));
		if (asprintf(&s->path, "%s:", path + ad->rootlen) < 0)
			return -ENOMEM;
		ds->n++;
		s->label = -1;
		s->shard = (uint32_t)i;
		s->bad = not_indexed;
	}
	if (r == 0 && ad->progress != NULL)
		ad->progress(ds->n, ad->arg);
	return r;
}

/*
 * Remote shards: ds->remote for them, and their display names in place
 * of paths (the specs, which may hold a signed URL's query, in *specs).
 */
static int
remote_open(struct dataset *ds, const struct remote_opts *ropts,
    char **paths, size_t np, char ***specs, char *err, size_t errlen)
{
	static const struct remote_opts dflt = {
	    NULL, NULL, -1, NULL, 0, UINT32_MAX};
	int r;

	if ((r = ds_remote_ctx(ropts ? ropts : &dflt,
		 (const char *const *)paths, np, &ds->remote, err, errlen)) !=
	    0)
		return r;
	if ((ds->robjs = calloc(np, sizeof(*ds->robjs))) == NULL ||
	    (*specs = calloc(np, sizeof(**specs))) == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < np; i++) {
		char *d = remote_url_display(paths[i]);

		if (d == NULL)
			return -ENOMEM;
		(*specs)[i] = paths[i]; /* transferred */
		paths[i] = d;
	}
	return ds_remote_prepare(ds->remote, *specs, np, ds->robjs, err, errlen);
}

int
ds_open_shards_remote(const char *name, const char *shards, const char *label,
    const struct remote_opts *ropts, const struct ds_remote_hooks *hooks,
    int index_fd, ds_progress_fn progress, void *arg, struct dataset **out,
    char *err, size_t errlen)
{
	struct dataset *ds;
	struct ds_label lb;
	struct adder ad = {0};
	char **paths = NULL, **specs = NULL;
	size_t np = 0;
	int64_t *lv = NULL;
	int r;

	if ((r = ds_label_parse(label, &lb, err, errlen)) != 0)
		return r;
	if ((ds = calloc(1, sizeof(*ds))) == NULL ||
	    (ds->name = strdup(name ? name : "")) == NULL) {
		free(ds);
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	if ((r = ds_shard_paths(shards, &paths, &np, err, errlen)) != 0)
		goto fail;
	if (remote_is_url(paths[0]) &&
	    (r = remote_open(ds, ropts, paths, np, &specs, err, errlen)) != 0)
		goto fail;
	if ((ds->shards = calloc(np, sizeof(*ds->shards))) == NULL ||
	    (ds->root = ds_shard_common_dir(paths, np)) == NULL) {
		r = -ENOMEM;
		goto fail;
	}
	ad.ds = ds;
	ad.lb = &lb;
	ad.rootlen = strcmp(ds->root, "/") == 0 ? 1 : strlen(ds->root) + 1;
	ad.progress = progress;
	ad.arg = arg;
	if (specs != NULL) {
		for (size_t i = 0; i < np; i++) {
			ds->shards[i].path = paths[i]; /* transferred */
			paths[i] = NULL;
		}
		ds->nshards = np;
		if ((r = ds_remote_pass(ds, hooks, index_fd, add_shard, &ad,
			 err, errlen)) != 0)
			goto fail;
	}
	for (size_t i = 0; specs == NULL && i < np; i++) {
		struct ds_shard *sh = &ds->shards[ds->nshards];
		struct tar_index ix;
		bool scanned;

		sh->path = paths[i]; /* transferred */
		paths[i] = NULL;
		ds->nshards++;
		if (stat(sh->path, &sh->st) != 0 || !S_ISREG(sh->st.st_mode)) {
			r = errno ? -errno : -EINVAL;
			snprintf(err, errlen, "shard %s: %s", sh->path,
			    S_ISREG(sh->st.st_mode) ? strerror(-r)
						    : "not a regular file");
			r = -EINVAL;
			goto fail;
		}
		if ((r = ds_tar_index_shard(sh->path, &sh->st, index_fd, &ix,
			 &scanned, err, errlen)) != 0)
			goto fail;
		r = add_shard(&ad, i, &ix, NULL);
		ds_tar_index_free(&ix);
		if (r != 0)
			goto fail;
	}
	if (ds->n == 0) {
		snprintf(err, errlen,
		    "shards %s: no samples (members named "
		    "KEY.jpg, KEY.jpeg, KEY.png or KEY.webp)",
		    shards);
		r = -ENOENT;
		goto fail;
	}
	qsort(ds->samples, ds->n, sizeof(*ds->samples), by_spath);
	/*
	 * label = auto: cls, or none when no sample has a .cls member.  A
	 * shard that could not be indexed (its one sample, not_indexed) has
	 * no say, and stays bad.
	 */
	if (label != NULL && strcmp(label, "auto") == 0) {
		size_t nocls = 0, nfailed = 0;

		for (size_t i = 0; i < ds->n; i++) {
			const char *bad = ds->samples[i].bad;

			nocls += bad != NULL && strcmp(bad, DS_NO_CLS) == 0;
			nfailed += bad == not_indexed;
		}
		if (nocls + nfailed == ds->n) {
			lb.mode = LBL_NONE;
			for (size_t i = 0; i < ds->n; i++)
				if (ds->samples[i].bad != not_indexed)
					ds->samples[i].bad = NULL;
		}
	}
	/*
	 * The classes: the distinct labels, in increasing order, named by
	 * their number; a sample's label becomes its class's index (labels
	 * 0, 1, 3, 7 are classes 0..3, as every dataset's label is).
	 */
	if (lb.mode != LBL_NONE) {
		size_t k = 0;

		if ((lv = malloc(ds->n * sizeof(*lv))) == NULL) {
			r = -ENOMEM;
			goto fail;
		}
		for (size_t i = 0; i < ds->n; i++)
			if (ds->samples[i].bad == NULL)
				lv[k++] = ds->samples[i].label;
		qsort(lv, k, sizeof(*lv), by_i64);
		if ((ds->classes = calloc(k ? k : 1, sizeof(char *))) == NULL) {
			r = -ENOMEM;
			goto fail;
		}
		for (size_t i = 0; i < k; i++) {
			if (i > 0 && lv[i] == lv[i - 1])
				continue;
			if (asprintf(&ds->classes[ds->nclasses], "%" PRId64,
				lv[i]) < 0) {
				r = -ENOMEM;
				goto fail;
			}
			lv[ds->nclasses++] = lv[i];
		}
		for (size_t i = 0; i < ds->n; i++) {
			struct ds_sample *x = &ds->samples[i];
			const int64_t *c;

			if (x->bad == NULL &&
			    (c = bsearch(&x->label, lv, ds->nclasses,
				 sizeof(*lv), by_i64)) != NULL)
				x->label = c - lv;
		}
	}
	free(lv);
	free(paths);
	for (size_t i = 0; specs != NULL && i < np; i++)
		free(specs[i]);
	free(specs);
	*out = ds;
	return 0;
fail:
	for (size_t i = 0; specs != NULL && i < np; i++)
		free(specs[i]);
	free(specs);
	/* Objects prepared past the shards counted: ds_free frees those. */
	for (size_t i = ds->nshards; ds->robjs != NULL && i < np; i++) {
		remote_obj_free(&ds->robjs[i]);
	}
	if (r == -ENOMEM)
		snprintf(err, errlen, "%s", strerror(ENOMEM));
	for (size_t i = 0; i < np; i++)
		free(paths[i]);
	free(paths);
	free(lv);
	ds_free(ds);
	return r;
}

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
