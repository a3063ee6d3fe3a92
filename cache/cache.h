/*
 * cache.h - cache/ (the store): its public interface, the store of
 * preprocessed results in RocksDB, shared by the mounts of a machine.
 *
 * Values are the output of a job's pipeline prefix for one source image,
 * keyed by cache_key(content digest, prefix text).  Source digests are kept
 * per (path, size, mtime, ctime, inode, device) so a hit needs no read of
 * the source.
 *
 * The store is private to its owner: cache_open makes its directory 0700
 * and refuses one that another user owns or can write, or a link
 * (cache_dir_open, below).
 *
 * Thread safety: every function may be called from any thread at once.
 * A cache that fails (read-only, corrupt) is never fatal to a read:
 * cache_get returns a miss and cache_put drops the value; the first
 * failure is logged once and counted (cache_stats).  A full disk is not
 * such a failure: it costs inserts, never hits (cache_opts' say tells
 * when inserts stop and when they resume).
 */
#ifndef FEEDFS_CACHE_H
#define FEEDFS_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

/*
 * 2: the index holds prefix text and time; 3: decode uses only the DCT
 * scales 1/8, 2/8, 4/8 and 8/8 (a prefix may give other pixels than in 2);
 * 4: the payload checksum is XXH3_64bits, digest memos hold the ctime;
 * 5: the values live in a column family of their own; 6: values are
 * envelopes (codec.h): key, shape and payload under one checksum, the
 * same bytes in the store, on the socket and in the cluster tier; 7: the
 * envelope holds the frame (src_w, src_h), and a plain decode is Pillow's
 * full one (a DCT-scaled decode is decode(scaled), another prefix text).
 *
 * CACHE_FORMAT_TEST_NEXT: a build of the next format, only for the tests
 * (tests/format-peer: a newer feedfs on the same cache_dir).
 */
#define CACHE_FORMAT_CURRENT 7
#ifdef CACHE_FORMAT_TEST_NEXT
#define CACHE_FORMAT_VERSION (CACHE_FORMAT_CURRENT + 1)
#else
#define CACHE_FORMAT_VERSION CACHE_FORMAT_CURRENT
#endif
#define CACHE_KEY_LEN 32

struct cache;

/* A cached value: an array of shape h x w x c of dtype (0 = uint8). */
struct cache_val {
	uint32_t w, h, c, dtype;
	void *data; /* malloc'd by cache_get; the caller frees */
	size_t len;
	const char *prefix; /* cache_put: the prefix text, kept for ls */
	/*
	 * How data holds the array (cache/format.h: raw, lossless, jpeg(Q));
	 * 0 = raw, where len is w * h * c bytes of dtype.  Stored in the
	 * header beside dtype.
	 */
	uint32_t enc;
	/*
	 * The frame: the size of the source image the array stands for
	 * (transforms' shrink, xf.h's struct xf_image), kept in the header;
	 * 0 0 for none, else at least w x h.
	 */
	uint32_t src_w, src_h;
};

struct cache_stats {
	uint64_t hits, misses; /* of cache_get, not of digest lookups */
	/*
	 * Admission (cache_put): values stored, values refused because the
	 * cache was full of entries used within cache_stale, entries
	 * deleted to make room or keep the bound, entries a hit rewrote as
	 * new (see cache_opts' stale); live entries, their bytes as the
	 * index counts them and the digest memos' (242 bytes each),
	 * and the bytes admission fills up to.
	 * oversize: values not stored because they are over size_bound / 4
	 * (not in denied, which counts only a full cache's refusals).
	 */
	uint64_t inserts, denied, evictions, refreshes, oversize;
	uint64_t entries, used_bytes, admit_bytes;
	/*
	 * Digest memos kept, and evicted (the oldest, past their share of
	 * admit_bytes); used_bytes counts them too.
	 */
	uint64_t memos, memo_evictions;
	/*
	 * Bytes of the values read from and written to the store (header
	 * and payload; inserts and refreshes): only what was stored, never
	 * a put that was denied, oversize, a duplicate or failed.
	 */
	uint64_t bytes_read, bytes_written;
	uint64_t insert_failures;
	uint64_t disk_bytes; /* RocksDB's total-sst-files-size */
	/*
	 * The owner of a shared cache: the most bytes it held at once for
	 * the other mounts (their queued puts, the request bodies it was
	 * reading), which cache_opts' share_mem bounds; 0 otherwise.
	 */
	uint64_t share_peak;
	bool disabled; /* the cache failed and feedfs serves without it */
	/*
	 * The store's filesystem (the owner's; 0 on a client): full, no
	 * room for inserts (hits go on); nospace: the puts refused for it
	 * (in insert_failures too).  size_bound: the bound in force (the
	 * owner's, in either role); size_clamped: cache_size was more than
	 * the filesystem holds, and was clamped (the owner's).
	 */
	bool full, size_clamped;
	uint64_t nospace, size_bound;
	/*
	 * The cache format cache_dir holds, as last seen (its format file):
	 * this build's, another one's (newer: the cache_dir is left alone,
	 * and disabled is set), 0 when not known.
	 */
	uint32_t dir_format;
};

/*
 * Open (creating) the store in dir.  size_bound bounds its disk use
 * (approximately: it may be passed by min(64M, size_bound/32) plus a
 * memtable before the oldest entries go, and for a moment by the two
 * memtables a flush may be writing; a value over size_bound/4 is not
 * stored), mem_bound its block cache and memtables.
 *
 * dir and the parents it lacks are made 0700.  An existing dir must belong
 * to the effective user and be writable by nobody else; one that others
 * can read (made by an older feedfs) is made 0700.  The files in dir are
 * made 0600 once open; RocksDB makes later ones 0644 less the umask, which
 * a library does not change: feedfs, feedfs-fill and feedfs-cache set
 * umask 077 in main, so those are 0600 too, and the 0700 directory keeps
 * them private whatever the umask of another program that opens it.
 *
 * Fails with a message when dir cannot be used: -EACCES when another user
 * owns dir or group or others can write it, -EBUSY when another process
 * holds it, -EINVAL for a store of a newer format version, -EIO otherwise.
 * A damaged store, or one of an older format, is moved aside and replaced
 * (see cache_note).  Once open, the store's format is written to
 * dir/format too (cache_dir_format).
 *
 * A size_bound above the size of dir's filesystem is clamped to what
 * CACHE_SIZE_AUTO would choose there, and said (cache_opts' say, a
 * warning; cache_stats' size_clamped).  The store leaves a floor of free
 * space on its filesystem (4 RocksDB write buffers, at most an eighth of
 * the filesystem, at least 1 MiB): below it, and after a write that found
 * no space, inserts stop and hits go on; they resume once twice the
 * floor is free again (cache/room.c).
 */
int cache_open(const char *dir, uint64_t size_bound, uint64_t mem_bound,
    struct cache **out, char *err, size_t errlen);
void cache_close(struct cache *c);

/*
 * Options given once at open, in every role, and applied again by every
 * takeover: size_bound and mem_bound as cache_open's, stale as the
 * admission's below (CACHE_STALE_DEFAULT; 0: every entry is stale), label
 * names this mount in the owner's table (NULL: the last argument of the
 * command line, the mount point of feedfs; an absolute one is also how
 * an owner that unmounts is told from one that serves, so that a mount
 * taking its place waits for its close), say (may be NULL) is told,
 * from any thread, of the role taken and of every change of owner.
 */
typedef void (*cache_log_fn)(bool warn, const char *msg);
struct cache_opts {
	uint64_t size_bound, mem_bound;
	uint64_t stale;
	const char *label;
	cache_log_fn say;
	/*
	 * cache_open_shared only.  workers: the threads that call the
	 * cache at once; a client keeps that many connections (and 2 more,
	 * for stats and the like) to the owner (0: 8).  conns: the owner's
	 * cap of connections from all clients (0: CACHE_CONNS_DEFAULT).
	 * share_mem: the bytes the owner holds for its clients, the puts
	 * queued for its store and the request bodies being read, all
	 * together (0: CACHE_SHARE_MEM_DEFAULT); feedfs takes it from
	 * `memory`.
	 */
	unsigned workers, conns;
	uint64_t share_mem;
	/*
	 * The node's bound on its caches of cache_size = auto (core/node.h):
	 * node_total bytes, or node_pct of the filesystem, shared equally by
	 * the users that node_registry counts there (NULL: no bound, auto is
	 * half the free space); node_conf names the file, for messages.
	 */
	uint64_t node_total;
	unsigned node_pct;
	const char *node_registry, *node_conf;
};
#define CACHE_CONNS_DEFAULT 1024
#define CACHE_SHARE_MEM_DEFAULT (256u << 20)
/*
 * size_bound = CACHE_SIZE_AUTO (cache_size = auto, feedfs.conf(5)): the
 * owner that opens the store chooses the bound then, as half of the space
 * its filesystem has free plus what the store's files already take (so a
 * reopen keeps the bound of a cache that filled the disk's free half), at
 * least CACHE_SIZE_AUTO_MIN, and in a takeover at least the bound the old
 * owner served with; cache_open_shared's say is told what it chose and
 * from what.
 */
#define CACHE_SIZE_AUTO UINT64_MAX
#define CACHE_SIZE_AUTO_MIN (16u << 20)
/* The bound cache_size = auto gives: half of avail (free on the cache's
 * filesystem) plus used (the store's files), at least CACHE_SIZE_AUTO_MIN. */
uint64_t cache_size_auto(uint64_t avail, uint64_t used);
/* cache_open with every option (label and say unused). */
int cache_open_opts(const char *dir, const struct cache_opts *o,
    struct cache **out, char *err, size_t errlen);

/*
 * One cache for every feedfs of a machine.  RocksDB lets one process write
 * a store, so the first feedfs to take the store's lock (cache_open) is
 * its owner: it serves the others on dir/data.sock (wire.h: length-
 * prefixed binary frames for get, put and the digest memos, each value one
 * envelope (codec.h) checked against the key asked for; a 270 KB get
 * costs tens of microseconds) and answers feedfs-cache on
 * dir/control.sock.  A feedfs that finds the store locked is a client:
 * the same functions (cache_get, cache_put, cache_get_digest,
 * cache_put_digest, cache_get_stats, cache_error, cache_note, cache_close)
 * send requests to the owner over a pool of connections (one per
 * concurrent caller, up to the workers of cache_opts and 2 more; a caller
 * past that waits for one, up to HELLO's deadline, or misses).  An owner
 * at its cap of connections (cache_opts' conns, CACHE_CONNS_DEFAULT)
 * answers a new one "busy": that request waits for a connection of the
 * client's own or misses, and the client makes no new connection for a
 * second; a busy owner is never taken for a failed one.  A put is sent
 * without waiting for an answer and queued by the owner, which answers
 * gets first: a get may miss a value put a moment before.  The owner's
 * queue and the bodies it is reading share one bound (share_mem): a put
 * past it is dropped and counted.  Every put goes through the
 * owner's store, so its size bound and eviction hold for all mounts; the
 * owner's options apply.  A put over the owner's limit (size_bound / 4,
 * told in its HELLO) is not sent.
 *
 * Trust: every role checks the directory (owned by this user, writable by
 * nobody else: -EACCES otherwise), and a client talks only to a process
 * of its own user that holds the store's lock: SO_PEERCRED's uid, its
 * pid where the holder's pid is visible, and everywhere the lease token
 * (owner.c), so that mounts in other PID namespaces share the cache.
 *
 * A request has a deadline (1 s): past it, a get is a miss.  A client
 * tells an owner that is slow (its process runs: a miss; after
 * CACHE_BREAKER_TIMEOUTS deadlines in a row with no answer between them,
 * the breaker below opens) from one that is stopped (state T, where its
 * pid is visible: a breaker opens, and every request
 * misses at once for at least the deadline, doubling up to 30 s, until
 * one probe finds it running) and from one that is gone (nobody holds
 * the store's lock): then one thread of the client tries to take the
 * lock; the one process that gets it opens the store with its own
 * options (its size bound at least the one the old owner announced) and
 * starts both sockets, the others attach to it.  Reads never fail
 * because of the cache.
 *
 * cache_get_stats on such a handle: hits and misses (and bytes read) are
 * this handle's own lookups; the store's figures (admission, entries,
 * bytes, disk, bytes written) are its owner's in either role, asked over
 * the socket by a client (0 when the owner does not answer).
 *
 * cache_open_shared returns such a handle in either role: 0, or what
 * cache_open returns for a dir that cannot be used (-EACCES, -EINVAL,
 * -EIO); -EBUSY never (a held store is shared).  Where another process
 * takes more than 3 s to open the store, the handle starts as a client
 * (missing until an owner serves).  The handle is thread safe as cache.h
 * says; cache_admin_run and the functions of administration below are
 * not for it.
 */
int cache_open_shared(const char *dir, const struct cache_opts *o,
    struct cache **out, char *err, size_t errlen);
#define CACHE_BREAKER_TIMEOUTS 3
/* Whether this process holds the store now (a plain cache_open: true). */
bool cache_is_owner(struct cache *c);
/*
 * The mounts attached to the owner of dir, as text, one line each:
 * "PID<TAB>owner|client<TAB>HITS<TAB>MISSES<TAB>LABEL" (the owner first;
 * a client's counts as of its last request).  0 and *text (malloc'd, the
 * caller frees), or -errno (-ENOENT, -ECONNREFUSED: no owner runs).
 */
int cache_mounts(const char *dir, char **text);

/*
 * Whether another process holds the store in dir (RocksDB's lock on
 * dir/LOCK), without taking the lock: -EBUSY and "DIR is in use by another
 * feedfs (pid N)" if so, else 0 (also when dir has no store yet).  dir is
 * checked first (cache_dir_open) and LOCK opened relative to it: a dir
 * that fails the checks, a LOCK that is a link, a FIFO or a device is
 * -EACCES (-errno) and why, at once.  Starts no thread, so it can run
 * before a fork.
 */
int cache_probe_lock(const char *dir, char *err, size_t len);

/*
 * Trust in a cache directory, decided once, on a descriptor (cache/dir.c),
 * by every entry point: the mount's store, feedfs-cache, feedfs-fill and
 * the shard index.
 *
 * cache_dir_open: dir (made 0700 with the parents it lacks, when create)
 * opened as a directory without following a link in its last component,
 * and checked on the descriptor: this user's, writable by nobody else
 * (one that others may only read or enter is made 0700).  Its path is
 * walked from "/" on descriptors first, every directory on the way
 * checked before the next is opened under it: root's or this user's,
 * writable by nobody else unless sticky (as /tmp); a symbolic link on
 * the way is followed only where root or this user owns it.  The fd
 * (O_CLOEXEC; the caller closes it), or -errno and why in err: -EACCES
 * for another user's or a group- or world-writable one, or one under
 * such a directory or link, -ELOOP for a symbolic link, -ENOENT for a
 * missing one without create.
 *
 * cache_dir_openat: openat(dfd, name, flags | O_NOFOLLOW | O_NONBLOCK |
 * O_CLOEXEC | O_NOCTTY, mode): the fd or -errno.  A FIFO does not block
 * it; callers fstat what they opened.
 *
 * cache_dir_entries_ok: every entry of the store in dfd is a file, a
 * directory or a socket (what RocksDB and feedfs make there): 0, or
 * -EACCES and the first link, FIFO or device named in err.  RocksDB opens
 * its files by name, following links and blocking on FIFOs.
 *
 * cache_index_open: the shard index's directory, DIR/shard-index (made
 * when create), opened through cache_dir_open(dir, create) and checked
 * the same way (a link is refused, not followed).  The fd, or -errno and
 * why: the index is then off.
 */
#define CACHE_INDEX_DIR "shard-index"
int cache_dir_open(const char *dir, bool create, char *err, size_t errlen);
/*
 * The format file, dir/format: the decimal CACHE_FORMAT_VERSION of the
 * store in dir, written by whoever opens it (cache_open), so that a
 * feedfs of another format can tell before it opens or asks anything:
 * cache_open_shared leaves a dir of a newer format alone (every get a
 * miss, every put dropped, cache_error says why, cache_stats' disabled
 * and dir_format say so), and a client never uses an owner of another
 * format (a newer: as above; an older: misses until that owner goes, then
 * the takeover moves the old store aside).  cache_dir_format: the
 * version there, or 0 (no file: an empty dir, or a store of a feedfs
 * before the file).
 */
#define CACHE_FORMAT_FILE "format"
int cache_dir_format(const char *dir);
int cache_dir_openat(int dfd, const char *name, int flags, mode_t mode);
int cache_dir_entries_ok(int dfd, const char *dir, char *err, size_t errlen);
int cache_index_open(const char *dir, bool create, char *err, size_t errlen);

/*
 * What cache_open did besides opening, for the log, or NULL: a damaged
 * store (RocksDB reports corruption, or the format marker is garbage) is
 * renamed to DIR.corrupt-YYYYmmdd-HHMMSS and a new one made; the note
 * names it.
 */
const char *cache_note(struct cache *c);

/*
 * What one entry of a payload of len bytes under a prefix text of plen
 * bytes counts against cache_size: the payload, the value's header, its
 * index records and the prefix text (feedfs --check's sizes).
 */
uint64_t cache_entry_cost(uint64_t len, size_t plen);

/* SHA-256 of len bytes. */
void cache_sha256(const void *data, size_t len, uint8_t out[32]);
/* Key = SHA-256(digest, prefix text, CACHE_FORMAT_VERSION). */
void cache_key(
    const uint8_t digest[32], const char *prefix, uint8_t key[CACHE_KEY_LEN]);

/*
 * The remembered digest of the file with this path and stat: 0 or -ENOENT.
 * A memo holds for the size, mtime, ctime, inode and device it was put
 * with: a file rewritten in place is a miss even when its mtime was put
 * back.
 */
int cache_get_digest(struct cache *c, const char *path, const struct stat *st,
    uint8_t digest[32]);
/*
 * cache_put_digest drops a memo that cache_memo_trusted(st, st, now)
 * refuses: one for a file changed within CACHE_MEMO_GRAIN_NS of now.
 */
void cache_put_digest(struct cache *c, const char *path, const struct stat *st,
    const uint8_t digest[32]);
/*
 * Whether a digest memo may be made (git's racy-timestamp rule, see
 * git's Documentation/technical/racy-git.txt): before and after are the
 * file's fstat taken before and after the read that digested it, t0 the
 * CLOCK_REALTIME taken before that first fstat.  True when the two stats
 * agree (size, mtime, ctime, inode, device) and the file's mtime and
 * ctime are older than t0 by more than CACHE_MEMO_GRAIN_NS, the coarsest
 * timestamp granularity of the file systems feedfs reads (FAT: 2 s).  A
 * file changed after t0 then always gets a newer ctime; one changed in
 * the same tick as it was read (same size, same times) is "racily clean"
 * and gets no memo: it is read and digested again at its next use.
 */
#define CACHE_MEMO_GRAIN_NS 2000000000LL
bool cache_memo_trusted(const struct stat *before, const struct stat *after,
    const struct timespec *t0);

/* 0 and *v filled on a hit (checksum verified); -ENOENT on a miss. */
int cache_get(
    struct cache *c, const uint8_t key[CACHE_KEY_LEN], struct cache_val *v);
/*
 * Whether key has an entry (its index record; the value is not read).  A
 * store of this process only: false on a cache_open_shared handle.
 */
bool cache_has(struct cache *c, const uint8_t key[CACHE_KEY_LEN]);
/*
 * The same on any handle: 1 key has an entry, 0 it has none, -1 c
 * cannot tell without reading the value (a cache_open_shared handle
 * whose store another process holds).  Thread safe.
 */
int cache_holds(struct cache *c, const uint8_t key[CACHE_KEY_LEN]);
/* Store v (v->data is not taken).  Failures are counted, not returned. */
void cache_put(struct cache *c, const uint8_t key[CACHE_KEY_LEN],
    const struct cache_val *v);

void cache_get_stats(struct cache *c, struct cache_stats *st);

/*
 * Admission.  The cache admits every value while its entries take at most
 * admit_bytes = size_bound - size_bound / 20 (the index's count: payload,
 * prefix text and CACHE_VAL_OVERHEAD per entry), less the share of the
 * digest memos (admit_bytes / 32, 242 bytes a memo): a new memo past that
 * share evicts the oldest memos (an eighth of the share), whatever their
 * use, and never a value; a memo met with another stat than its file's
 * is deleted.  Once full, a new value
 * is admitted only if stale entries can be deleted for it: an entry is
 * stale when it was put (or refreshed) stale seconds ago or more.  The
 * oldest entries go first, and only stale ones; when the oldest entry is
 * not stale the value is refused (counted in denied) and nothing is
 * written.  A hit on an entry put more than stale / 2 seconds ago
 * rewrites it as new (a refresh, the only write a hit makes, at most once
 * per stale / 2 per entry), so an entry used within the last stale / 2
 * seconds is never deleted for admission, and one unused for stale
 * seconds can be.  stale = 0: every entry is stale (oldest first, no
 * refresh: a scan larger than the cache evicts what it needs next).
 * Independently the disk bound holds: when the store's files pass
 * size_bound, the oldest entries go whatever their age.
 * stale is an option of cache_open_opts and cache_open_shared (default
 * CACHE_STALE_DEFAULT).
 */
#define CACHE_STALE_DEFAULT 86400

/*
 * Count a hit or miss of the entries of prefix (the text given to
 * cache_put: prefix and format) for cache_get_prefix_stats; the first
 * CACHE_PFX_MAX (32) texts are counted, the rest are not.
 */
void cache_note_use(struct cache *c, const char *prefix, bool hit);
struct cache_prefix_stat {
	char text[256];
	uint64_t hits, misses;
};
/* The counted prefixes (at most max): how many were written to out. */
size_t cache_get_prefix_stats(
    struct cache *c, struct cache_prefix_stat *out, size_t max);

/*
 * NULL while the cache works; once it has failed (and feedfs serves without
 * it) the reason, e.g. "write failed: IO error: Read-only file system".
 * After the first failure puts are dropped and gets miss for good.  Stays
 * valid until cache_close.  A full disk is not a failure (cache_stats'
 * full).
 */
const char *cache_error(struct cache *c);

/* ---- administration: feedfs-cache and the control socket ------------- */

/* One entry, as the insertion index ('T') has it. */
struct cache_entry {
	uint64_t seq; /* insertion order */
	uint8_t key[CACHE_KEY_LEN];
	uint64_t len;	    /* payload bytes */
	uint64_t bytes;	    /* stored value bytes (payload and header) */
	uint64_t time;	    /* insertion, Unix seconds */
	const char *prefix; /* not NUL-terminated: prefix_len bytes */
	size_t prefix_len;
};
/* Called per entry; a nonzero return stops the scan and is returned. */
typedef int (*cache_entry_fn)(const struct cache_entry *e, void *arg);

/*
 * Open dir read-only as a RocksDB secondary instance: works whether or not
 * a feedfs holds it (it sees what that one has flushed: ask it to flush
 * first, see cache_ctl_request).  Only the functions below that read
 * (cache_scan, cache_check_entry, cache_get_stats) may be used on it.
 */
int cache_open_secondary(
    const char *dir, struct cache **out, char *err, size_t errlen);
/* Every entry, oldest first. */
int cache_scan(
    struct cache *c, cache_entry_fn fn, void *arg, char *err, size_t errlen);
/*
 * Read entry e's value and check it (header, length, checksum): 0 when
 * sound, -ENOENT when it is gone (evicted meanwhile), -EIO when damaged,
 * with why.
 */
int cache_check_entry(
    struct cache *c, const struct cache_entry *e, char *why, size_t whylen);
/*
 * Delete the entries whose prefix is prefix (NULL: any) and that were
 * inserted before the Unix time before (0: any time), and give their
 * space back; *n and *bytes say how many and how much.
 */
int cache_evict_match(struct cache *c, const char *prefix, uint64_t before,
    uint64_t *n, uint64_t *bytes, char *err, size_t errlen);
/*
 * Delete every entry and digest memo (the store stays, empty).  On a full
 * disk the store's files go first, without a write, and the deletes wait
 * (up to 12 s) for the store to take writes again; evict_match (below)
 * does the same for the oldest entries it deletes, all of them from the
 * oldest on (evict --older-than).
 */
int cache_clear(
    struct cache *c, uint64_t *n, uint64_t *bytes, char *err, size_t errlen);
/*
 * Remove the store in dir that no process holds (RocksDB's files: its
 * tables, logs, MANIFEST, CURRENT...; not the shard index, nor feedfs's
 * sockets and files), taking its lock first: for clear where the store
 * cannot be opened for want of space.  The next cache_open makes a new
 * one.  0 and *bytes freed, -EBUSY when it is held, or what
 * cache_dir_open says.
 */
int cache_wipe(const char *dir, uint64_t *bytes, char *err, size_t errlen);
/* Compact the whole store: deleted entries give their space back. */
int cache_compact(struct cache *c);
/* Write the memtables out (the store skips the WAL). */
int cache_flush(struct cache *c, char *err, size_t errlen);

/*
 * Control requests, one line each (no newline):
 *
 *	flush | compact | clear | stats | prefix-stats |
 *	evict-prefix TEXT | evict-before UNIXTIME
 *	-> "ok[ WORDS]" or "error MESSAGE"
 *
 * stats answers "ok hits H misses M inserts I denied D evictions E
 * refreshes R oversize O written W" (cache_stats; W is bytes_written);
 * prefix-stats "ok" and, per prefix counted since the
 * holder opened the store, a tab, its text, a tab, its hits, a tab, its
 * misses; evict-prefix and clear "ok N BYTES", evict-before "ok N BYTES
 * MEMOS" (the digest memos put before UNIXTIME go too; clear drops them
 * all).
 * evict-prefix drops the entries whose prefix text is TEXT (the rest of the
 * line, possibly empty), evict-before those put before UNIXTIME (decimal
 * digits; 0 drops nothing).
 */
enum cache_admin_op {
	CACHE_ADMIN_FLUSH,
	CACHE_ADMIN_COMPACT,
	CACHE_ADMIN_CLEAR,
	CACHE_ADMIN_STATS,
	CACHE_ADMIN_PREFIX_STATS,
	CACHE_ADMIN_EVICT_PREFIX,
	CACHE_ADMIN_EVICT_BEFORE,
};
struct cache_admin_req {
	enum cache_admin_op op;
	const char *prefix; /* EVICT_PREFIX: points into the parsed line */
	uint64_t before;    /* EVICT_BEFORE: Unix seconds */
};
/* Parse one request line: 0 and *req filled, or -EINVAL and why. */
int cache_admin_parse(
    const char *line, struct cache_admin_req *req, char *err, size_t errlen);
/*
 * Parse and run one request line on c (a store opened with cache_open,
 * held by this process), the reply line in reply: 0 for "ok...", else
 * -errno for "error MESSAGE".  The control socket and feedfs-cache on a
 * store no feedfs holds both run requests through this one function.
 */
int cache_admin_run(struct cache *c, const char *line, char *reply, size_t len);

/*
 * The control socket, dir/control.sock: a thread of the feedfs that holds
 * dir answers one request per connection with cache_admin_run.  The
 * socket is made in dir, which cache_open made private (0700, this user's),
 * and a peer whose SO_PEERCRED uid is not this process's effective uid is
 * closed unanswered; a stale socket left by a killed feedfs is replaced,
 * anything else at that name is an error.  A client has 2 s from its
 * connect to send its whole line, or is closed unanswered; 8 connections
 * are read at once, more wait in the backlog.  No client delays another
 * for longer than that, nor cache_ctl_stop at all (it waits only for a
 * request being run, e.g. a compaction).
 */
struct cache_ctl;
int cache_ctl_start(struct cache *c, const char *dir, struct cache_ctl **out,
    char *err, size_t errlen);
void cache_ctl_stop(struct cache_ctl *ctl); /* NULL is fine */
/*
 * Client side: send req, the reply (without the newline) in reply, all
 * within timeout_ms (a compaction of a large store can need more than a
 * few seconds).  0; -ETIMEDOUT when the holder did not answer in time
 * (stopped, or busy); -EPERM when the socket's holder is another user;
 * -ECONNREFUSED, -ENOENT when none listens; -EIO when it closed
 * unanswered.
 */
#define CACHE_CTL_TIMEOUT_MS 5000
int cache_ctl_request(
    const char *dir, const char *req, char *reply, size_t len, int timeout_ms);

#endif
