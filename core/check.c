/*
 * check.c - `feedfs --check`: every header read, a report, an exit status
 * (see check.h).
 *
 * Header reads are bounded: a file is read through one cursor (struct
 * src) that never reads outside the file (or the tar member), at most
 * CHK_WINDOW bytes from its start and CHK_WINDOW from its end, plus a
 * few bytes at each JPEG segment header (at most CHK_MAX_SEGMENTS of
 * them, each past the last).  So a hostile file costs at most about
 * 130 KiB of reads and no allocation of its claimed size.
 *
 * Truncation, without --check=full, is judged from the ends of the file:
 *   JPEG  an EOI marker (FF D9) after the first scan's header, within the
 *         last CHK_WINDOW bytes (scan data stuffs every FF byte, so a
 *         file cut in its scans has none there; garbage after EOI is
 *         allowed, as libjpeg allows it);
 *   PNG   the IEND chunk, with its CRC, within the last CHK_WINDOW bytes;
 *   WebP  the RIFF header's size against the file's.
 * That finds a file cut short, which is what copies and downloads leave,
 * not damage inside the data (a bad CRC, corrupt entropy codes, too many
 * scans): --check=full decodes every image as a worker does and finds
 * every sample a mount would fail on.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cache/format.h"
#include "core/cachefit.h"
#include "core/check.h"
#include "core/config.h"
#include "core/dsopen.h"
#include "dataset/dataset.h"
#include "transforms/xf.h"

#define CHK_WINDOW (64u << 10)
#define CHK_MAX_SEGMENTS 4096
#define CHK_MAX_STRAY 4096	  /* bytes skipped before a JPEG marker */
#define CHK_MAX_FILE (512u << 20) /* the mount's bound on a sample */
#define CHK_SKIP_SHOWN 20

enum kind {
	K_OK,
	K_UNREADABLE,
	K_UNSUPPORTED,
	K_TRUNCATED,
	K_CORRUPT,
	K_NKINDS
};

static const char *const kind_names[K_NKINDS] = {
    "ok", "unreadable", "unsupported", "truncated", "corrupt"};

/* The bytes of one sample: size bytes at base in fd. */
struct src {
	int fd;
	uint64_t base, size;
	uint8_t *mem; /* a remote member's bytes (freed by the caller), or
			 NULL: read fd */
};

/* What the check found of a dataset. */
struct dsres {
	struct dataset *ds;
	uint32_t *w, *h; /* of each sample (0 when not ok) */
	uint8_t *kind;
	size_t nok;
	uint64_t max_pixels; /* the least of its jobs' (0: none) */
};

struct run {
	FILE *out;
	bool full;
	uint8_t *head, *tail; /* CHK_WINDOW each */
	size_t counts[K_NKINDS];
	size_t empty, skipped;
	int shard_fd; /* the shard open now, or -1 */
	uint32_t shard;
};

/*
 * A name as samples.tsv writes it: tab, newline, carriage return and
 * backslash escaped (\\t \\n \\r \\\\), so one report line is one line.
 */
static void
put_name(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '\t')
			fputs("\\t", out);
		else if (*s == '\n')
			fputs("\\n", out);
		else if (*s == '\r')
			fputs("\\r", out);
		else if (*s == '\\')
			fputs("\\\\", out);
		else
			fputc(*s, out);
	}
}

/* "  KIND: NAME: why" (NAME escaped), counted when a problem. */
static void
report(struct run *r, const char *kind, const char *name, const char *why)
{
	fprintf(r->out, "  %s: ", kind);
	put_name(r->out, name);
	fprintf(r->out, ": %s\n", why);
}

/* Up to n bytes at off of s into buf: how many, or -errno. */
static ssize_t
src_read(const struct src *s, uint64_t off, void *buf, size_t n)
{
	size_t got = 0;

	if (off >= s->size)
		return 0;
	if (n > s->size - off)
		n = (size_t)(s->size - off);
	if (s->mem != NULL) {
		memcpy(buf, s->mem + off, n);
		return (ssize_t)n;
	}
	while (got < n) {
		ssize_t k = pread(s->fd, (uint8_t *)buf + got, n - got,
		    (off_t)(s->base + off + got));

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			break;
		got += (size_t)k;
	}
	return (ssize_t)got;
}

static uint32_t
be16(const uint8_t *p)
{
	return (uint32_t)p[0] << 8 | p[1];
}

static uint32_t
be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static uint32_t
le32(const uint8_t *p)
{
	return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[1] << 8 | p[0];
}

/* A format feedfs does not decode, by its magic bytes; NULL: unknown. */
static const char *
other_format(const uint8_t *p, size_t n)
{
	if (n >= 2 && p[0] == 'B' && p[1] == 'M')
		return "a BMP image";
	if (n >= 4 && memcmp(p, "GIF8", 4) == 0)
		return "a GIF image";
	if (n >= 4 &&
	    (memcmp(p, "II*\0", 4) == 0 || memcmp(p, "MM\0*", 4) == 0))
		return "a TIFF image";
	if (n >= 12 && memcmp(p + 4, "ftyp", 4) == 0) {
		if (memcmp(p + 8, "avif", 4) == 0 ||
		    memcmp(p + 8, "avis", 4) == 0)
			return "an AVIF image";
		return "a HEIF/ISO media file";
	}
	if (n >= 12 && memcmp(p, "\0\0\0\x0cjP  \r\n\x87\n", 12) == 0)
		return "a JPEG 2000 image";
	if (n >= 4 && memcmp(p, "\0\0\1\0", 4) == 0)
		return "an ICO image";
	if (n >= 4 && memcmp(p, "RIFF", 4) == 0)
		return "a RIFF file that is not WebP";
	return NULL;
}

/* The kind and why of an image over max_pixels. */
static enum kind
too_large(uint32_t w, uint32_t h, uint64_t max_pixels, char *why, size_t len)
{
	if (max_pixels == 0 || (uint64_t)w * h <= max_pixels)
		return K_OK;
	snprintf(why, len,
	    "image too large: %ux%u is more than max_pixels (%llu)",
	    (unsigned)w, (unsigned)h, (unsigned long long)max_pixels);
	return K_UNSUPPORTED;
}

/* Whether the last bytes of s (in r->tail) after from hold pat. */
static int
tail_has(struct run *r, const struct src *s, uint64_t from, const void *pat,
    size_t plen, bool *found)
{
	uint64_t start = s->size > CHK_WINDOW ? s->size - CHK_WINDOW : 0;
	ssize_t n;

	if (start < from)
		start = from;
	*found = false;
	if (start >= s->size)
		return 0;
	if ((n = src_read(s, start, r->tail, (size_t)(s->size - start))) < 0)
		return (int)n;
	*found = memmem(r->tail, (size_t)n, pat, plen) != NULL;
	return 0;
}

static enum kind
check_png(struct run *r, const struct src *s, size_t hn, uint64_t maxpx,
    uint32_t *w, uint32_t *h, char *why, size_t len)
{
	static const uint8_t iend[8] = {
	    'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
	const uint8_t *p = r->head;
	enum kind k;
	bool found;
	int e;

	if (hn < 33) {
		snprintf(why, len, "PNG cut in its header (%zu bytes)", hn);
		return K_TRUNCATED;
	}
	if (be32(p + 8) != 13 || memcmp(p + 12, "IHDR", 4) != 0 ||
	    be32(p + 16) == 0 || be32(p + 20) == 0 ||
	    be32(p + 16) > INT32_MAX || be32(p + 20) > INT32_MAX) {
		snprintf(why, len, "corrupt PNG: bad IHDR");
		return K_CORRUPT;
	}
	*w = be32(p + 16);
	*h = be32(p + 20);
	if ((k = too_large(*w, *h, maxpx, why, len)) != K_OK)
		return k;
	if ((e = tail_has(r, s, 33, iend, sizeof(iend), &found)) != 0) {
		snprintf(why, len, "%s", strerror(-e));
		return K_UNREADABLE;
	}
	if (!found) {
		snprintf(why, len, "no IEND chunk at the end: PNG cut short");
		return K_TRUNCATED;
	}
	return K_OK;
}

static enum kind
check_webp(struct run *r, const struct src *s, size_t hn, uint64_t maxpx,
    uint32_t *w, uint32_t *h, char *why, size_t len)
{
	uint64_t riff = (uint64_t)le32(r->head + 4) + 8;
	uint8_t *all = NULL;
	int e;

	if (riff > s->size) {
		snprintf(why, len,
		    "WebP cut short: its RIFF header says %" PRIu64
		    " bytes, the file has %" PRIu64,
		    riff, s->size);
		return K_TRUNCATED;
	}
	e = xf_webp_info(r->head, hn, w, h, why, len);
	/* Headers past the window (large metadata first): the whole file. */
	if (e == -EINVAL && hn < s->size && s->size <= CHK_MAX_FILE &&
	    (all = malloc((size_t)s->size)) != NULL) {
		ssize_t n = src_read(s, 0, all, (size_t)s->size);

		e = n == (ssize_t)s->size
			? xf_webp_info(all, (size_t)n, w, h, why, len)
			: -EIO;
		free(all);
	}
	if (e == -ENOTSUP)
		return K_UNSUPPORTED;
	if (e != 0)
		return K_CORRUPT;
	return too_large(*w, *h, maxpx, why, len);
}

/* Skip to the next 0xff at or after *pos (stray bytes, as libjpeg does). */
static int
jpeg_to_marker(const struct src *s, uint64_t *pos, uint8_t *buf)
{
	ssize_t n = src_read(s, *pos, buf, CHK_MAX_STRAY);
	const uint8_t *ff;

	if (n < 0)
		return (int)n;
	if ((ff = memchr(buf, 0xff, (size_t)n)) == NULL)
		return -ENOENT;
	*pos += (uint64_t)(ff - buf);
	return 0;
}

static bool
sof_marker(uint8_t m)
{
	return m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc;
}

static enum kind
check_jpeg(struct run *r, const struct src *s, uint64_t maxpx, uint32_t *w,
    uint32_t *h, char *why, size_t len)
{
	static const uint8_t eoi[2] = {0xff, 0xd9};
	uint8_t b[CHK_MAX_STRAY];
	uint64_t pos = 2, sos = 0;
	bool sof = false, found;
	enum kind k;
	int e;

	for (int seg = 0; seg < CHK_MAX_SEGMENTS && sos == 0; seg++) {
		ssize_t n = src_read(s, pos, b, 10);
		uint8_t m;

		if (n < 0) {
			snprintf(why, len, "%s", strerror((int)-n));
			return K_UNREADABLE;
		}
		if (n < 2) {
			snprintf(why, len, "JPEG cut in its headers");
			return K_TRUNCATED;
		}
		if (b[0] != 0xff) {
			if ((e = jpeg_to_marker(s, &pos, b)) != 0) {
				snprintf(why, len,
				    "corrupt JPEG: no marker at offset "
				    "%" PRIu64,
				    pos);
				return K_CORRUPT;
			}
			continue;
		}
		m = b[1];
		if (m == 0xff) { /* fill byte */
			pos++;
			continue;
		}
		if (m == 0xd8 || m == 0x01 || (m >= 0xd0 && m <= 0xd7)) {
			pos += 2;
			continue;
		}
		if (m == 0xd9 || m == 0x00) {
			snprintf(why, len, "corrupt JPEG: %s before any scan",
			    m == 0xd9 ? "end of image" : "a stuffed byte");
			return K_CORRUPT;
		}
		if (n < 4) {
			snprintf(why, len, "JPEG cut in its headers");
			return K_TRUNCATED;
		}
		if (be16(b + 2) < 2) {
			snprintf(why, len, "corrupt JPEG: segment length %u",
			    be16(b + 2));
			return K_CORRUPT;
		}
		if (pos + 2 + be16(b + 2) > s->size) {
			snprintf(why, len,
			    "JPEG cut short: a segment at offset %" PRIu64
			    " runs past the end",
			    pos);
			return K_TRUNCATED;
		}
		if (m == 0xda) {
			if (!sof) {
				snprintf(why, len,
				    "corrupt JPEG: a scan before the frame "
				    "header");
				return K_CORRUPT;
			}
			sos = pos;
			break;
		}
		if (sof_marker(m) && !sof) {
			if (n < 10) {
				snprintf(why, len, "JPEG cut in its headers");
				return K_TRUNCATED;
			}
			if (m == 0xc3 || (m >= 0xc5 && m <= 0xc7) ||
			    m == 0xcb || m >= 0xcd) {
				snprintf(why, len,
				    "a lossless or hierarchical JPEG (SOF%d), "
				    "which libjpeg-turbo does not decode",
				    m - 0xc0);
				return K_UNSUPPORTED;
			}
			if (b[4] != 8) {
				snprintf(why, len,
				    "a %u-bit JPEG (only 8-bit samples are "
				    "decoded)",
				    b[4]);
				return K_UNSUPPORTED;
			}
			*h = be16(b + 5);
			*w = be16(b + 7);
			if (*w == 0 || *h == 0) {
				snprintf(why, len,
				    "corrupt JPEG: an image of %ux%u",
				    (unsigned)*w, (unsigned)*h);
				return K_CORRUPT;
			}
			sof = true;
		}
		pos += 2 + be16(b + 2);
	}
	if (sos == 0) {
		snprintf(why, len, "corrupt JPEG: no scan in %d segments",
		    CHK_MAX_SEGMENTS);
		return K_CORRUPT;
	}
	if ((k = too_large(*w, *h, maxpx, why, len)) != K_OK)
		return k;
	if ((e = tail_has(r, s, sos + 2, eoi, sizeof(eoi), &found)) != 0) {
		snprintf(why, len, "%s", strerror(-e));
		return K_UNREADABLE;
	}
	if (!found) {
		snprintf(why, len,
		    "no end-of-image marker after the scan data: JPEG cut "
		    "short");
		return K_TRUNCATED;
	}
	return K_OK;
}

/* The kind of the sample whose bytes s holds; *w, *h when ok. */
static enum kind
check_src(struct run *r, const struct src *s, uint64_t maxpx, uint32_t *w,
    uint32_t *h, char *why, size_t len)
{
	ssize_t n;
	const char *fmt;

	if (s->size == 0) {
		snprintf(why, len, XF_EMPTY_FILE);
		return K_TRUNCATED;
	}
	if ((n = src_read(s, 0, r->head, CHK_WINDOW)) < 0) {
		snprintf(why, len, "%s", strerror((int)-n));
		return K_UNREADABLE;
	}
	if (xf_is_png(r->head, (size_t)n))
		return check_png(r, s, (size_t)n, maxpx, w, h, why, len);
	if (xf_is_webp(r->head, (size_t)n))
		return check_webp(r, s, (size_t)n, maxpx, w, h, why, len);
	if (n >= 2 && r->head[0] == 0xff && r->head[1] == 0xd8)
		return check_jpeg(r, s, maxpx, w, h, why, len);
	fmt = other_format(r->head, (size_t)n);
	snprintf(why, len, "%s, not a JPEG, PNG or WebP",
	    fmt ? fmt : "an unknown format");
	return K_UNSUPPORTED;
}

int
check_header(int fd, uint64_t base, uint64_t size, uint64_t max_pixels,
    uint32_t *w, uint32_t *h, char *why, size_t len)
{
	struct src s = {.fd = fd, .base = base, .size = size};
	struct run r = {.shard_fd = -1};
	enum kind k;

	if ((r.head = malloc(CHK_WINDOW)) == NULL ||
	    (r.tail = malloc(CHK_WINDOW)) == NULL) {
		free(r.head);
		snprintf(why, len, "out of memory");
		return K_UNREADABLE;
	}
	k = check_src(&r, &s, max_pixels, w, h, why, len);
	free(r.head);
	free(r.tail);
	return (int)k;
}

/* All of s, malloc'd (CHK_MAX_FILE at most): 0 or -errno. */
static int
src_slurp(const struct src *s, uint8_t **out)
{
	uint8_t *b;
	ssize_t n;

	if (s->size > CHK_MAX_FILE)
		return -EFBIG;
	if ((b = malloc(s->size ? (size_t)s->size : 1)) == NULL)
		return -ENOMEM;
	if ((n = src_read(s, 0, b, (size_t)s->size)) != (ssize_t)s->size) {
		free(b);
		return n < 0 ? (int)n : -EIO;
	}
	*out = b;
	return 0;
}

/* --check=full: the decode a worker does; the kind of its failure. */
static enum kind
check_decode(const struct src *s, uint64_t maxpx, char *why, size_t len)
{
	struct xf_image img;
	uint8_t *b;
	int e;

	if ((e = src_slurp(s, &b)) != 0) {
		snprintf(why, len, "%s", strerror(-e));
		return e == -EFBIG ? K_UNSUPPORTED : K_UNREADABLE;
	}
	e = xf_decode_max(b, (size_t)s->size, 0, 0, maxpx, &img, why, len);
	free(b);
	if (e == 0) {
		xf_free(img.px);
		return K_OK;
	}
	if (e == -EFBIG || e == -ENOTSUP)
		return K_UNSUPPORTED;
	if (strstr(why, "ends early") || strstr(why, "not enough data") ||
	    strstr(why, "Premature end") || strstr(why, "EOF"))
		return K_TRUNCATED;
	return K_CORRUPT;
}

/*
 * The bytes of sample id of ds: *s, opened as the mount opens it.  The
 * shard of a member stays open in r for the next member.
 */
static enum kind
open_sample(struct run *r, const struct dataset *ds, size_t id, struct src *s,
    char *why, size_t len)
{
	const struct ds_sample *x = &ds->samples[id];
	struct stat st;
	char err[4600];
	int fd;

	if (ds->nshards == 0) {
		if (ds_sample_open(ds, id, &fd, &st, err, sizeof(err)) != 0) {
			const char *m = strrchr(err, ':');

			snprintf(why, len, "%.400s", m ? m + 2 : err);
			return K_UNREADABLE;
		}
		s->fd = fd;
		s->base = 0;
		s->size = (uint64_t)st.st_size;
		return K_OK;
	}
	if (x->bad != NULL) {
		snprintf(why, len, "%s", x->bad);
		return K_UNREADABLE;
	}
	if (ds->robjs != NULL) {
		/* A remote member: fetched whole (a range request). */
		size_t n;

		if (ds_member_read(ds, id, CHK_MAX_FILE, &s->mem, &n, &st,
			err, sizeof(err)) != 0) {
			snprintf(why, len, "%.400s", err);
			return K_UNREADABLE;
		}
		s->fd = -1;
		s->base = 0;
		s->size = n;
		return K_OK;
	}
	if (r->shard_fd < 0 || r->shard != x->shard) {
		const struct ds_shard *sh = &ds->shards[x->shard];

		if (r->shard_fd >= 0)
			close(r->shard_fd);
		r->shard_fd = open(sh->path,
		    O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW);
		r->shard = x->shard;
		if (r->shard_fd < 0) {
			snprintf(why, len, "shard: %s", strerror(errno));
			return K_UNREADABLE;
		}
		if (fstat(r->shard_fd, &st) != 0 || !S_ISREG(st.st_mode) ||
		    st.st_size != sh->st.st_size ||
		    st.st_ino != sh->st.st_ino) {
			close(r->shard_fd);
			r->shard_fd = -1;
			snprintf(
			    why, len, "shard changed since it was indexed");
			return K_UNREADABLE;
		}
	}
	if (x->off + x->size > (uint64_t)ds->shards[x->shard].st.st_size) {
		snprintf(why, len, "member data past the end of the shard");
		return K_TRUNCATED;
	}
	s->fd = -1; /* the run's: not closed by the caller */
	s->base = x->off;
	s->size = x->size;
	return K_OK;
}

static int
src_fd(const struct run *r, const struct src *s)
{
	return s->fd >= 0 ? s->fd : r->shard_fd;
}

/* One sample: its kind (and w, h), its problem printed. */
static enum kind
check_sample(struct run *r, struct dsres *d, size_t id)
{
	const struct dataset *ds = d->ds;
	struct src s = {.fd = -1};
	char why[512];
	uint32_t w = 0, h = 0;
	enum kind k;

	why[0] = '\0';
	if ((k = open_sample(r, ds, id, &s, why, sizeof(why))) == K_OK) {
		int own = s.fd;

		s.fd = src_fd(r, &s);
		k = check_src(r, &s, d->max_pixels, &w, &h, why, sizeof(why));
		if (k == K_OK && r->full)
			k = check_decode(&s, d->max_pixels, why, sizeof(why));
		if (own >= 0)
			close(own);
	}
	free(s.mem);
	d->kind[id] = (uint8_t)k;
	if (k == K_OK) {
		d->w[id] = w;
		d->h[id] = h;
		d->nok++;
		return k;
	}
	r->counts[k]++;
	report(r, kind_names[k], ds->samples[id].path, why);
	return k;
}

/*
 * What the scan of an ImageFolder tree left out (ds->left, dataset.h),
 * one line each: a file of another image format (by its first bytes) is
 * a problem (unsupported), and so is an image's name that cannot be
 * served (a dangling link, a loop, a link refused: unreadable); anything
 * else is listed as skipped, the first CHK_SKIP_SHOWN of them.
 */
static void
check_skipped(struct run *r, const struct dataset *ds)
{
	size_t before = r->skipped;
	int rfd;

	if (ds->manifest || ds->nshards > 0)
		return;
	rfd = open(ds->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (size_t i = 0; i < ds->nleft; i++) {
		const struct ds_left *e = &ds->left[i];
		const char *fmt = NULL, *dot = strrchr(e->path, '.');
		char why[PATH_MAX + 256];
		uint8_t magic[16];
		ssize_t n = 0;
		int fd;

		if (e->why != DS_LEFT_NAME) {
			ds_left_text(e, why, sizeof(why));
			if (e->image &&
			    (e->why == DS_LEFT_DANGLING ||
				e->why == DS_LEFT_LOOP ||
				e->why == DS_LEFT_REFUSED ||
				e->why == DS_LEFT_UNREACHABLE ||
				e->why == DS_LEFT_SPECIAL)) {
				r->counts[K_UNREADABLE]++;
				report(r, "unreadable", e->path, why);
			} else if (r->skipped++ < CHK_SKIP_SHOWN)
				report(r, "skipped", e->path, why);
			continue;
		}
		if (dot != NULL && strchr(dot, '/') != NULL)
			dot = NULL;
		/* A file the scan took as a file (a link to one is followed:
		 * as root, only one its owner may read). */
		if (rfd >= 0 &&
		    (fd = openat(rfd, e->path,
			 O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) >= 0) {
			n = pread(fd, magic, sizeof(magic), 0);
			close(fd);
		}
		fmt = n > 0 ? other_format(magic, (size_t)n) : NULL;
		if (fmt == NULL && n >= 8 &&
		    (xf_is_png(magic, (size_t)n) ||
			(magic[0] == 0xff && magic[1] == 0xd8)))
			fmt = xf_is_png(magic, (size_t)n) ? "a PNG image"
							  : "a JPEG image";
		if (fmt == NULL && n >= 12 && xf_is_webp(magic, (size_t)n))
			fmt = "a WebP image";
		snprintf(why, sizeof(why),
		    "not a sample: the scan takes .jpg, .jpeg, .png and .webp, "
		    "not %.32s%s%s%s",
		    dot ? dot : "a name without extension", fmt ? " (" : "",
		    fmt ? fmt : "", fmt ? ")" : "");
		if (fmt != NULL) {
			r->counts[K_UNSUPPORTED]++;
			report(r, "unsupported", e->path, why);
		} else if (r->skipped++ < CHK_SKIP_SHOWN)
			report(r, "skipped", e->path, why);
	}
	if (rfd >= 0)
		close(rfd);
	if (r->skipped - before > CHK_SKIP_SHOWN)
		fprintf(r->out, "  skipped: ... and %zu more files\n",
		    r->skipped - before - CHK_SKIP_SHOWN);
	if (ds_skipped_total(ds) > ds->nleft)
		fprintf(r->out,
		    "  left out: %zu more, not listed (the first %zu are)\n",
		    ds_skipped_total(ds) - ds->nleft, ds->nleft);
}

static void
check_classes(struct run *r, const struct dsres *d)
{
	const struct dataset *ds = d->ds;
	size_t *ok, *bad, nolabel = 0;

	if (ds->nclasses == 0) {
		fprintf(r->out, "  no classes (label = none)\n");
		return;
	}
	ok = calloc(ds->nclasses, sizeof(*ok));
	bad = calloc(ds->nclasses, sizeof(*bad));
	if (ok == NULL || bad == NULL) {
		free(ok);
		free(bad);
		return;
	}
	for (size_t i = 0; i < ds->n; i++) {
		int64_t l = ds->samples[i].label;

		if (l < 0 || (uint64_t)l >= ds->nclasses)
			nolabel++;
		else if (d->kind[i] == K_OK)
			ok[l]++;
		else
			bad[l]++;
	}
	for (size_t c = 0; c < ds->nclasses; c++) {
		fprintf(r->out, "  class %zu ", c);
		put_name(r->out, ds->classes[c]);
		fprintf(r->out, ": %zu samples", ok[c]);
		if (bad[c] > 0)
			fprintf(r->out, " (and %zu with problems)", bad[c]);
		fputc('\n', r->out);
	}
	for (size_t c = 0; c < ds->nclasses; c++)
		if (ok[c] == 0) {
			r->empty++;
			fprintf(r->out, "  empty class: ");
			put_name(r->out, ds->classes[c]);
			fprintf(r->out, " (class %zu)%s\n", c,
			    bad[c] ? ": none of its samples can be read" : "");
		}
	if (nolabel > 0)
		fprintf(r->out, "  %zu samples without a label\n", nolabel);
	free(ok);
	free(bad);
}

/* The sources of job cj (indexes into c->datasets). */
static size_t
job_sources(const struct cfg_job *cj, const size_t **v)
{
	if (cj->nsources > 0) {
		*v = cj->source_index;
		return cj->nsources;
	}
	*v = &cj->dataset_index;
	return 1;
}

/*
 * The even sample of the job's ok images that cachefit.h encodes, read
 * through the check's own cursors (tar members, remote members).
 */
static void
sample_formats(struct run *r, const struct cfg_job *cj, struct dsres *res,
    const size_t *src, size_t nsrc, struct cachefit *fit)
{
	size_t at = 0;

	for (size_t k = 0; k < nsrc; k++) {
		struct dsres *d = &res[src[k]];

		for (size_t i = 0; i < d->ds->n; i++) {
			struct src s = {.fd = -1};
			char why[512];
			uint8_t *b;
			int own;

			if (d->kind[i] != K_OK || !cachefit_pick(fit, at++))
				continue;
			if (open_sample(r, d->ds, i, &s, why, sizeof(why)) !=
			    K_OK) {
				fit->done++;
				continue;
			}
			own = s.fd;
			s.fd = src_fd(r, &s);
			if (src_slurp(&s, &b) == 0) {
				cachefit_add(fit, cj, b, (size_t)s.size);
				free(b);
			} else
				fit->done++;
			if (own >= 0)
				close(own);
			free(s.mem);
			s.mem = NULL;
		}
	}
}

static void
check_job(struct run *r, const struct cfg *c, const struct cfg_job *cj,
    struct dsres *res)
{
	const struct xf_pipeline *pl = cj->pl;
	const size_t *src;
	size_t nsrc = job_sources(cj, &src), nok = 0;
	uint64_t payload = 0, need = 0, size;
	char prefix[1024], a[4200], v[4400], name[32];
	struct cachefit fit;

	xf_prefix_text(pl, prefix, sizeof(prefix));
	fprintf(r->out, "job %s:\n", cj->name);
	if (pl->cache_at >= pl->nops) {
		fprintf(r->out, "  no cache op in its pipeline: it caches "
				"nothing\n");
		return;
	}
	for (size_t k = 0; k < nsrc; k++) {
		struct dsres *d = &res[src[k]];

		for (size_t i = 0; i < d->ds->n; i++) {
			uint32_t w, h;
			uint64_t most;

			if (d->kind[i] != K_OK)
				continue;
			most = xf_prefix_dims(pl, d->w[i], d->h[i], &w, &h);
			if (cj->max_pixels > 0 && most > cj->max_pixels) {
				/* the sample fails in this job */
				char why[256];

				r->counts[K_UNSUPPORTED]++;
				snprintf(why, sizeof(why),
				    "a %ux%u image, its prefix makes one of "
				    "%" PRIu64
				    " pixels: more than max_pixels (%" PRIu64
				    ")",
				    (unsigned)d->w[i], (unsigned)d->h[i], most,
				    cj->max_pixels);
				report(r, "unsupported", d->ds->samples[i].path,
				    why);
				continue;
			}
			payload += (uint64_t)w * h * 3;
			nok++;
		}
	}
	fprintf(r->out, "  the cache of its prefix \"%s\" for %zu images\n",
	    prefix, nok);
	/* The estimate a mount makes too (cachefit.h), with the payload
	 * exact from every header. */
	cachefit_init(&fit, cj, nok);
	sample_formats(r, cj, res, src, nsrc, &fit);
	for (int f = 0; f < CACHEFIT_NFMT; f++) {
		double ratio;
		uint64_t bytes = cachefit_bytes(&fit, f, payload, nok, &ratio);

		cache_fmt_name(fit.fmt[f], name, sizeof(name));
		if (f == CACHEFIT_RAW) {
			cachefit_human(bytes, a, sizeof(a));
			fprintf(r->out,
			    "  cache_format %-9s  %10s  exact: %" PRIu64
			    " pixel bytes (3 a pixel of the prefix images) + "
			    "%" PRIu64 " bytes an entry",
			    name, a, payload, cachefit_entry(&fit, f));
		} else if (fit.ok == 0) {
			fprintf(r->out,
			    "  cache_format %-9s  %10s  (no image to encode)",
			    name, "?");
			bytes = 0;
		} else {
			cachefit_human(bytes, a, sizeof(a));
			fprintf(r->out,
			    "  cache_format %-9s ~%10s  estimated: %zu of "
			    "%zu images encoded, %.3fx raw",
			    name, a, fit.done, nok, ratio);
		}
		if (f == fit.own) {
			fprintf(r->out, "  <- this job's");
			need = bytes;
		}
		fputc('\n', r->out);
	}
	if (c->mount.cache_size == 0) {
		fprintf(r->out, "  cache_size = 0: no cache\n");
		return;
	}
	size = c->mount.cache_size;
	if (size == CFG_SIZE_AUTO) {
		/* What a mount would choose now (cache/open.c's rule, less
		 * what a store already there takes): about. */
		size = cachefit_auto(c->mount.cache_dir);
		cachefit_human(size, a, sizeof(a));
		snprintf(a + strlen(a), sizeof(a) - strlen(a),
		    " (auto: half of the space free on %s's filesystem now)",
		    c->mount.cache_dir);
	} else
		cachefit_human(size, a, sizeof(a));
	cachefit_verdict(size, a, need, v, sizeof(v));
	fprintf(r->out, "  %s\n", v);
}

int
check_run(const struct cfg *c, bool full, FILE *out, char *err, size_t errlen)
{
	struct run r = {.out = out, .full = full, .shard_fd = -1};
	struct dsres *res;
	size_t total = 0, problems;
	int ret = -ENOMEM;

	if ((res = calloc(c->ndatasets, sizeof(*res))) == NULL ||
	    (r.head = malloc(CHK_WINDOW)) == NULL ||
	    (r.tail = malloc(CHK_WINDOW)) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	/* The bound each dataset is read against: its jobs' least. */
	for (size_t i = 0; i < c->njobs; i++) {
		const size_t *src;
		size_t n = job_sources(&c->jobs[i], &src);

		for (size_t k = 0; k < n; k++) {
			uint64_t m = c->jobs[i].max_pixels,
				 *d = &res[src[k]].max_pixels;

			if (m != 0 && (*d == 0 || m < *d))
				*d = m;
		}
	}
	fprintf(out, "feedfs --check%s %s\n", full ? "=full" : "", c->path);
	if (c->layout != NULL)
		fprintf(out, "%s\n", c->layout);
	for (size_t i = 0; i < c->ndatasets; i++) {
		const struct cfg_dataset *cd = &c->datasets[i];
		struct dsres *d = &res[i];
		int e;

		if ((e = ds_open_cfg(
			 cd, -1, NULL, NULL, &d->ds, err, errlen)) != 0) {
			char msg[4600];

			snprintf(msg, sizeof(msg), "%s", err);
			snprintf(err, errlen, "%s:%d: dataset %s: %s", c->path,
			    cd->line, cd->name, msg);
			ret = e;
			goto out;
		}
		if ((d->w = calloc(d->ds->n, sizeof(*d->w))) == NULL ||
		    (d->h = calloc(d->ds->n, sizeof(*d->h))) == NULL ||
		    (d->kind = calloc(d->ds->n, 1)) == NULL) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		fprintf(out, "dataset %s: %s: %zu samples, %zu classes\n",
		    cd->name, d->ds->root, d->ds->n, d->ds->nclasses);
		for (size_t id = 0, asked = 0; id < d->ds->n; id++) {
			/* Remote members: the next ones asked for ahead, as
			 * far as the fetcher's window has room. */
			while (d->ds->robjs != NULL && asked < d->ds->n &&
			       (asked <= id ||
				   d->ds->samples[asked].size <=
				       ds_remote_room(d->ds)))
				ds_sample_prefetch(d->ds, asked++);
			check_sample(&r, d, id);
		}
		check_skipped(&r, d->ds);
		check_classes(&r, d);
		total += d->ds->n;
	}
	if (r.shard_fd >= 0)
		close(r.shard_fd);
	r.shard_fd = -1;
	for (size_t i = 0; i < c->njobs; i++)
		check_job(&r, c, &c->jobs[i], res);
	problems = r.empty;
	for (int k = K_UNREADABLE; k < K_NKINDS; k++)
		problems += r.counts[k];
	if (problems == 0)
		fprintf(out, "no problems in %zu samples%s\n", total,
		    r.skipped ? " (some files skipped: see above)" : "");
	else
		fprintf(out,
		    "%zu problems in %zu samples: %zu unreadable, %zu "
		    "unsupported, %zu truncated, %zu corrupt, %zu empty "
		    "classes\n",
		    problems, total, r.counts[K_UNREADABLE],
		    r.counts[K_UNSUPPORTED], r.counts[K_TRUNCATED],
		    r.counts[K_CORRUPT], r.empty);
	ret = problems ? 1 : 0;
out:
	if (r.shard_fd >= 0)
		close(r.shard_fd);
	for (size_t i = 0; res != NULL && i < c->ndatasets; i++) {
		free(res[i].w);
		free(res[i].h);
		free(res[i].kind);
		if (res[i].ds != NULL)
			ds_free(res[i].ds);
	}
	free(res);
	free(r.head);
	free(r.tail);
	return ret;
}
