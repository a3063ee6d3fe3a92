/*
 * ns.c - the namespace of a mount (see ns.h).  Layer: the engine
 * (engine/), below fs/; it asks the engine's jobs (jobs.c) and text
 * files (text.c) through feed.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "engine/ns.h"

/* The names of a batch's files, by kind. */
static const char *const suffix[BK_COUNT] = {
    ".npy", ".labels.npy", ".ids.npy", ".cuda", ".text.jsonl"};

/* The fixed entries of the root, of .feedfs and of a job, in listing
 * order; a job's epochs (and a rank view's) follow its fixed entries. */
struct fixed {
	const char *name;
	enum ns_type type;
};
static const struct fixed root_fixed[] = {
    {"README", NS_README}, {".feedfs", NS_DOTDIR}};
static const struct fixed dot_fixed[] = {{"stats", NS_STATS}, {"log", NS_LOG}};
static const struct fixed job_fixed[] = {{"info.json", NS_INFO},
    {"samples.tsv", NS_SAMPLES}, {"errors.tsv", NS_ERRORS}};
#define NFIXED(a) (sizeof(a) / sizeof(a[0]))

void
ns_root(struct ns_key *k)
{
	memset(k, 0, sizeof(*k));
	k->type = NS_ROOT;
	k->world = 1;
}

static bool
find_fixed(
    const struct fixed *t, size_t n, const char *name, enum ns_type *type)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(t[i].name, name) == 0) {
			*type = t[i].type;
			return true;
		}
	return false;
}

/* The files of a batch of job in listing order, *v (BK_COUNT slots):
 * .text.jsonl too with text, .cuda with gpu = on.  Their count. */
static unsigned
batch_kinds(const struct feed *f, uint32_t job, enum batch_kind *v)
{
	unsigned n = 0;

	v[n++] = BK_IMAGES;
	v[n++] = BK_LABELS;
	v[n++] = BK_IDS;
	if (feed_job_text(f, job))
		v[n++] = BK_TEXT;
	if (feed_job_cuda(f, job))
		v[n++] = BK_CUDA;
	return n;
}

/* Whether job's batches have a file of kind. */
static bool
has_kind(const struct feed *f, uint32_t job, enum batch_kind kind)
{
	enum batch_kind v[BK_COUNT];
	unsigned n = batch_kinds(f, job, v);

	for (unsigned i = 0; i < n; i++)
		if (v[i] == kind)
			return true;
	return false;
}

int
ns_child(const struct feed *f, const struct ns_key *p, const char *name,
    struct ns_key *c)
{
	struct feed_key fk;
	int j;

	*c = *p;
	switch (p->type) {
	case NS_ROOT:
		ns_root(c);
		if (find_fixed(root_fixed, NFIXED(root_fixed), name, &c->type))
			return 0;
		if ((j = feed_find_job(f, name)) < 0)
			return -ENOENT;
		c->type = NS_JOB;
		c->job = (uint32_t)j;
		return 0;
	case NS_DOTDIR:
		return find_fixed(dot_fixed, NFIXED(dot_fixed), name, &c->type)
			   ? 0
			   : -ENOENT;
	case NS_JOB:
		if (find_fixed(job_fixed, NFIXED(job_fixed), name, &c->type))
			return 0;
		if (strcmp(name, "mixture") == 0 &&
		    feed_job_mixture(f, c->job)) {
			c->type = NS_MIXTURE;
			return 0;
		}
		if (ns_parse_rank(name, &c->rank, &c->world)) {
			c->type = NS_RANK;
			return 0;
		}
		/* epochs of the whole view: */
		/* FALLTHROUGH */
	case NS_RANK:
		if (!ns_parse_epoch(name, &c->epoch) ||
		    c->epoch >= feed_job_epochs(f, c->job))
			return -ENOENT;
		c->type = NS_EPOCH;
		return 0;
	case NS_EPOCH:
		if (strcmp(name, "mixture") == 0 &&
		    feed_job_mixture(f, c->job)) {
			c->type = NS_EMIX;
			return 0;
		}
		if (ns_parse_view_batch(name, &c->batch, &c->view)) {
			if (c->view >= feed_job_views(f, c->job))
				return -ENOENT;
			c->kind = BK_IMAGES;
			c->job = (uint32_t)feed_job_view(f, c->job, c->view);
		} else if (!ns_parse_batch(name, &c->batch, &c->kind) ||
			   !has_kind(f, c->job, c->kind))
			return -ENOENT;
		fk = ns_feed_key(c);
		if (!feed_key_valid(f, &fk))
			return -ENOENT;
		c->type = NS_BATCH;
		return 0;
	default:
		return -ENOTDIR;
	}
}

static bool
fixed_entry(const struct fixed *t, size_t n, uint64_t i, char *name, size_t len,
    struct ns_key *c)
{
	if (i >= n)
		return false;
	snprintf(name, len, "%s", t[i].name);
	c->type = t[i].type;
	return true;
}

bool
ns_entry(const struct feed *f, const struct ns_key *k, uint64_t i, char *name,
    size_t len, struct ns_key *c)
{
	enum batch_kind kinds[BK_COUNT];
	unsigned per, nk;

	*c = *k;
	switch (k->type) {
	case NS_ROOT:
		ns_root(c);
		if (i < NFIXED(root_fixed))
			return fixed_entry(
			    root_fixed, NFIXED(root_fixed), i, name, len, c);
		i -= NFIXED(root_fixed);
		if (i >= feed_njobs(f))
			return false;
		c->type = NS_JOB;
		c->job = (uint32_t)i;
		snprintf(name, len, "%s", feed_job_name(f, c->job));
		return true;
	case NS_DOTDIR:
		return fixed_entry(
		    dot_fixed, NFIXED(dot_fixed), i, name, len, c);
	case NS_JOB:
		if (i < NFIXED(job_fixed))
			return fixed_entry(
			    job_fixed, NFIXED(job_fixed), i, name, len, c);
		i -= NFIXED(job_fixed);
		if (feed_job_mixture(f, k->job) && i-- == 0) {
			snprintf(name, len, "mixture");
			c->type = NS_MIXTURE;
			return true;
		}
		/* FALLTHROUGH */
	case NS_RANK:
		if (i >= feed_job_epochs(f, k->job))
			return false;
		c->type = NS_EPOCH;
		c->epoch = (uint32_t)i;
		ns_epoch_name(name, len, c->epoch);
		return true;
	case NS_EPOCH:
		/* Per batch: its files, then its views 1..N-1. */
		nk = batch_kinds(f, k->job, kinds);
		per = nk + feed_job_views(f, k->job) - 1;
		if (i == per * feed_job_nbatches(f, k->job, k->world) &&
		    feed_job_mixture(f, k->job)) {
			snprintf(name, len, "mixture");
			c->type = NS_EMIX;
			return true;
		}
		if (i >= per * feed_job_nbatches(f, k->job, k->world))
			return false;
		c->type = NS_BATCH;
		c->batch = i / per;
		if (i % per >= nk) {
			c->view = (uint32_t)(i % per - nk + 1);
			c->kind = BK_IMAGES;
			c->job = (uint32_t)feed_job_view(f, k->job, c->view);
			ns_view_batch_name(name, len, c->batch, c->view);
			return true;
		}
		c->kind = kinds[i % per];
		ns_batch_name(name, len, c->batch, c->kind);
		return true;
	default:
		return false;
	}
}

int
ns_text(const struct ns_key *k)
{
	switch (k->type) {
	case NS_README:
		return FT_README;
	case NS_STATS:
		return FT_STATS;
	case NS_LOG:
		return FT_LOG;
	case NS_ERRORS:
		return FT_ERRORS;
	case NS_INFO:
		return FT_INFO;
	case NS_SAMPLES:
		return FT_SAMPLES;
	default:
		return -1;
	}
}

bool
ns_is_dir(const struct ns_key *k)
{
	return k->type == NS_ROOT || k->type == NS_DOTDIR ||
	       k->type == NS_JOB || k->type == NS_RANK || k->type == NS_EPOCH;
}

void
ns_attr(struct feed *f, const struct ns_key *k, struct ns_attr *a)
{
	struct feed_key fk;
	int t = ns_text(k);

	memset(a, 0, sizeof(*a));
	switch (k->type) {
	case NS_ROOT:
	case NS_DOTDIR:
	case NS_JOB:
	case NS_RANK:
	case NS_EPOCH:
		a->dir = true;
		break;
	case NS_STATS:
	case NS_LOG:
	case NS_ERRORS:
		a->live = true; /* its size is only known when read */
		break;
	case NS_MIXTURE:
		a->writable = true;
		/* FALLTHROUGH */
	case NS_EMIX:
		a->live = true; /* made when read (and written) */
		break;
	case NS_BATCH:
		fk = ns_feed_key(k);
		a->size = k->kind == BK_TEXT ? feed_text_size(f, &fk)
					     : feed_file_size(f, &fk, k->kind);
		break;
	default:
		a->size = feed_text_len(f, (enum feed_text)t, k->job);
	}
}

struct feed_key
ns_feed_key(const struct ns_key *k)
{
	struct feed_key fk = {k->job, k->rank, k->world, k->epoch, k->batch};

	return fk;
}

/*
 * Parse the decimal number at *s made of at least `width` digits, in its
 * canonical form (zero padded to width, no extra leading zeros).
 */
static bool
parse_num(const char **s, int width, uint64_t *out)
{
	const char *p = *s;
	uint64_t v = 0;
	int n = 0;
	char buf[32];

	while (*p >= '0' && *p <= '9') {
		if (v > (UINT64_MAX - 9) / 10 || ++n > 20)
			return false;
		v = v * 10 + (uint64_t)(*p++ - '0');
	}
	if (n == 0)
		return false;
	if (snprintf(buf, sizeof(buf), "%0*" PRIu64, width, v) != n ||
	    strncmp(buf, *s, (size_t)n) != 0)
		return false;
	*s = p;
	*out = v;
	return true;
}

bool
ns_parse_rank(const char *name, uint32_t *rank, uint32_t *world)
{
	uint64_t r, w;

	if (strncmp(name, "rank-", 5) != 0)
		return false;
	name += 5;
	if (!parse_num(&name, 1, &r) || strncmp(name, "-of-", 4) != 0)
		return false;
	name += 4;
	if (!parse_num(&name, 1, &w) || *name != '\0')
		return false;
	if (w < 1 || w > FEED_MAX_WORLD || r >= w)
		return false;
	*rank = (uint32_t)r;
	*world = (uint32_t)w;
	return true;
}

bool
ns_parse_epoch(const char *name, uint32_t *epoch)
{
	uint64_t e;

	if (strncmp(name, "epoch-", 6) != 0)
		return false;
	name += 6;
	if (!parse_num(&name, 4, &e) || *name != '\0' || e > UINT32_MAX)
		return false;
	*epoch = (uint32_t)e;
	return true;
}

bool
ns_parse_batch(const char *name, uint64_t *batch, enum batch_kind *kind)
{
	if (strncmp(name, "batch-", 6) != 0)
		return false;
	name += 6;
	if (!parse_num(&name, 6, batch))
		return false;
	for (int k = 0; k < BK_COUNT; k++)
		if (strcmp(name, suffix[k]) == 0) {
			*kind = (enum batch_kind)k;
			return true; /* .cuda: only in jobs with gpu = on */
		}
	return false;
}

int
ns_rank_name(char *buf, size_t len, uint32_t rank, uint32_t world)
{
	return snprintf(buf, len, "rank-%" PRIu32 "-of-%" PRIu32, rank, world);
}

int
ns_epoch_name(char *buf, size_t len, uint32_t epoch)
{
	return snprintf(buf, len, "epoch-%04" PRIu32, epoch);
}

int
ns_batch_name(char *buf, size_t len, uint64_t batch, enum batch_kind kind)
{
	return snprintf(buf, len, "batch-%06" PRIu64 "%s", batch, suffix[kind]);
}

bool
ns_parse_view_batch(const char *name, uint64_t *batch, uint32_t *view)
{
	uint64_t v;

	if (strncmp(name, "batch-", 6) != 0)
		return false;
	name += 6;
	if (!parse_num(&name, 6, batch) || strncmp(name, ".view", 5) != 0)
		return false;
	name += 5;
	if (!parse_num(&name, 1, &v) || strcmp(name, ".npy") != 0 || v < 1 ||
	    v >= CFG_MAX_VIEWS)
		return false;
	*view = (uint32_t)v;
	return true;
}

int
ns_view_batch_name(char *buf, size_t len, uint64_t batch, uint32_t view)
{
	return snprintf(
	    buf, len, "batch-%06" PRIu64 ".view%" PRIu32 ".npy", batch, view);
}
