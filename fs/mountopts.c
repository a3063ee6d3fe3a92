/*
 * mountopts.c - fs/ (the FUSE glue), under main.c: the -o string of
 * libfuse a mount is made with (mountopts.h).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "fs/mountopts.h"

void
fs_mount_opts(const char *source, const char *fuse_opts, bool writable,
    char *out, size_t len)
{
	char real[PATH_MAX], src[2 * PATH_MAX];
	size_t n = 0;

	if (realpath(source, real) == NULL)
		snprintf(real, sizeof(real), "feedfs");
	for (const char *s = real; *s && n + 3 < sizeof(src); s++) {
		if (*s == ',' || *s == '\\')
			src[n++] = '\\';
		src[n++] = *s;
	}
	src[n] = '\0';
	snprintf(out, len, "fsname=%s,subtype=feedfs%s%s%s", src,
	    writable ? "" : ",ro", fuse_opts ? "," : "",
	    fuse_opts ? fuse_opts : "");
}
