/*
 * ds_skipped.c - layer: dataset/ (the datasets), under ds_scan.c (calls nothing of
 * the index).  What an ImageFolder scan left out, for any reason: counted
 * by reason (and files that are not images by their name also by
 * extension) as the scan meets them, the first DS_LEFT_KEPT kept with
 * their paths (ds_left_add); their total and text (ds_skipped_total,
 * ds_skipped_text), which the mount and the scan's "no images" error
 * say, and each one's reason in words (ds_left_text), which --check
 * lists.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dataset/ds_int.h"

bool
ds_is_image_name(const char *name)
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

/* A file that is not an image by its name: counted by extension. */
static void
count_ext(struct dataset *ds, const char *name)
{
	const char *dot = strrchr(name, '.');
	const char *ext = dot != NULL && dot != name ? dot : "";
	size_t i;

	if (strlen(ext) >= sizeof(ds->skipped[0].ext)) {
		ds->skipped_other++;
		return;
	}
	for (i = 0; i < ds->nskipped_kinds; i++)
		if (strcasecmp(ds->skipped[i].ext, ext) == 0)
			break;
	if (i == ds->nskipped_kinds) {
		if (i == DS_SKIP_KINDS) {
			ds->skipped_other++;
			return;
		}
		snprintf(
		    ds->skipped[i].ext, sizeof(ds->skipped[i].ext), "%s", ext);
		ds->nskipped_kinds++;
	}
	ds->skipped[i].n++;
}

int
ds_left_add(struct dataset *ds, const char *dir, const char *name,
    enum ds_left_why why, const char *target, uint32_t uid)
{
	struct ds_left *e;

	ds->nleft_by[why]++;
	if (why == DS_LEFT_NAME)
		count_ext(ds, name);
	if (why == DS_LEFT_REFUSED) {
		if (ds->nleft_by[why] == 1)
			ds->refused_uid = uid;
		else if (ds->refused_uid != uid)
			ds->refused_many = true;
	}
	if (ds->nleft >= DS_LEFT_KEPT)
		return 0;
	if (ds->nleft % 64 == 0) {
		e = realloc(ds->left, (ds->nleft + 64) * sizeof(*e));
		if (e == NULL)
			return -ENOMEM;
		ds->left = e;
	}
	e = &ds->left[ds->nleft];
	memset(e, 0, sizeof(*e));
	if (asprintf(&e->path, "%s%s%s", dir, dir[0] && name[0] ? "/" : "",
		name) < 0) {
		e->path = NULL;
		return -ENOMEM;
	}
	if (target != NULL && (e->target = strdup(target)) == NULL) {
		free(e->path);
		return -ENOMEM;
	}
	e->uid = uid;
	e->why = (uint8_t)why;
	e->image = ds_is_image_name(e->path);
	ds->nleft++;
	return 0;
}

size_t
ds_skipped_total(const struct dataset *ds)
{
	size_t n = 0;

	for (int i = 0; i < DS_NLEFT; i++)
		n += ds->nleft_by[i];
	return n;
}

/* "N thing" or "N things" into buf at *used. */
static void
put_count(char *buf, size_t len, size_t *used, size_t n, const char *one,
    const char *many)
{
	if (n == 0 || *used >= len)
		return;
	*used += (size_t)snprintf(buf + *used, len - *used, "%s%zu %s",
	    *used ? ", " : "", n, n == 1 ? one : many);
}

void
ds_skipped_text(const struct dataset *ds, char *buf, size_t len)
{
	const size_t *k = ds->nleft_by;
	char refused[160];
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < ds->nskipped_kinds && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%zu %s",
		    i ? ", " : "", ds->skipped[i].n,
		    ds->skipped[i].ext[0] ? ds->skipped[i].ext
					  : "without an extension");
	put_count(buf, len, &used, ds->skipped_other, "of other kinds",
	    "of other kinds");
	put_count(buf, len, &used, k[DS_LEFT_ROOT],
	    "directly under the root, not in a class folder",
	    "directly under the root, not in a class folder");
	put_count(buf, len, &used, k[DS_LEFT_HIDDEN],
	    "hidden (a name starting with '.')",
	    "hidden (names starting with '.')");
	put_count(buf, len, &used, k[DS_LEFT_SPECIAL],
	    "not a regular file (a FIFO, socket or device)",
	    "not regular files (FIFOs, sockets or devices)");
	put_count(buf, len, &used, k[DS_LEFT_DANGLING],
	    "dangling symbolic link", "dangling symbolic links");
	put_count(buf, len, &used, k[DS_LEFT_LOOP], "symbolic link loop",
	    "symbolic link loops");
	if (ds->refused_many)
		snprintf(refused, sizeof(refused),
		    "out of the dataset refused (their owners cannot read "
		    "what they lead to)");
	else
		snprintf(refused, sizeof(refused),
		    "out of the dataset refused (%s owner, uid %u, cannot "
		    "read what %s to)",
		    k[DS_LEFT_REFUSED] == 1 ? "its" : "their",
		    (unsigned)ds->refused_uid,
		    k[DS_LEFT_REFUSED] == 1 ? "it leads" : "they lead");
	{
		char one[200], many[200];

		snprintf(one, sizeof(one), "symbolic link %s", refused);
		snprintf(many, sizeof(many), "symbolic links %s", refused);
		put_count(buf, len, &used, k[DS_LEFT_REFUSED], one, many);
	}
	put_count(buf, len, &used, k[DS_LEFT_UNREACHABLE],
	    "symbolic link that cannot be followed",
	    "symbolic links that cannot be followed");
	put_count(buf, len, &used, k[DS_LEFT_AGAIN],
	    "directory reached again through a link (read once)",
	    "directories reached again through a link (read once)");
}

void
ds_left_text(const struct ds_left *e, char *buf, size_t len)
{
	const char *t = e->target ? e->target : "?";

	switch (e->why) {
	case DS_LEFT_NAME:
		snprintf(buf, len, "not an image by its name");
		break;
	case DS_LEFT_ROOT:
		snprintf(
		    buf, len, "directly under the root, not in a class folder");
		break;
	case DS_LEFT_HIDDEN:
		snprintf(buf, len, "hidden (a name starting with '.')");
		break;
	case DS_LEFT_SPECIAL:
		snprintf(buf, len, "not a regular file or a directory%s%s",
		    e->target ? ": a symbolic link to " : "",
		    e->target ? e->target : "");
		break;
	case DS_LEFT_DANGLING:
		snprintf(buf, len, "a dangling symbolic link (to %s)", t);
		break;
	case DS_LEFT_LOOP:
		snprintf(buf, len,
		    "a symbolic link loop (%s): a loop of links, or a link to "
		    "a directory that holds it",
		    t);
		break;
	case DS_LEFT_REFUSED:
		snprintf(buf, len,
		    "a symbolic link out of the dataset to %s, which its "
		    "owner (uid %u) cannot read: refused (feedfs reads as "
		    "root; see feedfs(8), DATASET LAYOUTS)",
		    t, (unsigned)e->uid);
		break;
	case DS_LEFT_UNREACHABLE:
		snprintf(buf, len,
		    "a symbolic link that cannot be followed (%s)", t);
		break;
	case DS_LEFT_AGAIN:
		snprintf(buf, len,
		    "a link to a directory read already through another link "
		    "(%s): its files are served once, under the first path",
		    t);
		break;
	default:
		snprintf(buf, len, "left out");
	}
}
