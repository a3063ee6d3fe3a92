/*
 * ds_sidecar.c - layer: dataset index, beside the ImageFolder scan (under
 * dataset.c; calls ds_text.c and ds_skipped.c's counts).  The captions of
 * an ImageFolder dataset: each image's sidecar (ds_sidecars, see
 * ds_text.h), read once at open, as the scan lists the images.
 *
 * A sidecar is looked for in the directory its image is listed in: that
 * directory resolved (realpath) as the scan follows links, and used only
 * if it stays inside the root; the sidecar itself is opened relative to
 * it with O_NOFOLLOW, O_NONBLOCK (a FIFO does not block the mount) and
 * checked to be a regular file of at most DS_TEXT_MAX bytes.  A sidecar
 * that is a symbolic link (a Hugging Face snapshot's NAME.txt ->
 * ../../blobs/HASH) is followed as the scan follows an image's
 * (ds_scan_entry.c): resolved once, opened through no link (from the
 * root, or from "/" out of it), and out of the root, when feedfs reads
 * as root, only if the link's owner may read what it leads to
 * (ds_guard.c; links made by root are followed).  The samples are sorted
 * by path, so a directory is opened once for the images listed in it,
 * one after the other.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "dataset/ds_int.h"
#include "dataset/ds_text.h"

/* Errors of the process, not of a sidecar: they stop the mount. */
static bool
process_error(int e)
{
	return e == ENOMEM || e == EMFILE || e == ENFILE;
}

/*
 * The directory dir (relative to ds->root, "" for the root) opened, if
 * it resolves to a place inside the root: the descriptor, or -1 with
 * errno (ELOOP for a place outside).
 */
static int
open_dir(const struct dataset *ds, const char *dir)
{
	char *res = ds_resolve(ds, dir, NULL);
	int fd, e;

	if (res == NULL)
		return -1;
	if (strcmp(res, ds->root) != 0 && ds_below_root(ds, res) == 0) {
		free(res);
		errno = ELOOP;
		return -1;
	}
	fd = open(res, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	e = errno;
	free(res);
	errno = e;
	return fd;
}

/* Why a sidecar could not be opened (errno e), a static string. */
static const char *
open_why(int e, bool json)
{
	if (e == ENOENT || e == ENOTDIR)
		return json ? "no caption: its .json sidecar is missing"
			    : "no caption: its .txt sidecar is missing";
	if (e == ELOOP)
		return json ? "its .json sidecar is a symbolic link loop (not "
			      "followed)"
			    : "its .txt sidecar is a symbolic link loop (not "
			      "followed)";
	if (e == EXDEV)
		return json ? "its .json sidecar is a symbolic link to a file "
			      "the link's owner may not read (not followed)"
			    : "its .txt sidecar is a symbolic link to a file "
			      "the link's owner may not read (not followed)";
	if (e == EACCES || e == EPERM)
		return json ? "its .json sidecar cannot be read (permission "
			      "denied)"
			    : "its .txt sidecar cannot be read (permission "
			      "denied)";
	return json ? "its .json sidecar cannot be read"
		    : "its .txt sidecar cannot be read";
}

/*
 * The sidecar base of directory cur (relative to the root; dfd, opened)
 * that is a symbolic link: followed (see the head of this file).  The
 * descriptor, or -1 with errno: ELOOP (not a link after all, a loop),
 * ENOENT (dangling), EXDEV (out of the root, and the link's owner may
 * not read it), ENOMEM.
 */
static int
open_link(
    struct dataset *ds, int dfd, const char *cur, const char *base, int flags)
{
	char *res;
	struct stat lst, st;
	uint32_t g = 0;
	size_t below;
	int top, fd = -1, e;

	if (fstatat(dfd, base, &lst, AT_SYMLINK_NOFOLLOW) != 0)
		return -1;
	if (!S_ISLNK(lst.st_mode)) {
		errno = ELOOP;
		return -1;
	}
	if ((res = ds_resolve(ds, cur, base)) == NULL)
		return -1;
	below = ds_below_root(ds, res);
	/* Out of the root: a user's link speaks for that user alone. */
	if (below == 0 && ds_guard_active() && lst.st_uid != 0) {
		if (ds_guard_of(ds, (uint32_t)lst.st_uid, &g) != 0) {
			free(res);
			errno = ENOMEM;
			return -1;
		}
		if (g != 0 && !ds_guard_path(ds, g, res)) {
			free(res);
			errno = EXDEV;
			return -1;
		}
	}
	if ((top = open(below ? ds->root : "/",
		 O_PATH | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		fd = ds_open_beneath(top, res + (below ? below : 1), flags);
		e = errno;
		close(top);
		errno = e;
	}
	free(res);
	if (fd >= 0 && g != 0 &&
	    (fstat(fd, &st) != 0 ||
		!ds_guard_allows(ds, g, &st, ds_has_acl(fd, NULL), 4))) {
		close(fd);
		errno = EXDEV;
		return -1;
	}
	return fd;
}

/*
 * Read the sidecar base in directory cur (dfd) into buf (DS_TEXT_MAX + 1
 * bytes): its length, or -1 with *bad (the sample's), or -2 with errno
 * for an error of the process.
 */
static ssize_t
read_sidecar(struct dataset *ds, int dfd, const char *cur, const char *base,
    bool json, char *buf, const char **bad)
{
	const int flags =
	    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
	struct stat st;
	size_t got = 0;
	int fd;

	fd = openat(dfd, base, flags);
	if (fd < 0 && errno == ELOOP)
		fd = open_link(ds, dfd, cur, base, flags);
	if (fd < 0) {
		if (process_error(errno))
			return -2;
		*bad = open_why(errno, json);
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		*bad = json ? "its .json sidecar is not a regular file"
			    : "its .txt sidecar is not a regular file";
		return -1;
	}
	for (;;) {
		ssize_t k = read(fd, buf + got, DS_TEXT_MAX + 1 - got);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = errno;

			close(fd);
			if (process_error(e)) {
				errno = e;
				return -2;
			}
			*bad = open_why(e, json);
			return -1;
		}
		if (k == 0 || (got += (size_t)k) > DS_TEXT_MAX)
			break;
	}
	close(fd);
	if (got > DS_TEXT_MAX) {
		*bad = json ? "its .json sidecar is over 64 KiB"
			    : "its .txt sidecar is over 64 KiB";
		return -1;
	}
	return (ssize_t)got;
}

static int
by_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The n sidecars named by used[] (paths relative to root, as the scan
 * met them) were read: they are no files left out.  Their count comes
 * off the scan's (by reason and by extension ext), and their entries
 * off ds->left, so that the mount and --check list only what is not
 * served.  used is sorted here.
 */
static void
uncount(struct dataset *ds, const char *ext, char **used, size_t n)
{
	size_t k = 0;

	ds->nleft_by[DS_LEFT_NAME] -=
	    n < ds->nleft_by[DS_LEFT_NAME] ? n : ds->nleft_by[DS_LEFT_NAME];
	for (size_t i = 0; i < ds->nskipped_kinds; i++)
		if (ds->skipped[i].ext[0] == '.' &&
		    strcasecmp(ds->skipped[i].ext + 1, ext) == 0) {
			ds->skipped[i].n -=
			    n < ds->skipped[i].n ? n : ds->skipped[i].n;
			break;
		}
	qsort(used, n, sizeof(*used), by_str);
	for (size_t i = 0; i < ds->nleft; i++) {
		struct ds_left *e = &ds->left[i];

		if (e->why == DS_LEFT_NAME &&
		    bsearch(&e->path, used, n, sizeof(*used), by_str) !=
			NULL) {
			free(e->path);
			free(e->target);
			continue;
		}
		ds->left[k++] = *e;
	}
	ds->nleft = k;
}

int
ds_sidecars(
    struct dataset *ds, const struct ds_text *tx, char *err, size_t errlen)
{
	const char *ext = ds_text_ext(tx);
	bool json = tx->mode == TXT_JSON;
	char rel[PATH_MAX], cur[PATH_MAX] = "", *buf, **usedv;
	size_t used = 0;
	bool have = false; /* cur was opened: dfd, or derr why not */
	int dfd = -1, derr = 0, r = 0;

	if (ext == NULL)
		return 0;
	buf = malloc(DS_TEXT_MAX + 1);
	usedv = calloc(ds->n ? ds->n : 1, sizeof(*usedv));
	if (buf == NULL || usedv == NULL) {
		free(buf);
		free(usedv);
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	for (size_t i = 0; i < ds->n; i++) {
		struct ds_sample *s = &ds->samples[i];
		char *slash, *base;
		const char *bad = NULL;
		ssize_t n;

		if (ds_sidecar_name(s->path, ext, rel, sizeof(rel)) != 0) {
			s->bad = json ? "no caption: no name for its .json "
					"sidecar"
				      : "no caption: no name for its .txt "
					"sidecar";
			continue;
		}
		slash = strrchr(rel, '/');
		base = slash ? slash + 1 : rel;
		if (slash)
			*slash = '\0';
		if (!have || strcmp(cur, slash ? rel : "") != 0) {
			if (dfd >= 0)
				close(dfd);
			have = true;
			snprintf(cur, sizeof(cur), "%s", slash ? rel : "");
			dfd = open_dir(ds, cur);
			derr = dfd < 0 ? errno : 0;
			if (dfd < 0 && process_error(derr)) {
				r = -derr;
				snprintf(err, errlen, "%s/%s: %s", ds->root,
				    cur, strerror(derr));
				break;
			}
		}
		if (dfd < 0) {
			s->bad = open_why(derr, json);
			continue;
		}
		if ((n = read_sidecar(ds, dfd, cur, base, json, buf, &bad)) ==
		    -2) {
			r = -errno;
			snprintf(err, errlen, "%s/%s/%s: %s", ds->root, cur,
			    base, strerror(-r));
			break;
		}
		if (n < 0) {
			s->bad = bad;
			continue;
		}
		if (asprintf(&usedv[used], "%s%s%s", cur, cur[0] ? "/" : "",
			base) < 0) {
			usedv[used] = NULL;
			r = -ENOMEM;
			snprintf(err, errlen, "%s", strerror(ENOMEM));
			break;
		}
		used++;
		if ((r = ds_text_from(tx, false, buf, (size_t)n, &s->text,
			 &s->tlen, &bad)) != 0) {
			snprintf(err, errlen, "%s", strerror(-r));
			break;
		}
		s->bad = bad;
	}
	if (dfd >= 0)
		close(dfd);
	free(buf);
	if (r == 0)
		uncount(ds, ext, usedv, used);
	for (size_t i = 0; i < ds->n && usedv[i] != NULL; i++)
		free(usedv[i]);
	free(usedv);
	return r;
}
