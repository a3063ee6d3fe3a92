/*
 * dataset.h - the index of a dataset's samples.
 *
 * Sample ids are positions in the list of samples sorted by relative path
 * (byte order), so they are stable across mounts.  ImageFolder: classes are
 * the subdirectories of root sorted by name (as torchvision does), label =
 * index of the class; files ending in .jpg/.jpeg (any case) are found at
 * any depth below a class directory; hidden entries are skipped.  Manifest:
 * lines "relative/path<TAB>label", labels >= 0; nclasses = max label + 1.
 * Immutable after ds_open; safe to read from any thread.
 */
#ifndef FEEDFS_DATASET_H
#define FEEDFS_DATASET_H

#include <stddef.h>
#include <stdint.h>

struct ds_sample {
	char *path; /* relative to root */
	int64_t label;
};

struct dataset {
	char *name;
	char *root; /* absolute */
	struct ds_sample *samples;
	size_t n;
	char **classes; /* ImageFolder: class names; manifest: "0", "1", ... */
	size_t nclasses;
};

/* Called now and then while scanning (for a progress line). */
typedef void (*ds_progress_fn)(size_t nfound, void *arg);

/*
 * Scan root (or read manifest).  Errors: a root that is missing or not a
 * directory, a manifest line that does not parse (message names its line),
 * no samples at all.  *out set on success only.
 */
int ds_open(const char *name, const char *root, const char *manifest,
    ds_progress_fn progress, void *arg, struct dataset **out, char *err,
    size_t errlen);
void ds_free(struct dataset *ds);

#endif
