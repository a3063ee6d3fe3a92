/*
 * io.c - the session's I/O on /dev/fuse (fs/, the FUSE glue), with
 * FUSE_DIRECT_IO_ALLOW_MMAP asked for in the INIT reply (see io.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "fs/io.h"

/* Bits of the 64-bit INIT flags that <linux/fuse.h> here may lack. */
#define IO_INIT_EXT (1ULL << 30)
#define IO_DIRECT_IO_ALLOW_MMAP (1ULL << 36)

static ssize_t
io_read(int fd, void *buf, size_t len, void *userdata)
{
	struct fs_io *io = userdata;
	ssize_t n = read(fd, buf, len);
	const struct fuse_in_header *h = buf;

	if (n >= (ssize_t)(sizeof(*h) + sizeof(struct fuse_init_in)) &&
	    h->opcode == FUSE_INIT) {
		const struct fuse_init_in *in = (const void *)(h + 1);
		uint64_t flags = in->flags;

		if (flags & IO_INIT_EXT)
			flags |= (uint64_t)in->flags2 << 32;
		atomic_store(
		    &io->offered, (flags & IO_DIRECT_IO_ALLOW_MMAP) != 0);
		atomic_store(&io->init_unique, h->unique);
	}
	return n;
}

static ssize_t
io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct fs_io *io = userdata;
	const struct fuse_out_header *h = iov[0].iov_base;
	uint64_t u = atomic_load(&io->init_unique);
	struct fuse_init_out out;
	struct iovec v[2];

	if (u == 0 || count != 2 || iov[0].iov_len < sizeof(*h) ||
	    h->unique != u || h->error != 0 || iov[1].iov_len != sizeof(out))
		return writev(fd, iov, count);
	/* The INIT reply: ask for shared mmap of direct_io files. */
	atomic_store(&io->init_unique, 0);
	memcpy(&out, iov[1].iov_base, sizeof(out));
	if (atomic_load(&io->offered)) {
		out.flags |= (uint32_t)IO_INIT_EXT;
		out.flags2 |= (uint32_t)(IO_DIRECT_IO_ALLOW_MMAP >> 32);
	}
	v[0] = iov[0];
	v[1].iov_base = &out;
	v[1].iov_len = sizeof(out);
	if (writev(fd, v, 2) != (ssize_t)(iov[0].iov_len + sizeof(out)))
		return -1;
	atomic_store(&io->granted, atomic_load(&io->offered));
	return (ssize_t)(iov[0].iov_len + iov[1].iov_len);
}

int
fs_io_attach(struct fuse_session *se, struct fs_io *io)
{
	static const struct fuse_custom_io ops = {
	    .writev = io_writev, .read = io_read};

	atomic_store(&io->offered, false);
	atomic_store(&io->granted, false);
	atomic_store(&io->init_unique, 0);
	return fuse_session_custom_io(se, &ops, fuse_session_fd(se)) == 0
		   ? 0
		   : -EINVAL;
}

bool
fs_io_direct_mmap(struct fs_io *io)
{
	return atomic_load(&io->granted);
}
