/*
 * admin.c - cache/ (the store), layer store: its administration (calls
 * store.c, room.c and codec.c, and is called by ctl.c, open.c and
 * feedfs-cache).  Check, evict, clear, compact and flush, and the one
 * executor of control requests that both the control socket and
 * feedfs-cache (on a store no feedfs holds) run.
 *
 * On a full disk: clear and evict --older-than first drop the files that
 * hold only what they delete (RocksDB's DeleteFilesInRange: no write, so
 * space comes back at once), then wait, outside the admin lock, up to
 * NOSPACE_WAIT_MS for RocksDB to take writes again (it stops them after a
 * write found no space, and starts them again by itself, every 5 s, once
 * there is room) before their deletes are written; cache_wipe drops a
 * store no process can open for want of space.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

#define NOSPACE_WAIT_MS 12000

/*
 * Wait up to NOSPACE_WAIT_MS for the store to take writes again after a
 * write found no space (a rewrite of its format marker, every 100 ms):
 * whether it does.  Not holding c->admin (puts wait for it).
 */
static bool
wait_writable(struct cache *c)
{
	char want[16], *e = NULL;

	snprintf(want, sizeof(want), "%d", CACHE_FORMAT_VERSION);
	for (int waited = 0;; waited += 100) {
		struct timespec ts = {0, 100 * 1000000};

		rocksdb_put(c->db, c->wopts, CACHE_FORMAT_KEY,
		    strlen(CACHE_FORMAT_KEY), want, strlen(want), &e);
		if (e == NULL)
			return true;
		if (!cache_is_nospace(e) || waited >= NOSPACE_WAIT_MS) {
			rocksdb_free(e);
			return false;
		}
		rocksdb_free(e);
		e = NULL;
		nanosleep(&ts, NULL);
	}
}

/*
 * Write b holding c->admin exclusive (and c->memo when memo): when the
 * store stopped writes for want of space, let go of the locks, wait for
 * it (wait_writable), take them again and write once more.  *e on
 * failure.
 */
static void
write_admin(struct cache *c, rocksdb_writebatch_t *b, bool memo, char **e)
{
	rocksdb_write(c->db, c->wopts, b, e);
	if (*e == NULL || !cache_is_nospace(*e))
		return;
	rocksdb_free(*e);
	*e = NULL;
	if (memo)
		pthread_mutex_unlock(&c->memo);
	pthread_rwlock_unlock(&c->admin);
	(void)wait_writable(c);
	pthread_rwlock_wrlock(&c->admin);
	if (memo)
		pthread_mutex_lock(&c->memo);
	rocksdb_write(c->db, c->wopts, b, e);
}

/*
 * Drop the files of cf that hold only keys of kind (one byte) of seq 0
 * to last: no write, so that space comes back on a full disk too.  What
 * they held may be in a memtable as well; the deletes written after
 * cover it.
 */
static void
drop_files(struct cache *c, rocksdb_column_family_handle_t *cf, char kind,
    uint64_t last)
{
	uint8_t lo[CODEC_SEQ_KEY], hi[CODEC_SEQ_KEY];
	char *e = NULL;

	codec_seq_key(kind, 0, lo);
	codec_seq_key(kind, last, hi);
	rocksdb_delete_file_in_range_cf(c->db, cf, (const char *)lo, sizeof(lo),
	    (const char *)hi, sizeof(hi), &e);
	rocksdb_free(e);
}

/*
 * The number of the oldest table file of level 0 (the smallest) in
 * family name, its name in *out: 0 when none.
 */
static uint64_t
oldest_l0(const rocksdb_livefiles_t *lf, const char *cf, const char **out)
{
	uint64_t best = 0;

	for (int i = 0; i < rocksdb_livefiles_count(lf); i++) {
		const char *name = rocksdb_livefiles_name(lf, i), *p;
		uint64_t num;

		if (rocksdb_livefiles_level(lf, i) != 0 ||
		    strcmp(rocksdb_livefiles_column_family_name(lf, i), cf) !=
			0)
			continue;
		p = strrchr(name, '/');
		num = strtoull(p != NULL ? p + 1 : name, NULL, 10);
		if (best == 0 || num < best) {
			best = num;
			*out = name;
		}
	}
	return best;
}

/*
 * Drop every table file of the store without a write, so that space
 * comes back on a full disk too: those of levels 1 and up whole
 * (DeleteFilesInRange), then those of level 0, the oldest first (RocksDB
 * deletes a file of level 0 only when it is the oldest, and the levels
 * under it are empty).  What the memtables hold stays: the deletes
 * written after cover it.
 */
static void
drop_all_files(struct cache *c)
{
	static const char *const names[2] = {"default", "values"};
	const char lo[1] = {0}, hi[2] = {(char)0xff, (char)0xff};
	char *e = NULL;

	for (int i = 0; i < 2; i++) {
		rocksdb_delete_file_in_range_cf(
		    c->db, c->cf[i], lo, 0, hi, sizeof(hi), &e);
		rocksdb_free(e);
		e = NULL;
		for (uint64_t was = 0, num;; was = num) {
			const rocksdb_livefiles_t *lf =
			    rocksdb_livefiles(c->db);
			const char *name = NULL;

			if (lf == NULL)
				break;
			/* Stop at none left, or at one RocksDB kept. */
			if ((num = oldest_l0(lf, names[i], &name)) != 0 &&
			    num != was)
				rocksdb_delete_file(c->db, name);
			rocksdb_livefiles_destroy(lf);
			if (num == 0 || num == was)
				break;
		}
	}
}

struct evict_ctx {
	struct cache *c;
	const char *prefix;
	uint64_t before;
	rocksdb_writebatch_t *b;
	uint64_t n, bytes;
	/* The entries up to seq run_end, all of them evicted: a run from the
	 * oldest (run: none left out yet). */
	uint64_t run_end;
	bool run;
};

static int
evict_one(const struct cache_entry *ent, void *arg)
{
	struct evict_ctx *x = arg;

	if ((x->prefix != NULL &&
		(ent->prefix_len != strlen(x->prefix) ||
		    memcmp(ent->prefix, x->prefix, ent->prefix_len) != 0)) ||
	    (x->before != 0 && ent->time >= x->before)) {
		x->run = false;
		return 0;
	}
	if (x->run)
		x->run_end = ent->seq;
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
	struct evict_ctx x = {c, prefix, before, NULL, 0, 0, 0, true};
	char *e = NULL;
	int r;

	x.b = rocksdb_writebatch_create();
	/*
	 * No put between the scan and the totals (cache_int.h: admin): a
	 * put's accounting would else be lost or counted twice.
	 */
	pthread_rwlock_wrlock(&c->admin);
	r = cache_scan(c, evict_one, &x, err, errlen);
	if (r == 0 && x.n > 0 && x.run_end > 0) {
		/* The oldest entries, all evicted: their values' files go
		 * whole, before any write (a full disk). */
		drop_files(c, c->vcf, 'V', x.run_end);
		drop_files(c, c->cf[0], 'T', x.run_end);
	}
	if (r == 0 && x.n > 0) {
		write_admin(c, x.b, false, &e);
		if (e != NULL) {
			snprintf(err, errlen, "%s", e);
			rocksdb_free(e);
			r = -EIO;
		}
	}
	if (x.n > 0) /* files may have gone, the write failing or not */
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
	/*
	 * What is counted is what is deleted: no put in between (but while
	 * write_admin waits for room, whose puts are deleted uncounted).
	 */
	pthread_rwlock_wrlock(&c->admin);
	pthread_mutex_lock(&c->memo);
	r = cache_scan(c, count_one, nb, err, errlen);
	drop_all_files(c); /* before any write: space back on a full disk */
	write_admin(c, b, true, &e);
	rocksdb_writebatch_destroy(b);
	/* The files went, the write failing or not. */
	cache_load_totals(c);
	cache_load_memos(c, false);
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

/* RocksDB's files in a store's directory (what cache_wipe removes). */
static bool
rocksdb_file(const char *name)
{
	static const char *const pats[] = {"CURRENT", "IDENTITY", "LOG",
	    "LOG.old.*", "MANIFEST-*", "OPTIONS-*", "*.sst", "*.log", "*.blob",
	    "*.dbtmp", "*.ldb"};

	for (size_t i = 0; i < sizeof(pats) / sizeof(pats[0]); i++)
		if (fnmatch(pats[i], name, 0) == 0)
			return true;
	return false;
}

int
cache_wipe(const char *dir, uint64_t *bytes, char *err, size_t errlen)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	struct dirent *de;
	struct stat st;
	uint64_t freed = 0;
	int dfd, lk, fd;
	DIR *d;

	if ((dfd = cache_dir_open(dir, false, err, errlen)) < 0)
		return dfd;
	/* RocksDB's own lock: no process opens the store meanwhile. */
	if ((lk = cache_dir_openat(dfd, "LOCK", O_RDWR | O_CREAT, 0600)) < 0 ||
	    fstat(lk, &st) != 0 || !S_ISREG(st.st_mode) ||
	    fcntl(lk, F_SETLK, &fl) != 0) {
		snprintf(err, errlen,
		    "%s is in use, or its LOCK cannot be taken", dir);
		if (lk >= 0)
			close(lk);
		close(dfd);
		return -EBUSY;
	}
	if ((fd = dup(dfd)) >= 0 && (d = fdopendir(fd)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (!rocksdb_file(de->d_name) ||
			    fstatat(dfd, de->d_name, &st,
				AT_SYMLINK_NOFOLLOW) != 0 ||
			    !S_ISREG(st.st_mode))
				continue;
			if (unlinkat(dfd, de->d_name, 0) == 0)
				freed += (uint64_t)st.st_blocks * 512;
		}
		closedir(d);
	} else if (fd >= 0)
		close(fd);
	close(lk); /* the lock with it */
	close(dfd);
	*bytes = freed;
	return 0;
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
