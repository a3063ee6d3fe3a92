/*
 * check_tree.c - what `feedfs --check` says of a dataset's tree (see
 * check_int.h): the samples of each class and the empty classes, and the
 * files in class directories the scan does not take (an image of another
 * format, named by transforms/' xf_format_name, is a problem; anything
 * else is listed as skipped).  Layer: core/ (the model).
 */
#include <sys/stat.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/check_int.h"
#include "dataset/dataset.h"
#include "transforms/probe.h"

#define CHK_MAX_DEPTH 64
#define CHK_SKIP_SHOWN 20

/*
 * The names the ImageFolder scan takes as images (ds_scan.c's is_image):
 * the files in class directories with other names are reported here.
 */
static bool
scanned_name(const char *name)
{
	static const char *const ext[] = {".jpg", ".jpeg", ".png", ".webp"};
	size_t n = strlen(name);

	for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
		size_t e = strlen(ext[i]);

		if (n > e && strcasecmp(name + n - e, ext[i]) == 0)
			return true;
	}
	return false;
}

/* Whether name is a caption's sidecar (.txt or .json; text =). */
static bool
sidecar_name(const char *name)
{
	const char *dot = strrchr(name, '.');

	return dot != NULL && dot != name &&
	       (strcasecmp(dot, ".txt") == 0 || strcasecmp(dot, ".json") == 0);
}

/*
 * The files below directory dfd (rel: its path from the root) that the
 * scan skips: an image of another format is a problem (unsupported),
 * anything else is listed as skipped, but with text (sidecars set) the
 * captions' sidecars.  Links are not followed; depth and the entries
 * read are bounded by the tree.
 */
static void
walk_skipped(struct run *r, int dfd, const char *rel, int depth, bool sidecars)
{
	DIR *dir;
	struct dirent *e;

	if ((dir = fdopendir(dfd)) == NULL) {
		close(dfd);
		return;
	}
	while ((e = readdir(dir)) != NULL) {
		char path[4096], why[256];
		struct stat st;
		uint8_t magic[16];
		const char *fmt, *dot;
		ssize_t n;
		int fd;

		if (e->d_name[0] == '.')
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", rel,
			e->d_name) >= sizeof(path))
			continue;
		if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) !=
		    0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			if (depth < CHK_MAX_DEPTH &&
			    (fd = openat(dirfd(dir), e->d_name,
				 O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
				     O_CLOEXEC)) >= 0)
				walk_skipped(r, fd, path, depth + 1, sidecars);
			continue;
		}
		if (!S_ISREG(st.st_mode) || scanned_name(e->d_name) ||
		    (sidecars && sidecar_name(e->d_name)))
			continue;
		n = 0;
		if ((fd = openat(dirfd(dir), e->d_name,
			 O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
			     O_CLOEXEC)) >= 0) {
			n = pread(fd, magic, sizeof(magic), 0);
			close(fd);
		}
		dot = strrchr(e->d_name, '.');
		fmt = n > 0 ? xf_format_name(magic, (size_t)n) : NULL;
		snprintf(why, sizeof(why),
		    "not a sample: the scan takes .jpg, .jpeg, .png and .webp, "
		    "not %.32s%s%s%s",
		    dot ? dot : "a name without extension", fmt ? " (" : "",
		    fmt ? fmt : "", fmt ? ")" : "");
		if (fmt != NULL) {
			r->counts[K_UNSUPPORTED]++;
			check_report(r, "unsupported", path, why);
		} else if (r->skipped++ < CHK_SKIP_SHOWN)
			check_report(r, "skipped", path, why);
	}
	closedir(dir);
}

/* The class directories of an ImageFolder root, walked for skipped files. */
void
check_skipped(struct run *r, const struct dataset *ds)
{
	size_t before = r->skipped;
	int rfd;

	if (ds->manifest || ds->nshards > 0)
		return;
	if ((rfd = open(ds->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return;
	for (size_t c = 0; c < ds->nclasses; c++) {
		int fd = openat(rfd, ds->classes[c],
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (fd >= 0)
			walk_skipped(r, fd, ds->classes[c], 1, ds->text);
	}
	close(rfd);
	if (r->skipped - before > CHK_SKIP_SHOWN)
		fprintf(r->out, "  skipped: ... and %zu more files\n",
		    r->skipped - before - CHK_SKIP_SHOWN);
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
