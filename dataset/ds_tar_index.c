/*
 * ds_tar_index.c - layer: dataset/ (the datasets), tar shard backend (calls
 * ds_tar_walk.c and ds_common.c).  The kept index of a tar shard: its
 * encoding (the shard's name and stat first, a SHA-256 last), its parse
 * through one checking cursor, and its file in the index directory, a
 * descriptor the caller checked (cache_index_open), named by the SHA-256
 * of the shard's path.  An index that met a read error (which may be gone
 * at the next scan) is used but not kept (idx_keepable).
 *
 * The format is versioned (the magic) and extensible: a word of features
 * says what kinds of content the whole index carries, and each member
 * ends with records (a tag, a length, its bytes) that a parser skips when
 * it does not know their tag, so that a new kind of content per member is
 * a new tag, not a new format; what changes which members a walk keeps
 * is a new version.  Version 4:
 *
 *	"FFTARIX4"
 *	u32 features		IDX_F_*
 *	u32 name length, name	the shard's path, or a remote shard's
 *				display URL
 *	7 x u64			size, inode, device, mtime s ns, ctime s ns
 *				(a remote shard's: ds_remote.c's, made of its
 *				size and version)
 *	u32 status, u64 status_off, u64 member count
 *	each member:		u32 name length, name, u8 kind, u64 off,
 *				u64 size, u32 text length (UINT32_MAX: none),
 *				text, u32 records' length, records:
 *				u8 tag, u32 length, bytes
 *	32 bytes		SHA-256 of everything before
 *
 * (all numbers little endian).  Tags: IDX_T_DIGEST, 32..48 bytes: the
 * SHA-256 of the member's bytes, then its first bytes (TAR_HEAD_MAX at
 * most).  A member's text is kept for .cls, .json and .txt members (labels
 * and captions) up to TAR_LABEL_MAX bytes.  Any other version is read as
 * malformed, and the shard indexed again: 1 and 2 have no name and no
 * records (2 keeps .txt text, 1 does not), 3 does not keep .txt text.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "dataset/ds_tar_int.h"

#define IDX_MAGIC "FFTARIX4"
/* Features: the image members of a whole stream carry their digests. */
#define IDX_F_DIGESTS 1u
/* Member records' tags. */
#define IDX_T_DIGEST 1u
/* A member's records: at most this many bytes (a parser's bound). */
#define IDX_REC_MAX 4096u

/* A growing buffer for the index file. */
struct wbuf {
	uint8_t *p;
	size_t n, cap;
	bool oom;
};

static void
wput(struct wbuf *b, const void *d, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n > b->cap) {
		size_t c = b->cap ? b->cap : 4096;
		uint8_t *np;

		while (c < b->n + n)
			c *= 2;
		if ((np = realloc(b->p, c)) == NULL) {
			b->oom = true;
			return;
		}
		b->p = np;
		b->cap = c;
	}
	memcpy(b->p + b->n, d, n);
	b->n += n;
}

static void
wput64(struct wbuf *b, uint64_t v)
{
	uint8_t d[8];

	for (int i = 0; i < 8; i++)
		d[i] = (uint8_t)(v >> (8 * i));
	wput(b, d, 8);
}

static void
wput32(struct wbuf *b, uint32_t v)
{
	uint8_t d[4];

	for (int i = 0; i < 4; i++)
		d[i] = (uint8_t)(v >> (8 * i));
	wput(b, d, 4);
}

static void
sha256(const void *d, size_t n, uint8_t out[32])
{
	unsigned int len = 32;

	if (EVP_Digest(d, n, out, &len, EVP_sha256(), NULL) != 1)
		memset(out, 0, 32);
}

/*
 * See ds_tar_int.h.  A shard rewritten in place with its size and mtime
 * put back (rsync --inplace -t) has a new ctime, and its members may lie
 * elsewhere.
 */
bool
ds_shard_same(const struct stat *a, const struct stat *b)
{
	return a->st_size == b->st_size && a->st_ino == b->st_ino &&
	       a->st_dev == b->st_dev &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
	       a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* The shard's identity in the index: size, inode, device, mtime, ctime. */
static void
wput_stat(struct wbuf *b, const struct stat *st)
{
	wput64(b, (uint64_t)st->st_size);
	wput64(b, (uint64_t)st->st_ino);
	wput64(b, (uint64_t)st->st_dev);
	wput64(b, (uint64_t)st->st_mtim.tv_sec);
	wput64(b, (uint64_t)st->st_mtim.tv_nsec);
	wput64(b, (uint64_t)st->st_ctim.tv_sec);
	wput64(b, (uint64_t)st->st_ctim.tv_nsec);
}

/* Whether every image member of ix carries its digest. */
static bool
all_digests(const struct tar_index *ix)
{
	for (size_t i = 0; i < ix->n; i++) {
		size_t kl;
		const char *ext;

		if (ix->m[i].kind == TM_FILE && !ix->m[i].has_digest &&
		    (ext = ds_tar_member_ext(ix->m[i].name, &kl)) != NULL &&
		    ds_tar_is_image_ext(ext))
			return false;
	}
	return true;
}

int
ds_tar_index_encode(const struct tar_index *ix, const char *name,
    const struct stat *st, uint8_t **out, size_t *len)
{
	struct wbuf b = {0};
	uint8_t sum[32];
	size_t nl = strlen(name);

	wput(&b, IDX_MAGIC, 8);
	wput32(&b, all_digests(ix) ? IDX_F_DIGESTS : 0);
	wput32(&b, (uint32_t)nl);
	wput(&b, name, nl);
	wput_stat(&b, st);
	wput32(&b, ix->status);
	wput64(&b, ix->status_off);
	wput64(&b, ix->n);
	for (size_t i = 0; i < ix->n; i++) {
		const struct tar_member *m = &ix->m[i];

		nl = strlen(m->name);
		wput32(&b, (uint32_t)nl);
		wput(&b, m->name, nl);
		wput(&b, &m->kind, 1);
		wput64(&b, m->off);
		wput64(&b, m->size);
		wput32(&b, m->has_data ? m->dlen : UINT32_MAX);
		if (m->has_data)
			wput(&b, m->data, m->dlen);
		if (!m->has_digest) {
			wput32(&b, 0);
			continue;
		}
		wput32(&b, 1 + 4 + 32 + m->hlen);
		wput(&b, &(uint8_t){IDX_T_DIGEST}, 1);
		wput32(&b, 32u + m->hlen);
		wput(&b, m->digest, 32);
		wput(&b, m->head, m->hlen);
	}
	if (b.oom) {
		free(b.p);
		return -ENOMEM;
	}
	sha256(b.p, b.n, sum);
	wput(&b, sum, 32);
	if (b.oom) {
		free(b.p);
		return -ENOMEM;
	}
	*out = b.p;
	*len = b.n;
	return 0;
}

/* The checking cursor over an index file's bytes. */
struct cur {
	const uint8_t *p;
	size_t left;
};

static bool
get(struct cur *c, void *d, size_t n)
{
	if (c->left < n)
		return false;
	memcpy(d, c->p, n);
	c->p += n;
	c->left -= n;
	return true;
}

static bool
get64(struct cur *c, uint64_t *v)
{
	uint8_t d[8];

	if (!get(c, d, 8))
		return false;
	*v = 0;
	for (int i = 7; i >= 0; i--)
		*v = *v << 8 | d[i];
	return true;
}

static bool
get32(struct cur *c, uint32_t *v)
{
	uint8_t d[4];

	if (!get(c, d, 4))
		return false;
	*v = (uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16 |
	     (uint32_t)d[3] << 24;
	return true;
}

/*
 * A member's records (n bytes at c): the digest's taken into m, unknown
 * tags skipped.  Whether they parse.
 */
static bool
get_records(struct cur *c, uint32_t n, struct tar_member *m)
{
	struct cur r;

	if (n > IDX_REC_MAX || n > c->left)
		return false;
	r.p = c->p;
	r.left = n;
	c->p += n;
	c->left -= n;
	while (r.left > 0) {
		uint8_t tag;
		uint32_t len;

		if (!get(&r, &tag, 1) || !get32(&r, &len) || len > r.left)
			return false;
		if (tag == IDX_T_DIGEST) {
			if (m->has_digest || m->kind != TM_FILE ||
			    len != 32 + (m->size < TAR_HEAD_MAX
						? (uint32_t)m->size
						: TAR_HEAD_MAX))
				return false;
			get(&r, m->digest, 32);
			m->hlen = (uint8_t)(len - 32);
			get(&r, m->head, m->hlen);
			m->has_digest = true;
			continue;
		}
		r.p += len; /* a later version's: not ours to read */
		r.left -= len;
	}
	return true;
}

int
ds_tar_index_parse(const uint8_t *d, size_t len, const char *name,
    const struct stat *st, struct tar_index *ix)
{
	struct cur c;
	uint8_t sum[32], magic[8];
	uint64_t v[7], n, cap;
	uint32_t status, features, nl;
	size_t have = 0;
	int r = -EINVAL;

	memset(ix, 0, sizeof(*ix));
	if (len < 8 + 32)
		return -EINVAL;
	sha256(d, len - 32, sum);
	if (memcmp(sum, d + len - 32, 32) != 0)
		return -EINVAL;
	c.p = d;
	c.left = len - 32;
	if (!get(&c, magic, 8) || memcmp(magic, IDX_MAGIC, 8) != 0 ||
	    !get32(&c, &features) || !get32(&c, &nl) || nl > c.left)
		return -EINVAL;
	/* Another shard's index (a tier's value under the wrong key). */
	if (name != NULL && (strlen(name) != nl || memcmp(c.p, name, nl) != 0))
		return -ESTALE;
	c.p += nl;
	c.left -= nl;
	for (int i = 0; i < 7; i++)
		if (!get64(&c, &v[i]))
			return -EINVAL;
	/* A changed shard is indexed again (-ESTALE). */
	if (st != NULL) {
		struct stat was;

		memset(&was, 0, sizeof(was));
		was.st_size = (off_t)v[0];
		was.st_ino = (ino_t)v[1];
		was.st_dev = (dev_t)v[2];
		was.st_mtim.tv_sec = (time_t)v[3];
		was.st_mtim.tv_nsec = (long)v[4];
		was.st_ctim.tv_sec = (time_t)v[5];
		was.st_ctim.tv_nsec = (long)v[6];
		if (!ds_shard_same(&was, st))
			return -ESTALE;
	}
	if (!get32(&c, &status) || status > TS_READ ||
	    !get64(&c, &ix->status_off) || !get64(&c, &n))
		return -EINVAL;
	ix->status = status;
	/* Each member takes at least 29 bytes: n is bounded by the file. */
	if (n > c.left / 29)
		return -EINVAL;
	cap = n;
	if (cap > 0 && (ix->m = calloc((size_t)cap, sizeof(*ix->m))) == NULL)
		return -ENOMEM;
	for (; have < n; have++) {
		struct tar_member *m = &ix->m[have];
		uint32_t dl, rl;

		if (!get32(&c, &nl) || nl > c.left)
			goto bad;
		if ((m->name = malloc((size_t)nl + 1)) == NULL) {
			r = -ENOMEM;
			goto bad;
		}
		ix->n = have + 1;
		if (!get(&c, m->name, nl) || memchr(m->name, '\0', nl) != NULL)
			goto bad;
		m->name[nl] = '\0';
		if (!get(&c, &m->kind, 1) || m->kind >= TM_NKINDS ||
		    !get64(&c, &m->off) || !get64(&c, &m->size) ||
		    !get32(&c, &dl))
			goto bad;
		/* Offsets inside the shard as it was (size v[0]). */
		if (m->off > v[0] || m->size > v[0] - m->off)
			goto bad;
		if (dl != UINT32_MAX) {
			if (dl > TAR_LABEL_MAX || dl > c.left ||
			    (m->data = malloc((size_t)dl + 1)) == NULL ||
			    !get(&c, m->data, dl))
				goto bad;
			m->data[dl] = '\0';
			m->dlen = dl;
			m->has_data = true;
		}
		if (!get32(&c, &rl) || !get_records(&c, rl, m))
			goto bad;
	}
	ix->n = have;
	if (c.left != 0)
		goto bad;
	/* The feature said is the members' (a check of the encoder). */
	if ((features & IDX_F_DIGESTS) && !all_digests(ix))
		goto bad;
	return 0;
bad:
	ds_tar_index_free(ix);
	return r;
}

/* HEX.idx, the name of the kept index of the shard at path. */
static void
idx_name(const char *path, char out[70])
{
	uint8_t h[32];

	sha256(path, strlen(path), h);
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", h[i]);
	memcpy(out + 64, ".idx", 5);
}

/*
 * The kept index of the shard, if it matches st: 0 or -errno.  index_fd
 * is the checked index directory (cache_index_open); what is opened in it
 * is never followed through a link, never a FIFO that blocks.
 */
static int
idx_load(
    int index_fd, const char *path, const struct stat *st, struct tar_index *ix)
{
	char name[70];
	struct stat is;
	uint8_t *d;
	int fd, r;

	if (index_fd < 0)
		return -ENOENT;
	idx_name(path, name);
	if ((fd = openat(index_fd, name,
		 O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) <
	    0)
		return -errno;
	/* Ours, a plain file, of a sane size. */
	if (fstat(fd, &is) != 0 || !S_ISREG(is.st_mode) ||
	    is.st_uid != geteuid() || is.st_size > (off_t)1 << 34) {
		close(fd);
		return -EPERM;
	}
	if ((d = malloc(is.st_size ? (size_t)is.st_size : 1)) == NULL) {
		close(fd);
		return -ENOMEM;
	}
	r = ds_pread_all(fd, d, (size_t)is.st_size, 0);
	close(fd);
	if (r == 0)
		r = ds_tar_index_parse(d, (size_t)is.st_size, path, st, ix);
	free(d);
	return r;
}

/*
 * Keep the index in index_fd (a new file, then renamed over the old one);
 * failures only cost a rescan later.
 */
static void
idx_store(int index_fd, const char *path, const struct stat *st,
    const struct tar_index *ix)
{
	char name[70], tmp[96];
	uint8_t *d;
	size_t len;
	int fd;

	if (index_fd < 0)
		return;
	idx_name(path, name);
	if (ds_tar_index_encode(ix, path, st, &d, &len) != 0)
		return;
	snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", name, (long)getpid());
	(void)unlinkat(index_fd, tmp, 0); /* a killed run's */
	if ((fd = openat(index_fd, tmp,
		 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) >=
	    0) {
		size_t put = 0;

		while (put < len) {
			ssize_t k = write(fd, d + put, len - put);

			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0)
				break;
			put += (size_t)k;
		}
		if (close(fd) != 0 || put != len ||
		    renameat(index_fd, tmp, index_fd, name) != 0)
			(void)unlinkat(index_fd, tmp, 0);
	}
	free(d);
}

/*
 * Whether an index says something of the shard's bytes, so that it may be
 * kept under the shard's stat: complete, truncated or a bad header are
 * the same at every scan of the same bytes; a read error (EIO, a short
 * read) may be gone at the next, and its index is used but never kept.
 */
static bool
idx_keepable(const struct tar_index *ix)
{
	return ix->status != TS_READ;
}

/*
 * The index of the shard named path (whose stat is st): kept in index_fd,
 * else scan(arg, ix), then kept unless it met a read error.
 */
static int
index_with(const char *path, const struct stat *st, int index_fd,
    int (*scan)(void *arg, struct tar_index *ix, char *err, size_t errlen),
    void *arg, struct tar_index *ix, bool *scanned, char *err, size_t errlen)
{
	int r;

	*scanned = false;
	if (ds_tar_index_load(index_fd, path, st, ix) == 0)
		return 0;
	if ((r = scan(arg, ix, err, errlen)) != 0)
		return r;
	*scanned = true;
	ds_tar_index_keep(index_fd, path, st, ix);
	return 0;
}

int
ds_tar_index_load(
    int index_fd, const char *path, const struct stat *st, struct tar_index *ix)
{
	int r;

	if ((r = idx_load(index_fd, path, st, ix)) != 0)
		return r;
	if (idx_keepable(ix))
		return 0;
	/* Kept by an older feedfs: scanned again. */
	ds_tar_index_free(ix);
	return -EINVAL;
}

void
ds_tar_index_keep(int index_fd, const char *path, const struct stat *st,
    const struct tar_index *ix)
{
	if (idx_keepable(ix))
		idx_store(index_fd, path, st, ix);
}

struct local_scan {
	const char *path;
	uint64_t size;
};

static int
local_scan(void *arg, struct tar_index *ix, char *err, size_t errlen)
{
	const struct local_scan *ls = arg;
	int fd, r;

	if ((fd = open(ls->path, O_RDONLY | O_NOCTTY | O_NONBLOCK |
				     O_CLOEXEC)) < 0) {
		r = -errno;
		snprintf(err, errlen, "shard %s: %s", ls->path, strerror(-r));
		return r;
	}
	r = ds_tar_scan(fd, ls->size, ix);
	close(fd);
	if (r != 0)
		snprintf(err, errlen, "shard %s: %s", ls->path, strerror(-r));
	return r;
}

int
ds_tar_index_shard(const char *path, const struct stat *st, int index_fd,
    struct tar_index *ix, bool *scanned, char *err, size_t errlen)
{
	struct local_scan ls = {path, (uint64_t)st->st_size};

	return index_with(
	    path, st, index_fd, local_scan, &ls, ix, scanned, err, errlen);
}
