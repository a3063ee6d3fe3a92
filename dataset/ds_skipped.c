/*
 * ds_skipped.c - layer: dataset/ (the datasets), under ds_scan.c (calls
 * nothing of the index).  What an ImageFolder scan left out: files that are
 * not images by their name, counted by extension as the scan meets them
 * (ds_skipped_count), and their total and text (ds_skipped_total,
 * ds_skipped_text; see dataset.h), which the mount and the scan's "no images"
 * error say.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "dataset/ds_int.h"

/* A regular file that is not an image by its name: counted by extension. */
void
ds_skipped_count(struct dataset *ds, const char *name)
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

size_t
ds_skipped_total(const struct dataset *ds)
{
	size_t n = ds->skipped_other + ds->skipped_root;

	for (size_t i = 0; i < ds->nskipped_kinds; i++)
		n += ds->skipped[i].n;
	return n;
}

void
ds_skipped_text(const struct dataset *ds, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < ds->nskipped_kinds && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%zu %s",
		    i ? ", " : "", ds->skipped[i].n,
		    ds->skipped[i].ext[0] ? ds->skipped[i].ext
					  : "without an extension");
	if (ds->skipped_other > 0 && used < len)
		used += (size_t)snprintf(buf + used, len - used,
		    "%s%zu of other kinds", used ? ", " : "",
		    ds->skipped_other);
	if (ds->skipped_root > 0 && used < len)
		snprintf(buf + used, len - used,
		    "%s%zu directly under the root, not in a class folder",
		    used ? ", " : "", ds->skipped_root);
}
