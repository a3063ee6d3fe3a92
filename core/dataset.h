/*
 * dataset.h - the index of a dataset's samples.
 *
 * Sample ids are positions in the list of samples sorted by relative path
 * (byte order), so they are stable across mounts.  ImageFolder: classes are
 * the subdirectories of root sorted by name (as torchvision does), label =
 * index of the class; files ending in .jpg/.jpeg/.png (any case) are found
 * at any depth below a class directory; hidden entries are skipped; symbolic
 * links are followed only where they lead to a place inside root (others
 * are skipped), and a directory reached through links is read at most
 * once.  Manifest: lines "relative/path<TAB>label", labels >= 0; nclasses
 * = max label + 1; a path that is absolute or has a ".." component is an
 * error.  Immutable after ds_open; safe to read from any thread.
 */
#ifndef FEEDFS_DATASET_H
#define FEEDFS_DATASET_H

#include <sys/stat.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ds_sample {
	char *path; /* relative to root */
	int64_t label;
	/* The file itself, relative to root and through no symbolic link,
	 * where path goes through one (scan only); NULL: path. */
	char *open_path;
};

struct dataset {
	char *name;
	char *root; /* absolute */
	struct ds_sample *samples;
	size_t n;
	char **classes; /* ImageFolder: class names; manifest: "0", "1", ... */
	size_t nclasses;
	bool
	    manifest; /* links in paths are resolved at open (ds_sample_open) */
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

/*
 * Open sample id for reading, safely: no symlink followed at open time
 * (O_NOFOLLOW|O_NOCTTY|O_NONBLOCK|O_CLOEXEC, relative to a descriptor of
 * root opened for the call, with openat2 RESOLVE_BENEATH|
 * RESOLVE_NO_SYMLINKS where the kernel has it, else component by
 * component with O_NOFOLLOW), the scan having resolved the links it
 * allowed (open_path).  A manifest's path that goes through links is
 * resolved here, and opened only if it stays inside root.  fstat before
 * reading: anything but a regular file is -EINVAL "not a regular file"; a
 * FIFO or a device does not block.  On success *fd (blocking, close-on-
 * exec; the caller closes it) and *st are set.  On error err names the
 * file ("ROOT/PATH: why"): -ELOOP for a symbolic link that is not
 * allowed, -errno of open otherwise.  Thread-safe.
 */
int ds_sample_open(const struct dataset *ds, size_t id, int *fd,
    struct stat *st, char *err, size_t errlen);

#endif
