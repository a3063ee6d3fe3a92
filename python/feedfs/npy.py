"""feedfs.npy - the .npy format as a mount writes it, read with plain
preadv: a header's length, shape and dtype; a buffer checked against
them; a small file (labels, ids) read whole in one read.

Part of the Python package (python/feedfs/): it imports only the
standard library and numpy, and nothing of the package; reader.py and
errors.py read through it.
"""

import io
import os

import numpy as np


def _parse_header(head):
    """(header length, shape, dtype) of a .npy file from its first bytes,
    or None when head is too short for the whole header."""
    if len(head) < 10 or head[:6] != b"\x93NUMPY":
        raise ValueError("not a .npy file")
    if head[6] == 1:
        hl = 10 + int.from_bytes(head[8:10], "little")
    elif head[6] in (2, 3):
        if len(head) < 12:
            return None
        hl = 12 + int.from_bytes(head[8:12], "little")
    else:
        raise ValueError(".npy version %d.%d" % (head[6], head[7]))
    if len(head) < hl:
        return None
    f = io.BytesIO(bytes(head[:hl]))
    if np.lib.format.read_magic(f) == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    if fortran and len(shape) > 1:
        raise ValueError(".npy in Fortran order")
    return hl, shape, dtype


def _preadv_all(fd, bufs, off):
    """preadv until every buffer is full; returns the bytes read (less at
    end of file)."""
    bufs = [memoryview(b).cast("B") for b in bufs]
    total = 0
    while bufs:
        n = os.preadv(fd, bufs, off)
        if n == 0:
            break
        total += n
        off += n
        while bufs and n >= len(bufs[0]):
            n -= len(bufs[0])
            bufs.pop(0)
        if bufs and n:
            bufs[0] = bufs[0][n:]
    return total


def _checked(path, out, parsed, size):
    hl, shape, dtype = parsed
    if dtype != out.dtype or tuple(shape[1:]) != out.shape[1:] \
            or not shape or shape[0] > out.shape[0]:
        raise ValueError("%s: %s %s does not fit a buffer of %s %s"
                         % (path, dtype, tuple(shape), out.dtype, out.shape))
    if hl + shape[0] * (out[0].nbytes if out.ndim else 0) != size:
        raise ValueError("%s: size %d disagrees with its header"
                         % (path, size))
    return out[:shape[0]]


def _read_small(path):
    """A small .npy (labels, ids) as a new writable array, in one read;
    an OSError of the read is raised as it is (reader._load_small turns
    a batch's into a BatchError)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size = os.fstat(fd).st_size
        buf = bytearray(size)
        if _preadv_all(fd, [buf], 0) != size:
            raise EOFError("%s: short read" % path)
    finally:
        os.close(fd)
    hl, shape, dtype = _parse_header(buf)
    return np.frombuffer(buf, dtype=dtype, offset=hl,
                         count=int(np.prod(shape))).reshape(shape)
