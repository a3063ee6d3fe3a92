/*
 * cache.c - the store of preprocessed results, in RocksDB.
 *
 * One RocksDB database, default column family, keys told apart by their
 * first byte:
 *
 *	"feedfs-cache-format"	CACHE_FORMAT_VERSION, decimal text
 *	'D' SHA-256(path)	digest memo: digest[32] size mtime.sec
 *				mtime.nsec ino dev (5 x u64 LE)
 *	'K' key[32]		seq (u64 BE): where the value lives
 *	'V' seq (u64 BE)	value: header (see VAL_*) + payload
 *	'T' seq (u64 BE)	key[32] + payload length (u64 LE) +
 *				insertion time (u64 LE, Unix seconds) +
 *				the prefix text (the rest: no NUL)
 *
 * Values are numbered in insertion order (seq), so the oldest ones are one
 * contiguous key range: eviction deletes a prefix of the 'V' and 'T'
 * ranges with range deletions and drops or compacts the files that held
 * them.  'T' is the small index that tells eviction which 'K' entries to
 * remove and how many bytes it frees without reading the values; it also
 * tells feedfs-cache the prefix and age of each entry (ls, evict).
 *
 * Writes skip the WAL: everything here can be recomputed, the WAL would
 * double the bytes written, and a batch is applied atomically to the
 * memtable either way.  A crash loses the unflushed memtable (misses, never
 * wrong data); cache_close flushes so a clean unmount keeps everything.
 *
 * Digest memos are never evicted: they are small (~90 bytes a source file)
 * and bounded by the number of source files.
 *
 * Lock order: none; the mutable state is atomics, and err is written once,
 * under errlock, before the disabled flag is set.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <rocksdb/c.h>

#include "cache/cache.h"

#define FORMAT_KEY "feedfs-cache-format"

#define VAL_MAGIC "FFCV"
#define VAL_HDR 80 /* magic version w h c dtype seq len hash key */
#define VAL_OVERHEAD (VAL_HDR + 9 + 41 + 33 + 64) /* index keys, slack */
#define DIGEST_VAL 72
#define TIDX_VAL 48 /* the fixed part of a 'T' value; the prefix follows */

struct cache {
	rocksdb_t *db;
	rocksdb_options_t *opts;
	rocksdb_block_based_table_options_t *topts;
	rocksdb_cache_t *bcache;
	rocksdb_filterpolicy_t *filter; /* owned by topts once set */
	rocksdb_readoptions_t *ropts;
	rocksdb_writeoptions_t *wopts;

	uint64_t size_bound;
	uint64_t check_every; /* bytes put between checks of the size */

	atomic_uint_least64_t seq; /* next value's sequence number */
	atomic_uint_least64_t since_check;
	atomic_flag evicting;

	atomic_uint_least64_t hits, misses, bytes_read, bytes_written;
	atomic_uint_least64_t insert_failures, corrupt, evicted;

	atomic_bool disabled;
	pthread_mutex_t errlock;
	char err[256];
	char note[4800];    /* what cache_open did besides opening, or "" */
	char secondary[64]; /* cache_open_secondary's own dir, removed */
};

static void
put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t
get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void
put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t
get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static void
put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static uint64_t
get_be64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* XXH64 (seed 0) of len bytes: the payload checksum. */
#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

static uint64_t
rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static uint64_t
xxh_round(uint64_t acc, uint64_t in)
{
	acc += in * P2;
	acc = rotl64(acc, 31);
	return acc * P1;
}

static uint64_t
xxh_merge(uint64_t acc, uint64_t v)
{
	acc ^= xxh_round(0, v);
	return acc * P1 + P4;
}

static uint64_t
rd64(const uint8_t *p)
{
	return get_le64(p); /* compilers turn this into one load */
}

static uint64_t
xxh64(const void *data, size_t len)
{
	const uint8_t *p = data, *end = p + len;
	uint64_t h;

	if (len >= 32) {
		uint64_t v1 = P1 + P2, v2 = P2, v3 = 0, v4 = 0 - P1;

		do {
			v1 = xxh_round(v1, rd64(p));
			v2 = xxh_round(v2, rd64(p + 8));
			v3 = xxh_round(v3, rd64(p + 16));
			v4 = xxh_round(v4, rd64(p + 24));
			p += 32;
		} while (end - p >= 32);
		h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) +
		    rotl64(v4, 18);
		h = xxh_merge(h, v1);
		h = xxh_merge(h, v2);
		h = xxh_merge(h, v3);
		h = xxh_merge(h, v4);
	} else
		h = P5;
	h += (uint64_t)len;
	while (end - p >= 8) {
		h ^= xxh_round(0, rd64(p));
		h = rotl64(h, 27) * P1 + P4;
		p += 8;
	}
	if (end - p >= 4) {
		h ^= (uint64_t)get_le32(p) * P1;
		h = rotl64(h, 23) * P2 + P3;
		p += 4;
	}
	while (p < end) {
		h ^= *p++ * P5;
		h = rotl64(h, 11) * P1;
	}
	h ^= h >> 33;
	h *= P2;
	h ^= h >> 29;
	h *= P3;
	h ^= h >> 32;
	return h;
}

static bool
is_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0)
			return false;
	return true;
}

/*
 * On an allocation failure inside OpenSSL the digest is all zeroes, which
 * cache_key, cache_get and cache_put take as "unknown": never a hit.
 */
void
cache_sha256(const void *data, size_t len, uint8_t out[32])
{
	if (EVP_Digest(data, len, out, NULL, EVP_sha256(), NULL) != 1)
		memset(out, 0, 32);
}

void
cache_key(
    const uint8_t digest[32], const char *prefix, uint8_t key[CACHE_KEY_LEN])
{
	EVP_MD_CTX *ctx;
	uint8_t n[8], ver[4];
	size_t plen = strlen(prefix);
	int ok;

	memset(key, 0, CACHE_KEY_LEN);
	if (is_zero(digest, 32) || (ctx = EVP_MD_CTX_new()) == NULL)
		return;
	put_le64(n, plen);
	put_le32(ver, CACHE_FORMAT_VERSION);
	ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
	     EVP_DigestUpdate(ctx, digest, 32) == 1 &&
	     EVP_DigestUpdate(ctx, n, sizeof(n)) == 1 &&
	     EVP_DigestUpdate(ctx, prefix, plen) == 1 &&
	     EVP_DigestUpdate(ctx, ver, sizeof(ver)) == 1 &&
	     EVP_DigestFinal_ex(ctx, key, NULL) == 1;
	EVP_MD_CTX_free(ctx);
	if (!ok)
		memset(key, 0, CACHE_KEY_LEN);
}

/* Record the first failure; from then on the cache is off. */
static void
fail(struct cache *c, const char *what, const char *msg)
{
	pthread_mutex_lock(&c->errlock);
	if (!atomic_load(&c->disabled)) {
		snprintf(c->err, sizeof(c->err), "%s failed: %s", what, msg);
		atomic_store(&c->disabled, true);
	}
	pthread_mutex_unlock(&c->errlock);
}

const char *
cache_error(struct cache *c)
{
	if (c == NULL || !atomic_load(&c->disabled))
		return NULL;
	return c->err;
}

/* mkdir -p, mode 0755. */
static int
mkdir_p(const char *dir)
{
	char buf[4096];
	size_t len = strlen(dir);

	if (len == 0 || len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, dir, len + 1);
	for (char *p = buf + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) != 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0755) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static uint64_t
clamp64(uint64_t v, uint64_t lo, uint64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static void
free_handles(struct cache *c)
{
	if (c->db != NULL)
		rocksdb_close(c->db);
	if (c->ropts != NULL)
		rocksdb_readoptions_destroy(c->ropts);
	if (c->wopts != NULL)
		rocksdb_writeoptions_destroy(c->wopts);
	if (c->opts != NULL)
		rocksdb_options_destroy(c->opts);
	if (c->topts != NULL)
		rocksdb_block_based_options_destroy(c->topts);
	if (c->bcache != NULL)
		rocksdb_cache_destroy(c->bcache);
}

/*
 * Options from the bounds: half of mem_bound to the block cache, a quarter
 * to the two write buffers; no compression (preprocessed pixels hardly
 * compress, and every hit would pay for it).
 *
 * Values stay in the SSTs, not in BlobDB's blob files, by measurement
 * (RocksDB 7.8, 2-core VM, values of 200 KB, 3000 of them (586 MB), WAL
 * off, 32M memtables, no compression, reads of every key in a shuffled
 * order after a reopen, files in the page cache; two runs each):
 *
 *			insert		point reads
 *	plain SST	682-745 MB/s	2674-2731 MB/s (13700-14000 values/s)
 *	BlobDB (64K)	501-515 MB/s	 873-888 MB/s  ( 4470-4540 values/s)
 *
 * A blob read copies the value out of the file on every get, where a
 * block-based read pins it in the block cache; hits, the warm epoch's
 * work, are 3x slower with blobs.  What BlobDB would save, compactions
 * rewriting values, matters less here: eviction drops whole ranges.
 */
static void
set_options(struct cache *c, uint64_t size_bound, uint64_t mem_bound)
{
	uint64_t bc = clamp64(mem_bound / 2, 8u << 20, UINT64_MAX);
	uint64_t wb = clamp64(mem_bound / 8, 1u << 20, 64u << 20);
	uint64_t wbmax = clamp64(size_bound / 8, 1u << 20, UINT64_MAX);

	if (wb > wbmax)
		wb = wbmax; /* a flush writes files well under the bound */
	c->opts = rocksdb_options_create();
	c->topts = rocksdb_block_based_options_create();
	c->bcache = rocksdb_cache_create_lru(bc);
	c->filter = rocksdb_filterpolicy_create_bloom(10);
	rocksdb_block_based_options_set_block_cache(c->topts, c->bcache);
	rocksdb_block_based_options_set_filter_policy(c->topts, c->filter);
	rocksdb_options_set_block_based_table_factory(c->opts, c->topts);
	rocksdb_options_set_create_if_missing(c->opts, 1);
	rocksdb_options_set_compression(c->opts, rocksdb_no_compression);
	rocksdb_options_set_write_buffer_size(c->opts, wb);
	rocksdb_options_set_max_write_buffer_number(c->opts, 2);
	rocksdb_options_set_target_file_size_base(c->opts, wb);
	rocksdb_options_set_max_bytes_for_level_base(c->opts, wb * 8);
	rocksdb_options_set_max_open_files(c->opts, 512);
	rocksdb_options_set_max_background_jobs(c->opts, 2);
	rocksdb_options_set_keep_log_file_num(c->opts, 2);
	rocksdb_options_set_max_log_file_size(c->opts, 1u << 20);
	rocksdb_options_set_info_log_level(c->opts, 2); /* warnings */
	c->ropts = rocksdb_readoptions_create();
	c->wopts = rocksdb_writeoptions_create();
	rocksdb_writeoptions_disable_WAL(c->wopts, 1);
	c->size_bound = size_bound;
	c->check_every = clamp64(size_bound / 32, 64u << 10, 64u << 20);
}

static bool
is_decimal(const char *s, size_t len)
{
	if (len == 0 || len > 9)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* The format marker: written in a new store, checked in an old one. */
static int
check_format(struct cache *c, const char *dir, char *err, size_t errlen)
{
	char *e = NULL, *v, want[16];
	size_t vlen;
	int r = 0;

	snprintf(want, sizeof(want), "%d", CACHE_FORMAT_VERSION);
	v = rocksdb_get(
	    c->db, c->ropts, FORMAT_KEY, strlen(FORMAT_KEY), &vlen, &e);
	if (e != NULL) {
		snprintf(err, errlen, "%s: %s", dir, e);
		r = -EIO;
	} else if (v == NULL) {
		rocksdb_put(c->db, c->wopts, FORMAT_KEY, strlen(FORMAT_KEY),
		    want, strlen(want), &e);
		if (e != NULL) {
			snprintf(err, errlen, "%s: %s", dir, e);
			r = -EIO;
		}
	} else if (!is_decimal(v, vlen)) {
		snprintf(
		    err, errlen, "%s: unreadable cache format marker", dir);
		r = -EBADMSG; /* garbage: cache_open moves the store aside */
	} else if (vlen < strlen(want) ||
	    (vlen == strlen(want) && memcmp(v, want, vlen) < 0)) {
		/* An older feedfs's store: cache_open moves it aside. */
		snprintf(err, errlen, "written by an older feedfs (format %.*s)",
		    (int)(vlen < 16 ? vlen : 16), v);
		r = -ESTALE;
	} else if (vlen != strlen(want) || memcmp(v, want, vlen) != 0) {
		/* A newer feedfs's store: leave it alone. */
		snprintf(err, errlen,
		    "%s: cache format version %.*s, this feedfs writes "
		    "version %s (clear the directory or use another "
		    "cache_dir)",
		    dir, (int)(vlen < 16 ? vlen : 16), v, want);
		r = -EINVAL;
	}
	rocksdb_free(e);
	rocksdb_free(v);
	return r;
}

/* The next sequence number: one past the newest 'T' entry. */
static void
load_seq(struct cache *c)
{
	rocksdb_iterator_t *it = rocksdb_create_iterator(c->db, c->ropts);
	uint8_t last[9];
	uint64_t seq = 1;

	last[0] = 'T';
	memset(last + 1, 0xff, 8);
	rocksdb_iter_seek_for_prev(it, (const char *)last, sizeof(last));
	if (rocksdb_iter_valid(it)) {
		size_t kl;
		const char *k = rocksdb_iter_key(it, &kl);

		if (kl == 9 && k[0] == 'T')
			seq = get_be64((const uint8_t *)k + 1) + 1;
	}
	rocksdb_iter_destroy(it);
	atomic_store(&c->seq, seq);
}

static int
is_lock_error(const char *e)
{
	return strstr(e, "lock") != NULL &&
	       (strstr(e, "Resource temporarily unavailable") != NULL ||
		   strstr(e, "No locks available") != NULL);
}

int
cache_probe_lock(const char *dir, char *err, size_t errlen)
{
	struct flock fl = {0};
	char path[4096];
	int fd, r = 0;

	if ((size_t)snprintf(path, sizeof(path), "%s/LOCK", dir) >=
	    sizeof(path))
		return 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0; /* no store yet, or cache_open will say why */
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	if (fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK) {
		snprintf(err, errlen,
		    "%s is in use by another feedfs (pid %ld)", dir,
		    (long)fl.l_pid);
		r = -EBUSY;
	}
	close(fd);
	return r;
}

/* RocksDB's message for a damaged database ("Corruption: ..."). */
static bool
is_corruption(const char *e)
{
	return strncmp(e, "Corruption", 10) == 0 ||
	       strstr(e, "Corruption:") != NULL;
}

/*
 * Rename a damaged store dir to dir.corrupt-YYYYmmdd-HHMMSS (-N when that
 * exists) and say so in note.
 */
static int
move_aside(const char *dir, const char *tag, const char *why, char *note,
    size_t notelen)
{
	char to[4096], stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	size_t n;

	localtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	n = (size_t)snprintf(to, sizeof(to), "%s.%s-%s", dir, tag, stamp);
	for (int i = 1; n < sizeof(to) && access(to, F_OK) == 0 && i < 100; i++)
		n = (size_t)snprintf(
		    to, sizeof(to), "%s.%s-%s-%d", dir, tag, stamp, i);
	if (n >= sizeof(to) || access(to, F_OK) == 0)
		return -EEXIST;
	if (rename(dir, to) != 0)
		return -errno;
	snprintf(note, notelen, "%s %s (%s): moved it aside to %s and made a "
				"new cache",
	    dir, strcmp(tag, "corrupt") == 0 ? "was damaged" : "is old", why,
	    to);
	return 0;
}

/* One attempt at opening dir: 0, or -EBADMSG when the store is damaged. */
static int
open_store(struct cache *c, const char *dir, char *err, size_t errlen)
{
	char *e = NULL;
	int r;

	if ((r = mkdir_p(dir)) != 0) {
		snprintf(err, errlen, "%s: %s", dir, strerror(-r));
		return r;
	}
	c->db = rocksdb_open(c->opts, dir, &e);
	if (e != NULL) {
		if (is_lock_error(e)) {
			snprintf(err, errlen,
			    "%s is in use by another feedfs (cache lock held)",
			    dir);
			r = -EBUSY;
		} else {
			snprintf(err, errlen, "%s", e);
			r = is_corruption(e) ? -EBADMSG : -EIO;
		}
		rocksdb_free(e);
		c->db = NULL;
		return r;
	}
	if ((r = check_format(c, dir, err, errlen)) != 0) {
		rocksdb_close(c->db);
		c->db = NULL;
	}
	return r;
}

int
cache_open(const char *dir, uint64_t size_bound, uint64_t mem_bound,
    struct cache **out, char *err, size_t errlen)
{
	struct cache *c;
	char why[512];
	int r;

	if ((c = calloc(1, sizeof(*c))) == NULL) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	pthread_mutex_init(&c->errlock, NULL);
	atomic_flag_clear(&c->evicting);
	set_options(c, size_bound, mem_bound);
	r = open_store(c, dir, why, sizeof(why));
	if (r == -EBADMSG || r == -ESTALE) {
		/*
		 * Damaged, or an older format: keep it (for a post-mortem, or
		 * a downgrade) and start afresh.
		 */
		if ((r = move_aside(dir, r == -ESTALE ? "old" : "corrupt", why,
			 c->note, sizeof(c->note))) != 0) {
			snprintf(err, errlen,
			    "%s is damaged (%s) and cannot be moved aside: %s",
			    dir, why, strerror(-r));
			r = -EIO;
			goto fail;
		}
		r = open_store(c, dir, why, sizeof(why));
	}
	if (r != 0) {
		if (r == -EBUSY || r == -EINVAL ||
		    strncmp(why, dir, strlen(dir)) == 0)
			snprintf(err, errlen, "%s", why);
		else
			snprintf(err, errlen, "%s: %s", dir, why);
		if (r == -EBADMSG)
			r = -EIO;
		goto fail;
	}
	load_seq(c);
	*out = c;
	return 0;
fail:
	free_handles(c);
	pthread_mutex_destroy(&c->errlock);
	free(c);
	return r;
}

const char *
cache_note(struct cache *c)
{
	return c != NULL && c->note[0] != '\0' ? c->note : NULL;
}

static uint64_t store_bytes(struct cache *c);
static void evict_oldest(struct cache *c, uint64_t want);

/* rm -r of a secondary instance's dir: plain files in one directory. */
static void
remove_tree(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char p[4096];

	while (d != NULL && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		unlink(p);
	}
	if (d != NULL)
		closedir(d);
	rmdir(dir);
}

void
cache_close(struct cache *c)
{
	rocksdb_flushoptions_t *fo;
	char *e = NULL;

	if (c == NULL)
		return;
	/* Without the WAL, unflushed puts live only in the memtable. */
	if (!atomic_load(&c->disabled) && c->db != NULL &&
	    c->secondary[0] == '\0') {
		fo = rocksdb_flushoptions_create();
		rocksdb_flushoptions_set_wait(fo, 1);
		rocksdb_flush(c->db, fo, &e);
		rocksdb_free(e);
		e = NULL;
		/* What the last puts brought over the bound goes now. */
		if (store_bytes(c) > c->size_bound) {
			evict_oldest(
			    c, store_bytes(c) - c->size_bound / 10 * 9);
			rocksdb_flush(c->db, fo, &e);
			rocksdb_free(e);
		}
		rocksdb_flushoptions_destroy(fo);
	}
	free_handles(c);
	if (c->secondary[0] != '\0')
		remove_tree(c->secondary);
	pthread_mutex_destroy(&c->errlock);
	free(c);
}

static void
digest_key(const char *path, uint8_t k[33])
{
	k[0] = 'D';
	cache_sha256(path, strlen(path), k + 1);
}

/* The stat fields a digest memo is valid for. */
static void
digest_stat(const struct stat *st, uint8_t s[DIGEST_VAL - 32])
{
	put_le64(s, (uint64_t)st->st_size);
	put_le64(s + 8, (uint64_t)st->st_mtim.tv_sec);
	put_le64(s + 16, (uint64_t)st->st_mtim.tv_nsec);
	put_le64(s + 24, (uint64_t)st->st_ino);
	put_le64(s + 32, (uint64_t)st->st_dev);
}

int
cache_get_digest(struct cache *c, const char *path, const struct stat *st,
    uint8_t digest[32])
{
	uint8_t k[33], want[DIGEST_VAL - 32];
	rocksdb_pinnableslice_t *ps;
	const char *v;
	char *e = NULL;
	size_t vlen;
	int r = -ENOENT;

	if (c == NULL || atomic_load(&c->disabled))
		return -ENOENT;
	digest_key(path, k);
	ps =
	    rocksdb_get_pinned(c->db, c->ropts, (const char *)k, sizeof(k), &e);
	if (e != NULL) {
		rocksdb_free(e);
		return -ENOENT;
	}
	if (ps == NULL)
		return -ENOENT;
	v = rocksdb_pinnableslice_value(ps, &vlen);
	digest_stat(st, want);
	if (vlen == DIGEST_VAL && memcmp(v + 32, want, sizeof(want)) == 0) {
		memcpy(digest, v, 32);
		r = 0;
	}
	rocksdb_pinnableslice_destroy(ps);
	return r;
}

void
cache_put_digest(struct cache *c, const char *path, const struct stat *st,
    const uint8_t digest[32])
{
	uint8_t k[33], v[DIGEST_VAL];
	char *e = NULL;

	if (c == NULL || atomic_load(&c->disabled) || is_zero(digest, 32))
		return;
	digest_key(path, k);
	memcpy(v, digest, 32);
	digest_stat(st, v + 32);
	rocksdb_put(c->db, c->wopts, (const char *)k, sizeof(k),
	    (const char *)v, sizeof(v), &e);
	if (e != NULL) {
		atomic_fetch_add(&c->insert_failures, 1);
		fail(c, "write", e);
		rocksdb_free(e);
	}
}

static void
index_key(const uint8_t key[CACHE_KEY_LEN], uint8_t k[1 + CACHE_KEY_LEN])
{
	k[0] = 'K';
	memcpy(k + 1, key, CACHE_KEY_LEN);
}

static void
seq_key(int kind, uint64_t seq, uint8_t k[9])
{
	k[0] = (uint8_t)kind;
	put_be64(k + 1, seq);
}

/* The seq that 'K' key points at: 0 or -ENOENT. */
static int
lookup_seq(struct cache *c, const uint8_t key[CACHE_KEY_LEN], uint64_t *seq)
{
	uint8_t k[1 + CACHE_KEY_LEN];
	char *e = NULL, *v;
	size_t vlen;
	int r = -ENOENT;

	index_key(key, k);
	v = rocksdb_get(c->db, c->ropts, (const char *)k, sizeof(k), &vlen, &e);
	if (e == NULL && v != NULL && vlen == 8) {
		*seq = get_be64((const uint8_t *)v);
		r = 0;
	}
	rocksdb_free(e);
	rocksdb_free(v);
	return r;
}

/* Forget a missing or corrupt entry (best effort). */
static void
drop_entry(struct cache *c, const uint8_t key[CACHE_KEY_LEN], uint64_t seq)
{
	rocksdb_writebatch_t *b = rocksdb_writebatch_create();
	uint8_t k[1 + CACHE_KEY_LEN], sk[9];
	char *e = NULL;

	index_key(key, k);
	rocksdb_writebatch_delete(b, (const char *)k, sizeof(k));
	seq_key('V', seq, sk);
	rocksdb_writebatch_delete(b, (const char *)sk, sizeof(sk));
	rocksdb_write(c->db, c->wopts, b, &e);
	rocksdb_free(e);
	rocksdb_writebatch_destroy(b);
}

/* Is v (vlen bytes) a sound value of key and seq?  Fills out if so. */
static int
parse_val(const uint8_t *v, size_t vlen, const uint8_t key[CACHE_KEY_LEN],
    uint64_t seq, struct cache_val *out)
{
	uint64_t len;

	if (vlen < VAL_HDR || memcmp(v, VAL_MAGIC, 4) != 0 ||
	    get_le32(v + 4) != CACHE_FORMAT_VERSION ||
	    get_le64(v + 24) != seq || memcmp(v + 48, key, CACHE_KEY_LEN) != 0)
		return -EINVAL;
	len = get_le64(v + 32);
	if (len != vlen - VAL_HDR ||
	    xxh64(v + VAL_HDR, len) != get_le64(v + 40))
		return -EINVAL;
	out->w = get_le32(v + 8);
	out->h = get_le32(v + 12);
	out->c = get_le32(v + 16);
	out->dtype = get_le32(v + 20);
	out->len = len;
	out->prefix = NULL;
	return 0;
}

int
cache_get(
    struct cache *c, const uint8_t key[CACHE_KEY_LEN], struct cache_val *v)
{
	rocksdb_pinnableslice_t *ps;
	struct cache_val tmp;
	const char *data;
	uint8_t sk[9];
	uint64_t seq;
	char *e = NULL;
	size_t vlen;

	if (c == NULL)
		return -ENOENT;
	if (atomic_load(&c->disabled) || is_zero(key, CACHE_KEY_LEN) ||
	    lookup_seq(c, key, &seq) != 0)
		goto miss;
	seq_key('V', seq, sk);
	ps = rocksdb_get_pinned(
	    c->db, c->ropts, (const char *)sk, sizeof(sk), &e);
	if (e != NULL) {
		rocksdb_free(e);
		goto miss;
	}
	if (ps == NULL) {
		drop_entry(c, key, seq); /* evicted: the 'K' entry dangles */
		goto miss;
	}
	data = rocksdb_pinnableslice_value(ps, &vlen);
	if (parse_val((const uint8_t *)data, vlen, key, seq, &tmp) != 0) {
		rocksdb_pinnableslice_destroy(ps);
		atomic_fetch_add(&c->corrupt, 1);
		drop_entry(c, key, seq);
		goto miss;
	}
	if ((tmp.data = malloc(tmp.len ? tmp.len : 1)) == NULL) {
		rocksdb_pinnableslice_destroy(ps);
		goto miss;
	}
	memcpy(tmp.data, data + VAL_HDR, tmp.len);
	rocksdb_pinnableslice_destroy(ps);
	atomic_fetch_add(&c->hits, 1);
	atomic_fetch_add(&c->bytes_read, vlen);
	*v = tmp;
	return 0;
miss:
	atomic_fetch_add(&c->misses, 1);
	return -ENOENT;
}

/* Bytes the store holds now: live files plus memtables (approximate). */
static uint64_t
store_bytes(struct cache *c)
{
	uint64_t sst = 0, mem = 0;

	rocksdb_property_int(c->db, "rocksdb.live-sst-files-size", &sst);
	rocksdb_property_int(c->db, "rocksdb.cur-size-all-mem-tables", &mem);
	return sst + mem;
}

/*
 * Delete the oldest values until about want bytes are freed, then give the
 * space back (drop whole files in the range, compact the rest).
 */
static void
evict_oldest(struct cache *c, uint64_t want)
{
	rocksdb_iterator_t *it = rocksdb_create_iterator(c->db, c->ropts);
	rocksdb_writebatch_t *b = rocksdb_writebatch_create();
	uint8_t t0[9], t1[9], v0[9], v1[9], vlast[9];
	uint64_t freed = 0, last = 0, n = 0, seq;
	char *e = NULL;

	seq_key('T', 0, t0);
	rocksdb_iter_seek(it, (const char *)t0, sizeof(t0));
	for (; rocksdb_iter_valid(it) && freed < want; rocksdb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *k = (const void *)rocksdb_iter_key(it, &kl);
		const uint8_t *v = (const void *)rocksdb_iter_value(it, &vl);

		if (kl != 9 || k[0] != 'T')
			break;
		last = get_be64(k + 1);
		n++;
		if (vl < TIDX_VAL)
			continue;
		/* A newer put of the same key keeps its 'K' entry. */
		if (lookup_seq(c, v, &seq) == 0 && seq == last) {
			uint8_t ik[1 + CACHE_KEY_LEN];

			index_key(v, ik);
			rocksdb_writebatch_delete(
			    b, (const char *)ik, sizeof(ik));
		}
		freed += get_le64(v + CACHE_KEY_LEN) + VAL_OVERHEAD;
	}
	rocksdb_iter_destroy(it);
	if (n == 0) {
		rocksdb_writebatch_destroy(b);
		return;
	}
	seq_key('T', last + 1, t1);
	seq_key('V', 0, v0);
	seq_key('V', last + 1, v1);
	seq_key('V', last, vlast);
	rocksdb_writebatch_delete_range(
	    b, (const char *)t0, sizeof(t0), (const char *)t1, sizeof(t1));
	rocksdb_writebatch_delete_range(
	    b, (const char *)v0, sizeof(v0), (const char *)v1, sizeof(v1));
	rocksdb_write(c->db, c->wopts, b, &e);
	rocksdb_writebatch_destroy(b);
	if (e != NULL) {
		fail(c, "eviction", e);
		rocksdb_free(e);
		return;
	}
	atomic_fetch_add(&c->evicted, n);
	/* The limit of delete_file_in_range is inclusive. */
	rocksdb_delete_file_in_range(c->db, (const char *)v0, sizeof(v0),
	    (const char *)vlast, sizeof(vlast), &e);
	rocksdb_free(e);
	rocksdb_compact_range(
	    c->db, (const char *)t0, sizeof(t0), (const char *)v1, sizeof(v1));
}

/* Every check_every bytes put, one thread checks the size against the bound. */
static void
maybe_evict(struct cache *c, uint64_t added)
{
	uint64_t used;

	if (atomic_fetch_add(&c->since_check, added) + added < c->check_every)
		return;
	if (atomic_flag_test_and_set(&c->evicting))
		return;
	atomic_store(&c->since_check, 0);
	/*
	 * Other threads go on putting while an eviction compacts: look again
	 * when it is done (a few rounds at most, then the next put's turn).
	 */
	for (int round = 0;
	     round < 4 && (used = store_bytes(c)) > c->size_bound; round++)
		evict_oldest(c, used - c->size_bound / 10 * 9);
	atomic_flag_clear(&c->evicting);
}

void
cache_put(struct cache *c, const uint8_t key[CACHE_KEY_LEN],
    const struct cache_val *v)
{
	rocksdb_writebatch_t *b;
	uint8_t ik[1 + CACHE_KEY_LEN], vk[9], tk[9], sb[8];
	uint8_t *buf, *tv;
	const char *prefix = v->prefix != NULL ? v->prefix : "";
	size_t plen = strlen(prefix);
	uint64_t seq;
	char *e = NULL;

	if (c == NULL || atomic_load(&c->disabled) ||
	    is_zero(key, CACHE_KEY_LEN))
		return;
	if (v->len + VAL_OVERHEAD > c->size_bound / 4)
		return; /* would evict most of the cache: not worth it */
	if ((buf = malloc(VAL_HDR + v->len + TIDX_VAL + plen)) == NULL) {
		atomic_fetch_add(&c->insert_failures, 1);
		return;
	}
	tv = buf + VAL_HDR + v->len;
	seq = atomic_fetch_add(&c->seq, 1);
	memcpy(buf, VAL_MAGIC, 4);
	put_le32(buf + 4, CACHE_FORMAT_VERSION);
	put_le32(buf + 8, v->w);
	put_le32(buf + 12, v->h);
	put_le32(buf + 16, v->c);
	put_le32(buf + 20, v->dtype);
	put_le64(buf + 24, seq);
	put_le64(buf + 32, v->len);
	put_le64(buf + 40, xxh64(v->data, v->len));
	memcpy(buf + 48, key, CACHE_KEY_LEN);
	if (v->len > 0)
		memcpy(buf + VAL_HDR, v->data, v->len);

	index_key(key, ik);
	seq_key('V', seq, vk);
	seq_key('T', seq, tk);
	put_be64(sb, seq);
	memcpy(tv, key, CACHE_KEY_LEN);
	put_le64(tv + CACHE_KEY_LEN, v->len);
	put_le64(tv + CACHE_KEY_LEN + 8, (uint64_t)time(NULL));
	memcpy(tv + TIDX_VAL, prefix, plen);
	b = rocksdb_writebatch_create();
	rocksdb_writebatch_put(b, (const char *)vk, sizeof(vk),
	    (const char *)buf, VAL_HDR + v->len);
	rocksdb_writebatch_put(
	    b, (const char *)tk, sizeof(tk), (const char *)tv, TIDX_VAL + plen);
	rocksdb_writebatch_put(
	    b, (const char *)ik, sizeof(ik), (const char *)sb, sizeof(sb));
	rocksdb_write(c->db, c->wopts, b, &e);
	rocksdb_writebatch_destroy(b);
	free(buf);
	if (e != NULL) {
		atomic_fetch_add(&c->insert_failures, 1);
		fail(c, "write", e);
		rocksdb_free(e);
		return;
	}
	atomic_fetch_add(&c->bytes_written, VAL_HDR + v->len);
	maybe_evict(c, VAL_HDR + v->len);
}

void
cache_get_stats(struct cache *c, struct cache_stats *st)
{
	uint64_t sst = 0;

	memset(st, 0, sizeof(*st));
	if (c == NULL)
		return;
	st->hits = atomic_load(&c->hits);
	st->misses = atomic_load(&c->misses);
	st->bytes_read = atomic_load(&c->bytes_read);
	st->bytes_written = atomic_load(&c->bytes_written);
	st->insert_failures = atomic_load(&c->insert_failures);
	if (rocksdb_property_int(c->db, "rocksdb.total-sst-files-size", &sst) ==
	    0)
		st->disk_bytes = sst;
	st->disabled = atomic_load(&c->disabled);
}

/* ---- administration (feedfs-cache, the control socket) ---------------- */

int
cache_open_secondary(
    const char *dir, struct cache **out, char *err, size_t errlen)
{
	char tmpl[] = "/tmp/feedfs-cache.XXXXXX", *e = NULL;
	struct cache *c;
	struct stat st;
	int r;

	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s: %s", dir,
		    errno ? strerror(errno) : "not a directory");
		return -ENOENT;
	}
	if (mkdtemp(tmpl) == NULL) {
		snprintf(err, errlen, "mkdtemp: %s", strerror(errno));
		return -errno;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		rmdir(tmpl);
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	pthread_mutex_init(&c->errlock, NULL);
	atomic_flag_clear(&c->evicting);
	set_options(c, UINT64_MAX / 2, 16u << 20);
	rocksdb_options_set_create_if_missing(c->opts, 0);
	rocksdb_options_set_max_open_files(c->opts, -1); /* secondary needs */
	snprintf(c->secondary, sizeof(c->secondary), "%s", tmpl);
	c->db = rocksdb_open_as_secondary(c->opts, dir, tmpl, &e);
	if (e != NULL) {
		snprintf(err, errlen, "%s: %s", dir, e);
		rocksdb_free(e);
		c->db = NULL;
		r = -EIO;
		goto fail;
	}
	if ((r = check_format(c, dir, err, errlen)) != 0)
		goto fail;
	*out = c;
	return 0;
fail:
	cache_close(c);
	return r;
}

/* The fixed part of a 'T' value, and its prefix. */
static bool
parse_tidx(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
    struct cache_entry *ent)
{
	if (kl != 9 || k[0] != 'T' || vl < TIDX_VAL)
		return false;
	ent->seq = get_be64(k + 1);
	memcpy(ent->key, v, CACHE_KEY_LEN);
	ent->len = get_le64(v + CACHE_KEY_LEN);
	ent->time = get_le64(v + CACHE_KEY_LEN + 8);
	ent->prefix = (const char *)v + TIDX_VAL;
	ent->prefix_len = vl - TIDX_VAL;
	ent->bytes = ent->len + VAL_HDR;
	return true;
}

int
cache_scan(
    struct cache *c, cache_entry_fn fn, void *arg, char *err, size_t errlen)
{
	rocksdb_iterator_t *it = rocksdb_create_iterator(c->db, c->ropts);
	struct cache_entry ent;
	uint8_t t0[9];
	char *e = NULL;
	int r = 0;

	seq_key('T', 0, t0);
	for (rocksdb_iter_seek(it, (const char *)t0, sizeof(t0));
	     rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *k = (const void *)rocksdb_iter_key(it, &kl);
		const uint8_t *v = (const void *)rocksdb_iter_value(it, &vl);

		if (kl < 1 || k[0] != 'T')
			break;
		if (!parse_tidx(k, kl, v, vl, &ent))
			continue;
		if ((r = fn(&ent, arg)) != 0)
			break;
	}
	rocksdb_iter_get_error(it, &e);
	if (e != NULL) {
		snprintf(err, errlen, "%s", e);
		rocksdb_free(e);
		r = -EIO;
	}
	rocksdb_iter_destroy(it);
	return r;
}

int
cache_check_entry(
    struct cache *c, const struct cache_entry *ent, char *why, size_t whylen)
{
	rocksdb_pinnableslice_t *ps;
	struct cache_val tmp;
	const char *data;
	uint8_t sk[9];
	uint64_t seq;
	char *e = NULL;
	size_t vlen;
	int r = 0;

	seq_key('V', ent->seq, sk);
	ps = rocksdb_get_pinned(
	    c->db, c->ropts, (const char *)sk, sizeof(sk), &e);
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
	if (parse_val((const uint8_t *)data, vlen, ent->key, ent->seq, &tmp) !=
	    0) {
		snprintf(why, whylen, "bad header, length or checksum");
		r = -EIO;
	} else if (tmp.len != ent->len) {
		snprintf(why, whylen, "length %zu, the index says %llu",
		    tmp.len, (unsigned long long)ent->len);
		r = -EIO;
	}
	rocksdb_pinnableslice_destroy(ps);
	if (r == 0 && lookup_seq(c, ent->key, &seq) == 0 && seq < ent->seq) {
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
	uint8_t sk[9];
	uint64_t seq;

	if (lookup_seq(c, ent->key, &seq) == 0 && seq == ent->seq) {
		uint8_t ik[1 + CACHE_KEY_LEN];

		index_key(ent->key, ik);
		rocksdb_writebatch_delete(b, (const char *)ik, sizeof(ik));
	}
	seq_key('T', ent->seq, sk);
	rocksdb_writebatch_delete(b, (const char *)sk, sizeof(sk));
	seq_key('V', ent->seq, sk);
	rocksdb_writebatch_delete(b, (const char *)sk, sizeof(sk));
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

	rocksdb_compact_range(c->db, lo, 0, hi, sizeof(hi));
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
	r = cache_scan(c, evict_one, &x, err, errlen);
	if (r == 0 && x.n > 0) {
		rocksdb_write(c->db, c->wopts, x.b, &e);
		if (e != NULL) {
			snprintf(err, errlen, "%s", e);
			rocksdb_free(e);
			r = -EIO;
		}
	}
	rocksdb_writebatch_destroy(x.b);
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
	static const char kinds[] = {'D', 'K', 'T', 'V'};
	rocksdb_writebatch_t *b = rocksdb_writebatch_create();
	uint64_t nb[2] = {0, 0};
	char *e = NULL;
	int r;

	r = cache_scan(c, count_one, nb, err, errlen);
	for (size_t i = 0; i < sizeof(kinds); i++) {
		char lo[1] = {kinds[i]}, hi[1] = {(char)(kinds[i] + 1)};

		rocksdb_writebatch_delete_range(b, lo, 1, hi, 1);
	}
	rocksdb_write(c->db, c->wopts, b, &e);
	rocksdb_writebatch_destroy(b);
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
	rocksdb_flush(c->db, fo, &e);
	rocksdb_flushoptions_destroy(fo);
	if (e != NULL) {
		snprintf(err, errlen, "%s", e);
		rocksdb_free(e);
		return -EIO;
	}
	return 0;
}
