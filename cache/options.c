/*
 * options.c - cache/ (the store), layer store (under open.c; calls
 * nothing).  The RocksDB options a store is opened with, and its size
 * bound: a set cache_size (clamped to its filesystem: cache_clamp_bound),
 * or cache_size = auto, chosen from the filesystem before the store is
 * opened (cache_choose_bound: half the free space, or the node's bound
 * shared by its users, registry.c) and kept at least the previous
 * owner's on a takeover (cache_keep_bound).
 */
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include <rocksdb/c.h>

#include "cache/cache_int.h"

static uint64_t
clamp64(uint64_t v, uint64_t lo, uint64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
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
 *
 * Over whole cold epochs in the mount (issue 18: the second cold epoch of
 * a mount, 2000 make-dataset images, resize(256) prefixes of ~256 KB;
 * per image, two rounds on a loaded 2-core VM), the insert CPU (the
 * workers' puts + RocksDB's threads), the bytes written, and the daemon's
 * CPU in the warm epoch after:
 *
 *			insert		written	warm
 *	these options	0.30-0.40 ms	256 KB	0.40-0.57 ms
 *	BlobDB (4K min)	0.50-0.65 ms	256 KB	0.49-0.57 ms
 *	direct I/O for flush and compaction
 *			0.29-0.32 ms	255 KB	0.46-0.58 ms, and warm
 *					epochs read from the disk: slower
 *	256 MB write buffers	0.33-0.45 ms	(some still unflushed)
 *	4 write buffers	0.45-0.53 ms	256 KB
 *	cache_format = lossless
 *			1.33-1.55 ms	151 KB	0.72-0.88 ms
 *
 * so none of them replaces these.
 */
/*
 * The table files RocksDB keeps open: all a store within size_bound has
 * (size_bound / file_size, twice over for the level-0 files and the
 * compactions' outputs), at least CACHE_OPEN_FILES_MIN; at most half of
 * the process's open-file limit, whose soft value is raised to the hard
 * one first.  A get from a file not kept open opens it again (its footer,
 * index and filter read and parsed): with the old fixed 512, a store over
 * 512 files (12 GB at the 24 MB files that `memory` of 2G or more gives;
 * ImageNet's 290G takes 12000) paid that on most gets.  Simulated by the
 * ratio (RocksDB 7.8, 251 files of 1 MB holding 256 KB values, 10 kept
 * open against all, random gets, 2 cores under load, five pairs of
 * runs): 70-107 us of CPU per get against 48-70 us, and 0.8-1.3 ms of
 * wall time against 0.5-0.8 ms.
 */
static int
open_files(uint64_t size_bound, uint64_t file_size)
{
	uint64_t want = 2 * (size_bound / file_size) + 64, cap = want;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		if (rl.rlim_cur < rl.rlim_max) {
			struct rlimit up = {rl.rlim_max, rl.rlim_max};

			if (setrlimit(RLIMIT_NOFILE, &up) == 0)
				rl = up;
		}
		if (rl.rlim_cur != RLIM_INFINITY)
			cap = rl.rlim_cur / 2;
	}
	return (int)clamp64(
	    want < cap ? want : cap, CACHE_OPEN_FILES_MIN, INT32_MAX / 2);
}

/* What depends on the size bound; again once cache_size = auto chose it. */
static void
set_bound(struct cache *c, uint64_t size_bound, uint64_t mem_bound)
{
	uint64_t wb = clamp64(mem_bound / 8, 1u << 20, 64u << 20);
	uint64_t wbmax = clamp64(size_bound / 8, 1u << 20, UINT64_MAX);

	if (wb > wbmax)
		wb = wbmax; /* a flush writes files well under the bound */
	rocksdb_options_set_write_buffer_size(c->opts, wb);
	rocksdb_options_set_target_file_size_base(c->opts, wb);
	rocksdb_options_set_max_bytes_for_level_base(c->opts, wb * 8);
	rocksdb_options_set_max_open_files(c->opts, open_files(size_bound, wb));
	c->wbuf = wb;
	c->size_bound = size_bound;
	c->check_every = clamp64(size_bound / 32, 64u << 10, 64u << 20);
}

void
cache_set_options(struct cache *c, uint64_t size_bound, uint64_t mem_bound)
{
	uint64_t bc = clamp64(mem_bound / 2, 8u << 20, UINT64_MAX);

	c->opts = rocksdb_options_create();
	c->topts = rocksdb_block_based_options_create();
	c->bcache = rocksdb_cache_create_lru(bc);
	c->filter = rocksdb_filterpolicy_create_bloom(10);
	rocksdb_block_based_options_set_block_cache(c->topts, c->bcache);
	rocksdb_block_based_options_set_filter_policy(c->topts, c->filter);
	rocksdb_options_set_block_based_table_factory(c->opts, c->topts);
	rocksdb_options_set_create_if_missing(c->opts, 1);
	rocksdb_options_set_compression(c->opts, rocksdb_no_compression);
	rocksdb_options_set_max_write_buffer_number(c->opts, 2);
	rocksdb_options_set_max_background_jobs(c->opts, 2);
	rocksdb_options_set_keep_log_file_num(c->opts, 2);
	rocksdb_options_set_max_log_file_size(c->opts, 1u << 20);
	/*
	 * RocksDB's own log (dir/LOG) gets its header at open and nothing
	 * after.  Debian's librocksdb 7.8 is built with assertions: once an
	 * append to LOG failed (a full disk), the next one aborts the
	 * process (WritableFileWriter's "sync_without_flush_called_"), and
	 * at the level of warnings a full disk is what RocksDB logs.
	 * Measured on a 8M tmpfs filled by dd: 4 runs of 5 aborted at
	 * level 2 (a flush's error, or the open of a store on the full
	 * disk); none in 14 at this level.
	 */
	rocksdb_options_set_info_log_level(c->opts, 5); /* header only */
	/*
	 * A new MANIFEST at every open, preallocated: 4 MiB by default,
	 * which a store on a small or full disk cannot spare.
	 */
	rocksdb_options_set_manifest_preallocation_size(c->opts, 64u << 10);
	rocksdb_options_set_create_missing_column_families(c->opts, 1);
	c->ropts = rocksdb_readoptions_create();
	/*
	 * One checksum per value read, the value's own XXH3 (codec.c), not
	 * RocksDB's block checksum too; and no copy into the block cache,
	 * which a random scan over values larger than it only churns.
	 */
	c->vropts = rocksdb_readoptions_create();
	rocksdb_readoptions_set_verify_checksums(c->vropts, 0);
	rocksdb_readoptions_set_fill_cache(c->vropts, 0);
	c->wopts = rocksdb_writeoptions_create();
	rocksdb_writeoptions_disable_WAL(c->wopts, 1);
	c->mem_bound = mem_bound;
	set_bound(c, size_bound, mem_bound);
}

static void
human(uint64_t b, char *out, size_t len)
{
	if (b >= (1ull << 30))
		snprintf(out, len, "%.1fG", (double)b / (1ull << 30));
	else
		snprintf(out, len, "%.1fM", (double)b / (1u << 20));
}

uint64_t
cache_size_auto(uint64_t avail, uint64_t used)
{
	uint64_t b = (avail + used) / 2;

	return b < CACHE_SIZE_AUTO_MIN ? CACHE_SIZE_AUTO_MIN : b;
}

/*
 * What dfd's filesystem has: *avail free for this user, *total its size,
 * and *used what the store's files (regular files of dfd) take now.
 */
static void
measure(int dfd, uint64_t *avail, uint64_t *total, uint64_t *used)
{
	struct statvfs sv;
	struct dirent *de;
	struct stat st;
	DIR *d;
	int fd;

	*avail = *total = *used = 0;
	if (fstatvfs(dfd, &sv) == 0) {
		*avail = (uint64_t)sv.f_bavail * sv.f_frsize;
		*total = (uint64_t)sv.f_blocks * sv.f_frsize;
	}
	if ((fd = dup(dfd)) >= 0 && (d = fdopendir(fd)) != NULL) {
		rewinddir(d); /* the offset dfd's earlier reads left */
		while ((de = readdir(d)) != NULL)
			if (fstatat(dirfd(d), de->d_name, &st,
				AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISREG(st.st_mode))
				*used += (uint64_t)st.st_blocks * 512;
		closedir(d);
	} else if (fd >= 0) {
		close(fd);
	}
}

/*
 * cache_size = auto, or a set one clamped: half of what dfd's filesystem
 * has free for this user and what the store's files take now, at least
 * min; before the store is opened with it.  The note says from what.
 */
static uint64_t
auto_bound(struct cache *c, uint64_t avail, uint64_t used, const char *dir,
    uint64_t min)
{
	uint64_t b = (avail + used) / 2 < min ? min : (avail + used) / 2;
	char a[32], u[32];

	set_bound(c, b, c->mem_bound);
	human(avail, a, sizeof(a));
	human(used, u, sizeof(u));
	snprintf(c->auto_from, sizeof(c->auto_from),
	    "half of the %s free on %s's filesystem and the %s the cache takes",
	    a, dir, u);
	return b;
}

/*
 * cache_size = auto under the node's bound (core/node.h): the bound on
 * all the node's caches on dfd's filesystem, shared equally by the users
 * the registry counts there, this user's share split between their
 * caches there; never more than the free space and what the store takes,
 * at least CACHE_SIZE_AUTO_MIN.  0, or -1 with why (the registry).
 */
static int
node_bound(struct cache *c, int dfd, const char *dir, uint64_t avail,
    uint64_t total, uint64_t used, uint64_t *out, char *why, size_t len)
{
	uint64_t all = c->node_pct ? total / 100 * c->node_pct : c->node_total;
	uint64_t b;
	unsigned users, mine;
	char a[32], pct[16] = "";

	if (cache_registry_count(
		c->node_registry, dfd, dir, &users, &mine, why, len) != 0)
		return -1;
	b = all / users / mine;
	if (b > avail + used)
		b = avail + used;
	if (b < CACHE_SIZE_AUTO_MIN)
		b = CACHE_SIZE_AUTO_MIN;
	set_bound(c, b, c->mem_bound);
	human(all, a, sizeof(a));
	if (c->node_pct)
		snprintf(pct, sizeof(pct), " (%u%%)", c->node_pct);
	snprintf(c->auto_from, sizeof(c->auto_from),
	    "the node's bound of %s%s on %.1500s's filesystem (%.200s) shared "
	    "by the %u user%s with a cache there (%.1500s), and this user's "
	    "share by "
	    "their %u cache%s there",
	    a, pct, dir, c->node_conf, users, users == 1 ? "" : "s",
	    c->node_registry, mine, mine == 1 ? "" : "s");
	*out = b;
	return 0;
}

void
cache_choose_bound(struct cache *c, int dfd, const char *dir)
{
	uint64_t avail, total, used, b;
	char h[32], why[4400] = "";

	measure(dfd, &avail, &total, &used);
	if (c->node_registry[0] == '\0' ||
	    node_bound(c, dfd, dir, avail, total, used, &b, why,
		sizeof(why)) != 0)
		b = auto_bound(c, avail, used, dir, CACHE_SIZE_AUTO_MIN);
	c->node_failed = why[0] != '\0';
	human(b, h, sizeof(h));
	snprintf(c->auto_note, sizeof(c->auto_note),
	    "cache_size = auto: %s (%" PRIu64 " bytes), %s%s%s%s", h, b,
	    c->auto_from, why[0] ? "; the node's bound is not applied: " : "",
	    why, why[0] ? " (feedfs.conf(5), THE NODE)" : "");
}

void
cache_clamp_bound(struct cache *c, int dfd, const char *dir)
{
	uint64_t avail, total, used, asked = c->size_bound, b;
	char h[32], t[32], a[32];

	measure(dfd, &avail, &total, &used);
	if (total == 0 || asked <= total)
		return;
	/* Not auto's least, CACHE_SIZE_AUTO_MIN: the filesystem is small. */
	b = auto_bound(c, avail, used, dir, 1u << 20);
	c->size_clamped = true;
	human(asked, a, sizeof(a));
	human(total, t, sizeof(t));
	human(b, h, sizeof(h));
	snprintf(c->auto_note, sizeof(c->auto_note),
	    "cache_size = %s is more than the %s that %s's filesystem "
	    "holds: clamped to %s (%" PRIu64 " bytes), as cache_size = auto "
	    "would choose: %s",
	    a, t, dir, h, b, c->auto_from);
}

const char *
cache_size_note(struct cache *c, bool *warn)
{
	*warn = c->size_clamped || c->node_failed;
	return c->size_auto || c->size_clamped ? c->auto_note : NULL;
}

void
cache_keep_bound(struct cache *c, uint64_t was)
{
	char h[32];

	if (!c->size_auto || was <= c->size_bound)
		return;
	/* Only the bound: the options the store runs with stay safe under
	 * a larger one. */
	c->size_bound = was;
	c->check_every = clamp64(was / 32, 64u << 10, 64u << 20);
	human(was, h, sizeof(h));
	snprintf(c->auto_note, sizeof(c->auto_note),
	    "cache_size = auto: %s (%" PRIu64 " bytes), the bound the "
	    "previous owner served with, more than %s",
	    h, was, c->auto_from);
}
