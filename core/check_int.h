/*
 * check_int.h - the parts of `feedfs --check` (core/check*.c) share: what
 * a sample is found to be, its bytes, a dataset's results, the run.
 * Layer: core/ (the model), inside the check only.
 *
 * The files, bottom up: check_report.c (the report's lines),
 * check_sample.c (one sample's bytes opened as the mount opens them, its
 * headers asked of transforms/probe.h, with full its decode),
 * check_tree.c (the classes, and the files the scan skips),
 * check_job.c (the cache a job's prefix needs), check.c (the run).
 */
#ifndef FEEDFS_CHECK_INT_H
#define FEEDFS_CHECK_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "transforms/probe.h"

struct cfg;
struct cfg_job;
struct dataset;

#define CHK_MAX_FILE (512u << 20) /* the mount's bound on a sample */

/* What the check finds of a sample: the probe's verdicts. */
enum kind {
	K_OK = XF_PROBE_OK,
	K_UNREADABLE = XF_PROBE_UNREADABLE,
	K_UNSUPPORTED = XF_PROBE_UNSUPPORTED,
	K_TRUNCATED = XF_PROBE_TRUNCATED,
	K_CORRUPT = XF_PROBE_CORRUPT,
	K_NKINDS
};

/* The kinds' names in the report ("ok", "unreadable", ...). */
extern const char *const check_kind_names[K_NKINDS];

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

/* One run of the check: its report, counts and the shard open now. */
struct run {
	FILE *out;
	bool full;
	size_t counts[K_NKINDS];
	size_t empty, skipped;
	int shard_fd; /* the shard open now, or -1 */
	uint32_t shard;
};

/* check_report.c: a name escaped as samples.tsv escapes it; a line
 * "  KIND: NAME: why" (the caller counts the problem). */
void check_put_name(FILE *out, const char *s);
void check_report(
    struct run *r, const char *kind, const char *name, const char *why);

/*
 * check_sample.c.  check_open: the bytes of sample id of ds into *s,
 * opened as the mount opens them (a shard stays open in r for its next
 * member; a remote member is fetched whole into s->mem, the caller's to
 * free), K_OK or the kind and why.  check_src_fd: the descriptor to read
 * s from (its own or the run's shard).  check_slurp: all of s, malloc'd,
 * at most CHK_MAX_FILE (0 or -errno).  check_sample: sample id checked
 * (with full, decoded), its kind and size in d, its problem reported and
 * counted in r.
 */
enum kind check_open(struct run *r, const struct dataset *ds, size_t id,
    struct src *s, char *why, size_t len);
int check_src_fd(const struct run *r, const struct src *s);
int check_slurp(const struct src *s, uint8_t **out);
enum kind check_sample(struct run *r, struct dsres *d, size_t id);

/* check_tree.c: the files of an ImageFolder's class directories the scan
 * skips; the samples of each class and the empty classes. */
void check_skipped(struct run *r, const struct dataset *ds);
void check_classes(struct run *r, const struct dsres *d);

/* check_job.c: the datasets job cj reads (indexes into the config's
 * datasets, in *v); the report of its cache against cache_size. */
size_t check_job_sources(const struct cfg_job *cj, const size_t **v);
void check_job(struct run *r, const struct cfg *c, const struct cfg_job *cj,
    struct dsres *res);

#endif
