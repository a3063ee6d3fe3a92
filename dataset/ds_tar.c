/*
 * ds_tar.c - layer: dataset/ (the datasets), tar shard backend, its top
 * (called by dataset.c's ds_open_cfg and core/dsopen.c; calls the others:
 * ds_shard_list.c, ds_tar_index.c, ds_tar_walk.c, ds_remote.c (the index
 * pass over remote shards), ds_label.c, ds_label_list.c, ds_text.c and
 * ds_common.c).  WebDataset
 * tar shards read in place (see dataset.h): ds_open_shards finds the shards,
 * indexes each (the kept index, else a walk of its headers), groups its
 * members into samples by key, labels them and reads their captions
 * (ds_tar_read.c reads their bytes).
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
#include "dataset/ds_text.h"
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

/* What a shard's samples carry: label, text, class names (ds_meta). */
struct carry {
	struct ds_label lb;
	struct ds_text tx;
	const struct ds_names *names; /* NULL: no classes = FILE */
	bool autolabel;	  /* label = auto: cls, or none if no .cls at all */
	size_t nlabelled; /* samples seen with a label member */
};

/*
 * Sample s's label and caption from its members lm (nlm of the label's
 * extension) and tm (ntm of the caption's); bad, when the image itself
 * cannot be served, comes first.  0 or -ENOMEM.
 */
static int
sample_meta(struct carry *ca, struct ds_sample *s,
    const struct tar_member *lm, size_t nlm, const struct tar_member *tm,
    size_t ntm, const char *bad)
{
	struct ds_labels labs;
	const char *lbad, *tbad;
	int r;

	s->label = -1;
	if ((r = ds_labels_of(&ca->lb, lm, nlm, ca->names, &labs, &lbad)) !=
		0 ||
	    (r = ds_text_of(&ca->tx, tm, ntm, &s->text, &s->tlen, &tbad)) !=
		0) {
		free(labs.v);
		return r;
	}
	ca->nlabelled += nlm > 0;
	/* label = auto: a sample without a .cls member keeps its caption,
	 * for the dataset may turn out to have no labels at all (then it is
	 * served); its caption's fault comes first. */
	if (ca->autolabel && lbad != NULL && strcmp(lbad, DS_NO_CLS) == 0 &&
	    tbad != NULL)
		lbad = NULL;
	s->bad = bad ? bad : lbad ? lbad : tbad;
	if (s->bad != NULL &&
	    !(ca->autolabel && strcmp(s->bad, DS_NO_CLS) == 0)) {
		free(s->text);
		s->text = NULL;
	} else if (labs.list) {
		/* A list (multi-label): its count first. */
		if ((s->labels = malloc((labs.n + 1) * sizeof(uint32_t))) ==
		    NULL) {
			free(labs.v);
			return -ENOMEM;
		}
		s->labels[0] = labs.n;
		memcpy(s->labels + 1, labs.v, labs.n * sizeof(uint32_t));
	} else if (labs.n == 1)
		s->label = labs.v[0];
	free(labs.v);
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
	struct carry *ca;
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
	struct carry *ca = ad->ca;
	struct ds_sample **v = &ad->ds->samples;
	size_t *n = &ad->ds->n;
	const char *want = ds_label_ext(&ca->lb), *twant = ds_text_ext(&ca->tx);
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
		const struct tar_member *img = NULL, *lm = NULL, *tm = NULL;
		size_t nimg = 0, nlm = 0, ntm = 0;
		const char *bad = NULL;
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
				continue;
			}
			if (want != NULL && strcmp(g[i].ext, want) == 0) {
				lm = g[i].m;
				nlm++;
			}
			if (twant != NULL && strcmp(g[i].ext, twant) == 0) {
				tm = g[i].m;
				ntm++;
			}
		}
		if (img == NULL)
			continue; /* no image: not a sample */
		if (img->kind != TM_FILE)
			bad = ds_tm_why(img->kind);
		else if (nimg > 1)
			bad = "duplicate key: more than one image member";
		if ((r = grow(v, *n, &ad->cap)) != 0)
			break;
		s = &(*v)[*n];
		memset(s, 0, sizeof(*s));
		if (asprintf(&s->path, "%s:%s", rel, img->name) < 0) {
			s->path = NULL;
			r = -ENOMEM;
			break;
		}
		(*n)++;
		s->shard = shard;
		s->off = img->off;
		s->size = img->size;
		if ((r = sample_meta(ca, s, lm, nlm, tm, ntm, bad)) != 0)
			break;
		/* The image's digest, whatever its label or caption say: a
		 * sample label = auto fails for now may be served after all. */
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
	struct ds_meta meta = {label, NULL, NULL, 0};

	return ds_open_shards_remote(name, shards, &meta, NULL, NULL,
	    index_fd, progress, arg, out, err, errlen);
}

/* Why a shard that could not be indexed fails its sample (the log has
 * the failure itself). */
static const char not_indexed[] =
    "its shard could not be indexed (the log says why); the next mount "
    "indexes it again";

/*
 * A shard's samples (ds_shard_add_fn): of its index ix, or for a shard
 * that failed, one sample named "SHARD:" that fails when read.  That one
 * has no label member, so it has no vote in label = auto (nlabelled),
 * and it stays bad whatever label = auto decides.
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

/*
 * The classes of a dataset of one label a sample: the distinct labels, in
 * increasing order, named by their number; a sample's label becomes its
 * class's index (labels 0, 1, 3, 7 are classes 0..3, as every dataset's
 * label is).  0 or -ENOMEM.
 */
static int
number_classes(struct dataset *ds)
{
	int64_t *lv;
	size_t k = 0;

	if ((lv = malloc(ds->n * sizeof(*lv))) == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < ds->n; i++)
		if (ds->samples[i].bad == NULL)
			lv[k++] = ds->samples[i].label;
	qsort(lv, k, sizeof(*lv), by_i64);
	if ((ds->classes = calloc(k ? k : 1, sizeof(char *))) == NULL) {
		free(lv);
		return -ENOMEM;
	}
	for (size_t i = 0; i < k; i++) {
		if (i > 0 && lv[i] == lv[i - 1])
			continue;
		if (asprintf(&ds->classes[ds->nclasses], "%" PRId64, lv[i]) <
		    0) {
			ds->classes[ds->nclasses] = NULL;
			free(lv);
			return -ENOMEM;
		}
		lv[ds->nclasses++] = lv[i];
	}
	for (size_t i = 0; i < ds->n; i++) {
		struct ds_sample *x = &ds->samples[i];
		const int64_t *c;

		if (x->bad == NULL && (c = bsearch(&x->label, lv, ds->nclasses,
					   sizeof(*lv), by_i64)) != NULL)
			x->label = c - lv;
	}
	free(lv);
	return 0;
}

/* The shards' samples once all are added: label = auto decided, then
 * the classes (multi-label, numbered, or none).  0 or -ENOMEM. */
static int
finish_labels(struct dataset *ds, struct carry *ca)
{
	/* label = auto: cls, or none when no sample has a .cls member (a
	 * shard that could not be indexed has none: no vote). */
	if (ca->autolabel && ca->nlabelled == 0)
		ca->lb.mode = LBL_NONE;
	for (size_t i = 0; ca->autolabel && i < ds->n; i++) {
		struct ds_sample *x = &ds->samples[i];

		if (x->bad == NULL || strcmp(x->bad, DS_NO_CLS) != 0)
			continue;
		if (ca->lb.mode == LBL_NONE)
			x->bad = NULL; /* its caption was kept */
		else {
			free(x->text);
			x->text = NULL;
		}
	}
	for (size_t i = 0; i < ds->n && !ds->multi; i++)
		ds->multi = ds->samples[i].labels != NULL;
	if (ds->multi)
		return ds_multi_classes(ds);
	return ca->lb.mode != LBL_NONE ? number_classes(ds) : 0;
}

int
ds_open_shards_remote(const char *name, const char *shards,
    const struct ds_meta *meta, const struct remote_opts *ropts,
    const struct ds_remote_hooks *hooks, int index_fd, ds_progress_fn progress,
    void *arg, struct dataset **out, char *err, size_t errlen)
{
	struct dataset *ds;
	struct carry ca = {.names = NULL};
	struct ds_names names = {NULL, 0, NULL};
	struct adder ad = {0};
	char **paths = NULL, **specs = NULL;
	size_t np = 0;
	int r;

	if ((r = ds_label_parse(
		 meta ? meta->label : NULL, &ca.lb, err, errlen)) != 0 ||
	    (r = ds_text_parse(
		 meta ? meta->text : NULL, &ca.tx, err, errlen)) != 0)
		return r;
	if ((ds = calloc(1, sizeof(*ds))) == NULL ||
	    (ds->name = strdup(name ? name : "")) == NULL) {
		free(ds);
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	ds->text = ca.tx.mode != TXT_NONE;
	ca.autolabel = meta != NULL && meta->label != NULL &&
		       strcmp(meta->label, "auto") == 0;
	if (meta != NULL && meta->class_names != NULL) {
		if ((r = ds_names_init(
			 &names, meta->class_names, meta->nclass_names)) != 0)
			goto fail;
		ca.names = &names;
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
	ad.ca = &ca;
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
	if ((r = finish_labels(ds, &ca)) != 0)
		goto fail;
	free(paths);
	for (size_t i = 0; specs != NULL && i < np; i++)
		free(specs[i]);
	free(specs);
	ds_names_fini(&names);
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
	ds_names_fini(&names);
	ds_free(ds);
	return r;
}
