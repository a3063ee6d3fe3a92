/*
 * replybuf.h - a buffer of the calling thread's for the bytes of a FUSE
 * reply (util/).
 *
 * ff_reply_buf returns at least size bytes, valid until the thread's
 * next call (or its end, which frees it); NULL without memory.  Buffers
 * of a megabyte and more are aligned to a huge page and advised to be
 * one: the kernel pins a reply's pages to copy them out, page by page.
 */
#ifndef FEEDFS_UTIL_REPLYBUF_H
#define FEEDFS_UTIL_REPLYBUF_H

#include <stddef.h>
#include <stdint.h>

uint8_t *ff_reply_buf(size_t size);

#endif
