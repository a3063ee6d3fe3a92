/*
 * ds_tier.c - the model (core/): remote shards' indexes in the cluster
 * tier (issue 38).  Over cache/cluster.h and the dataset layer's hooks
 * (dataset.h: struct ds_remote_hooks); dsopen.c and the engine's one
 * pass (engine/prefill.c) hand these to a dataset's index pass, and
 * feedfs-fill too.
 *
 * A shard's index, as its kept file holds it (ds_tar_index_encode: its
 * name, its version, each member's offset, size and content digest,
 * under a SHA-256), goes into the tier under the key
 * SHA-256(DS_TIER_LABEL, name, version), sealed as every tier value is:
 * the value envelope (codec.h), which names the key, and with
 * cluster_secret its MAC, in the secret's namespace.  So an index is
 * trusted exactly as a prefix is: with a secret, nobody without it can
 * plant or replay one (cluster_get refuses it: a miss); the dataset layer
 * then parses it as a kept index, and refuses one of another shard or
 * version (a stale one) or that does not parse.  A member served on the
 * strength of a tier's digest is checked against it when its bytes are
 * read (sample_cache.c).
 *
 * The envelope holds uint8 arrays: the payload is a u64 LE length, the
 * index, then zeros to a whole row of DS_TIER_ROW bytes (w = DS_TIER_ROW,
 * h rows, c = 1, raw), which no prefix has (c = 3), and the key is of
 * another label than any prefix's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "cache/cluster.h"
#include "core/dsopen.h"

/* What keys hash first, so that no prefix's key is an index's. */
#define DS_TIER_LABEL "feedfs shard index 4\n"

void
ds_tier_key(const char *name, const char *version, uint8_t key[32])
{
	size_t ll = strlen(DS_TIER_LABEL), nl = strlen(name),
	       vl = strlen(version);
	char *t = malloc(ll + nl + 1 + vl);

	if (t == NULL) {
		memset(key, 0xff, 32); /* a key nothing is stored under */
		return;
	}
	memcpy(t, DS_TIER_LABEL, ll);
	memcpy(t + ll, name, nl);
	t[ll + nl] = '\n';
	memcpy(t + ll + nl + 1, version, vl);
	cache_sha256(t, ll + nl + 1 + vl, key);
	free(t);
}

int
ds_tier_wrap(const uint8_t *d, size_t len, struct cache_val *v)
{
	size_t rows = (8 + len + DS_TIER_ROW - 1) / DS_TIER_ROW;
	uint8_t *p;

	if (rows > DS_TIER_ROWS_MAX)
		return -EFBIG;
	if ((p = calloc(rows, DS_TIER_ROW)) == NULL)
		return -ENOMEM;
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)((uint64_t)len >> (8 * i));
	memcpy(p + 8, d, len);
	memset(v, 0, sizeof(*v));
	v->w = DS_TIER_ROW;
	v->h = (uint32_t)rows;
	v->c = 1;
	v->data = p;
	v->len = rows * DS_TIER_ROW;
	return 0;
}

int
ds_tier_unwrap(const struct cache_val *v, const uint8_t **d, size_t *len)
{
	const uint8_t *p = v->data;
	uint64_t n = 0;

	if (v->w != DS_TIER_ROW || v->c != 1 || v->dtype != 0 || v->enc != 0 ||
	    v->h == 0 || v->h > DS_TIER_ROWS_MAX ||
	    v->len != (size_t)v->h * DS_TIER_ROW)
		return -EBADMSG;
	for (int i = 7; i >= 0; i--)
		n = n << 8 | p[i];
	/* The index and its padding fill the rows, no more, no less. */
	if (n > v->len - 8 || v->len - 8 - n >= DS_TIER_ROW)
		return -EBADMSG;
	for (size_t i = 8 + (size_t)n; i < v->len; i++)
		if (p[i] != 0)
			return -EBADMSG;
	*d = p + 8;
	*len = (size_t)n;
	return 0;
}

/* struct ds_remote_hooks' index_get over the cluster tier (tier). */
static int
tier_get(
    void *tier, const char *name, const char *version, uint8_t **d, size_t *len)
{
	struct cache_val v;
	uint8_t key[32];
	const uint8_t *p;
	size_t n;
	int r;

	ds_tier_key(name, version, key);
	if ((r = cluster_get(tier, key, &v)) != 0)
		return r;
	if ((r = ds_tier_unwrap(&v, &p, &n)) == 0) {
		if ((*d = malloc(n ? n : 1)) == NULL)
			r = -ENOMEM;
		else {
			memcpy(*d, p, n);
			*len = n;
		}
	}
	free(v.data);
	return r;
}

/* struct ds_remote_hooks' index_put over the cluster tier (tier). */
static void
tier_put(void *tier, const char *name, const char *version, const uint8_t *d,
    size_t len)
{
	struct cache_val v;
	uint8_t key[32];

	if (ds_tier_wrap(d, len, &v) != 0)
		return;
	ds_tier_key(name, version, key);
	(void)cluster_put(tier, key, &v); /* a failure: a later stream */
	free(v.data);
}

void
ds_tier_hooks(struct cluster *cl, struct ds_remote_hooks *h)
{
	if (cl == NULL)
		return;
	h->index_get = tier_get;
	h->index_put = tier_put;
	h->tier = cl;
}
