/*
 * check_sample.c - one sample as `feedfs --check` sees it (see
 * check_int.h): its bytes opened as the mount opens them (a file, a
 * shard's member, a remote member), its headers asked of transforms/
 * (xf_probe, which parses every format; nothing here does), and with
 * --check=full its decode as a worker decodes it.  Layer: core/ (the
 * model).
 *
 * Reads are bounded: a sample is read through one cursor (struct src)
 * that never reads outside the file (or the tar member), and the probe
 * reads at most XF_PROBE_WINDOW bytes from its start and from its end,
 * plus a few bytes at each JPEG segment header, and allocates nothing of
 * the size a header claims.  Truncation, without --check=full, is judged
 * from the ends of the file (XF_PROBE_END): that finds a file cut short,
 * which is what copies and downloads leave, not damage inside the data
 * (a bad CRC, corrupt entropy codes, too many scans): --check=full
 * decodes every image as a worker does and finds every sample a mount
 * would fail on.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/check.h"
#include "core/check_int.h"
#include "dataset/dataset.h"
#include "transforms/probe.h"
#include "transforms/xf.h"

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

/* src_read as a probe's reader. */
static ssize_t
src_reader(void *arg, uint64_t off, void *buf, size_t n)
{
	return src_read(arg, off, buf, n);
}

/* The kind of the sample whose bytes s holds (the probe's verdict, the
 * end of the file judged too); *w, *h when ok. */
static enum kind
check_src(const struct src *s, uint64_t maxpx, uint32_t *w, uint32_t *h,
    char *why, size_t len)
{
	struct xf_reader rd = {
	    .read = src_reader, .arg = (void *)s, .size = s->size};
	struct xf_probe pr;
	enum xf_verdict v;

	v = xf_probe(&rd, maxpx, XF_PROBE_END, &pr, why, len);
	if (v == XF_PROBE_OK) {
		*w = pr.w;
		*h = pr.h;
	}
	return (enum kind)v;
}

int
check_header(int fd, uint64_t base, uint64_t size, uint64_t max_pixels,
    uint32_t *w, uint32_t *h, char *why, size_t len)
{
	struct src s = {.fd = fd, .base = base, .size = size};

	return (int)check_src(&s, max_pixels, w, h, why, len);
}

/* All of s, malloc'd (CHK_MAX_FILE at most): 0 or -errno. */
int
check_slurp(const struct src *s, uint8_t **out)
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

	if ((e = check_slurp(s, &b)) != 0) {
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
enum kind
check_open(struct run *r, const struct dataset *ds, size_t id, struct src *s,
    char *why, size_t len)
{
	const struct ds_sample *x = &ds->samples[id];
	struct stat st;
	char err[4600];
	int fd;

	/* Known bad at the index, in any dataset (a missing caption too). */
	if (x->bad != NULL) {
		snprintf(why, len, "%s", x->bad);
		return K_UNREADABLE;
	}
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
	if (ds->robjs != NULL) {
		/* A remote member: fetched whole (a range request). */
		size_t n;

		if (ds_member_read(ds, id, CHK_MAX_FILE, &s->mem, &n, &st, err,
			sizeof(err)) != 0) {
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

int
check_src_fd(const struct run *r, const struct src *s)
{
	return s->fd >= 0 ? s->fd : r->shard_fd;
}

/* One sample: its kind (and w, h), its problem printed. */
enum kind
check_sample(struct run *r, struct dsres *d, size_t id)
{
	const struct dataset *ds = d->ds;
	struct src s = {.fd = -1};
	char why[512];
	uint32_t w = 0, h = 0;
	enum kind k;

	why[0] = '\0';
	if ((k = check_open(r, ds, id, &s, why, sizeof(why))) == K_OK) {
		int own = s.fd;

		s.fd = check_src_fd(r, &s);
		k = check_src(&s, d->max_pixels, &w, &h, why, sizeof(why));
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
	check_report(r, check_kind_names[k], ds->samples[id].path, why);
	return k;
}
