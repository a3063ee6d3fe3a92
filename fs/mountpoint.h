/*
 * mountpoint.h - the FUSE glue (fs/, mountpoint.c): what a mountpoint
 * holds before feedfs mounts on it, and the detaching of a feedfs mount
 * left dead by a crash.  Called by main() before any thread (it forks).
 */
#ifndef FEEDFS_FS_MOUNTPOINT_H
#define FEEDFS_FS_MOUNTPOINT_H

#include <stddef.h>

enum fs_mnt {
	FS_MNT_FREE, /* no feedfs mounted there */
	FS_MNT_LIVE, /* a feedfs mount that a process may still serve */
	FS_MNT_DEAD  /* a feedfs mount whose daemon is gone (ENOTCONN) */
};

/*
 * What the mountpoint mnt (a real path) holds; for a live or dead mount
 * why says how that was told ("process 123 holds its FUSE connection
 * 44"; "its mount answers ENOTCONN and no process holds ...").  Never
 * waits on a live daemon: a stat of the mount is bounded in time.
 */
enum fs_mnt fs_mnt_state(const char *mnt, char *why, size_t len);

/* Detach the (dead) feedfs mount at mnt: 0, or -errno with err. */
int fs_mnt_detach(const char *mnt, char *err, size_t len);

#endif
