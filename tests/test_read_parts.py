#!/usr/bin/python3
"""test_read_parts.py - feedfs.read_into reads a large batch in parts, a
thread each (python/feedfs/reader.py: _pread_parts), and gets the same
bytes:

- on a real mount, every batch of two epochs of a float32 CHW job and of a
  uint8 HWC job, read with the parts made small (4 KiB and up, four
  threads, so that these small batches split: the header's read carries
  the first part), equals numpy.load of the same file, dtype, shape and
  bytes; and so does a read in one part (a single CPU);
- on a plain file, parts of any size (uneven last part) give its bytes;
  a file shorter than asked gives the bytes up to the first short part
  and read_into raises EOFError for a truncated .npy; a part's OSError
  (a closed descriptor) is raised in the caller's thread.
"""

import os
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

sys.path.insert(0, os.path.join(fflib.SRCDIR, "python"))
try:
    import numpy as np
except ImportError:
    fflib.skip("numpy is missing (Debian: python3-numpy)")
import feedfs  # noqa: E402

t = fflib.Test()
data = t.gen(t.path("data"), n=40, classes=3, seed=4)
JOBS = {
    "f32": dict(epochs=2, seed=21, batch_size=16),
    "u8": dict(epochs=2, seed=5, batch_size=16, dtype="uint8",
               layout="HWC",
               pipeline="decode resize(72) cache random_resized_crop(64) "
                        "flip(0.5)"),
}
cfg = t.config(t.path("feedfs.conf"), data, JOBS)


def parts(cpus, least):
    # The reader's own module: a name set on the package would not reach it.
    feedfs.reader._cpus = lambda: cpus
    feedfs.reader._PART_MIN = least


with fflib.Mount(t, cfg, t.path("mnt")) as m:
    for name in JOBS:
        for epoch in range(2):
            d = os.path.join(m.mnt, name, "epoch-%04d" % epoch)
            files = sorted(x for x in os.listdir(d)
                           if x.startswith("batch-") and x.endswith(".npy")
                           and x.count(".") == 1)
            check(files, "%s: no batches" % d)
            for x in files:
                ref = np.load(os.path.join(d, x))
                for cpus, least in ((4, 4096), (3, 4096), (1, 4096),
                                    (4, 1 << 30)):
                    parts(cpus, least)
                    out = np.empty((32,) + ref.shape[1:], ref.dtype)
                    got = feedfs.read_into(os.path.join(d, x), out)
                    check(got.dtype == ref.dtype and
                          got.shape == ref.shape and
                          got.tobytes() == ref.tobytes(),
                          "%s/%s in parts (%d CPUs, %d bytes and up) "
                          "differs from numpy.load" % (d, x, cpus, least))
    log("read_into in parts equals numpy.load on the mount (f32, u8)")

# A plain file: parts of uneven size, a short file, errors.
blob = os.urandom(3 * 1000 * 1000 + 17)
path = t.path("blob")
with open(path, "wb") as f:
    f.write(blob)
fd = os.open(path, os.O_RDONLY)
try:
    for cpus, least in ((4, 4096), (8, 100000), (2, 1500000), (1, 4096)):
        parts(cpus, least)
        head = bytearray(100)
        buf = bytearray(len(blob) - 100)
        n = feedfs._pread_parts(fd, head, buf, 0)
        check(n == len(blob) and bytes(head) + bytes(buf) == blob,
              "parts (%d, %d) with a head: wrong bytes" % (cpus, least))
        buf = bytearray(len(blob) - 5)
        n = feedfs._pread_parts(fd, None, buf, 5)
        check(n == len(blob) - 5 and bytes(buf) == blob[5:],
              "parts (%d, %d) at 5: wrong bytes" % (cpus, least))
        # Asked for more than the file holds: up to its end.
        buf = bytearray(len(blob) + 50000)
        n = feedfs._pread_parts(fd, None, buf, 0)
        check(n == len(blob) and bytes(buf[:n]) == blob,
              "parts (%d, %d) past the end: %d bytes" % (cpus, least, n))
finally:
    os.close(fd)
parts(4, 4096)
try:
    feedfs._pread_parts(fd, None, bytearray(1 << 20), 0)
    fflib.fail("a closed descriptor read without an error")
except OSError:
    pass
arr = np.arange(64 * 3 * 32 * 32, dtype=np.float32).reshape(64, 3, 32, 32)
np.save(t.path("a.npy"), arr)
out = np.empty_like(arr)
check(feedfs.read_into(t.path("a.npy"), out).tobytes() == arr.tobytes(),
      "a .npy read in parts differs")
size = os.path.getsize(t.path("a.npy"))
os.truncate(t.path("a.npy"), size - 10000)
try:
    feedfs.read_into(t.path("a.npy"), out)
    fflib.fail("a truncated .npy was read")
except (EOFError, ValueError):
    pass
log("parts of a plain file: uneven, short, closed, truncated")
sys.exit(0)
