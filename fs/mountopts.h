/*
 * mountopts.h - fs/ (the FUSE glue), under main.c: the -o string of
 * libfuse a mount is made with.
 */
#ifndef FEEDFS_MOUNTOPTS_H
#define FEEDFS_MOUNTOPTS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

/* Room for any: the escaped source, the type, ro, the user's -o. */
#define FS_MOUNT_OPTS_MAX (2 * PATH_MAX + 4096)

/*
 * "fsname=SOURCE,subtype=feedfs[,ro][,FUSE_OPTS]" into out: SOURCE is
 * source's real path (the config or dataset), which mount(8) compares
 * with an fstab line's, so that `mount -a` again is a no-op; libfuse's
 * separators in it escaped (\, and \\); "feedfs" when it has none.  ro
 * unless writable; fuse_opts (NULL: none) are the -o options for FUSE.
 */
void fs_mount_opts(const char *source, const char *fuse_opts, bool writable,
    char *out, size_t len);

#endif
