/*
 * io.h - the session's reads and writes on /dev/fuse (fs/, the FUSE glue:
 * libfuse's custom I/O), which also ask the kernel to allow
 * mmap(MAP_SHARED) of files opened with direct_io
 * (FUSE_DIRECT_IO_ALLOW_MMAP, Linux 6.6 and later).
 *
 * libfuse 3.14 cannot ask for that flag (it lives in the INIT reply's
 * flags2, which 3.14 does not set), so the INIT request and reply are
 * looked at here on their way: when the kernel offers the flag, the reply
 * takes it.  Batch files are then served with direct_io (one copy, from
 * the daemon's buffer to the reader's) and numpy.memmap still works;
 * with an older kernel they keep the page cache (fs_io_direct_mmap is
 * false).  Everything else passes through unchanged.
 */
#ifndef FEEDFS_IO_H
#define FEEDFS_IO_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <fuse_lowlevel.h>

struct fs_io {
	atomic_bool offered;  /* the kernel's INIT offered the flag */
	atomic_bool granted;  /* and our reply took it */
	atomic_uint_fast64_t init_unique; /* of the INIT request, or 0 */
};

/* Use io for se's reads and writes on its (mounted) fd. */
int fs_io_attach(struct fuse_session *se, struct fs_io *io);
/* Whether direct_io files can be mapped shared (after INIT). */
bool fs_io_direct_mmap(struct fs_io *io);

#endif
