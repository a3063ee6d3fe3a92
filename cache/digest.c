/*
 * digest.c - layer: store (calls codec.c, and open.c's cache_fail).  The
 * hashes (SHA-256 of sources, cache keys) and the digest memos, which let
 * a hit skip reading its source.
 *
 * Digest memos are never evicted: they are small (~100 bytes a source
 * file) and bounded by the number of source files.  A memo is made only
 * for a file whose times are older than the read that digested it by more
 * than the file system's timestamp granularity (git's racy-timestamp rule,
 * cache_memo_trusted): a file changed in the same tick as it was read
 * keeps its stat and would else map its new content to the old digest.
 */
#include <sys/stat.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <rocksdb/c.h>

#include "cache/cache_int.h"

bool
cache_is_zero(const uint8_t *p, size_t n)
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
	if (cache_is_zero(digest, 32) || (ctx = EVP_MD_CTX_new()) == NULL)
		return;
	codec_put_le64(n, plen);
	codec_put_le32(ver, CACHE_FORMAT_VERSION);
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

/*
 * Whether file time t is older than t0 (a clock reading) by more than the
 * grain.  t may be anything (a client sends its stat): compared in
 * seconds first, so that no subtraction can overflow.
 */
static bool
older(const struct timespec *t, const struct timespec *t0)
{
	int64_t s0 = (int64_t)t0->tv_sec, d;

	if ((int64_t)t->tv_sec < s0 - 10)
		return true;
	if ((int64_t)t->tv_sec > s0)
		return false;
	d = (s0 - (int64_t)t->tv_sec) * 1000000000 +
	    ((int64_t)t0->tv_nsec - (int64_t)t->tv_nsec);
	return d > CACHE_MEMO_GRAIN_NS;
}

bool
cache_memo_trusted(const struct stat *before, const struct stat *after,
    const struct timespec *t0)
{
	uint8_t a[CODEC_MEMO_STAT], b[CODEC_MEMO_STAT];

	codec_memo_stat(before, a);
	codec_memo_stat(after, b);
	return memcmp(a, b, sizeof(a)) == 0 && older(&before->st_mtim, t0) &&
	       older(&before->st_ctim, t0);
}

static void
memo_key(const char *path, uint8_t k[CODEC_MEMO_KEY])
{
	k[0] = 'D';
	cache_sha256(path, strlen(path), k + 1);
}

int
cache_get_digest(struct cache *c, const char *path, const struct stat *st,
    uint8_t digest[32])
{
	uint8_t k[CODEC_MEMO_KEY], want[CODEC_MEMO_STAT];
	rocksdb_pinnableslice_t *ps;
	const char *v;
	char *e = NULL;
	size_t vlen;
	int r = -ENOENT;

	if (c != NULL && c->ops != NULL)
		return c->ops->get_digest(c, path, st, digest);
	if (c == NULL || atomic_load(&c->disabled))
		return -ENOENT;
	memo_key(path, k);
	ps =
	    rocksdb_get_pinned(c->db, c->ropts, (const char *)k, sizeof(k), &e);
	if (e != NULL) {
		rocksdb_free(e);
		return -ENOENT;
	}
	if (ps == NULL)
		return -ENOENT;
	v = rocksdb_pinnableslice_value(ps, &vlen);
	codec_memo_stat(st, want);
	if (vlen == CODEC_MEMO_VAL && memcmp(v + 32, want, sizeof(want)) == 0) {
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
	uint8_t k[CODEC_MEMO_KEY], v[CODEC_MEMO_VAL];
	struct timespec now;
	char *e = NULL;

	if (c != NULL && c->ops != NULL) {
		c->ops->put_digest(c, path, st, digest);
		return;
	}
	if (c == NULL || atomic_load(&c->disabled) || cache_is_zero(digest, 32))
		return;
	/*
	 * The caller's read began before now: a stat racy against now is
	 * racy against that read too (a client's memo is checked here, by
	 * the owner, as well).
	 */
	clock_gettime(CLOCK_REALTIME, &now);
	if (!cache_memo_trusted(st, st, &now))
		return;
	memo_key(path, k);
	memcpy(v, digest, 32);
	codec_memo_stat(st, v + 32);
	rocksdb_put(c->db, c->wopts, (const char *)k, sizeof(k),
	    (const char *)v, sizeof(v), &e);
	if (e != NULL) {
		atomic_fetch_add(&c->insert_failures, 1);
		cache_fail(c, "write", e);
		rocksdb_free(e);
	}
}
