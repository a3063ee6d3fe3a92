#!/usr/bin/python3
"""test_cache_size.py - cache_size = auto, the default (issue 26): the
cache's bound is half of what cache_dir's filesystem has free, the
cache's own files counted as free, chosen when the mount opens the cache.

On tmpfs filesystems of known sizes (mounted by the test):

- a mount with no config and no cache_size (the default) logs the bound
  it chose, which is half of the filesystem's free space (within what
  the store's first files take), and serves with it: .feedfs/stats'
  feedfs_cache_admit_bytes is 95% of it;
- after an epoch filled the cache, a remount chooses the same bound
  (the cache's bytes count as free), not a smaller one;
- on a filesystem of 64M, an epoch whose prefixes need more than that is
  served in full with the cache on, its store under half the disk, the
  filesystem never full (the old 50G default filled it: the cache failed);
- cache_size = 0 and a set size still mean what they say.
"""

import atexit
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

PY = os.path.join(fflib.SRCDIR, "python")
sys.path.insert(0, PY)
try:
    import numpy  # noqa: F401
except ImportError:
    fflib.skip("numpy is missing (Debian: python3-numpy)")
import feedfs  # noqa: E402

MB = 1 << 20
t = fflib.Test()
tmpfs = []


def umount_tmpfs():
    for d in reversed(tmpfs):
        subprocess.call(["umount", "-l", d], stderr=subprocess.DEVNULL)


atexit.register(umount_tmpfs)  # before Test's cleanup (atexit is LIFO)


def make_tmpfs(name, size):
    d = t.path(name)
    os.makedirs(d)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d,mode=0700"
                        % size, "tmpfs", d], stderr=subprocess.PIPE)
    if r.returncode != 0:
        fflib.skip("cannot mount a tmpfs: %s" % r.stderr.decode().strip())
    tmpfs.append(d)
    return d


def avail(d):
    s = os.statvfs(d)
    return s.f_bavail * s.f_frsize


def chosen(m):
    """The bound the mount's log says cache_size = auto chose."""
    found = re.findall(r"cache_size = auto: \S+ \((\d+) bytes\), .*?half "
                       r"of the \S+ free on ([^ ]+)'s filesystem and the "
                       r"\S+ the cache takes", m.log())
    check(len(found) == 1, "the log says no (or more than one) chosen "
          "cache_size:\n%s" % m.log())
    return int(found[0][0]), found[0][1]


def stat(m, name):
    return feedfs.stats(m.mnt)[(name, ())]


def read_epoch(m, job, e):
    j = feedfs.Job(m.p(job))
    n = 0
    for x, _ in j.epoch(e):
        n += len(x)
    return n


# 240 images of ~400x300: resize(256)'s prefix is ~256x341x3 = 260 KB, so
# an epoch's prefixes take ~62 MB.
data = t.gen(t.path("data"), n=240, classes=4, seed=5, big=True)

# ---- the default, on a filesystem of 256M -------------------------------------
fs = make_tmpfs("fs256", 256 * MB)
free0 = avail(fs)
cdir = os.path.join(fs, "cache")
m = fflib.Mount(t, data, t.path("mnt"), "-o",
                "cache_dir=%s,threads=2,memory=256M" % cdir).__enter__()
b1, where = chosen(m)
check(where == cdir, "the log names %s, not %s" % (where, cdir))
# The store's first files (a few KB to a few MB) are taken from the free
# space before it was measured, and count as the cache's: the bound is
# half the free space as the test found it, within a few MB.
check(abs(b1 - free0 // 2) <= 4 * MB,
      "cache_size = auto chose %d bytes, half of the %d free is %d"
      % (b1, free0, free0 // 2))
admit = stat(m, "feedfs_cache_admit_bytes")
check(admit == b1 - b1 // 20, "feedfs_cache_admit_bytes %d with a bound of %d"
      % (admit, b1))
n = read_epoch(m, "train", 0)
check(n == 240, "train epoch 0 served %d of 240 samples" % n)
inserts = stat(m, "feedfs_cache_inserts_total")
check(inserts == 240, "%d inserts in a cold epoch of 240" % inserts)
m.umount()
used = sum(os.stat(os.path.join(cdir, f)).st_blocks * 512
           for f in os.listdir(cdir)
           if os.path.isfile(os.path.join(cdir, f)))
check(used > 40 * MB, "the cache takes only %d bytes after an epoch" % used)
log("default on a 256M tmpfs: bound %.1fM (half of %.1fM free); an epoch "
    "left %.1fM in the cache" % (b1 / MB, free0 / MB, used / MB))

# ---- the remount keeps the bound ---------------------------------------------
free1 = avail(fs)
m = fflib.Mount(t, data, t.path("mnt"), "-o",
                "cache_dir=%s,threads=2,memory=256M" % cdir).__enter__()
b2, _ = chosen(m)
check(abs(b2 - b1) <= 4 * MB, "the remount chose %d bytes, the first mount "
      "%d: the cache's %d bytes were not counted as free (%d free now)"
      % (b2, b1, used, free1))
HITS = ("feedfs_cache_hits_total", (("job", "train"),))
hits0 = feedfs.stats(m.mnt)[HITS]
read_epoch(m, "train", 1)
hits = feedfs.stats(m.mnt)[HITS] - hits0
check(hits == 240, "the remount's warm epoch hit %d of 240" % hits)
m.umount()
log("remount: bound %.1fM (%.1fM free, %.1fM cached); the warm epoch hit "
    "all 240" % (b2 / MB, free1 / MB, used / MB))

# ---- a small disk: half of it, never full ------------------------------------
small = make_tmpfs("fs64", 64 * MB)
sdir = os.path.join(small, "cache")
m = fflib.Mount(t, data, t.path("mnt"), "-o",
                "cache_dir=%s,threads=2,memory=256M" % sdir).__enter__()
b3, _ = chosen(m)
check(b3 <= 32 * MB, "a 64M filesystem: a bound of %d" % b3)
for e in range(2):
    n = read_epoch(m, "train", e)
    check(n == 240, "64M: epoch %d served %d of 240" % (e, n))
s = feedfs.stats(m.mnt)
check(s[("feedfs_cache_enabled", ())] == 1 and
      s[("feedfs_cache_insert_failures_total", ())] == 0,
      "64M: the cache failed (enabled %d, insert failures %d):\n%s"
      % (s[("feedfs_cache_enabled", ())],
         s[("feedfs_cache_insert_failures_total", ())], m.log()))
check(s[("feedfs_cache_inserts_total", ())] > 0, "64M: nothing was cached")
left = avail(small)
m.umount()
check(left > 16 * MB, "64M: only %d bytes left free with the cache open"
      % left)
log("64M tmpfs: bound %.1fM; two epochs served, no insert failed, %.1fM "
    "still free" % (b3 / MB, left / MB))

# ---- a takeover keeps the old owner's bound -------------------------------------
# Owner A with cache_size = 200M, client B with auto (half of the free
# 256M would be ~128M); A goes, B takes the store over at its next read
# and keeps 200M: a takeover never shrinks the shared cache.
fsb = make_tmpfs("fsb", 256 * MB)
bdir = os.path.join(fsb, "cache")
ma = fflib.Mount(t, data, t.path("mnta"), "-o",
                 "cache_dir=%s,cache_size=200M" % bdir).__enter__()
mb = fflib.Mount(t, data, t.path("mntb"), "-o",
                 "cache_dir=%s" % bdir).__enter__()
check("attached to the cache" in mb.log(), "B is not a client:\n%s"
      % mb.log())
ma.umount()
deadline = __import__("time").monotonic() + 60
e = 0
while "owner of" not in mb.log():
    check(__import__("time").monotonic() < deadline,
          "B never took the cache over:\n%s" % mb.log())
    read_epoch(mb, "train", 0)
b4, _ = chosen(mb)
check(b4 == 200 * MB and "the bound the previous owner served with, more "
      "than half of the" in mb.log(),
      "the takeover chose %d, not the old owner's 200M:\n%s"
      % (b4, mb.log()))
check(stat(mb, "feedfs_cache_admit_bytes") == 200 * MB - 10 * MB,
      "after the takeover: admit_bytes %d"
      % stat(mb, "feedfs_cache_admit_bytes"))
mb.umount()
log("takeover with cache_size = auto from an owner of 200M: kept 200M")

# ---- cache_size = 0 and a set size are what they say ---------------------------
m = fflib.Mount(t, data, t.path("mnt"), "-o",
                "cache_dir=%s,cache_size=100M" % cdir).__enter__()
check("cache_size = auto" not in m.log(), "a set cache_size was chosen:\n%s"
      % m.log())
admit = stat(m, "feedfs_cache_admit_bytes")
check(admit == 100 * MB - 5 * MB, "cache_size=100M: admit_bytes %d" % admit)
m.umount()
m = fflib.Mount(t, data, t.path("mnt"), "-o",
                "cache_dir=%s,cache_size=0" % cdir).__enter__()
check("cache_size = auto" not in m.log() and
      feedfs.stats(m.mnt)[("feedfs_cache_enabled", ())] == 0,
      "cache_size=0: a cache:\n%s" % m.log())
m.umount()
log("cache_size=100M and cache_size=0: as set")
umount_tmpfs()
tmpfs.clear()
sys.exit(0)
