/*
 * cache_int.h - cache/ (the store), every layer: what the files of cache/
 * share; nothing outside cache/ includes it.
 *
 * One RocksDB database, default column family, keys told apart by their
 * first byte (the bytes of each record: codec.h):
 *
 *	"feedfs-cache-format"	CACHE_FORMAT_VERSION, decimal text
 *	'D' SHA-256(path)	digest memo: digest[32] size mtime.sec
 *				mtime.nsec ctime.sec ctime.nsec ino dev
 *				(7 x u64 LE), the seq of its 'M' record
 *				(u64 LE)
 *	'M' seq (u64 BE)	SHA-256(path) + insertion time (u64 LE,
 *				Unix seconds): the memos in insertion
 *				order, the oldest evicted first (digest.c)
 *	'K' key[32]		seq (u64 BE): where the value lives
 *	'V' seq (u64 BE)	value: header + payload
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
 * Files, each opening with a comment saying its layer (the layers read
 * one way: store <- owner <- server/client <- handle; share_int.h).  The
 * store's files, each calling only those before it: codec.c (the
 * records' bytes), room.c (the room on the store's filesystem: a full
 * disk), err.c (a store's first failure), dir.c (the directory's checks,
 * on its descriptor, and the format file), memo.c (the memos' records:
 * their share, room, eviction), index.c (the scan of the index, the
 * totals loaded from it), store.c (get, put, eviction), stats.c (a
 * store's figures), digest.c (hashes, digest memos), options.c (RocksDB's
 * options, the size bound), open.c (open, close, moving a store aside),
 * admin.c (verify, evict, clear, compact, flush, and the one executor of
 * control requests); and the store shared by the mounts of a machine:
 * owner.c (who may own and serve it), wire.c (the data socket's frames),
 * putq.c and srv.c (the owner's server: its put queue, its
 * connections), ctl.c (the control socket, beside srv.c), breaker.c and
 * client.c (a client: its breaker, its connections), handle.c
 * (cache_open_shared's handle, local or remote, and the takeover).
 */
#ifndef FEEDFS_CACHE_INT_H
#define FEEDFS_CACHE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <rocksdb/c.h>

#include "cache/cache.h"
#include "cache/codec.h"

#define CACHE_FORMAT_KEY "feedfs-cache-format"
/* Stored bytes of a value besides its payload: header, index keys, slack. */
#define CACHE_VAL_OVERHEAD (CODEC_ENV_HDR + 9 + 41 + 33 + 64)
/*
 * What a digest memo counts against admit_bytes: its 'D' and 'M' records
 * and slack.  Memos take at most cache_memo_budget of it (memo.c).
 * 242 bytes: cache.h says so.
 */
#define CACHE_MEMO_COST                                                       \
	(CODEC_MEMO_KEY + CODEC_MEMO_VAL + 9 + CODEC_MEMO_IDX + 64)
/* Prefixes (with their format) whose hits and misses are counted. */
#define CACHE_PFX_MAX 32

/*
 * Lock order: admin, then memo, then errlock.  The mutable state is
 * atomics; err is written once, under errlock, before the disabled flag
 * is set.  admin
 * keeps the admission totals (used, entries) true to the index: a put or
 * a refresh (store.c), with the eviction it may run, holds it shared from
 * its admission to its accounting; admin.c's deletes (evict, clear) hold
 * it exclusive until cache_load_totals has counted what is left.  It
 * prefers writers: a stream of puts does not starve an admin request.
 */
#define CACHE_PUTTING 256

struct cache {
	rocksdb_t *db;
	/*
	 * The values ('V') live in a column family of their own: their keys
	 * (the insertion seq) only grow, so its files never overlap and
	 * compaction moves them instead of rewriting them; the small keys
	 * (random digests and keys) in the default family do not drag the
	 * values through every compaction.
	 */
	rocksdb_column_family_handle_t *cf[2]; /* default, values */
	rocksdb_column_family_handle_t *vcf;   /* cf[1] */
	rocksdb_options_t *opts;
	rocksdb_block_based_table_options_t *topts;
	rocksdb_cache_t *bcache;
	rocksdb_filterpolicy_t *filter; /* owned by topts once set */
	rocksdb_readoptions_t *ropts;
	rocksdb_readoptions_t *vropts; /* values: XXH3 checks them, and they
					  bypass the block cache */
	/* Keys being put now (a hash each, 0 = free): a second put of one
	 * of them is dropped (store.c); zero as calloc leaves it. */
	atomic_uint_least64_t putting[CACHE_PUTTING];
	rocksdb_writeoptions_t *wopts;

	uint64_t size_bound;
	uint64_t check_every; /* bytes put between checks of the size */
	/*
	 * cache_size = auto, or a cache_size above the filesystem's size
	 * (size_clamped): open_store chose the bound; auto_note says from
	 * what (handle.c says it, after cache_keep_bound).
	 */
	uint64_t mem_bound, wbuf; /* wbuf: RocksDB's write buffer size */
	bool size_auto, size_clamped;
	char auto_from[4096 + 256], auto_note[4096 + 512];
	/* cache_opts' node_*: the node's bound on auto (registry.c). */
	uint64_t node_total;
	unsigned node_pct;
	bool node_failed; /* the registry refused: said as a warning */
	char node_registry[4096], node_conf[256];

	/*
	 * The room on the store's filesystem (room.c): dirfd is the store's
	 * directory (-1 for a secondary instance), floor the bytes the store
	 * leaves free there.  full: inserts stop (hits go on), set by a
	 * check that found less than floor free, or by a write that found
	 * no space; cleared by a check that finds twice floor free (a write
	 * that fails again sets it again).  room_at: the next check
	 * (CLOCK_MONOTONIC ns).  said_full: the lack of room was said, and
	 * no write has succeeded since.  nospace: puts refused while full.
	 */
	int dirfd;
	uint64_t floor;
	atomic_bool full, said_full;
	atomic_uint_least64_t room_at, nospace;
	cache_log_fn say;
	char dir[4096];

	atomic_uint_least64_t seq; /* next value's sequence number */
	atomic_uint_least64_t since_check;
	atomic_flag evicting;

	atomic_uint_least64_t hits, misses, bytes_read, bytes_written;
	atomic_uint_least64_t insert_failures, corrupt, evicted;

	/*
	 * Admission (store.c): the live entries as the 'T' index counts
	 * them (payload, prefix text and CACHE_VAL_OVERHEAD each), loaded
	 * at open and kept by put, refresh and eviction; the insertion time
	 * of the oldest entry (a hint: eviction corrects it).
	 */
	uint64_t stale;		      /* seconds; 0: every entry is stale */
	atomic_uint_least64_t used, entries, oldest_time;
	atomic_uint_least64_t inserts, denied, refreshed;
	atomic_uint_least64_t oversize; /* over size_bound / 4: not stored */
	pthread_rwlock_t admin;
	/*
	 * Digest memos (digest.c, memo.c): the next 'M' seq, their number and
	 * cost (CACHE_MEMO_COST each, in admission beside used), and how many
	 * were evicted.  memo serializes every write of memos (put, the drop
	 * of a stale one, eviction, clear), so that the counts stay true to
	 * the 'M' records.
	 */
	atomic_uint_least64_t memo_seq, memos, memo_used, memo_evicted;
	pthread_mutex_t memo;
	/*
	 * Hits and misses per prefix text (cache_note_use): a slot is
	 * claimed by one CAS of state 0 -> 1, its text written, then state
	 * 2 (readable).  Two threads may claim two slots for one text:
	 * readers add them up.
	 */
	struct cache_pfx_stat {
		atomic_uint state;
		char text[256];
		atomic_uint_least64_t hits, misses;
	} pfx[CACHE_PFX_MAX];

	atomic_bool disabled;
	pthread_mutex_t errlock;
	char err[256];
	char note[4800];    /* what cache_open did besides opening, or "" */
	char secondary[64]; /* cache_open_secondary's own dir, removed */

	/*
	 * Set in a handle of cache_open_shared (handle.c): the functions of
	 * cache.h then go through ops, to this process's own store once it
	 * owns one, else to the owner's data socket; db is NULL.
	 */
	const struct cache_ops *ops;
	struct cache_share *share;
	/*
	 * Set by the owner's server (srv.c) before it serves, cleared after
	 * it stopped: its request threads (cache_no_evict) then leave the
	 * size check and its eviction to the server's maintenance thread,
	 * woken by maint_wake(maint_arg).
	 */
	void (*maint_wake)(void *arg);
	void *maint_arg;
};

/* What cache.h's functions do on a handle of cache_open_shared. */
struct cache_ops {
	int (*get)(struct cache *c, const uint8_t key[CACHE_KEY_LEN],
	    struct cache_val *v);
	int (*holds)(struct cache *c, const uint8_t key[CACHE_KEY_LEN]);
	void (*put)(struct cache *c, const uint8_t key[CACHE_KEY_LEN],
	    const struct cache_val *v);
	int (*get_digest)(struct cache *c, const char *path,
	    const struct stat *st, uint8_t digest[32]);
	void (*put_digest)(struct cache *c, const char *path,
	    const struct stat *st, const uint8_t digest[32]);
	void (*get_stats)(struct cache *c, struct cache_stats *st);
	/* cache_note_use: counted by the store this process holds, if any. */
	void (*note_use)(struct cache *c, const char *prefix, bool hit);
	const char *(*error)(struct cache *c);
	const char *(*note)(struct cache *c);
	void (*close)(struct cache *c);
};

/*
 * err.c: record the first failure (what failed: msg); from then on the
 * cache is off.  A failure for want of space (RocksDB's "No space left on
 * device") is not one: it goes to cache_room_nospace, and the cache goes
 * on serving hits.
 */
void cache_fail(struct cache *c, const char *what, const char *msg);

/*
 * room.c: the room on the store's filesystem.  cache_room_init: at open,
 * dfd is the store's directory (dup'ed and kept for fstatvfs), the floor
 * chosen from the filesystem's size and RocksDB's write buffer.
 * cache_room_ok: whether a put may write now (not full); checks the
 * filesystem at most once a second.
 * cache_room_nospace: a write found no space (msg: RocksDB's): full, said
 * once.  cache_room_wrote: a write succeeded: room is back, if it was
 * said to be gone.  cache_room_free: close dirfd.
 */
#define CACHE_ROOM_CHECK_NS 1000000000u
void cache_room_init(struct cache *c, int dfd);
bool cache_room_ok(struct cache *c);
void cache_room_nospace(struct cache *c, const char *msg);
void cache_room_wrote(struct cache *c);
void cache_room_free(struct cache *c);
/* Whether msg is RocksDB's error for a full disk. */
bool cache_is_nospace(const char *msg);

/* Whether n bytes at p are all zero (an unknown digest or key). */
static inline bool
cache_is_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0)
			return false;
	return true;
}

/* dir.c: write dir/format for the store just opened in dfd (best effort). */
void cache_dir_format_write(int dfd);

/* open.c: the checks of a cache directory in every role (cache_open):
 * cache_dir_open's, the descriptor then closed. */
int cache_private_dir(const char *dir, char *err, size_t errlen);

/* store.c */
/* The seq that the 'K' entry of key points at: 0 or -ENOENT. */
int cache_lookup_seq(
    struct cache *c, const uint8_t key[CACHE_KEY_LEN], uint64_t *seq);
/* Bytes the store holds now: live files plus memtables (approximate). */
uint64_t cache_store_bytes(struct cache *c);
/* Delete the oldest values until about want bytes are freed. */
void cache_evict_oldest(struct cache *c, uint64_t want);
/* The check of the store's size against its bound, and its eviction. */
void cache_maintain(struct cache *c);
/* Set on the owner's request threads (srv.c): their puts never evict. */
extern _Thread_local bool cache_no_evict;
/*
 * index.c: the next sequence number (one past the newest 'T' entry) and the
 * admission totals (used, entries, oldest_time), from a scan of 'T'; the
 * staleness defaults to CACHE_STALE_DEFAULT.  Called at open; admin.c
 * calls cache_load_totals after it deletes entries, holding c->admin
 * exclusive (so that no put's accounting falls between its scan and its
 * result).
 */
void cache_load_seq(struct cache *c);
void cache_load_totals(struct cache *c);

/* Run cache_maintain now, or wake the owner's maintenance thread for it. */
void cache_maintain_soon(struct cache *c);

/* memo.c */
/* The bytes admission fills the store up to, values and memos. */
uint64_t cache_admit_bytes(const struct cache *c);
/*
 * The bytes memos may take: a 32nd of cache_admit_bytes, kept for them
 * (values are admitted up to the rest).
 */
uint64_t cache_memo_budget(const struct cache *c);
/*
 * The memo under k: 0 and its value in v (CODEC_MEMO_VAL bytes, *seq its
 * 'M' record's), -ENOENT, or -EINVAL for one of the format before 'M'
 * records (*seq 0: counted nowhere).
 */
int cache_memo_read(struct cache *c, const uint8_t k[CODEC_MEMO_KEY],
    uint8_t v[CODEC_MEMO_VAL], uint64_t *seq);
/* Forget n counted memos (their 'M' records are gone), under c->memo. */
void cache_memo_uncount(struct cache *c, uint64_t n);
/*
 * Room for a new memo in the memos' share, holding c->memo: when it is
 * full, the oldest go.  *last: the seq of the newest memo evicted (for
 * cache_memo_compact), or left.  Whether there is room.
 */
bool cache_memo_room(struct cache *c, uint64_t *last);
/* The space of the 'M' records up to seq last back. */
void cache_memo_compact(struct cache *c, uint64_t last);
/*
 * The memo seq and counts from the 'M' records (at open, and by clear
 * holding c->memo); at open, memos of the format before 'M' records are
 * deleted (they would never be evicted).
 */
void cache_load_memos(struct cache *c, bool migrate);
/*
 * Delete the oldest memos until about want bytes (CACHE_MEMO_COST each)
 * are freed, stopping at the first put at or after the Unix time before;
 * how many in *n (may be NULL).  0 or -EIO (why in err, may be NULL).
 */
int cache_evict_memos(struct cache *c, uint64_t want, uint64_t before,
    uint64_t *n, char *err, size_t errlen);

/* Init and destroy c->admin and c->memo (open.c, for every struct cache it
 * makes). */
void cache_admin_lock_init(struct cache *c);
void cache_admin_lock_destroy(struct cache *c);

/* options.c */
/*
 * c's RocksDB options and handles (opts, topts, bcache, filter, ropts,
 * vropts, wopts) for the bounds; free_handles in open.c destroys them.
 * The table files kept open (max_open_files): every file a store within
 * the size bound has, twice over, at least CACHE_OPEN_FILES_MIN and at
 * most half of RLIMIT_NOFILE (whose soft limit it raises to the hard).
 */
#define CACHE_OPEN_FILES_MIN 512
void cache_set_options(
    struct cache *c, uint64_t size_bound, uint64_t mem_bound);
/* cache_size = auto: the bound from dfd's filesystem (dir: its name). */
void cache_choose_bound(struct cache *c, int dfd, const char *dir);
/*
 * A set bound above the size of dfd's filesystem: clamped to what
 * cache_size = auto would choose there (size_clamped set), else left.
 */
void cache_clamp_bound(struct cache *c, int dfd, const char *dir);
/*
 * cache_size = auto or clamped: what the bound was chosen from (NULL for
 * a set bound that fits; *warn: it was clamped); a takeover keeps at
 * least the old owner's bound (was).
 */
const char *cache_size_note(struct cache *c, bool *warn);
void cache_keep_bound(struct cache *c, uint64_t was);

/* open.c: flush both column families' memtables (the WAL is off); *e on
 * error (cache_close, and admin.c's cache_flush). */
void cache_flush_cfs(struct cache *c, const rocksdb_flushoptions_t *fo,
    char **e);

/*
 * registry.c: this cache (dfd, named dir) entered in the node's registry
 * reg, and counted: *users with a cache on its filesystem there (this one
 * included), *mine of this user's.  0, or -errno with err (a registry
 * missing or not root's 1777).
 */
#define CACHE_REGISTRY_STALE_DAYS 30
int cache_registry_count(const char *reg, int dfd, const char *dir,
    unsigned *users, unsigned *mine, char *err, size_t errlen);

#endif
