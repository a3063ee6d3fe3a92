/*
 * npy.h - the model (core/): NumPy .npy format version 1.0 headers, the
 * header of every batch file.
 */
#ifndef FEEDFS_NPY_H
#define FEEDFS_NPY_H

#include <stddef.h>
#include <stdint.h>

#define NPY_ALIGN 64

/*
 * Write the header of a C-order array of dtype descr ("<f4", "<f2", "|u1",
 * "<i8") and shape into buf: magic, version 1.0, the dict, padded with
 * spaces and a newline so the data starts at a multiple of NPY_ALIGN.
 * Returns the header's length; buf needs at most NPY_MAX_HEADER bytes.
 */
#define NPY_MAX_HEADER 256
size_t npy_header(char *buf, const char *descr, const uint64_t *shape,
    int ndim);
/* The length npy_header would return, computed without writing it. */
size_t npy_header_len(const char *descr, const uint64_t *shape, int ndim);

#endif
