/*
 * ds_int.h - layer: dataset/ (the datasets).  What the files of the dataset
 * index share (dataset.c: ds_open and the manifest, on top; ds_scan.c: the
 * ImageFolder scan, ds_skipped.c: what it left out; ds_tar*.c: tar shards;
 * ds_safeopen.c: ds_sample_open and the open through no symbolic link;
 * ds_text.c and ds_sidecar.c: captions (ds_text.h); ds_common.c, under
 * them all: ds_free and the helpers below).  Not for use outside
 * dataset/dataset.c and dataset/ds_*.c (and the tests and fuzz targets of
 * the tar reader).
 */
#ifndef FEEDFS_DS_INT_H
#define FEEDFS_DS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataset/dataset.h"

/* The progress callback runs every this many samples found. */
#define DS_PROGRESS_EVERY 1000

/* Free n samples at v, their paths, and v.  ds_common.c */
void ds_free_samples(struct ds_sample *v, size_t n);

/* Has path a ".." component (one that may leave the root)?  ds_common.c */
bool ds_has_dotdot(const char *path);

/* pread all of n bytes at off: 0, or -EIO (short) / -errno.  ds_common.c */
int ds_pread_all(int fd, void *buf, size_t n, uint64_t off);

/*
 * The ImageFolder scan of ds->root (realpath of root, which is named as
 * given in messages): sets ds->classes and ds->nclasses (ds_free frees
 * them, on error too), and on success ds->samples and ds->n, sorted by
 * path.  No samples at all is -ENOENT.  0 or -errno with a message in err.
 */
int ds_scan(struct dataset *ds, const char *root, ds_progress_fn progress,
    void *arg, char *err, size_t errlen);

/*
 * Something the scan leaves out (ds_skipped.c): dir/name (dir relative
 * to the root, "" for the root itself) counted in ds->nleft_by[why] (and
 * by extension for DS_LEFT_NAME), and kept in ds->left while fewer than
 * DS_LEFT_KEPT are; target (may be NULL) is copied, uid is a refused
 * link's owner.  0 or -ENOMEM.
 */
int ds_left_add(struct dataset *ds, const char *dir, const char *name,
    enum ds_left_why why, const char *target, uint32_t uid);

/* The names the scan takes as images: .jpg .jpeg .png .webp, any case. */
bool ds_is_image_name(const char *name);

/*
 * ds_guard.c: links out of the root when feedfs may read what others
 * cannot (see there).  ds_guard_active: whether the process is such
 * (euid 0, CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH).  ds_guard_of: the
 * guard of uid in ds (1 + its index in ds->guards, added with its groups
 * if new); 0 or -ENOMEM.  ds_guard_allows: whether guard g (0: none,
 * anything goes) may have want (4 read, 5 read and search) of a file of
 * stat st with (acl) or without a POSIX ACL.  ds_guard_path: the same of
 * the absolute path (no link on it): it readable (a directory also
 * searchable), every directory above it searchable.  ds_has_acl: whether
 * fd (or, fd < 0, path, not followed) has a POSIX access ACL (true when
 * that cannot be told).
 */
bool ds_guard_active(void);
int ds_guard_of(struct dataset *ds, uint32_t uid, uint32_t *g);
bool ds_guard_allows(const struct dataset *ds, uint32_t g,
    const struct stat *st, bool acl, unsigned want);
bool ds_guard_path(struct dataset *ds, uint32_t g, const char *path);
bool ds_has_acl(int fd, const char *path);

/*
 * openat(dirfd, rel, flags) following no symbolic link and never leaving
 * dirfd: openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS where the kernel
 * has it (and FEEDFS_DS_NO_OPENAT2 is not set: the tests try both), else
 * component by component with O_NOFOLLOW.  A link anywhere gives ELOOP
 * (or ENOTDIR for one in place of a directory), ".." gives EXDEV.
 * Returns the descriptor, or -1 with errno set.  Thread-safe.
 */
int ds_open_beneath(int dirfd, const char *rel, int flags);

/*
 * The realpath of ROOT/dir, or of ROOT/dir/base with base (dir may be
 * ""): malloc'd, or NULL with errno set.  ds_safeopen.c
 */
char *ds_resolve(const struct dataset *ds, const char *dir, const char *base);

/*
 * Where path (absolute, resolved) lies below the dataset's root: the
 * offset of its part relative to the root, or 0 where it is not below it
 * (the root itself is not).  ds_safeopen.c
 */
size_t ds_below_root(const struct dataset *ds, const char *path);

/* A remote member's range asked for ahead of its read.  ds_tar.c */
void ds_remote_prefetch(const struct dataset *ds, size_t id);

/* ---- tar shards: the walk (ds_tar_walk.c) and the kept index
 * (ds_tar_index.c); the rest of the tar reader is in ds_tar_int.h ---- */

/* What a member is; all but TM_FILE are refused when read (ds_tm_why). */
enum tar_kind {
	TM_FILE,
	TM_SYMLINK,
	TM_HARDLINK,
	TM_DEVICE,
	TM_SPARSE,
	TM_BADNAME,
	TM_PASTEND,
	TM_BIGMETA,
	TM_BADTYPE,
	TM_NKINDS
};

/* How the scan of a shard ended. */
enum tar_status { TS_COMPLETE, TS_TRUNCATED, TS_BADHEADER, TS_READ };

/* A member's first bytes an index keeps beside its digest: what tells
 * JPEG, PNG and WebP apart (transforms/: xf_src_kind), so that a cache
 * key can be made without reading the member. */
#define TAR_HEAD_MAX 16

struct tar_member {
	char *name;
	uint8_t kind;	    /* enum tar_kind */
	uint64_t off, size; /* the data, inside the shard */
	/* .cls, .json and .txt members of at most 64 KiB: their text (+
	 * NUL) */
	bool has_data;
	char *data;
	uint32_t dlen;
	/* An image member whose bytes the index saw (a remote shard's
	 * stream): the SHA-256 of its bytes, the cache key's input, and
	 * its first hlen bytes (min(size, TAR_HEAD_MAX)). */
	bool has_digest;
	uint8_t hlen;
	uint8_t digest[32];
	uint8_t head[TAR_HEAD_MAX];
};

/* A shard's members in file order, and where and why the scan stopped. */
struct tar_index {
	struct tar_member *m;
	size_t n;
	uint32_t status; /* enum tar_status */
	uint64_t status_off;
};

/*
 * Index the tar file fd of fsize bytes from its headers (pread only).
 * Damage stops the scan and is said in ix->status (what came before is
 * kept); members past the end are recorded as TM_PASTEND.  0, or -ENOMEM
 * (ix then empty).  Never reads outside [0, fsize).
 */
int ds_tar_scan(int fd, uint64_t fsize, struct tar_index *ix);
/*
 * The same over any reader: pread(arg, buf, n, off) gives all of n bytes
 * at off, 0, or -errno (the scan then stops with TS_READ).  The walk reads
 * forward, save the one block it last read, read again: a stream can feed
 * it (ds_remote.c).  member (NULL: none) is called with each plain file
 * member as soon as it is recorded (ix->m[i]), before the walk reads on:
 * it may read the member's data through pread (forward still) and set
 * its digest; a nonzero return stops the walk with TS_READ.
 */
struct tar_rd {
	int (*pread)(void *arg, void *buf, size_t n, uint64_t off);
	void *arg;
	int (*member)(void *arg, struct tar_index *ix, size_t i);
};
int ds_tar_scan_rd(const struct tar_rd *rd, uint64_t fsize, struct tar_index *ix);
void ds_tar_index_free(struct tar_index *ix);
const char *ds_tm_why(unsigned kind);

/*
 * The kept index (ds_tar_index.c): encode (the shard's name and stat
 * first, a SHA-256 last) and parse through a checking cursor.  The same
 * bytes are kept in a cache_dir's shard-index and, for a remote shard,
 * in the cluster tier (core/ds_tier.c).  parse: -ESTALE when name or st
 * (either may be NULL: not checked) is not the one encoded, -EINVAL for
 * anything malformed (an index of an older format too), -ENOMEM.
 * Members' offsets are checked to lie inside the shard.
 */
int ds_tar_index_encode(const struct tar_index *ix, const char *name,
    const struct stat *st, uint8_t **out, size_t *len);
int ds_tar_index_parse(const uint8_t *d, size_t len, const char *name,
    const struct stat *st, struct tar_index *ix);

#endif
