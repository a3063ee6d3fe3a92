/*
 * check_tree.c - what `feedfs --check` says of a dataset's tree (see
 * check_int.h): the samples of each class and the empty classes, and the
 * files the ImageFolder scan left out, as it counted them (ds->left: an
 * image of another format, named by transforms/' xf_format_name, is a
 * problem, and so is an image's name behind a link not followed;
 * anything else is listed as skipped).  Layer: core/ (the model).
 */
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/check_int.h"
#include "dataset/dataset.h"
#include "transforms/probe.h"

#define CHK_SKIP_SHOWN 20

/* Whether path names a caption's sidecar (.txt or .json; text =). */
static bool
sidecar_name(const char *path)
{
	const char *base = strrchr(path, '/');
	const char *dot;

	base = base != NULL ? base + 1 : path;
	dot = strrchr(base, '.');
	return dot != NULL && dot != base &&
	       (strcasecmp(dot, ".txt") == 0 || strcasecmp(dot, ".json") == 0);
}

/*
 * What the scan of an ImageFolder tree left out (ds->left, dataset.h),
 * one line each: a file of another image format (by its first bytes) is
 * a problem (unsupported), and so is an image's name that cannot be
 * served (a dangling link, a loop, a link refused: unreadable); anything
 * else is listed as skipped, the first CHK_SKIP_SHOWN of them.  With
 * text, a caption's sidecar is no skipped file.
 */
void
check_skipped(struct run *r, const struct dataset *ds)
{
	size_t before = r->skipped;
	int rfd;

	if (ds->manifest || ds->nshards > 0)
		return;
	rfd = open(ds->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (size_t i = 0; i < ds->nleft; i++) {
		const struct ds_left *e = &ds->left[i];
		const char *fmt, *dot = strrchr(e->path, '.');
		char why[PATH_MAX + 256];
		uint8_t magic[16];
		ssize_t n = 0;
		int fd;

		if (e->why == DS_LEFT_NAME && ds->text &&
		    sidecar_name(e->path))
			continue;
		if (e->why != DS_LEFT_NAME) {
			ds_left_text(e, why, sizeof(why));
			if (e->image && (e->why == DS_LEFT_DANGLING ||
					    e->why == DS_LEFT_LOOP ||
					    e->why == DS_LEFT_REFUSED ||
					    e->why == DS_LEFT_UNREACHABLE ||
					    e->why == DS_LEFT_SPECIAL)) {
				r->counts[K_UNREADABLE]++;
				check_report(r, "unreadable", e->path, why);
			} else if (r->skipped++ < CHK_SKIP_SHOWN)
				check_report(r, "skipped", e->path, why);
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
		fmt = n > 0 ? xf_format_name(magic, (size_t)n) : NULL;
		snprintf(why, sizeof(why),
		    "not a sample: the scan takes .jpg, .jpeg, .png and .webp, "
		    "not %.32s%s%s%s",
		    dot ? dot : "a name without extension", fmt ? " (" : "",
		    fmt ? fmt : "", fmt ? ")" : "");
		if (fmt != NULL) {
			r->counts[K_UNSUPPORTED]++;
			check_report(r, "unsupported", e->path, why);
		} else if (r->skipped++ < CHK_SKIP_SHOWN)
			check_report(r, "skipped", e->path, why);
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

void
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
	if (ds->multi)
		fprintf(r->out,
		    "  labels are lists (multi-hot): a sample counts "
		    "in each of its classes\n");
	for (size_t i = 0; i < ds->n; i++) {
		const uint32_t *lv = ds->multi ? ds->samples[i].labels : NULL;
		uint32_t nl = ds->multi ? (lv ? lv[0] : 0) : 1;

		if (ds->multi && lv == NULL)
			nolabel++;
		for (uint32_t k = 0; k < nl; k++) {
			int64_t l =
			    lv ? (int64_t)lv[k + 1] : ds->samples[i].label;

			if (l < 0 || (uint64_t)l >= ds->nclasses)
				nolabel++;
			else if (d->kind[i] == K_OK)
				ok[l]++;
			else
				bad[l]++;
		}
	}
	for (size_t c = 0; c < ds->nclasses; c++) {
		fprintf(r->out, "  class %zu ", c);
		check_put_name(r->out, ds->classes[c]);
		fprintf(r->out, ": %zu samples", ok[c]);
		if (bad[c] > 0)
			fprintf(r->out, " (and %zu with problems)", bad[c]);
		fputc('\n', r->out);
	}
	for (size_t c = 0; c < ds->nclasses; c++)
		if (ok[c] == 0) {
			r->empty++;
			fprintf(r->out, "  empty class: ");
			check_put_name(r->out, ds->classes[c]);
			fprintf(r->out, " (class %zu)%s\n", c,
			    bad[c] ? ": none of its samples can be read" : "");
		}
	if (nolabel > 0)
		fprintf(r->out, "  %zu samples without a label\n", nolabel);
	free(ok);
	free(bad);
}
