/*
 * open.c - cache/ (the store), layer store (above options.c, index.c,
 * memo.c and store.c; under admin.c; calls nothing of the sharing layer;
 * owner.c uses its checks of the directory).  Opening and closing the
 * store: cache_open_opts (with options.c's RocksDB options and size
 * bound), the directory and its permissions, the format marker, the lock
 * probe, a damaged or old store moved aside, the flush at close, the
 * read-only secondary instance of feedfs-cache.
 *
 * Writes skip the WAL: everything here can be recomputed, the WAL would
 * double the bytes written, and a batch is applied atomically to the
 * memtable either way.  A crash loses the unflushed memtable (misses, never
 * wrong data); cache_close flushes so a clean unmount keeps everything.
 */
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <rocksdb/c.h>

#include "cache/cache_int.h"

/*
 * Make the files in the directory dfd 0600 (best effort): RocksDB creates
 * them 0644 less the umask, and a library cannot change the umask of the
 * process.  Files it makes later keep that mode; the 0700 directory is
 * what keeps them from other users.
 */
static void
private_files(int dfd)
{
	struct dirent *de;
	struct stat st;
	DIR *d;
	int fd, f;

	if ((fd = dup(dfd)) < 0)
		return;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return;
	}
	rewinddir(d);
	while ((de = readdir(d)) != NULL) {
		/*
		 * Not LOCK: closing a descriptor of it would drop this
		 * process's fcntl lock, RocksDB's, on it (and it is empty).
		 */
		if (strcmp(de->d_name, "LOCK") == 0)
			continue;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode) || (st.st_mode & 077) == 0)
			continue;
		f = openat(fd, de->d_name,
		    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (f < 0)
			continue;
		if (fstat(f, &st) == 0 && S_ISREG(st.st_mode))
			(void)fchmod(f, st.st_mode & 0600);
		close(f);
	}
	closedir(d); /* closes fd */
}

/*
 * Make dir (0700, and the parents it lacks) or check the one there, on its
 * descriptor (cache_dir_open): a directory of this user that nobody else
 * can write, not a link, else -EACCES (-errno) and why.
 */
int
cache_private_dir(const char *dir, char *err, size_t errlen)
{
	int fd = cache_dir_open(dir, true, err, errlen);

	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

/* Close the store (its column families first). */
static void
close_db(struct cache *c)
{
	for (int i = 0; i < 2; i++)
		if (c->cf[i] != NULL)
			rocksdb_column_family_handle_destroy(c->cf[i]);
	c->cf[0] = c->cf[1] = c->vcf = NULL;
	if (c->db != NULL)
		rocksdb_close(c->db);
	c->db = NULL;
}

static void
free_handles(struct cache *c)
{
	close_db(c);
	cache_room_free(c);
	if (c->ropts != NULL)
		rocksdb_readoptions_destroy(c->ropts);
	if (c->vropts != NULL)
		rocksdb_readoptions_destroy(c->vropts);
	if (c->wopts != NULL)
		rocksdb_writeoptions_destroy(c->wopts);
	if (c->opts != NULL)
		rocksdb_options_destroy(c->opts);
	if (c->topts != NULL)
		rocksdb_block_based_options_destroy(c->topts);
	if (c->bcache != NULL)
		rocksdb_cache_destroy(c->bcache);
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
	v = rocksdb_get(c->db, c->ropts, CACHE_FORMAT_KEY,
	    strlen(CACHE_FORMAT_KEY), &vlen, &e);
	if (e != NULL) {
		snprintf(err, errlen, "%s: %s", dir, e);
		r = -EIO;
	} else if (v == NULL && c->secondary[0] != '\0') {
		/*
		 * A new store whose marker was never written out (no WAL: its
		 * feedfs was killed before a flush).  A secondary instance
		 * cannot put; it reads the store as the owner would, as the
		 * current format, which its next owner marks.
		 */
	} else if (v == NULL) {
		rocksdb_put(c->db, c->wopts, CACHE_FORMAT_KEY,
		    strlen(CACHE_FORMAT_KEY), want, strlen(want), &e);
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
		snprintf(err, errlen,
		    "written by an older feedfs (format %.*s)",
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
	struct stat st;
	char why[4400];
	int dfd, fd, r = 0;

	if ((dfd = cache_dir_open(dir, false, why, sizeof(why))) < 0) {
		if (dfd == -ENOENT)
			return 0; /* no store yet */
		snprintf(err, errlen, "%s", why);
		return dfd;
	}
	/* Never a FIFO's open that blocks, nor a link followed. */
	fd = cache_dir_openat(dfd, "LOCK", O_RDONLY, 0);
	close(dfd);
	if (fd < 0) {
		if (fd == -ENOENT)
			return 0; /* no store yet */
		if (fd == -ELOOP)
			snprintf(err, errlen,
			    "%s/LOCK is a symbolic link: refusing the cache "
			    "(remove it)",
			    dir);
		else
			snprintf(
			    err, errlen, "%s/LOCK: %s", dir, strerror(-fd));
		return fd == -ELOOP ? -EACCES : fd;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen,
		    "%s/LOCK is not a regular file: refusing the cache "
		    "(remove it)",
		    dir);
		close(fd);
		return -EACCES;
	}
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
	snprintf(note, notelen,
	    "%s %s (%s): moved it aside to %s and made a "
	    "new cache",
	    dir, strcmp(tag, "corrupt") == 0 ? "was damaged" : "is old", why,
	    to);
	return 0;
}

/* The store in dir with its two column families (secondary: as a
 * secondary instance whose own files go there); NULL and *e on failure. */
static rocksdb_t *
open_cfs(struct cache *c, const char *dir, const char *secondary, char **e)
{
	static const char *const names[2] = {"default", "values"};
	const rocksdb_options_t *opts[2] = {c->opts, c->opts};
	rocksdb_t *db;

	db = secondary != NULL
		 ? rocksdb_open_as_secondary_column_families(
		       c->opts, dir, secondary, 2, names, opts, c->cf, e)
		 : rocksdb_open_column_families(
		       c->opts, dir, 2, names, opts, c->cf, e);
	if (*e != NULL) {
		c->cf[0] = c->cf[1] = NULL;
		return NULL;
	}
	c->vcf = c->cf[1];
	return db;
}

/*
 * Whether the path dir names the directory dfd now (its last component not
 * followed): RocksDB opens its files by path, so the directory it opened
 * must be the one checked on dfd.
 */
static bool
names_dir(int dfd, const char *dir)
{
	struct stat a, b;

	return fstat(dfd, &a) == 0 && lstat(dir, &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/*
 * Check dir on its descriptor (cache_dir_open, made if missing) and its
 * entries (no link, FIFO or device for RocksDB to follow or block on):
 * the fd, or -EACCES (-errno) and why.
 */
static int
checked_dir(const char *dir, bool create, char *err, size_t errlen)
{
	int dfd, r;

	if ((dfd = cache_dir_open(dir, create, err, errlen)) < 0)
		return dfd;
	if ((r = cache_dir_entries_ok(dfd, dir, err, errlen)) != 0) {
		close(dfd);
		return r;
	}
	return dfd;
}

/*
 * Whether the filesystem of dfd has room to open a store: RocksDB writes a
 * MANIFEST, an OPTIONS file and its LOG's header at every open, and
 * Debian's librocksdb (built with assertions) aborts the process when an
 * append to LOG follows one that failed (options.c).  Less than
 * CACHE_OPEN_ROOM free: -ENOSPC and why (RocksDB's words for it, which
 * feedfs-cache looks for).
 */
#define CACHE_OPEN_ROOM (1u << 20)
static int
open_room(int dfd, const char *dir, char *err, size_t errlen)
{
	struct statvfs sv;
	uint64_t avail;

	if (fstatvfs(dfd, &sv) != 0 ||
	    (avail = (uint64_t)sv.f_bavail * sv.f_frsize) >= CACHE_OPEN_ROOM)
		return 0;
	snprintf(err, errlen,
	    "%s: No space left on device (%" PRIu64 " KiB free on its "
	    "filesystem; opening the store takes about %u KiB)",
	    dir, avail >> 10, CACHE_OPEN_ROOM >> 10);
	return -ENOSPC;
}

/* One attempt at opening dir: 0, or -EBADMSG when the store is damaged. */
static int
open_store(struct cache *c, const char *dir, char *err, size_t errlen)
{
	char *e = NULL;
	int dfd, r;

	if ((dfd = checked_dir(dir, true, err, errlen)) < 0)
		return dfd;
	if ((r = open_room(dfd, dir, err, errlen)) != 0) {
		close(dfd);
		return r;
	}
	if (c->size_auto)
		cache_choose_bound(c, dfd, dir);
	else
		cache_clamp_bound(c, dfd, dir);
	c->db = open_cfs(c, dir, NULL, &e);
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
		close(dfd);
		return r;
	}
	if (!names_dir(dfd, dir)) {
		snprintf(err, errlen,
		    "%s was replaced while the store was opened: refusing it",
		    dir);
		close_db(c);
		close(dfd);
		return -EACCES;
	}
	if ((r = check_format(c, dir, err, errlen)) != 0) {
		close_db(c);
		close(dfd);
		return r;
	}
	private_files(dfd); /* after the open, which rewrites CURRENT */
	cache_dir_format_write(dfd);
	cache_room_free(c); /* a second attempt's */
	cache_room_init(c, dfd);
	close(dfd);
	return 0;
}

int
cache_open(const char *dir, uint64_t size_bound, uint64_t mem_bound,
    struct cache **out, char *err, size_t errlen)
{
	struct cache_opts o = {.size_bound = size_bound,
	    .mem_bound = mem_bound, .stale = CACHE_STALE_DEFAULT};

	return cache_open_opts(dir, &o, out, err, errlen);
}

int
cache_open_opts(const char *dir, const struct cache_opts *o,
    struct cache **out, char *err, size_t errlen)
{
	uint64_t size_bound = o->size_bound, mem_bound = o->mem_bound;
	struct cache *c;
	char why[512];
	int r;

	if ((c = calloc(1, sizeof(*c))) == NULL) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	pthread_mutex_init(&c->errlock, NULL);
	cache_admin_lock_init(c);
	atomic_flag_clear(&c->evicting);
	c->dirfd = -1;
	c->say = o->say;
	if (o->node_registry && (o->node_total || o->node_pct)) {
		c->node_total = o->node_total;
		c->node_pct = o->node_pct;
		snprintf(c->node_registry, sizeof(c->node_registry), "%s",
		    o->node_registry);
		snprintf(c->node_conf, sizeof(c->node_conf), "%s",
		    o->node_conf ? o->node_conf : "the node's config");
	}
	snprintf(c->dir, sizeof(c->dir), "%s", dir);
	/* cache_size = auto: chosen by open_store, on the checked directory. */
	c->size_auto = size_bound == CACHE_SIZE_AUTO;
	cache_set_options(
	    c, c->size_auto ? CACHE_SIZE_AUTO_MIN : size_bound, mem_bound);
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
	cache_load_seq(c);
	c->stale = o->stale;
	*out = c;
	return 0;
fail:
	free_handles(c);
	pthread_mutex_destroy(&c->errlock);
	cache_admin_lock_destroy(c);
	free(c);
	return r;
}

const char *
cache_note(struct cache *c)
{
	if (c != NULL && c->ops != NULL)
		return c->ops->note(c);
	return c != NULL && c->note[0] != '\0' ? c->note : NULL;
}

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
	if (c->ops != NULL) {
		c->ops->close(c);
		return;
	}
	/* Without the WAL, unflushed puts live only in the memtable. */
	if (!atomic_load(&c->disabled) && c->db != NULL &&
	    c->secondary[0] == '\0') {
		fo = rocksdb_flushoptions_create();
		rocksdb_flushoptions_set_wait(fo, 1);
		cache_flush_cfs(c, fo, &e);
		rocksdb_free(e);
		e = NULL;
		/* What the last puts brought over the bound goes now. */
		if (cache_store_bytes(c) > c->size_bound) {
			cache_evict_oldest(
			    c, cache_store_bytes(c) - c->size_bound / 10 * 9);
			cache_flush_cfs(c, fo, &e);
			rocksdb_free(e);
		}
		rocksdb_flushoptions_destroy(fo);
	}
	free_handles(c);
	if (c->secondary[0] != '\0')
		remove_tree(c->secondary);
	pthread_mutex_destroy(&c->errlock);
	cache_admin_lock_destroy(c);
	free(c);
}

int
cache_open_secondary(
    const char *dir, struct cache **out, char *err, size_t errlen)
{
	char tmpl[] = "/tmp/feedfs-cache.XXXXXX", *e = NULL;
	struct cache *c;
	int dfd, fd, r;

	/* The same checks as the mount's, on the descriptor: made nowhere. */
	if ((dfd = checked_dir(dir, false, err, errlen)) < 0)
		return dfd;
	if (mkdtemp(tmpl) == NULL) {
		r = -errno;
		snprintf(err, errlen, "mkdtemp: %s", strerror(errno));
		close(dfd);
		return r;
	}
	/* Its MANIFEST and LOG go to tmpl (the same abort: open_room). */
	if ((fd = open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		r = open_room(fd, tmpl, err, errlen);
		close(fd);
		if (r != 0) {
			rmdir(tmpl);
			close(dfd);
			return r;
		}
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		rmdir(tmpl);
		close(dfd);
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	pthread_mutex_init(&c->errlock, NULL);
	cache_admin_lock_init(c);
	atomic_flag_clear(&c->evicting);
	c->dirfd = -1;
	snprintf(c->dir, sizeof(c->dir), "%s", dir);
	cache_set_options(c, UINT64_MAX / 2, 16u << 20);
	rocksdb_options_set_create_if_missing(c->opts, 0);
	rocksdb_options_set_max_open_files(c->opts, -1); /* secondary needs */
	snprintf(c->secondary, sizeof(c->secondary), "%s", tmpl);
	c->db = open_cfs(c, dir, tmpl, &e);
	if (e != NULL) {
		snprintf(err, errlen, "%s: %s", dir, e);
		rocksdb_free(e);
		c->db = NULL;
		r = -EIO;
		goto fail;
	}
	if (!names_dir(dfd, dir)) {
		snprintf(err, errlen,
		    "%s was replaced while the store was opened: refusing it",
		    dir);
		r = -EACCES;
		goto fail;
	}
	if ((r = check_format(c, dir, err, errlen)) != 0)
		goto fail;
	close(dfd);
	cache_load_memos(c, false); /* for cache_get_stats: reads only */
	*out = c;
	return 0;
fail:
	close(dfd);
	cache_close(c);
	return r;
}

void
cache_flush_cfs(struct cache *c, const rocksdb_flushoptions_t *fo, char **e)
{
	/* The values first: an index entry never names a lost value. */
	rocksdb_flush_cf(c->db, fo, c->vcf, e);
	if (*e == NULL)
		rocksdb_flush_cf(c->db, fo, c->cf[0], e);
}
