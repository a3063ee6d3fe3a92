#!/usr/bin/python3
"""test_paths.py - names, reads and writes through a real mount (issue 6):

- lookups of non-canonical names (epoch-3, epoch-00003, batch-17.npy,
  rank-9-of-4, rank-0-of-0, rank-01-of-4, overflowing numbers, names of
  255 to 1024 bytes) get ENOENT from feedfs; 4096-byte names get
  ENAMETOOLONG from the kernel before feedfs sees them (names between
  1025 and 4095 bytes: ENAMETOOLONG from kernels before 6.x, whose
  FUSE_NAME_MAX is 1024, else feedfs's ENOENT);
- reads at many offsets and sizes (zero bytes, past EOF, unaligned, across
  the header, larger than the file, O_DIRECT, through mmap) return exactly
  feedfs-ref's bytes;
- every way of changing the mount fails: open for writing, O_TRUNC,
  create, truncate, chmod, chown, utime, setxattr, removexattr, rename,
  unlink, rmdir, mkdir, symlink, link, mknod get EROFS.  The mount is
  flagged read-only ("ro" in /proc/mounts), so the kernel answers most of
  these itself; feedfs's own handlers answer EROFS too.  Exceptions, as
  the kernel gives them: getxattr and listxattr get ENOTSUP (feedfs has no
  attributes), and opening a directory for writing gets EISDIR.
"""

import errno
import mmap
import os
import random
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

t = fflib.Test()
data = t.gen(t.path("data"), n=40, classes=3, seed=4)
cfg = t.config(t.path("feedfs.conf"), data, {
    "train": dict(epochs=5, batch_size=6),
}, threads=2, memory="64M", readahead=1)
ref0 = t.ref(cfg, "train", 0, t.path("ref0"))
ref1 = t.ref(cfg, "train", 1, t.path("ref1"), rank=2, world=3)


def expect_errno(want, fn, what):
    try:
        fn()
    except OSError as e:
        check(e.errno == want, "%s: %s, expected %s" % (
            what, errno.errorcode.get(e.errno, e.errno),
            errno.errorcode[want]))
        return
    fail_msg = "%s: succeeded, expected %s" % (what, errno.errorcode[want])
    fflib.fail(fail_msg)


with fflib.Mount(t, cfg, t.path("mnt")) as m:
    J = m.p("train")
    # ---- names --------------------------------------------------------------
    ok = ["epoch-0000", "epoch-0004", "rank-0-of-1", "rank-3-of-4",
          "rank-1023-of-1024", "rank-2-of-3/epoch-0001/batch-000000.npy",
          "epoch-0000/batch-000006.npy", "epoch-0000/batch-000006.ids.npy",
          "epoch-0000/batch-000006.labels.npy", "info.json", "samples.tsv"]
    for n in ok:
        os.stat(os.path.join(J, n))
    enoent = ["epoch-3", "epoch-003", "epoch-00003", "epoch-0005",
              "epoch-9999", "epoch--001", "epoch-+001", "epoch- 001",
              "epoch-0000 ", " epoch-0000", "Epoch-0000", "epoch-0x01",
              "epoch-4294967296", "epoch-" + "9" * 25, "epoch-",
              "rank-9-of-4", "rank-4-of-4", "rank-0-of-0", "rank-01-of-4",
              "rank-0-of-04", "rank-0-of-1025", "rank--1-of-4",
              "rank-0-of-18446744073709551617", "rank-0-of-", "rank-0",
              "rank-0-of-1/rank-0-of-1", "rank-0-of-2/info.json",
              "epoch-0000/batch-17.npy", "epoch-0000/batch-0000017.npy",
              "epoch-0000/batch-000007.npy", "epoch-0000/batch-999999.npy",
              "epoch-0000/batch-000000.npy.bak", "epoch-0000/batch-000000",
              "epoch-0000/batch-000000.NPY", "epoch-0000/batch-000000.cuda",
              "epoch-0000/batch-" + "0" * 30 + ".npy",
              "epoch-0000/batch-18446744073709551616.npy",
              "epoch-0000/epoch-0000", "nosuch", "README",
              "x" * 255, "x" * 256, "x" * 1024]
    for n in enoent:
        expect_errno(errno.ENOENT, lambda: os.stat(os.path.join(J, n)),
                     "stat train/%s" % n[:60])
    expect_errno(errno.ENOTDIR, lambda: os.stat(m.p("README", "x")),
                 "stat README/x")
    expect_errno(errno.ENOENT, lambda: os.stat(m.p("nosuchjob")), "nosuchjob")
    expect_errno(errno.ENOENT, lambda: os.stat(m.p(".feedfs", "x")),
                 ".feedfs/x")
    # Over FUSE_NAME_MAX (1024 before Linux 6.x, PATH_MAX - 1 since): the
    # kernel's ENAMETOOLONG, or feedfs's ENOENT where the kernel passes it.
    for n in ["x" * 1025, "x" * 4095]:
        try:
            os.stat(os.path.join(J, n))
            fflib.fail("stat a %d-byte name succeeded" % len(n))
        except OSError as e:
            check(e.errno in (errno.ENOENT, errno.ENAMETOOLONG),
                  "stat a %d-byte name: %s" % (len(n), e))
    for n in ["x" * 4096, "epoch-" + "0" * 4090]:
        expect_errno(errno.ENAMETOOLONG, lambda: os.stat(os.path.join(J, n)),
                     "stat a %d-byte name" % len(n))
    expect_errno(errno.ENAMETOOLONG,
                 lambda: os.stat(os.path.join(J, *(["epoch-0000/.."] * 400))),
                 "stat a 5600-byte path")
    log("names: %d canonical resolve, %d non-canonical get ENOENT, long "
        "names ENAMETOOLONG" % (len(ok), len(enoent)))

    # ---- reads ----------------------------------------------------------------
    rng = random.Random(17)
    nreads = 0

    def check_reads(path, want, cases):
        global nreads
        size = len(want)
        check(os.stat(path).st_size == size, "%s: st_size" % path)
        for off, n in cases:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                got = os.pread(fd, n, off)
            finally:
                os.close(fd)
            check(got == want[off:off + n], "%s: pread(%d, %d): %d bytes, "
                  "wrong" % (path, n, off, len(got)))
            nreads += 1

    for rel, ref in [("epoch-0000/batch-000000.npy", ref0),
                     ("epoch-0000/batch-000006.npy", ref0),
                     ("epoch-0000/batch-000003.labels.npy", ref0),
                     ("epoch-0000/batch-000003.ids.npy", ref0),
                     ("rank-2-of-3/epoch-0001/batch-000001.npy", ref1)]:
        path = os.path.join(J, rel)
        with open(os.path.join(ref, os.path.basename(rel)), "rb") as f:
            want = f.read()
        size = len(want)
        hdr = fflib.npy_header_len(path)
        cases = [(0, 0), (0, 1), (0, 10), (0, hdr - 1), (0, hdr),
                 (0, hdr + 1), (hdr - 1, 2), (hdr, 1), (1, 4096),
                 (63, 65), (4095, 8193), (4097, 3), (size - 1, 1),
                 (size - 1, 100), (size, 1), (size, 0), (size + 1, 10),
                 (size + 10 ** 9, 4096), (2 ** 62, 1), (0, size),
                 (0, size + 100000), (size // 2, size)]
        cases += [(rng.randrange(size + 64), rng.choice(
            [1, 3, 511, 4096, 65536, 131073, 1 << 20]))
            for _ in range(40)]
        check_reads(path, want, cases)
        # mmap: the whole file, a page-aligned window, the page past EOF
        with open(path, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
            check(mm[:] == want, "%s: mmap differs" % rel)
            mm.close()
            if size > 3 * mmap.PAGESIZE:
                mm = mmap.mmap(f.fileno(), 2 * mmap.PAGESIZE,
                               prot=mmap.PROT_READ, offset=mmap.PAGESIZE)
                check(mm[:] == want[mmap.PAGESIZE:3 * mmap.PAGESIZE],
                      "%s: mmap window differs" % rel)
                mm.close()
        # O_DIRECT: the offsets reach feedfs as they are (no page cache)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        except OSError as e:
            log("O_DIRECT: %s (not tried)" % e)
            continue
        try:
            buf = mmap.mmap(-1, 1 << 21)
            for off, n in [(0, 4096), (4096, 1 << 20), (size - 4096, 8192),
                           (size, 4096)]:
                if off < 0:
                    continue
                got = os.preadv(fd, [memoryview(buf)[:n]], off)
                check(buf[:got] == want[off:off + n],
                      "%s: O_DIRECT pread(%d, %d) differs" % (rel, n, off))
                nreads += 1
            buf.close()
        finally:
            os.close(fd)
    for rel in ["README", "train/info.json", "train/samples.tsv"]:
        path = m.p(rel)
        want = fflib.read_file(path)
        check_reads(path, want, [(0, 0), (1, 5), (len(want) - 1, 10),
                                 (len(want), 10), (len(want) + 5, 1)])
    log("reads: %d reads at odd offsets and sizes, mmap and O_DIRECT, "
        "equal feedfs-ref" % nreads)

    # ---- writes -----------------------------------------------------------------
    f = m.p("train", "epoch-0000", "batch-000000.npy")
    d = m.p("train", "epoch-0000")
    erofs = [
        ("open O_WRONLY", lambda: os.open(f, os.O_WRONLY)),
        ("open O_RDWR", lambda: os.open(f, os.O_RDWR)),
        ("open O_APPEND", lambda: os.open(f, os.O_WRONLY | os.O_APPEND)),
        ("open O_TRUNC", lambda: os.open(f, os.O_RDONLY | os.O_TRUNC)),
        ("create", lambda: os.open(os.path.join(d, "new"),
                                   os.O_WRONLY | os.O_CREAT, 0o644)),
        ("create existing", lambda: os.open(f, os.O_RDWR | os.O_CREAT)),
        ("truncate", lambda: os.truncate(f, 0)),
        ("truncate README", lambda: os.truncate(m.p("README"), 0)),
        ("truncate stats", lambda: os.truncate(m.p(".feedfs", "stats"), 0)),
        ("chmod", lambda: os.chmod(f, 0o777)),
        ("chmod dir", lambda: os.chmod(d, 0o777)),
        ("chown", lambda: os.chown(f, 1, 1)),
        ("utime", lambda: os.utime(f, (1, 1))),
        ("setxattr", lambda: os.setxattr(f, "user.x", b"1")),
        ("setxattr trusted", lambda: os.setxattr(f, "trusted.x", b"1")),
        ("removexattr", lambda: os.removexattr(f, "user.x")),
        ("rename", lambda: os.rename(f, os.path.join(d, "x"))),
        ("rename dir", lambda: os.rename(d, m.p("train", "x"))),
        ("unlink", lambda: os.unlink(f)),
        ("unlink README", lambda: os.unlink(m.p("README"))),
        ("rmdir", lambda: os.rmdir(d)),
        ("rmdir job", lambda: os.rmdir(m.p("train"))),
        ("mkdir", lambda: os.mkdir(os.path.join(d, "x"))),
        ("mkdir root", lambda: os.mkdir(m.p("newjob"))),
        ("symlink", lambda: os.symlink("a", os.path.join(d, "x"))),
        ("link", lambda: os.link(f, os.path.join(d, "x"))),
        ("mkfifo", lambda: os.mkfifo(os.path.join(d, "x"))),
    ]
    for what, fn in erofs:
        expect_errno(errno.EROFS, fn, what)
    expect_errno(errno.ENOTSUP, lambda: os.getxattr(f, "user.x"), "getxattr")
    expect_errno(errno.EISDIR, lambda: os.open(d, os.O_WRONLY),
                 "open a directory O_WRONLY")
    # nothing changed, and the daemon still serves
    with open(os.path.join(ref0, "batch-000000.npy"), "rb") as fh:
        check(fflib.read_file(f, drop=True) == fh.read(),
              "batch 0 changed after the write attempts")
    check(m.alive(), "feedfs died")
    log("writes: %d kinds of change get EROFS; getxattr ENOTSUP, "
        "O_WRONLY on a directory EISDIR" % len(erofs))
sys.exit(0)
