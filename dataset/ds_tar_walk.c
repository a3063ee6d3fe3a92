/*
 * ds_tar_walk.c - layer: dataset/ (the datasets), tar shard backend (the
 * bottom of it: calls only ds_common.c).  The walk of a tar shard's headers
 * (ds_tar_scan, see ds_int.h).
 *
 * A shard is indexed from its 512-byte headers only, with pread: ustar
 * names (prefix + name), GNU long names ('L') and pax extended headers
 * ('x': path, size, GNU.sparse.*).  Member data is never read at index
 * time, except the small .cls and .json members a label needs.  Every
 * field is checked against what remains of the shard: a header with a bad
 * checksum or a member running past the end stops the index there; what
 * came before is kept.  The archive ends at two zero blocks (or one the
 * file ends after): a lone zero block before a header is skipped, and an
 * old-GNU sparse member's extension blocks are stepped over, so that a
 * walk never takes member data for the end.
 *
 * Nothing here creates a file named by a member: names only ever label
 * samples.  Members that are not plain files (links, devices, FIFOs,
 * sparse files) and unsafe names (absolute, "..") are recorded with their
 * kind, and become samples that fail when read (ds_tar.c).
 */
#include <sys/types.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dataset/ds_tar_int.h"

#define TAR_BLOCK 512
/* A pax header or GNU long name longer than this is refused (its member
 * becomes a bad sample); real ones are a few hundred bytes. */
#define TAR_META_MAX (1u << 20)

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

const char *
ds_ts_why(unsigned status)
{
	return status < sizeof(scan_why) / sizeof(scan_why[0])
		   ? scan_why[status]
		   : "bad status";
}

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

/* See ds_tar_int.h. */
const char *
ds_tar_member_ext(const char *name, size_t *keylen)
{
	const char *base = strrchr(name, '/'), *dot;

	base = base ? base + 1 : name;
	if ((dot = strchr(base, '.')) == NULL || dot == base)
		return NULL;
	*keylen = (size_t)(dot - name);
	return dot + 1;
}

/* See ds_tar_int.h. */
bool
ds_tar_is_image_ext(const char *ext)
{
	return strcasecmp(ext, "jpg") == 0 || strcasecmp(ext, "jpeg") == 0 ||
	       strcasecmp(ext, "png") == 0 || strcasecmp(ext, "webp") == 0;
}

/* Members whose text the walk keeps: labels (.cls, .json), captions
 * (.txt). */
static bool
is_label_ext(const char *ext)
{
	return strcmp(ext, "cls") == 0 || strcmp(ext, "json") == 0 ||
	       strcmp(ext, "txt") == 0;
}

/*
 * Step *data over the extension blocks of an old GNU sparse header;
 * ix->status says so when the shard ends or cannot be read first.
 */
static void
skip_sparse_ext(const struct tar_rd *rd, uint64_t fsize, uint64_t *data, struct tar_index *ix)
{
	uint8_t x[TAR_BLOCK];

	do {
		if (fsize - *data < TAR_BLOCK) {
			ix->status = TS_TRUNCATED;
			return;
		}
		if (rd->pread(rd->arg, x, TAR_BLOCK, *data) != 0) {
			ix->status = TS_READ;
			return;
		}
		*data += TAR_BLOCK;
	} while (x[504] != 0);
}

int
ds_tar_scan_rd(const struct tar_rd *rd, uint64_t fsize, struct tar_index *ix)
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
		/* (off passes fsize where the last member's data ends inside
		 * its final, missing block) */
		if (off > fsize || fsize - off < TAR_BLOCK) {
			ix->status = TS_TRUNCATED;
			break;
		}
		if ((r = rd->pread(rd->arg, h, TAR_BLOCK, off)) != 0) {
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
			if ((r = rd->pread(
				 rd->arg, h, TAR_BLOCK, off + TAR_BLOCK)) != 0) {
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
			skip_sparse_ext(rd, fsize, &data, ix);
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
			if (rd->pread(rd->arg, d, (size_t)size, data) != 0) {
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
		/* The label and caption members' text, while we are here. */
		if (kind == TM_FILE && (uint64_t)size <= TAR_LABEL_MAX) {
			size_t kl;
			const char *ext = ds_tar_member_ext(name, &kl);
			struct tar_member *m = &ix->m[ix->n - 1];

			if (ext != NULL && is_label_ext(ext)) {
				if ((m->data = malloc((size_t)size + 1)) ==
				    NULL) {
					r = -ENOMEM;
					break;
				}
				if (rd->pread(
					rd->arg, m->data, (size_t)size, data) != 0) {
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
		/* Whoever reads the data too (a stream: its digests). */
		if (kind == TM_FILE && rd->member != NULL &&
		    rd->member(rd->arg, ix, ix->n - 1) != 0) {
			ix->status = TS_READ;
			break;
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

static int
fd_pread(void *arg, void *buf, size_t n, uint64_t off)
{
	return ds_pread_all(*(const int *)arg, buf, n, off);
}

int
ds_tar_scan(int fd, uint64_t fsize, struct tar_index *ix)
{
	struct tar_rd rd = {fd_pread, &fd, NULL};

	return ds_tar_scan_rd(&rd, fsize, ix);
}
