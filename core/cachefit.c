/*
 * cachefit.c - the model (core/): the cache a job's prefix needs, against
 * cache_size (see cachefit.h).  Over the dataset layer, the pixels and
 * the cache's formats; --check (check.c) and the mount (engine/feed.c)
 * call it, nothing below them.
 */
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/format.h"
#include "core/cachefit.h"
#include "core/config.h"
#include "dataset/dataset.h"
#include "transforms/xf.h"

#define CACHEFIT_MAX_FILE (512u << 20) /* the mount's bound on a sample */

void
cachefit_init(struct cachefit *f, const struct cfg_job *cj, size_t nok)
{
	int q = CACHE_FMT_OF(cj->cache_format) == CACHE_FMT_JPEG
		    ? CACHE_FMT_Q(cj->cache_format)
		    : 90;
	char prefix[1024];

	memset(f, 0, sizeof(*f));
	f->fmt[CACHEFIT_RAW] = CACHE_FMT_ENC(CACHE_FMT_RAW, 0);
	f->fmt[CACHEFIT_LOSSLESS] = CACHE_FMT_ENC(CACHE_FMT_LOSSLESS, 0);
	f->fmt[CACHEFIT_JPEG] = CACHE_FMT_ENC(CACHE_FMT_JPEG, q);
	f->own =
	    CACHE_FMT_OF(cj->cache_format) == CACHE_FMT_JPEG ? CACHEFIT_JPEG
	    : cj->cache_format == f->fmt[CACHEFIT_LOSSLESS]  ? CACHEFIT_LOSSLESS
							     : CACHEFIT_RAW;
	f->prefix_len = xf_prefix_text(cj->pl, prefix, sizeof(prefix));
	f->nok = nok;
	f->want = nok < CACHEFIT_SAMPLED ? nok : CACHEFIT_SAMPLED;
}

bool
cachefit_pick(const struct cachefit *f, size_t at)
{
	/* the (done * nok / want)-th image, for each done */
	return f->done < f->want && at == (f->done * f->nok) / f->want;
}

void
cachefit_add(
    struct cachefit *f, const struct cfg_job *cj, const uint8_t *b, size_t len)
{
	struct xf_image img;
	char why[512];

	f->done++;
	if (xf_run_prefix(cj->pl, b, len, &img, why, sizeof(why)) != 0)
		return;
	for (int k = CACHEFIT_LOSSLESS; k < CACHEFIT_NFMT; k++) {
		uint8_t *o;
		size_t ol;

		if (cache_fmt_encode(
			f->fmt[k], img.w, img.h, img.px, &o, &ol) == 0) {
			f->enc[k] += ol;
			free(o);
		}
	}
	f->sraw += (uint64_t)img.w * img.h * 3;
	f->enc[CACHEFIT_RAW] = f->sraw;
	f->ok++;
	xf_free(img.px);
}

uint64_t
cachefit_entry(const struct cachefit *f, int k)
{
	char sfx[64];

	cache_fmt_suffix(f->fmt[k], sfx, sizeof(sfx));
	return cache_entry_cost(0, f->prefix_len + strlen(sfx));
}

uint64_t
cachefit_bytes(const struct cachefit *f, int k, uint64_t payload, size_t nok,
    double *ratio)
{
	uint64_t cost = nok * cachefit_entry(f, k);
	double r = 1;

	if (payload == UINT64_MAX && f->ok > 0)
		payload =
		    (uint64_t)((double)f->sraw / (double)f->ok * (double)nok);
	if (k != CACHEFIT_RAW)
		r = f->sraw ? (double)f->enc[k] / (double)f->sraw : 0;
	if (ratio != NULL)
		*ratio = r;
	if (payload == UINT64_MAX || (k != CACHEFIT_RAW && f->sraw == 0))
		return 0; /* nothing to go by */
	return (uint64_t)(r * (double)payload) + cost;
}

uint64_t
cachefit_auto(const char *dir)
{
	char p[4096];
	struct statvfs sv;
	uint64_t avail = 0;
	char *slash;

	snprintf(p, sizeof(p), "%s", dir);
	for (;;) {
		if (statvfs(p, &sv) == 0) {
			avail = (uint64_t)sv.f_bavail * sv.f_frsize;
			break;
		}
		if ((slash = strrchr(p, '/')) == NULL || slash == p)
			break;
		*slash = '\0';
	}
	return cache_size_auto(avail, 0);
}

void
cachefit_human(uint64_t b, char *buf, size_t len)
{
	static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)b;
	int i = 0;

	while (v >= 1024 && i < 5) {
		v /= 1024;
		i++;
	}
	snprintf(buf, len, i == 0 ? "%.0f %s" : "%.1f %s", v, u[i]);
}

bool
cachefit_verdict(
    uint64_t size, const char *sizetext, uint64_t need, char *buf, size_t len)
{
	char a[32], b[32];

	cachefit_human(size, a, sizeof(a));
	cachefit_human(need, b, sizeof(b));
	if (need <= size) {
		snprintf(buf, len, "cache_size %s holds all of it (%s)",
		    sizetext ? sizetext : a, b);
		return true;
	}
	snprintf(buf, len,
	    "cache_size %s holds %.0f%% of it (%s): set cache_size to at "
	    "least %s for every epoch after the first to hit",
	    sizetext ? sizetext : a, 100.0 * (double)size / (double)need, b, b);
	return false;
}

/* Sample id of ds's bytes (a file, or a shard member): *out malloc'd. */
static int
read_sample(const struct dataset *ds, size_t id, uint8_t **out, size_t *len)
{
	char err[512];
	struct stat st;
	uint8_t *b;
	size_t got = 0;
	int fd, r;

	if (ds->nshards > 0)
		return ds_member_read(
		    ds, id, CACHEFIT_MAX_FILE, out, len, &st, err, sizeof(err));
	if ((r = ds_sample_open(ds, id, &fd, &st, err, sizeof(err))) != 0)
		return r;
	if (st.st_size <= 0 || (uint64_t)st.st_size > CACHEFIT_MAX_FILE ||
	    (b = malloc((size_t)st.st_size)) == NULL) {
		close(fd);
		return -EFBIG;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n =
		    pread(fd, b + got, (size_t)st.st_size - got, (off_t)got);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	*out = b;
	*len = got;
	return 0;
}

int
cachefit_job(const struct cfg_job *cj, struct dataset *const *ds,
    struct cachefit *f, size_t *nok)
{
	const size_t *src =
	    cj->nsources > 0 ? cj->source_index : &cj->dataset_index;
	size_t nsrc = cj->nsources > 0 ? cj->nsources : 1, n = 0, at = 0;

	for (size_t k = 0; k < nsrc; k++) {
		if (ds[src[k]]->robjs != NULL)
			return -EREMOTE;
		n += ds[src[k]]->n;
	}
	cachefit_init(f, cj, n);
	for (size_t k = 0; k < nsrc; k++) {
		const struct dataset *d = ds[src[k]];

		for (size_t i = 0; i < d->n; i++, at++) {
			uint8_t *b;
			size_t len;

			if (!cachefit_pick(f, at))
				continue;
			if (d->samples[i].bad != NULL ||
			    read_sample(d, i, &b, &len) != 0) {
				f->done++;
				continue;
			}
			cachefit_add(f, cj, b, len);
			free(b);
		}
	}
	*nok = n;
	return f->ok > 0 ? 0 : -ENOENT;
}
