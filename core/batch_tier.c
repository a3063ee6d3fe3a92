/*
 * batch_tier.c - the model (core/): a finished batch in the cluster
 * tier: its key, its bytes, the readers' position notes (see
 * batch_tier.h).  Over the job (job.h), its datasets and the
 * transforms' decoder ids; OpenSSL's SHA-256.
 */
#include <config.h> /* the build's (PACKAGE_VERSION), not core/config.h */

#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#include "cache/codec.h"
#include "core/batch_tier.h"
#include "dataset/dataset.h"
#include "transforms/xf.h"

#define POS_MAGIC "FFPO"
#define POS_VERSION 1

/* A SHA-256 in progress; ok false after a failure. */
struct hash {
	EVP_MD_CTX *ctx;
	bool ok;
};

static void
h_bytes(struct hash *h, const void *p, size_t len)
{
	if (h->ok && len > 0)
		h->ok = EVP_DigestUpdate(h->ctx, p, len) == 1;
}

/* A number, as 8 bytes little endian. */
static void
h_u64(struct hash *h, uint64_t v)
{
	uint8_t b[8];

	codec_put_le64(b, v);
	h_bytes(h, b, sizeof(b));
}

/* A string with its length before it, so that no two lists run together. */
static void
h_str(struct hash *h, const char *s)
{
	size_t len = s != NULL ? strlen(s) : 0;

	h_u64(h, len);
	h_bytes(h, s, len);
}

/* A pipeline's text with runs of blanks as one space, ends trimmed. */
static void
h_text(struct hash *h, const char *s)
{
	char buf[256];
	size_t n = 0, total = 0;
	bool blank = false;

	for (; s != NULL && *s; s++) {
		bool b = *s == ' ' || *s == '\t' || *s == '\n' || *s == '\r';

		if (b) {
			blank = total > 0;
			continue;
		}
		if (blank) {
			buf[n++] = ' ';
			total++;
			blank = false;
		}
		buf[n++] = *s;
		total++;
		if (n >= sizeof(buf) - 2) {
			h_bytes(h, buf, n);
			n = 0;
		}
	}
	h_bytes(h, buf, n);
	h_u64(h, total);
}

/* The identity of a dataset: its samples' names and labels, its classes
 * and its shards (named relative to its root), never its root. */
static void
h_dataset(struct hash *h, const struct dataset *ds)
{
	size_t rl = strlen(ds->root);

	h_u64(h, ds->n);
	h_u64(h, ds->nclasses);
	for (size_t i = 0; i < ds->nclasses; i++)
		h_str(h, ds->classes[i]);
	h_u64(h, ds->nshards);
	for (size_t i = 0; i < ds->nshards; i++) {
		const char *p = ds->shards[i].path;

		if (strncmp(p, ds->root, rl) == 0)
			p += rl;
		h_str(h, p);
		h_u64(h, (uint64_t)ds->shards[i].st.st_size);
		h_u64(h, (uint64_t)ds->shards[i].st.st_mtime);
	}
	for (size_t i = 0; i < ds->n; i++) {
		const struct ds_sample *s = &ds->samples[i];

		h_str(h, s->path);
		h_u64(h, (uint64_t)s->label);
		h_u64(h, s->off);
		h_u64(h, s->size);
		h_u64(h, s->bad != NULL);
	}
}

static int
h_begin(struct hash *h)
{
	h->ok = (h->ctx = EVP_MD_CTX_new()) != NULL &&
		EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) == 1;
	return h->ok ? 0 : -ENOMEM;
}

static int
h_end(struct hash *h, uint8_t out[TIER_KEY_LEN])
{
	unsigned len = 0;

	if (h->ok)
		h->ok = EVP_DigestFinal_ex(h->ctx, out, &len) == 1 &&
			len == TIER_KEY_LEN;
	EVP_MD_CTX_free(h->ctx);
	return h->ok ? 0 : -ENOMEM;
}

int
tier_job_print(const struct job *j, uint8_t out[TIER_KEY_LEN])
{
	const struct cfg_job *cj = j->cfg;
	const char *pipe = cj->pipeline;
	struct hash h;

	if (h_begin(&h) != 0) {
		EVP_MD_CTX_free(h.ctx);
		return -ENOMEM;
	}
	h_str(&h, "feedfs tier batch");
	h_u64(&h, TIER_FORMAT_VERSION);
	h_str(&h, PACKAGE_VERSION);
	h_str(&h, xf_decoder_id());
	h_str(&h, xf_png_decoder_id());
	h_str(&h, xf_webp_decoder_id());
	/* The job's canonical text: what changes a batch's bytes. */
	h_u64(&h, cj->batch_size);
	h_u64(&h, cfg_job_shuffle_seed(cj));
	h_u64(&h, j->aug_seed);
	h_u64(&h, cj->shuffle);
	h_u64(&h, cj->drop_last);
	h_u64(&h, (uint64_t)cj->order);
	h_u64(&h, (uint64_t)cj->on_error);
	h_u64(&h, (uint64_t)cj->dtype);
	h_u64(&h, (uint64_t)cj->layout);
	h_u64(&h, cj->gpu);
	h_u64(&h, cj->max_pixels);
	h_u64(&h, cj->cache_format);
	h_u64(&h, cj->res_line != 0);
	h_u64(&h, cj->res.lo);
	h_u64(&h, cj->res.hi);
	h_u64(&h, cj->res.e0);
	h_u64(&h, cj->res.e1);
	h_u64(&h, j->view);
	if (j->view > 0 && cj->view_text != NULL &&
	    cj->view_text[j->view] != NULL)
		pipe = cj->view_text[j->view];
	h_text(&h, pipe);
	h_str(&h, j->key_text);
	h_u64(&h, cj->epoch_samples);
	h_u64(&h, j->plan.n);
	h_u64(&h, j->nsrc);
	for (size_t s = 0; s < j->nsrc; s++)
		h_dataset(&h, j->src[s].ds);
	return h_end(&h, out);
}

int
tier_batch_key(const struct job *j, const uint8_t jp[TIER_KEY_LEN],
    uint32_t epoch, uint32_t rank, uint32_t world, uint64_t b,
    const uint32_t *ids, uint32_t len, const uint64_t *w, size_t nw,
    uint8_t key[TIER_KEY_LEN])
{
	struct hash h;
	int r = 0;

	if (h_begin(&h) != 0) {
		EVP_MD_CTX_free(h.ctx);
		return -ENOMEM;
	}
	h_bytes(&h, jp, TIER_KEY_LEN);
	h_u64(&h, epoch);
	h_u64(&h, rank);
	h_u64(&h, world);
	h_u64(&h, b);
	h_u64(&h, nw);
	for (size_t i = 0; i < nw; i++)
		h_u64(&h, w[i]);
	h_u64(&h, len);
	for (uint32_t s = 0; s < len && r == 0; s++) {
		uint32_t local;
		const struct dataset *ds = job_source_of(j, ids[s], &local)->ds;
		struct stat st;

		if (ds_sample_stat(ds, local, &st) != 0) {
			r = -ENOENT;
			break;
		}
		h_u64(&h, ids[s]);
		h_u64(&h, (uint64_t)st.st_size);
		h_u64(&h, (uint64_t)st.st_mtime);
	}
	if (r != 0) {
		EVP_MD_CTX_free(h.ctx);
		return r;
	}
	return h_end(&h, key);
}

void
tier_layout(const struct job *j, uint32_t epoch, uint32_t len, uint64_t *raw,
    uint64_t *ids)
{
	*raw = (uint64_t)len * job_geo(j, epoch)->raw_bytes;
	*ids = (uint64_t)len * 8;
}

int
tier_ids_check(
    const struct job *j, const uint8_t *p, uint32_t len, int64_t *out)
{
	for (uint32_t s = 0; s < len; s++) {
		uint64_t id = codec_get_le64(p + (size_t)s * 8);

		if (id >= j->plan.n)
			return -EBADMSG;
		out[s] = (int64_t)id;
	}
	return 0;
}

void
tier_pos_name(
    const uint8_t jp[TIER_KEY_LEN], unsigned slot, char name[TIER_NOTE_NAME])
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;

	name[n++] = 'p';
	name[n++] = '/';
	for (size_t i = 0; i < 16; i++) {
		name[n++] = hex[jp[i] >> 4];
		name[n++] = hex[jp[i] & 15];
	}
	snprintf(name + n, TIER_NOTE_NAME - n, "/%u", slot % TIER_SLOTS);
}

void
tier_pos_encode(const struct tier_pos *p, uint8_t out[TIER_POS_LEN])
{
	memcpy(out, POS_MAGIC, 4);
	codec_put_le32(out + 4, POS_VERSION);
	codec_put_le32(out + 8, p->world);
	codec_put_le32(out + 12, p->rank);
	codec_put_le32(out + 16, p->epoch);
	codec_put_le32(out + 20, 0);
	codec_put_le64(out + 24, p->batch);
	codec_put_le64(out + 32, p->time);
	codec_put_le64(out + 40, p->mount);
}

int
tier_pos_decode(const uint8_t *v, size_t len, struct tier_pos *p)
{
	struct tier_pos q;

	if (len != TIER_POS_LEN || memcmp(v, POS_MAGIC, 4) != 0 ||
	    codec_get_le32(v + 4) != POS_VERSION || codec_get_le32(v + 20) != 0)
		return -EBADMSG;
	q.world = codec_get_le32(v + 8);
	q.rank = codec_get_le32(v + 12);
	q.epoch = codec_get_le32(v + 16);
	q.batch = codec_get_le64(v + 24);
	q.time = codec_get_le64(v + 32);
	q.mount = codec_get_le64(v + 40);
	if (q.world < 1 || q.world > 1024 || q.rank >= q.world)
		return -EBADMSG;
	*p = q;
	return 0;
}
