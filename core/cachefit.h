/*
 * cachefit.h - the model (core/): the cache a job's prefix needs, in each
 * cache_format, against cache_size: the one estimate that `feedfs
 * --check` prints in full and a mount says in one line when the cache is
 * too small for it (issue 26, issue 36).
 *
 * An even sample of a job's images (at most CACHEFIT_SAMPLED) is run
 * through the pipeline's prefix and encoded in lossless and jpeg(Q) (Q of
 * the job's cache_format, else 90); the bytes a format needs are then
 * the payload (raw: 3 bytes a pixel of every prefix image) scaled by the
 * sample's ratio, plus what an entry costs besides its payload.  --check
 * knows the payload exactly (from every image's header); a mount reads
 * no header but the sample's and scales the sample's mean by the number
 * of images.  Not thread safe; a struct cachefit is one job's.
 */
#ifndef FEEDFS_CACHEFIT_H
#define FEEDFS_CACHEFIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cfg_job;
struct dataset;

#define CACHEFIT_SAMPLED 16 /* images run and encoded per job */

/* The formats estimated, in this order. */
enum { CACHEFIT_RAW, CACHEFIT_LOSSLESS, CACHEFIT_JPEG, CACHEFIT_NFMT };

struct cachefit {
	uint32_t fmt[CACHEFIT_NFMT]; /* cache/format.h encodings */
	int own;		     /* the job's cache_format among them */
	size_t prefix_len;	     /* of the prefix's text (the key's) */
	size_t nok;		     /* the job's images */
	size_t want, done, ok;	     /* to sample, sampled, run whole */
	uint64_t sraw;		     /* the sampled images' raw bytes */
	uint64_t enc[CACHEFIT_NFMT]; /* and their encoded bytes */
};

/* For job cj, whose images are nok (those a mount could serve). */
void cachefit_init(struct cachefit *f, const struct cfg_job *cj, size_t nok);
/* Whether the at-th of the nok images (counted from 0) is one to sample. */
bool cachefit_pick(const struct cachefit *f, size_t at);
/* Run the prefix over one sampled image's len bytes at b (not taken) and
 * count it; an image that fails counts as sampled, with no bytes. */
void cachefit_add(
    struct cachefit *f, const struct cfg_job *cj, const uint8_t *b, size_t len);
/*
 * The bytes format k needs for nok images whose raw payload is payload
 * (UINT64_MAX: the sample's mean times nok); *ratio (may be NULL) gets
 * the sample's encoded bytes against raw.  0 when there is nothing to
 * go by (no image of the sample ran, and the payload or the ratio is
 * the sample's).
 */
uint64_t cachefit_bytes(const struct cachefit *f, int k, uint64_t payload,
    size_t nok, double *ratio);
/* What an entry of format k costs against cache_size besides its
 * payload (cache_entry_cost of the prefix's key text). */
uint64_t cachefit_entry(const struct cachefit *f, int k);
/* cache_size = auto as a mount would choose it now from what dir's
 * filesystem (or its nearest existing parent's) has free. */
uint64_t cachefit_auto(const char *dir);
/* "20.0 MiB" into buf. */
void cachefit_human(uint64_t b, char *buf, size_t len);
/*
 * What cache_size size holds of need, in words: "cache_size 20.0 MiB
 * holds 12% of it (165.3 MiB): set cache_size to at least 165.3 MiB for
 * every epoch after the first to hit", or "... holds all of it (...)";
 * sizetext names size (NULL: size in units).  Returns whether it holds
 * all of it.
 */
bool cachefit_verdict(
    uint64_t size, const char *sizetext, uint64_t need, char *buf, size_t len);
/*
 * A mount's estimate of job cj over its datasets ds (indexed as the
 * config's): the sample read from the datasets (local files and shard
 * members; remote ones are not fetched for it: -EREMOTE), *nok the
 * images.  0 or -errno (nothing could be sampled: -ENOENT).
 */
int cachefit_job(const struct cfg_job *cj, struct dataset *const *ds,
    struct cachefit *f, size_t *nok);

#endif
