/*
 * cache.h - the store of preprocessed results, in RocksDB.
 *
 * Values are the output of a job's pipeline prefix for one source image,
 * keyed by cache_key(content digest, prefix text).  Source digests are kept
 * per (path, size, mtime, inode) so a hit needs no read of the source.
 *
 * Thread safety: every function may be called from any thread at once.
 * A cache that fails (disk full, read-only, corrupt) is never fatal to a
 * read: cache_get returns a miss and cache_put drops the value; the first
 * failure is logged once and counted (cache_stats).
 */
#ifndef FEEDFS_CACHE_H
#define FEEDFS_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define CACHE_FORMAT_VERSION 1
#define CACHE_KEY_LEN 32

struct cache;

/* A cached value: an array of shape h x w x c of dtype (0 = uint8). */
struct cache_val {
	uint32_t w, h, c, dtype;
	void *data; /* malloc'd by cache_get; the caller frees */
	size_t len;
};

struct cache_stats {
	uint64_t hits, misses; /* of cache_get, not of digest lookups */
	uint64_t bytes_read, bytes_written;
	uint64_t insert_failures;
	uint64_t disk_bytes; /* RocksDB's total-sst-files-size */
	bool disabled; /* the cache failed and feedfs serves without it */
};

/*
 * Open (creating) the store in dir.  size_bound bounds its disk use
 * (approximately: it may be passed by min(64M, size_bound/32) plus a
 * memtable before the oldest entries go; a value over size_bound/4 is not
 * stored), mem_bound its block cache and memtables.  Fails with a message
 * when dir cannot be used: -EBUSY when another process holds it, -EINVAL
 * for a store of another format version, -EIO otherwise.
 */
int cache_open(const char *dir, uint64_t size_bound, uint64_t mem_bound,
    struct cache **out, char *err, size_t errlen);
void cache_close(struct cache *c);

/* SHA-256 of len bytes. */
void cache_sha256(const void *data, size_t len, uint8_t out[32]);
/* Key = SHA-256(digest, prefix text, CACHE_FORMAT_VERSION). */
void cache_key(const uint8_t digest[32], const char *prefix,
    uint8_t key[CACHE_KEY_LEN]);

/* The remembered digest of the file with this path and stat: 0 or -ENOENT. */
int cache_get_digest(struct cache *c, const char *path, const struct stat *st,
    uint8_t digest[32]);
void cache_put_digest(struct cache *c, const char *path,
    const struct stat *st, const uint8_t digest[32]);

/* 0 and *v filled on a hit (checksum verified); -ENOENT on a miss. */
int cache_get(struct cache *c, const uint8_t key[CACHE_KEY_LEN],
    struct cache_val *v);
/* Store v (v->data is not taken).  Failures are counted, not returned. */
void cache_put(struct cache *c, const uint8_t key[CACHE_KEY_LEN],
    const struct cache_val *v);

void cache_get_stats(struct cache *c, struct cache_stats *st);

/*
 * NULL while the cache works; once it has failed (and feedfs serves without
 * it) the reason, e.g. "write failed: IO error: No space left on device".
 * After the first failure puts are dropped and gets miss for good.  Stays
 * valid until cache_close.
 */
const char *cache_error(struct cache *c);

#endif
