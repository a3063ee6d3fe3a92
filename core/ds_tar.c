/*
 * ds_tar.c - WebDataset tar shards read in place (see dataset.h).
 *
 * A shard is indexed from its 512-byte headers only, with pread: ustar
 * names (prefix + name), GNU long names ('L') and pax extended headers
 * ('x': path, size, GNU.sparse.*).  Member data is never read at index
 * time, except the small .cls and .json members a label needs.  Every
 * field is checked against what remains of the shard (tar_scan): a
 * header with a bad checksum or a member running past the end stops the
 * index there; what came before is kept.  The archive ends at two zero
 * blocks (or one the file ends after): a lone zero block before a header
 * is skipped, and an old-GNU sparse member's extension blocks are stepped
 * over, so that a walk never takes member data for the end.  The index of
 * each shard is kept in the index directory (a descriptor the caller
 * checked: index_fd), unless it met a read error (which may be gone at the
 * next scan: idx_keepable), and read back through one checking cursor
 * (idx_parse).
 *
 * Nothing here creates a file named by a member: names only ever label
 * samples.  Members that are not plain files (links, devices, FIFOs,
 * sparse files) and unsafe names (absolute, "..") become samples that fail
 * when read, so that on_error decides, and the log says why.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "core/config.h"
#include "core/ds_int.h"
#include "core/log.h"

#define TAR_BLOCK 512
/* A pax header or GNU long name longer than this is refused (its member
 * becomes a bad sample); real ones are a few hundred bytes. */
#define TAR_META_MAX (1u << 20)
/* .cls and .json members up to this size are read for labels. */
#define TAR_LABEL_MAX (64u << 10)
#define MAX_LABEL ((1 << 24) - 1)
#define IDX_MAGIC "FFTARIX1"

/* See ds_int.h: what a member is, or why it cannot be served. */
static const char *const tm_why[] = {
    [TM_FILE] = NULL,
    [TM_SYMLINK] = "a symbolic link member (not followed)",
    [TM_HARDLINK] = "a hard link member (not followed)",
    [TM_DEVICE] = "a device or FIFO member",
    [TM_SPARSE] = "a sparse member (not supported)",
    [TM_BADNAME] = "an absolute or '..' member name",
    [TM_PASTEND] = "member data runs past the end of the shard",
    [TM_BIGMETA] = "its pax header or long name is larger than 1 MiB",
    [TM_BADTYPE] = "a member of an unsupported type",
};

const char *
ds_tm_why(unsigned kind)
{
	return kind < sizeof(tm_why) / sizeof(tm_why[0]) ? tm_why[kind]
							 : "bad member";
}

static const char *const scan_why[] = {
    [TS_COMPLETE] = NULL,
    [TS_TRUNCATED] = "truncated",
    [TS_BADHEADER] = "a header with a bad checksum or field",
    [TS_READ] = "a read error",
};

void
ds_tar_index_free(struct tar_index *ix)
{
	for (size_t i = 0; i < ix->n; i++) {
		free(ix->m[i].name);
		free(ix->m[i].data);
	}
	free(ix->m);
	memset(ix, 0, sizeof(*ix));
}

/* ---- the header reader ------------------------------------------------ */

/*
 * An octal field (leading spaces, digits, then NUL or spaces) or GNU's
 * base-256 (high bit of the first byte).  -1 when it does not parse or
 * exceeds INT64_MAX.
 */
static int64_t
tar_num(const uint8_t *f, size_t len)
{
	uint64_t v = 0;
	size_t i = 0;

	if (f[0] & 0x80) {
		if (f[0] != 0x80) /* negative, or more than 63 bits */
			return -1;
		for (i = 1; i < len; i++) {
			if (v >> 55)
				return -1;
			v = v << 8 | f[i];
		}
		return v > INT64_MAX ? -1 : (int64_t)v;
	}
	while (i < len && f[i] == ' ')
		i++;
	if (i == len || f[i] < '0' || f[i] > '7')
		return -1;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 60)
			return -1;
		v = v << 3 | (uint64_t)(f[i] - '0');
	}
	for (; i < len; i++)
		if (f[i] != ' ' && f[i] != '\0')
			return -1;
	return (int64_t)v;
}

static bool
tar_checksum_ok(const uint8_t *h)
{
	int64_t want = tar_num(h + 148, 8);
	uint64_t u = 0;
	int64_t s = 0;

	for (int i = 0; i < TAR_BLOCK; i++) {
		uint8_t b = (i >= 148 && i < 156) ? ' ' : h[i];

		u += b;
		s += (int8_t)b; /* some old tars summed signed bytes */
	}
	return want >= 0 && ((uint64_t)want == u || want == s);
}

/* strndup of a NUL-padded field. */
static char *
field_dup(const uint8_t *f, size_t len)
{
	size_t n = strnlen((const char *)f, len);

	return strndup((const char *)f, n);
}

/* What a pax header says that we use. */
struct pax {
	char *path;
	int64_t size; /* -1: not given */
	bool sparse;
};

/*
 * Parse pax records "LEN KEY=VALUE\n" in d[0..n): each LEN is checked
 * against what remains.  0, or -EINVAL for a malformed header.
 */
static int
pax_parse(const char *d, size_t n, struct pax *px)
{
	size_t at = 0;

	while (at < n) {
		size_t len = 0, i = at, klen;
		const char *key, *val, *eq;

		while (i < n && d[i] >= '0' && d[i] <= '9' && i - at < 12)
			len = len * 10 + (size_t)(d[i++] - '0');
		if (i == at || i >= n || d[i] != ' ' || len < i - at + 2 ||
		    len > n - at || d[at + len - 1] != '\n')
			return -EINVAL;
		key = d + i + 1;
		if ((eq = memchr(key, '=', (size_t)(d + at + len - 1 - key))) ==
		    NULL)
			return -EINVAL;
		klen = (size_t)(eq - key);
		val = eq + 1;
		size_t vlen = (size_t)(d + at + len - 1 - val);

		if (klen == 4 && memcmp(key, "path", 4) == 0) {
			free(px->path);
			if (memchr(val, '\0', vlen) != NULL ||
			    (px->path = strndup(val, vlen)) == NULL)
				return -EINVAL;
		} else if (klen == 4 && memcmp(key, "size", 4) == 0) {
			int64_t v = 0;

			if (vlen == 0 || vlen > 18)
				return -EINVAL;
			for (size_t k = 0; k < vlen; k++) {
				if (val[k] < '0' || val[k] > '9')
					return -EINVAL;
				v = v * 10 + (val[k] - '0');
			}
			px->size = v;
		} else if (klen > 11 && memcmp(key, "GNU.sparse.", 11) == 0)
			px->sparse = true;
		at += len;
	}
	return 0;
}

/* Append a member to ix. */
static int
ix_add(struct tar_index *ix, char *name, uint8_t kind, uint64_t off,
    uint64_t size, size_t *cap)
{
	struct tar_member *nm;

	if (ix->n == *cap) {
		size_t c = *cap ? *cap * 2 : 256;

		if ((nm = realloc(ix->m, c * sizeof(*nm))) == NULL)
			return -ENOMEM;
		ix->m = nm;
		*cap = c;
	}
	nm = &ix->m[ix->n++];
	memset(nm, 0, sizeof(*nm));
	nm->name = name; /* transferred */
	nm->kind = kind;
	nm->off = off;
	nm->size = size;
	return 0;
}

/* Is name absolute, or has it a ".." component? */
static bool
unsafe_name(const char *name)
{
	return name[0] == '/' || ds_has_dotdot(name);
}

/* The extension of a member name as WebDataset sees it: after the first
 * dot of the last component (NULL: no key, not part of a sample). */
static const char *
member_ext(const char *name, size_t *keylen)
{
	const char *base = strrchr(name, '/'), *dot;

	base = base ? base + 1 : name;
	if ((dot = strchr(base, '.')) == NULL || dot == base)
		return NULL;
	*keylen = (size_t)(dot - name);
	return dot + 1;
}

static bool
is_label_ext(const char *ext)
{
	return strcmp(ext, "cls") == 0 || strcmp(ext, "json") == 0;
}

/*
 * Step *data over the extension blocks of an old GNU sparse header;
 * ix->status says so when the shard ends or cannot be read first.
 */
static void
skip_sparse_ext(int fd, uint64_t fsize, uint64_t *data, struct tar_index *ix)
{
	uint8_t x[TAR_BLOCK];

	do {
		if (fsize - *data < TAR_BLOCK) {
			ix->status = TS_TRUNCATED;
			return;
		}
		if (ds_pread_all(fd, x, TAR_BLOCK, *data) != 0) {
			ix->status = TS_READ;
			return;
		}
		*data += TAR_BLOCK;
	} while (x[504] != 0);
}

int
ds_tar_scan(int fd, uint64_t fsize, struct tar_index *ix)
{
	uint8_t h[TAR_BLOCK];
	uint64_t off = 0;
	size_t cap = 0;
	struct pax px = {NULL, -1, false};
	char *longname = NULL;
	uint8_t pending = TM_FILE; /* a meta header refused for the next */
	int r = 0;

	memset(ix, 0, sizeof(*ix));
	ix->status = TS_COMPLETE;
	for (;;) {
		uint64_t data, end, next;
		int64_t size;
		uint8_t type, kind;
		char *name;
		bool zero = true;

		if (off == fsize)
			break; /* no end-of-archive blocks: still whole */
		if (fsize - off < TAR_BLOCK) {
			ix->status = TS_TRUNCATED;
			break;
		}
		if ((r = ds_pread_all(fd, h, TAR_BLOCK, off)) != 0) {
			ix->status = TS_READ;
			r = 0;
			break;
		}
		for (int i = 0; i < TAR_BLOCK && zero; i++)
			zero = h[i] == 0;
		if (zero) {
			/*
			 * The end is two zero blocks, or one that the file
			 * ends after.  A lone zero block before a header is
			 * skipped (GNU tar -i; plain GNU tar warns "A lone
			 * zero block"): a walk that lands inside member data
			 * must not take it for the end and call the index
			 * whole.
			 */
			if (fsize - off < 2 * TAR_BLOCK)
				break;
			if ((r = ds_pread_all(
				 fd, h, TAR_BLOCK, off + TAR_BLOCK)) != 0) {
				ix->status = TS_READ;
				r = 0;
				break;
			}
			for (int i = 0; i < TAR_BLOCK && zero; i++)
				zero = h[i] == 0;
			if (zero)
				break; /* end of archive */
			off += TAR_BLOCK;
			continue;
		}
		if (!tar_checksum_ok(h) || (size = tar_num(h + 124, 12)) < 0) {
			ix->status = TS_BADHEADER;
			break;
		}
		type = h[156];
		if (px.size >= 0 && type != 'x' && type != 'g' && type != 'L' &&
		    type != 'K')
			size = px.size;
		data = off + TAR_BLOCK;
		if (type == 'S' && h[482] != 0) {
			/*
			 * Old GNU sparse with more than 4 holes: extension
			 * blocks (21 more entries each, byte 504 saying
			 * whether another follows) come before the data.
			 */
			skip_sparse_ext(fd, fsize, &data, ix);
			if (ix->status != TS_COMPLETE)
				break;
		}
		end = data + (uint64_t)size;
		if ((uint64_t)size > fsize || end > fsize) {
			/* Past the end: record a file member, then stop. */
			ix->status = TS_TRUNCATED;
			if (type == '0' || type == '\0' || type == '7') {
				name = px.path	  ? strdup(px.path)
				       : longname ? strdup(longname)
						  : field_dup(h, 100);
				if (name == NULL ||
				    (r = ix_add(ix, name, TM_PASTEND, data, 0,
					 &cap)) != 0) {
					free(name);
					r = -ENOMEM;
				}
			}
			break;
		}
		next = end + ((TAR_BLOCK - end % TAR_BLOCK) % TAR_BLOCK);
		if (type == 'x' || type == 'L') {
			/* Metadata for the next header. */
			char *d;

			if ((uint64_t)size > TAR_META_MAX) {
				pending = TM_BIGMETA;
				off = next;
				continue;
			}
			if ((d = malloc((size_t)size + 1)) == NULL) {
				r = -ENOMEM;
				break;
			}
			if (ds_pread_all(fd, d, (size_t)size, data) != 0) {
				free(d);
				ix->status = TS_READ;
				break;
			}
			d[size] = '\0';
			if (type == 'L') {
				free(longname);
				longname = d;
			} else {
				if (pax_parse(d, (size_t)size, &px) != 0)
					pending = TM_BIGMETA;
				free(d);
			}
			off = next;
			continue;
		}
		if (type == 'g' || type == 'K' || type == 'V' || type == '5' ||
		    type == 'D') {
			/* Global pax, long link name, volume label, directory:
			 * nothing of a sample.  'K' applies to the next link
			 * member only, which is refused anyway. */
			if (type == '5' || type == 'D')
				goto reset;
			off = next;
			continue;
		}
		if (px.path != NULL)
			name = strdup(px.path);
		else if (longname != NULL)
			name = strdup(longname);
		else if (memcmp(h + 257, "ustar", 5) == 0 && h[345] != '\0') {
			char *pre = field_dup(h + 345, 155),
			     *nm = field_dup(h, 100);

			name = NULL;
			if (pre != NULL && nm != NULL &&
			    asprintf(&name, "%s/%s", pre, nm) < 0)
				name = NULL;
			free(pre);
			free(nm);
		} else
			name = field_dup(h, 100);
		if (name == NULL) {
			r = -ENOMEM;
			break;
		}
		switch (type) {
		case '0':
		case '\0':
		case '7':
			kind = px.sparse ? TM_SPARSE : TM_FILE;
			break;
		case '1':
			kind = TM_HARDLINK;
			break;
		case '2':
			kind = TM_SYMLINK;
			break;
		case '3':
		case '4':
		case '6':
			kind = TM_DEVICE;
			break;
		case 'S':
			kind = TM_SPARSE;
			break;
		default:
			kind = TM_BADTYPE;
			break;
		}
		if (pending != TM_FILE)
			kind = pending;
		if (kind == TM_FILE && unsafe_name(name))
			kind = TM_BADNAME;
		if ((r = ix_add(ix, name, kind, data, (uint64_t)size, &cap)) !=
		    0) {
			free(name);
			break;
		}
		/* The label members' text, while we are here. */
		if (kind == TM_FILE && (uint64_t)size <= TAR_LABEL_MAX) {
			size_t kl;
			const char *ext = member_ext(name, &kl);
			struct tar_member *m = &ix->m[ix->n - 1];

			if (ext != NULL && is_label_ext(ext)) {
				if ((m->data = malloc((size_t)size + 1)) ==
				    NULL) {
					r = -ENOMEM;
					break;
				}
				if (ds_pread_all(
					fd, m->data, (size_t)size, data) != 0) {
					free(m->data);
					m->data = NULL;
					ix->status = TS_READ;
					break;
				}
				m->data[size] = '\0';
				m->dlen = (uint32_t)size;
				m->has_data = true;
			}
		}
	reset:
		free(px.path);
		px.path = NULL;
		px.size = -1;
		px.sparse = false;
		free(longname);
		longname = NULL;
		pending = TM_FILE;
		off = next;
	}
	ix->status_off = off;
	free(px.path);
	free(longname);
	if (r != 0)
		ds_tar_index_free(ix);
	return r;
}

/* ---- the kept index --------------------------------------------------- */

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
 * Whether a shard is the one that was indexed: the same size, inode,
 * device, mtime and ctime.  One test for the kept index (at open) and for
 * every read (ds_member_read): a shard rewritten in place with its size
 * and mtime put back (rsync --inplace -t) has a new ctime, and its
 * members may lie elsewhere.
 */
static bool
shard_same(const struct stat *a, const struct stat *b)
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

int
ds_tar_index_encode(const struct tar_index *ix, const struct stat *st,
    uint8_t **out, size_t *len)
{
	struct wbuf b = {0};
	uint8_t sum[32];

	wput(&b, IDX_MAGIC, 8);
	wput_stat(&b, st);
	wput32(&b, ix->status);
	wput64(&b, ix->status_off);
	wput64(&b, ix->n);
	for (size_t i = 0; i < ix->n; i++) {
		const struct tar_member *m = &ix->m[i];
		size_t nl = strlen(m->name);

		wput32(&b, (uint32_t)nl);
		wput(&b, m->name, nl);
		wput(&b, &m->kind, 1);
		wput64(&b, m->off);
		wput64(&b, m->size);
		wput32(&b, m->has_data ? m->dlen : UINT32_MAX);
		if (m->has_data)
			wput(&b, m->data, m->dlen);
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

int
ds_tar_index_parse(
    const uint8_t *d, size_t len, const struct stat *st, struct tar_index *ix)
{
	struct cur c;
	uint8_t sum[32], magic[8];
	uint64_t v[7], n, cap;
	uint32_t status;
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
	if (!get(&c, magic, 8) || memcmp(magic, IDX_MAGIC, 8) != 0)
		return -EINVAL;
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
		if (!shard_same(&was, st))
			return -ESTALE;
	}
	if (!get32(&c, &status) || status > TS_READ ||
	    !get64(&c, &ix->status_off) || !get64(&c, &n))
		return -EINVAL;
	ix->status = status;
	/* Each member takes at least 25 bytes: n is bounded by the file. */
	if (n > c.left / 25)
		return -EINVAL;
	cap = n;
	if (cap > 0 && (ix->m = calloc((size_t)cap, sizeof(*ix->m))) == NULL)
		return -ENOMEM;
	for (; have < n; have++) {
		struct tar_member *m = &ix->m[have];
		uint32_t nl, dl;

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
	}
	ix->n = have;
	if (c.left != 0)
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
		r = ds_tar_index_parse(d, (size_t)is.st_size, st, ix);
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
	if (ds_tar_index_encode(ix, st, &d, &len) != 0)
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

/* ---- samples ----------------------------------------------------------- */

/* A member of a shard's index, by key then extension then offset. */
struct mref {
	const struct tar_member *m;
	size_t keylen;
	const char *ext;
};

static int
by_key(const void *a, const void *b)
{
	const struct mref *x = a, *y = b;
	size_t n = x->keylen < y->keylen ? x->keylen : y->keylen;
	int c = memcmp(x->m->name, y->m->name, n);

	if (c != 0)
		return c;
	if (x->keylen != y->keylen)
		return x->keylen < y->keylen ? -1 : 1;
	if ((c = strcmp(x->ext, y->ext)) != 0)
		return c;
	return x->m->off < y->m->off ? -1 : x->m->off > y->m->off;
}

static bool
is_image_ext(const char *ext)
{
	return strcasecmp(ext, "jpg") == 0 || strcasecmp(ext, "jpeg") == 0 ||
	       strcasecmp(ext, "png") == 0 || strcasecmp(ext, "webp") == 0;
}

/* An integer label in s (spaces around allowed): 0 or -EINVAL. */
static int
parse_int(const char *s, size_t n, int64_t *v)
{
	size_t i = 0;
	bool neg = false;
	int64_t x = 0;

	while (i < n && isspace((unsigned char)s[i]))
		i++;
	if (i < n && (s[i] == '-' || s[i] == '+'))
		neg = s[i++] == '-';
	if (i == n || !isdigit((unsigned char)s[i]))
		return -EINVAL;
	for (; i < n && isdigit((unsigned char)s[i]); i++) {
		if (x > MAX_LABEL)
			return -ERANGE;
		x = x * 10 + (s[i] - '0');
	}
	while (i < n && isspace((unsigned char)s[i]))
		i++;
	if (i != n)
		return -EINVAL;
	if (neg || x > MAX_LABEL)
		return -ERANGE;
	*v = x;
	return 0;
}

/* JSON: skip a string at *i (on its quote); false if malformed. */
static bool
js_string(const char *s, size_t n, size_t *i, size_t *start, size_t *end)
{
	size_t k = *i + 1;

	*start = k;
	for (; k < n && s[k] != '"'; k++)
		if (s[k] == '\\' && ++k >= n)
			return false;
	if (k >= n)
		return false;
	*end = k;
	*i = k + 1;
	return true;
}

static void
js_ws(const char *s, size_t n, size_t *i)
{
	while (*i < n && isspace((unsigned char)s[*i]))
		(*i)++;
}

/* Skip a value (any type, nesting counted, strings respected). */
static bool
js_skip(const char *s, size_t n, size_t *i)
{
	size_t depth = 0, a, b;

	js_ws(s, n, i);
	do {
		if (*i >= n)
			return false;
		switch (s[*i]) {
		case '"':
			if (!js_string(s, n, i, &a, &b))
				return false;
			break;
		case '{':
		case '[':
			depth++;
			(*i)++;
			break;
		case '}':
		case ']':
			if (depth == 0)
				return false;
			depth--;
			(*i)++;
			break;
		default:
			if (depth == 0) {
				while (*i < n && s[*i] != ',' && s[*i] != '}' &&
				       s[*i] != ']')
					(*i)++;
				return true;
			}
			(*i)++;
		}
	} while (depth > 0);
	return true;
}

/*
 * The integer field key of the top-level JSON object in s (a number, or a
 * string holding one).  0, -ENOENT (no such key), -EINVAL (malformed or
 * not an integer), -ERANGE.
 */
static int
json_label(const char *s, size_t n, const char *key, int64_t *v)
{
	size_t i = 0, a, b, klen = strlen(key);

	js_ws(s, n, &i);
	if (i >= n || s[i++] != '{')
		return -EINVAL;
	for (;;) {
		js_ws(s, n, &i);
		if (i < n && s[i] == '}')
			return -ENOENT;
		if (i >= n || s[i] != '"' || !js_string(s, n, &i, &a, &b))
			return -EINVAL;
		js_ws(s, n, &i);
		if (i >= n || s[i++] != ':')
			return -EINVAL;
		js_ws(s, n, &i);
		if (b - a == klen && memcmp(s + a, key, klen) == 0) {
			size_t e = i;

			if (i < n && s[i] == '"') {
				if (!js_string(s, n, &e, &a, &b))
					return -EINVAL;
				return parse_int(s + a, b - a, v);
			}
			while (e < n && s[e] != ',' && s[e] != '}')
				e++;
			return parse_int(s + i, e - i, v);
		}
		if (!js_skip(s, n, &i))
			return -EINVAL;
		js_ws(s, n, &i);
		if (i < n && s[i] == ',') {
			i++;
			continue;
		}
		return i < n && s[i] == '}' ? -ENOENT : -EINVAL;
	}
}

enum label_mode { LBL_NONE, LBL_CLS, LBL_JSON };

/* A sample's label from its group's .cls or .json member, or why not. */
static const char *
group_label(const struct mref *g, size_t n, enum label_mode mode,
    const char *jkey, int64_t *label)
{
	const struct tar_member *lm = NULL;
	const char *want = mode == LBL_CLS ? "cls" : "json";
	size_t count = 0;
	int r;

	*label = -1;
	if (mode == LBL_NONE)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strcmp(g[i].ext, want) == 0) {
			lm = g[i].m;
			count++;
		}
	if (count == 0)
		return mode == LBL_CLS ? "no .cls member" : "no .json member";
	if (count > 1)
		return mode == LBL_CLS ? "duplicate .cls members"
				       : "duplicate .json members";
	if (lm->kind != TM_FILE)
		return ds_tm_why(lm->kind);
	if (!lm->has_data)
		return "label member larger than 64 KiB";
	if (mode == LBL_CLS)
		r = parse_int(lm->data, lm->dlen, label);
	else
		r = json_label(lm->data, lm->dlen, jkey, label);
	if (r == -ENOENT)
		return "the .json member has no such key";
	if (r == -ERANGE)
		return "label out of range (0 to 16777215)";
	if (r != 0)
		return mode == LBL_CLS ? "a .cls member that is not an integer"
				       : "a .json label that is not an integer";
	return NULL;
}

/* Samples of one shard's index appended to *v. */
static int
shard_samples(const struct tar_index *ix, uint32_t shard, const char *rel,
    enum label_mode mode, const char *jkey, struct ds_sample **v, size_t *n,
    size_t *cap)
{
	struct mref *g;
	size_t k = 0;
	int r = 0;

	if (ix->n == 0)
		return 0;
	if ((g = calloc(ix->n, sizeof(*g))) == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < ix->n; i++) {
		size_t kl;
		const char *ext = member_ext(ix->m[i].name, &kl);

		if (ext == NULL)
			continue;
		g[k].m = &ix->m[i];
		g[k].keylen = kl;
		g[k].ext = ext;
		k++;
	}
	qsort(g, k, sizeof(*g), by_key);
	for (size_t a = 0, b; a < k; a = b) {
		const struct tar_member *img = NULL;
		size_t nimg = 0;
		const char *bad;
		int64_t label;
		struct ds_sample *s;

		for (b = a + 1;
		     b < k && g[b].keylen == g[a].keylen &&
		     memcmp(g[b].m->name, g[a].m->name, g[a].keylen) == 0;
		     b++)
			;
		for (size_t i = a; i < b; i++)
			if (is_image_ext(g[i].ext)) {
				if (img == NULL)
					img = g[i].m;
				nimg++;
			}
		if (img == NULL)
			continue; /* no image: not a sample */
		bad = group_label(g + a, b - a, mode, jkey, &label);
		if (img->kind != TM_FILE)
			bad = ds_tm_why(img->kind);
		else if (nimg > 1)
			bad = "duplicate key: more than one image member";
		if (*n == *cap) {
			size_t c = *cap ? *cap * 2 : 1024;
			struct ds_sample *nv = realloc(*v, c * sizeof(*nv));

			if (nv == NULL) {
				r = -ENOMEM;
				break;
			}
			*v = nv;
			*cap = c;
		}
		s = &(*v)[*n];
		memset(s, 0, sizeof(*s));
		if (asprintf(&s->path, "%s:%s", rel, img->name) < 0) {
			r = -ENOMEM;
			break;
		}
		(*n)++;
		s->label = bad ? -1 : label;
		s->shard = shard;
		s->off = img->off;
		s->size = img->size;
		s->bad = bad;
	}
	free(g);
	return r;
}

/* ---- opening ----------------------------------------------------------- */

static bool
has_glob(const char *s)
{
	return strpbrk(s, "*?[") != NULL;
}

/* Paths from a list file (relative ones from its directory). */
static int
read_list(const char *list, char ***out, size_t *n, char *err, size_t errlen)
{
	FILE *f = fopen(list, "r");
	char *line = NULL, *dir, *slash, **v = NULL, **nv;
	size_t linecap = 0, cap = 0, lineno = 0;
	ssize_t len;
	int r = 0;

	*n = 0;
	if (f == NULL) {
		r = -errno;
		snprintf(err, errlen, "shards %s: %s", list, strerror(-r));
		return r;
	}
	if ((dir = strdup(list)) == NULL) {
		fclose(f);
		return -ENOMEM;
	}
	if ((slash = strrchr(dir, '/')) != NULL)
		*(slash == dir ? slash + 1 : slash) = '\0';
	else
		strcpy(dir, ".");
	while ((len = getline(&line, &linecap, f)) >= 0) {
		char *p = line, *e;

		lineno++;
		while (len > 0 && isspace((unsigned char)line[len - 1]))
			line[--len] = '\0';
		while (isspace((unsigned char)*p))
			p++;
		if (*p == '\0' || *p == '#')
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 64;
			if ((nv = realloc(v, cap * sizeof(*v))) == NULL) {
				r = -ENOMEM;
				break;
			}
			v = nv;
		}
		if (*p == '/')
			e = strdup(p);
		else if (asprintf(&e, "%s/%s", dir, p) < 0)
			e = NULL;
		if (e == NULL) {
			r = -ENOMEM;
			break;
		}
		v[(*n)++] = e;
	}
	if (r == 0 && ferror(f)) {
		r = -EIO;
		snprintf(err, errlen, "shards %s: %s", list, strerror(EIO));
	}
	if (r == 0 && *n == 0) {
		r = -ENOENT;
		snprintf(err, errlen, "shards %s: lists no shard", list);
	}
	free(line);
	free(dir);
	fclose(f);
	if (r != 0) {
		for (size_t i = 0; i < *n; i++)
			free(v[i]);
		free(v);
		*n = 0;
		return r;
	}
	*out = v;
	return 0;
}

static int
by_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
by_spath(const void *a, const void *b)
{
	return strcmp(((const struct ds_sample *)a)->path,
	    ((const struct ds_sample *)b)->path);
}

static int
by_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* The shard paths (absolute, real, sorted, unique) of spec. */
static int
shard_paths(const char *spec, char ***out, size_t *n, char *err, size_t errlen)
{
	char **v = NULL;
	size_t k = 0;
	int r;

	if (has_glob(spec) ||
	    (strlen(spec) > 4 &&
		strcmp(spec + strlen(spec) - 4, ".tar") == 0)) {
		glob_t gl;

		r = glob(spec, GLOB_ERR, NULL, &gl);
		if (r == GLOB_NOMATCH || (r == 0 && gl.gl_pathc == 0)) {
			globfree(&gl);
			snprintf(
			    err, errlen, "shards %s: no file matches", spec);
			return -ENOENT;
		}
		if (r != 0) {
			globfree(&gl);
			snprintf(
			    err, errlen, "shards %s: cannot be read", spec);
			return -EIO;
		}
		if ((v = calloc(gl.gl_pathc, sizeof(*v))) == NULL) {
			globfree(&gl);
			return -ENOMEM;
		}
		for (; k < gl.gl_pathc; k++)
			if ((v[k] = strdup(gl.gl_pathv[k])) == NULL) {
				globfree(&gl);
				*n = k;
				r = -ENOMEM;
				goto fail;
			}
		globfree(&gl);
	} else if ((r = read_list(spec, &v, &k, err, errlen)) != 0)
		return r;
	*n = k;
	for (size_t i = 0; i < k; i++) {
		char *res = realpath(v[i], NULL);

		if (res == NULL) {
			r = -errno;
			snprintf(
			    err, errlen, "shard %s: %s", v[i], strerror(-r));
			goto fail;
		}
		free(v[i]);
		v[i] = res;
	}
	qsort(v, k, sizeof(*v), by_str);
	/* unique */
	size_t u = 0;
	for (size_t i = 0; i < k; i++) {
		if (u > 0 && strcmp(v[u - 1], v[i]) == 0) {
			free(v[i]);
			continue;
		}
		v[u++] = v[i];
	}
	*n = u;
	*out = v;
	return 0;
fail:
	for (size_t i = 0; i < *n; i++)
		free(v[i]);
	free(v);
	*n = 0;
	return r;
}

/* The longest directory that holds every path (sorted): "/" at least. */
static char *
common_dir(char **v, size_t n)
{
	size_t len = strlen(v[0]);
	char *d;

	for (size_t i = 1; i < n; i++) {
		size_t k = 0;

		while (k < len && v[i][k] == v[0][k])
			k++;
		len = k;
	}
	while (len > 0 && v[0][len - 1] != '/')
		len--;
	if (len > 1)
		len--; /* the slash */
	if ((d = strndup(v[0], len ? len : 1)) != NULL && len == 0)
		d[0] = '/';
	return d;
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
 * Index one shard: the kept index, else a scan (then kept, unless it met
 * a read error).
 */
static int
index_shard(const char *path, const struct stat *st, int index_fd,
    struct tar_index *ix, bool *scanned, char *err, size_t errlen)
{
	int fd, r;

	*scanned = false;
	if (idx_load(index_fd, path, st, ix) == 0) {
		if (idx_keepable(ix))
			return 0;
		/* Kept by an older feedfs: scanned again. */
		ds_tar_index_free(ix);
	}
	if ((fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)) <
	    0) {
		r = -errno;
		snprintf(err, errlen, "shard %s: %s", path, strerror(-r));
		return r;
	}
	r = ds_tar_scan(fd, (uint64_t)st->st_size, ix);
	close(fd);
	if (r != 0) {
		snprintf(err, errlen, "shard %s: %s", path, strerror(-r));
		return r;
	}
	*scanned = true;
	if (idx_keepable(ix))
		idx_store(index_fd, path, st, ix);
	return 0;
}

/* Log what the index of a shard says is wrong with it, once per open. */
static void
log_shard(const char *path, const struct tar_index *ix)
{
	size_t nbad = 0;
	const struct tar_member *first = NULL;

	if (ix->status != TS_COMPLETE)
		log_warn("shard %s: %s at offset %" PRIu64
			 ": members from there on are not indexed%s",
		    path, scan_why[ix->status], ix->status_off,
		    ix->status == TS_READ
			? " (the index is not kept: the next mount reads the "
			  "shard again)"
			: "");
	for (size_t i = 0; i < ix->n; i++)
		if (ix->m[i].kind != TM_FILE && nbad++ == 0)
			first = &ix->m[i];
	if (nbad > 0)
		log_warn("shard %s: %zu member(s) cannot be served, the first "
			 "'%s': %s",
		    path, nbad, first->name, ds_tm_why(first->kind));
}

int
ds_open_shards(const char *name, const char *shards, const char *label,
    int index_fd, ds_progress_fn progress, void *arg, struct dataset **out,
    char *err, size_t errlen)
{
	struct dataset *ds;
	enum label_mode mode;
	const char *jkey = NULL;
	char **paths = NULL;
	size_t np = 0, cap = 0, rootlen;
	int64_t *lv = NULL;
	int r;

	if (label == NULL || strcmp(label, "cls") == 0)
		mode = LBL_CLS;
	else if (strcmp(label, "none") == 0)
		mode = LBL_NONE;
	else if (strncmp(label, "json:", 5) == 0 && label[5] != '\0') {
		mode = LBL_JSON;
		jkey = label + 5;
	} else {
		snprintf(err, errlen,
		    "label '%s': expected cls, json:KEY or none", label);
		return -EINVAL;
	}
	if ((ds = calloc(1, sizeof(*ds))) == NULL ||
	    (ds->name = strdup(name ? name : "")) == NULL) {
		free(ds);
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	if ((r = shard_paths(shards, &paths, &np, err, errlen)) != 0)
		goto fail;
	if ((ds->shards = calloc(np, sizeof(*ds->shards))) == NULL ||
	    (ds->root = common_dir(paths, np)) == NULL) {
		r = -ENOMEM;
		goto fail;
	}
	rootlen = strcmp(ds->root, "/") == 0 ? 1 : strlen(ds->root) + 1;
	for (size_t i = 0; i < np; i++) {
		struct ds_shard *sh = &ds->shards[ds->nshards];
		struct tar_index ix;
		bool scanned;

		sh->path = paths[i]; /* transferred */
		paths[i] = NULL;
		ds->nshards++;
		if (stat(sh->path, &sh->st) != 0 || !S_ISREG(sh->st.st_mode)) {
			r = errno ? -errno : -EINVAL;
			snprintf(err, errlen, "shard %s: %s", sh->path,
			    S_ISREG(sh->st.st_mode) ? strerror(-r)
						    : "not a regular file");
			r = -EINVAL;
			goto fail;
		}
		if ((r = index_shard(sh->path, &sh->st, index_fd, &ix, &scanned,
			 err, errlen)) != 0)
			goto fail;
		log_shard(sh->path, &ix);
		r = shard_samples(&ix, (uint32_t)i, sh->path + rootlen, mode,
		    jkey, &ds->samples, &ds->n, &cap);
		ds_tar_index_free(&ix);
		if (r != 0)
			goto fail;
		if (progress != NULL)
			progress(ds->n, arg);
	}
	if (ds->n == 0) {
		snprintf(err, errlen,
		    "shards %s: no samples (members named "
		    "KEY.jpg, KEY.jpeg, KEY.png or KEY.webp)",
		    shards);
		r = -ENOENT;
		goto fail;
	}
	qsort(ds->samples, ds->n, sizeof(*ds->samples), by_spath);
	/* The classes: the distinct labels, in increasing order. */
	if (mode != LBL_NONE) {
		size_t k = 0;

		if ((lv = malloc(ds->n * sizeof(*lv))) == NULL) {
			r = -ENOMEM;
			goto fail;
		}
		for (size_t i = 0; i < ds->n; i++)
			if (ds->samples[i].bad == NULL)
				lv[k++] = ds->samples[i].label;
		qsort(lv, k, sizeof(*lv), by_i64);
		if ((ds->classes = calloc(k ? k : 1, sizeof(char *))) == NULL) {
			r = -ENOMEM;
			goto fail;
		}
		for (size_t i = 0; i < k; i++) {
			if (i > 0 && lv[i] == lv[i - 1])
				continue;
			if (asprintf(&ds->classes[ds->nclasses], "%" PRId64,
				lv[i]) < 0) {
				r = -ENOMEM;
				goto fail;
			}
			ds->nclasses++;
		}
	}
	free(lv);
	free(paths);
	*out = ds;
	return 0;
fail:
	if (r == -ENOMEM)
		snprintf(err, errlen, "%s", strerror(ENOMEM));
	for (size_t i = 0; i < np; i++)
		free(paths[i]);
	free(paths);
	free(lv);
	ds_free(ds);
	return r;
}

int
ds_member_read(const struct dataset *ds, size_t id, size_t max, uint8_t **out,
    size_t *len, struct stat *st, char *err, size_t errlen)
{
	const struct ds_sample *sm;
	const struct ds_shard *sh;
	struct stat sb;
	uint8_t *buf;
	int fd, r;

	if (id >= ds->n || ds->nshards == 0) {
		snprintf(err, errlen, "%s: no sample %zu", ds->root, id);
		return -EINVAL;
	}
	sm = &ds->samples[id];
	sh = &ds->shards[sm->shard];
	if (sm->bad != NULL) {
		snprintf(err, errlen, "%s/%s: %s", ds->root, sm->path, sm->bad);
		return -EIO;
	}
	if ((fd = open(
		 sh->path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)) < 0) {
		r = -errno;
		snprintf(
		    err, errlen, "%s/%s: %s", ds->root, sm->path, strerror(-r));
		return r;
	}
	if (fstat(fd, &sb) != 0) {
		r = -errno;
		goto out_err;
	}
	if (!S_ISREG(sb.st_mode) || !shard_same(&sb, &sh->st)) {
		close(fd);
		snprintf(err, errlen,
		    "%s/%s: the shard changed since it was indexed "
		    "(remount to index it again)",
		    ds->root, sm->path);
		return -EIO;
	}
	if (sm->size > max) {
		close(fd);
		snprintf(err, errlen,
		    "%s/%s: member too large (%" PRIu64 " bytes)", ds->root,
		    sm->path, sm->size);
		return -EFBIG;
	}
	if ((buf = malloc(sm->size ? (size_t)sm->size : 1)) == NULL) {
		r = -ENOMEM;
		goto out_err;
	}
	if ((r = ds_pread_all(fd, buf, (size_t)sm->size, sm->off)) != 0) {
		free(buf);
		goto out_err;
	}
	close(fd);
	*out = buf; /* transferred */
	*len = (size_t)sm->size;
	*st = sb;
	return 0;
out_err:
	close(fd);
	snprintf(err, errlen, "%s/%s: %s", ds->root, sm->path, strerror(-r));
	return r;
}
