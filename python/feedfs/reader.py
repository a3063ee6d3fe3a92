"""feedfs.reader - reading a batch file: read_into, one preadv into memory
the caller keeps, a large batch in parts by a thread each; a small file
(labels, ids) whole; a batch's captions (read_text, its .text.jsonl); a
read the mount fails with EIO raised as a BatchError that says why.

Part of the Python package (python/feedfs/): it imports npy.py (the
format) and errors.py; job.py and feedfs.torch read through it.
"""

import json
import os
import threading

import numpy as np

from .errors import _batch_error
from .npy import _checked, _parse_header, _preadv_all, _read_small


# A large read is split in parts read at once by threads, each at least
# _PART_MIN bytes, as many as the CPUs this process may run on (at most
# _PARTS_MAX).  The kernel serves one read of a direct I/O file (a batch)
# one request (1 MiB) after another: one read keeps one of the mount's
# threads copying while the other cores wait.  Parts let them all copy.
_PART_MIN = 8 << 20
_PARTS_MAX = 8


def _cpus():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _pread_parts(fd, head, data, off):
    """_preadv_all(fd, [head, data], off) (head may be None), with data's
    bytes read in parts by threads when it is large; returns the bytes
    read (up to the first short part)."""
    data = memoryview(data).cast("B")
    hn = len(head) if head is not None else 0
    k = min(_cpus(), _PARTS_MAX, len(data) // _PART_MIN)
    if k < 2:
        return _preadv_all(fd, [head, data] if head is not None else [data],
                           off)
    step = -(-len(data) // k)
    step = -(-step // 4096) * 4096
    spans = [(i, min(i + step, len(data))) for i in range(0, len(data), step)]
    got = [0] * len(spans)
    errors = []

    def part(i):
        a, b = spans[i]
        try:
            if i == 0 and head is not None:
                got[i] = _preadv_all(fd, [head, data[a:b]], off) - hn
            else:
                got[i] = _preadv_all(fd, [data[a:b]], off + hn + a)
        except BaseException as e:  # raised in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=part, args=(i,), daemon=True)
               for i in range(1, len(spans))]
    for t in threads:
        t.start()
    part(0)
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    if got[0] < 0:
        return got[0] + hn
    total = hn
    for (a, b), n in zip(spans, got):
        total += n
        if n < b - a:
            break
    return total


def read_into(path, out):
    """Read the .npy file at path into the front of out, a C-contiguous
    numpy array whose shape after the first axis and dtype are the file's;
    return out[:n], n the file's first dimension.

    One read in the usual case: the header's length is the file's size
    modulo one sample's bytes (the mount pads it to 64 bytes, far less than
    a sample), and the header and the data go into one preadv; the header
    is then checked, and a file that does not fit that guess is read in
    two.  Nothing new is allocated for the data.  A large file's data is
    read in parts by a few threads at once (one per CPU, parts of 8 MiB
    or more): the kernel answers one read of a batch one 1 MiB request at
    a time, so that a single read keeps only one core copying.

    A batch the mount cannot make raises BatchError (an OSError, errno
    EIO) that names the batch and its samples that failed, with their
    files and reasons."""
    try:
        return _read_into(path, out)
    except OSError as e:
        raise _batch_error(path, e) from None


def _read_into(path, out):
    if not out.flags.c_contiguous:
        raise ValueError("read_into: the buffer must be C-contiguous")
    sample = out[0].nbytes if out.ndim else out.nbytes
    flat = out.reshape(-1).view(np.uint8)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size = os.fstat(fd).st_size
        hl = size % sample if sample >= 4096 else 0
        head = bytearray(hl if hl >= 64 else 4096)
        if hl >= 64 and size - hl <= flat.nbytes:
            got = _pread_parts(fd, head, flat[:size - hl], 0)
            parsed = _parse_header(head) if got == size else None
            if parsed is not None and parsed[0] == hl:
                return _checked(path, out, parsed, size)
        # The general way: the header, then the data where it says.
        head = bytearray(4096)
        got = _preadv_all(fd, [head], 0)
        parsed = _parse_header(head[:got])
        if parsed is None:  # a header over 4 KiB
            head = bytearray(65536 + 12)
            parsed = _parse_header(head[:_preadv_all(fd, [head], 0)])
            if parsed is None:
                raise ValueError("%s: .npy header too long" % path)
        hl = parsed[0]
        n = size - hl
        if n > flat.nbytes:
            raise ValueError("%s: %d bytes of data, the buffer holds %d"
                             % (path, n, flat.nbytes))
        if _pread_parts(fd, None, flat[:n], hl) != n:
            raise EOFError("%s: short read" % path)
        return _checked(path, out, parsed, size)
    finally:
        os.close(fd)


def _load_small(path):
    """A small .npy (labels, ids) as a new writable array, in one read; a
    batch the mount cannot make raises BatchError."""
    try:
        return _read_small(path)
    except OSError as e:
        raise _batch_error(path, e) from None


def read_text(path):
    """The captions of a batch (its .text.jsonl at path): a list of str,
    one per sample, in the batch's order.  The file is JSON lines: one
    JSON string a line, each ending with a newline (the only one in it:
    tabs, newlines and any Unicode are escaped or kept in the string).
    A batch the mount cannot make raises BatchError."""
    try:
        return _read_text(path)
    except OSError as e:
        raise _batch_error(path, e) from None


def _read_text(path):
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        parts = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            parts.append(b)
    finally:
        os.close(fd)
    data = b"".join(parts)
    if not data:
        return []
    if not data.endswith(b"\n"):
        raise ValueError("%s: not JSON lines (no newline at its end)"
                         % path)
    # Split on b"\n" alone: str.splitlines would also split at U+2028,
    # which a JSON string may hold as it is.
    return [json.loads(line) for line in data[:-1].split(b"\n")]
