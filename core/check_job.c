/*
 * check_job.c - what `feedfs --check` says of a job (see check_int.h):
 * the cache its prefix needs in each cache_format (raw exact from the
 * headers' sizes; lossless and jpeg(Q) estimated by encoding an even
 * sample of the images: cachefit.h, the estimate a mount says too),
 * against its cache_size.  Layer: core/ (the model).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/format.h"
#include "core/cachefit.h"
#include "core/check_int.h"
#include "core/config.h"
#include "dataset/dataset.h"
#include "transforms/xf.h"

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
 * The even sample of the job's ok images that cachefit.h encodes, read
 * through the check's own opens (tar members, remote members).
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
			if (check_open(r, d->ds, i, &s, why, sizeof(why)) !=
			    K_OK) {
				fit->done++;
				continue;
			}
			own = s.fd;
			s.fd = check_src_fd(r, &s);
			if (check_slurp(&s, &b) == 0) {
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

void
check_job(struct run *r, const struct cfg *c, const struct cfg_job *cj,
    struct dsres *res)
{
	const struct xf_pipeline *pl = cj->pl;
	const size_t *src;
	size_t nsrc = check_job_sources(cj, &src), nok = 0;
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
