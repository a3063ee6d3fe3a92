/*
 * check_job.c - what `feedfs --check` says of a job (see check_int.h):
 * the cache its prefix needs in each cache_format (raw exact from the
 * headers' sizes; lossless and jpeg(Q) estimated by encoding an even
 * sample of the images), against its cache_size.  Layer: core/ (the
 * model).
 */
#include <sys/statvfs.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/format.h"
#include "core/check_int.h"
#include "core/config.h"
#include "dataset/dataset.h"
#include "transforms/xf.h"

#define CHK_SAMPLED 16 /* images encoded per job for the estimates */

static void
human(uint64_t b, char *buf, size_t len)
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

/* The sources of job cj (indexes into c->datasets). */
size_t
check_job_sources(const struct cfg_job *cj, const size_t **v)
{
	if (cj->nsources > 0) {
		*v = cj->source_index;
		return cj->nsources;
	}
	*v = &cj->dataset_index;
	return 1;
}

/*
 * The encoded size of an even sample of the job's ok images, in
 * lossless and jpeg(q), against their raw size: sums into enc[2], raw.
 */
static size_t
sample_formats(struct run *r, const struct cfg_job *cj, struct dsres *res,
    const size_t *src, size_t nsrc, size_t nok, int q, uint64_t enc[2],
    uint64_t *raw)
{
	size_t want = nok < CHK_SAMPLED ? nok : CHK_SAMPLED, done = 0, at = 0;
	const uint32_t fmts[2] = {CACHE_FMT_ENC(CACHE_FMT_LOSSLESS, 0),
	    CACHE_FMT_ENC(CACHE_FMT_JPEG, q)};

	for (size_t k = 0; k < nsrc && want > 0; k++) {
		struct dsres *d = &res[src[k]];

		for (size_t i = 0; i < d->ds->n; i++) {
			struct src s = {.fd = -1};
			struct xf_image img;
			char why[512];
			uint8_t *b;
			int own;

			if (d->kind[i] != K_OK)
				continue;
			/* the (at * nok / want)-th ok image, for each at */
			if (done >= want || at++ != (done * nok) / want)
				continue;
			done++;
			if (check_open(r, d->ds, i, &s, why, sizeof(why)) !=
			    K_OK)
				continue;
			own = s.fd;
			s.fd = check_src_fd(r, &s);
			if (check_slurp(&s, &b) == 0) {
				if (xf_run_prefix(cj->pl, b, (size_t)s.size,
					&img, why, sizeof(why)) == 0) {
					for (int f = 0; f < 2; f++) {
						uint8_t *o;
						size_t ol;

						if (cache_fmt_encode(fmts[f],
							img.w, img.h, img.px,
							&o, &ol) == 0) {
							enc[f] += ol;
							free(o);
						}
					}
					*raw += (uint64_t)img.w * img.h * 3;
					xf_free(img.px);
				}
				free(b);
			}
			if (own >= 0)
				close(own);
			free(s.mem);
			s.mem = NULL;
		}
	}
	return done;
}

/*
 * cache_size = auto as a mount would choose it now (cache_size_auto) from
 * what the filesystem of cache_dir, or of its nearest existing parent
 * (--check makes nothing), has free; a store already there is not counted.
 */
static uint64_t
auto_estimate(const char *dir)
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
check_job(struct run *r, const struct cfg *c, const struct cfg_job *cj,
    struct dsres *res)
{
	const struct xf_pipeline *pl = cj->pl;
	const size_t *src;
	size_t nsrc = check_job_sources(cj, &src), nok = 0, plen, sampled;
	uint64_t payload = 0, enc[2] = {0, 0}, sraw = 0, need = 0, size;
	int q = CACHE_FMT_OF(cj->cache_format) == CACHE_FMT_JPEG
		    ? CACHE_FMT_Q(cj->cache_format)
		    : 90;
	char prefix[1024], sfx[64], a[4200], b[32], name[32];
	uint32_t fmts[3] = {CACHE_FMT_ENC(CACHE_FMT_RAW, 0),
	    CACHE_FMT_ENC(CACHE_FMT_LOSSLESS, 0),
	    CACHE_FMT_ENC(CACHE_FMT_JPEG, q)};

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
				check_report(r, "unsupported",
				    d->ds->samples[i].path, why);
				continue;
			}
			payload += (uint64_t)w * h * 3;
			nok++;
		}
	}
	fprintf(r->out, "  the cache of its prefix \"%s\" for %zu images\n",
	    prefix, nok);
	sampled = sample_formats(r, cj, res, src, nsrc, nok, q, enc, &sraw);
	for (int f = 0; f < 3; f++) {
		uint64_t bytes;

		cache_fmt_suffix(fmts[f], sfx, sizeof(sfx));
		plen = strlen(prefix) + strlen(sfx);
		cache_fmt_name(fmts[f], name, sizeof(name));
		if (f == 0) {
			bytes = payload + nok * cache_entry_cost(0, plen);
			human(bytes, a, sizeof(a));
			fprintf(r->out,
			    "  cache_format %-9s  %10s  exact: %" PRIu64
			    " pixel bytes (3 a pixel of the prefix images) + "
			    "%" PRIu64 " bytes an entry",
			    name, a, payload, cache_entry_cost(0, plen));
		} else if (sraw == 0) {
			fprintf(r->out,
			    "  cache_format %-9s  %10s  (no image to encode)",
			    name, "?");
			bytes = 0;
		} else {
			double ratio = (double)enc[f - 1] / (double)sraw;

			bytes = (uint64_t)(ratio * (double)payload) +
				nok * cache_entry_cost(0, plen);
			human(bytes, a, sizeof(a));
			fprintf(r->out,
			    "  cache_format %-9s ~%10s  estimated: %zu of "
			    "%zu images encoded, %.3fx raw",
			    name, a, sampled, nok, ratio);
		}
		if (fmts[f] == cj->cache_format ||
		    (f == 2 &&
			CACHE_FMT_OF(cj->cache_format) == CACHE_FMT_JPEG)) {
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
		size = auto_estimate(c->mount.cache_dir);
		human(size, a, sizeof(a));
		snprintf(a + strlen(a), sizeof(a) - strlen(a),
		    " (auto: half of the space free on %s's filesystem now)",
		    c->mount.cache_dir);
	} else
		human(size, a, sizeof(a));
	human(need, b, sizeof(b));
	if (need <= size)
		fprintf(r->out, "  cache_size %s holds all of it (%s)\n", a, b);
	else
		fprintf(r->out,
		    "  cache_size %s holds %.0f%% of it (%s): set cache_size "
		    "to at least %s for every epoch after the first to hit\n",
		    a, 100.0 * (double)size / (double)need, b, b);
}
