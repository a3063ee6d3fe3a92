/*
 * admin.c - layer: store (its administration; calls store.c and codec.c,
 * and is called by ctl.c, open.c and feedfs-cache).  Check, evict, clear,
 * compact and flush, and the one executor of control requests that both
 * the control socket and feedfs-cache (on a store no feedfs holds) run.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rocksdb/c.h>

#include "cache/cache_int.h"

int
cache_check_entry(
    struct cache *c, const struct cache_entry *ent, char *why, size_t whylen)
{
	rocksdb_pinnableslice_t *ps;
	struct cache_val tmp;
	const char *data, *bad = "";
	uint8_t sk[CODEC_SEQ_KEY];
	uint64_t seq;
	char *e = NULL;
	size_t vlen;
	int r = 0;

	codec_seq_key('V', ent->seq, sk);
	ps = rocksdb_get_pinned_cf(
	    c->db, c->ropts, c->vcf, (const char *)sk, sizeof(sk), &e);
	if (e != NULL) {
		snprintf(why, whylen, "%s", e);
		rocksdb_free(e);
		return -EIO;
	}
	if (ps == NULL) {
		/* Evicted (or cleared) between the index and now: not damage.
		 */
		return -ENOENT;
	}
	data = rocksdb_pinnableslice_value(ps, &vlen);
	if (codec_env_open((const uint8_t *)data, vlen, ent->key, &tmp, &bad) !=
	    0) {
		snprintf(why, whylen, "%s", bad);
		r = -EIO;
	} else if (tmp.len != ent->len) {
		snprintf(why, whylen, "length %zu, the index says %llu",
		    tmp.len, (unsigned long long)ent->len);
		r = -EIO;
	}
	rocksdb_pinnableslice_destroy(ps);
	if (r == 0 && cache_lookup_seq(c, ent->key, &seq) == 0 &&
	    seq < ent->seq) {
		snprintf(why, whylen, "index points at an older value");
		r = -EIO;
	}
	return r;
}

/* Delete one entry's K (when it points here), T and V. */
static void
batch_drop(
    struct cache *c, rocksdb_writebatch_t *b, const struct cache_entry *ent)
{
	uint8_t sk[CODEC_SEQ_KEY];
	uint64_t seq;

	if (cache_lookup_seq(c, ent->key, &seq) == 0 && seq == ent->seq) {
		uint8_t ik[CODEC_INDEX_KEY];

		codec_index_key(ent->key, ik);
		rocksdb_writebatch_delete(b, (const char *)ik, sizeof(ik));
	}
	codec_seq_key('T', ent->seq, sk);
	rocksdb_writebatch_delete(b, (const char *)sk, sizeof(sk));
	codec_seq_key('V', ent->seq, sk);
	rocksdb_writebatch_delete_cf(b, c->vcf, (const char *)sk, sizeof(sk));
}

struct evict_ctx {
	struct cache *c;
	const char *prefix;
	uint64_t before;
	rocksdb_writebatch_t *b;
	uint64_t n, bytes;
};

static int
evict_one(const struct cache_entry *ent, void *arg)
{
	struct evict_ctx *x = arg;

	if (x->prefix != NULL &&
	    (ent->prefix_len != strlen(x->prefix) ||
		memcmp(ent->prefix, x->prefix, ent->prefix_len) != 0))
		return 0;
	if (x->before != 0 && ent->time >= x->before)
		return 0;
	batch_drop(x->c, x->b, ent);
	x->n++;
	x->bytes += ent->bytes;
	return 0;
}

/* Give the space of deleted keys back: compact everything. */
static int
compact_all(struct cache *c)
{
	const char lo[1] = {0}, hi[2] = {(char)0xff, (char)0xff};

	for (int i = 0; i < 2; i++)
		rocksdb_compact_range_cf(
		    c->db, c->cf[i], lo, 0, hi, sizeof(hi));
	return 0;
}

int
cache_evict_match(struct cache *c, const char *prefix, uint64_t before,
    uint64_t *n, uint64_t *bytes, char *err, size_t errlen)
{
	struct evict_ctx x = {c, prefix, before, NULL, 0, 0};
	char *e = NULL;
	int r;

	x.b = rocksdb_writebatch_create();
	/*
	 * No put between the scan and the totals (cache_int.h: admin): a
	 * put's accounting would else be lost or counted twice.
	 */
	pthread_rwlock_wrlock(&c->admin);
	r = cache_scan(c, evict_one, &x, err, errlen);
	if (r == 0 && x.n > 0) {
		rocksdb_write(c->db, c->wopts, x.b, &e);
		if (e != NULL) {
			snprintf(err, errlen, "%s", e);
			rocksdb_free(e);
			r = -EIO;
		}
	}
	if (r == 0 && x.n > 0)
		cache_load_totals(c);
	pthread_rwlock_unlock(&c->admin);
	rocksdb_writebatch_destroy(x.b);
	/* The space goes back outside the lock: puts go on meanwhile. */
	if (r == 0 && x.n > 0)
		compact_all(c);
	if (r == 0) {
		*n = x.n;
		*bytes = x.bytes;
	}
	return r;
}

static int
count_one(const struct cache_entry *ent, void *arg)
{
	uint64_t *nb = arg;

	nb[0]++;
	nb[1] += ent->bytes;
	return 0;
}

int
cache_clear(
    struct cache *c, uint64_t *n, uint64_t *bytes, char *err, size_t errlen)
{
	static const char kinds[] = {'D', 'K', 'M', 'T', 'V'};
	rocksdb_writebatch_t *b = rocksdb_writebatch_create();
	uint64_t nb[2] = {0, 0};
	char *e = NULL;
	int r;

	for (size_t i = 0; i < sizeof(kinds); i++) {
		char lo[1] = {kinds[i]}, hi[1] = {(char)(kinds[i] + 1)};

		rocksdb_writebatch_delete_range_cf(
		    b, kinds[i] == 'V' ? c->vcf : c->cf[0], lo, 1, hi, 1);
	}
	/* What is counted is what is deleted: no put in between. */
	pthread_rwlock_wrlock(&c->admin);
	pthread_mutex_lock(&c->memo);
	r = cache_scan(c, count_one, nb, err, errlen);
	rocksdb_write(c->db, c->wopts, b, &e);
	rocksdb_writebatch_destroy(b);
	if (e == NULL) {
		cache_load_totals(c);
		cache_load_memos(c, false);
	}
	pthread_mutex_unlock(&c->memo);
	pthread_rwlock_unlock(&c->admin);
	if (e != NULL) {
		snprintf(err, errlen, "%s", e);
		rocksdb_free(e);
		return -EIO;
	}
	compact_all(c);
	*n = nb[0];
	*bytes = nb[1];
	return r == -EIO ? 0 : r; /* a damaged index is cleared too */
}

int
cache_compact(struct cache *c)
{
	return compact_all(c);
}

int
cache_flush(struct cache *c, char *err, size_t errlen)
{
	rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
	char *e = NULL;

	rocksdb_flushoptions_set_wait(fo, 1);
	cache_flush_cfs(c, fo, &e);
	rocksdb_flushoptions_destroy(fo);
	if (e != NULL) {
		snprintf(err, errlen, "%s", e);
		rocksdb_free(e);
		return -EIO;
	}
	return 0;
}

/* ---- control requests ------------------------------------------------- */

static const struct {
	const char *word;
	enum cache_admin_op op;
	bool arg; /* takes TEXT or UNIXTIME after one space */
} requests[] = {
    {"flush", CACHE_ADMIN_FLUSH, false},
    {"compact", CACHE_ADMIN_COMPACT, false},
    {"clear", CACHE_ADMIN_CLEAR, false},
    {"stats", CACHE_ADMIN_STATS, false},
    {"prefix-stats", CACHE_ADMIN_PREFIX_STATS, false},
    {"evict-prefix", CACHE_ADMIN_EVICT_PREFIX, true},
    {"evict-before", CACHE_ADMIN_EVICT_BEFORE, true},
};

/* Unsigned decimal, digits only, no overflow: 0 or -EINVAL. */
static int
parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (*s == '\0')
		return -EINVAL;
	for (; *s != '\0'; s++) {
		uint64_t d = (uint64_t)(*s - '0');

		if (*s < '0' || *s > '9' || v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

int
cache_admin_parse(
    const char *line, struct cache_admin_req *req, char *err, size_t errlen)
{
	struct cache_admin_req q = {0};
	const char *arg = NULL;
	size_t i, n;

	for (i = 0; i < sizeof(requests) / sizeof(requests[0]); i++) {
		n = strlen(requests[i].word);
		if (strncmp(line, requests[i].word, n) != 0)
			continue;
		if (!requests[i].arg && line[n] == '\0')
			break;
		if (requests[i].arg && line[n] == ' ') {
			arg = line + n + 1;
			break;
		}
	}
	if (i == sizeof(requests) / sizeof(requests[0])) {
		snprintf(err, errlen, "unknown request");
		return -EINVAL;
	}
	q.op = requests[i].op;
	if (q.op == CACHE_ADMIN_EVICT_PREFIX)
		q.prefix = arg;
	else if (q.op == CACHE_ADMIN_EVICT_BEFORE &&
		 parse_u64(arg, &q.before) != 0) {
		snprintf(err, errlen, "evict-before needs a Unix time");
		return -EINVAL;
	}
	*req = q;
	return 0;
}

/*
 * Run req on c: 0 and *n, *bytes (evict and clear), *memos (evict-before:
 * the digest memos put before then), or -errno and why.
 */
static int
admin_exec(struct cache *c, const struct cache_admin_req *req, uint64_t *n,
    uint64_t *bytes, uint64_t *memos, char *err, size_t errlen)
{
	int r;

	switch (req->op) {
	case CACHE_ADMIN_FLUSH:
		return cache_flush(c, err, errlen);
	case CACHE_ADMIN_COMPACT:
		return cache_compact(c);
	case CACHE_ADMIN_CLEAR:
		return cache_clear(c, n, bytes, err, errlen);
	case CACHE_ADMIN_EVICT_PREFIX:
		return cache_evict_match(
		    c, req->prefix, 0, n, bytes, err, errlen);
	case CACHE_ADMIN_EVICT_BEFORE:
		/* Nothing was put before 1970 (and 0 means "any" there). */
		if (req->before == 0)
			return 0;
		if ((r = cache_evict_match(
			 c, NULL, req->before, n, bytes, err, errlen)) != 0)
			return r;
		return cache_evict_memos(
		    c, UINT64_MAX, req->before, memos, err, errlen);
	case CACHE_ADMIN_STATS:
	case CACHE_ADMIN_PREFIX_STATS:
		break;
	}
	return 0;
}

int
cache_admin_run(struct cache *c, const char *line, char *reply, size_t len)
{
	struct cache_admin_req req;
	struct cache_stats st;
	uint64_t n = 0, bytes = 0, memos = 0;
	char err[512] = "";
	int r;

	if ((r = cache_admin_parse(line, &req, err, sizeof(err))) != 0 ||
	    (r = admin_exec(c, &req, &n, &bytes, &memos, err, sizeof(err))) !=
		0) {
		snprintf(reply, len, "error %s", err[0] ? err : strerror(-r));
		return r;
	}
	switch (req.op) {
	case CACHE_ADMIN_STATS:
		cache_get_stats(c, &st);
		snprintf(reply, len,
		    "ok hits %" PRIu64 " misses %" PRIu64 " inserts %" PRIu64
		    " denied %" PRIu64 " evictions %" PRIu64
		    " refreshes %" PRIu64 " oversize %" PRIu64
		    " written %" PRIu64,
		    st.hits, st.misses, st.inserts, st.denied, st.evictions,
		    st.refreshes, st.oversize, st.bytes_written);
		break;
	case CACHE_ADMIN_PREFIX_STATS: {
		struct cache_prefix_stat ps[CACHE_PFX_MAX];
		size_t np = cache_get_prefix_stats(c, ps, CACHE_PFX_MAX), used;

		used = (size_t)snprintf(reply, len, "ok");
		for (size_t i = 0; i < np; i++) {
			char rec[320];
			size_t rl = (size_t)snprintf(rec, sizeof(rec),
			    "\t%s\t%" PRIu64 "\t%" PRIu64, ps[i].text,
			    ps[i].hits, ps[i].misses);

			/* Whole records only: the line is bounded. */
			if (rl < sizeof(rec) && used + rl < len) {
				memcpy(reply + used, rec, rl + 1);
				used += rl;
			}
		}
		break;
	}
	case CACHE_ADMIN_CLEAR:
	case CACHE_ADMIN_EVICT_PREFIX:
		snprintf(reply, len, "ok %" PRIu64 " %" PRIu64, n, bytes);
		break;
	case CACHE_ADMIN_EVICT_BEFORE:
		snprintf(reply, len, "ok %" PRIu64 " %" PRIu64 " %" PRIu64, n,
		    bytes, memos);
		break;
	default:
		snprintf(reply, len, "ok");
	}
	return 0;
}
