#!/usr/bin/python3
"""test_cache_mount.py - the cache through real mounts, hit and miss
accounting read from .feedfs/stats, bytes compared with feedfs-ref:

  - two jobs with equal prefixes and other seeds, batch sizes and later
    ops: after job a's epoch 0, job b's epoch 0 has >= 99% hits;
  - a remount with the same cache_dir: its first epoch has >= 99% hits;
  - a source file rewritten after caching (another image, new mtime) is a
    miss, and the bytes served are feedfs-ref's for the new file;
  - the size bound under continuous insertion (cache_stale = 0: every
    entry may make room): 16M of cache, ~50M of
    values put through a mount; the disk use, polled while it runs and
    measured with du after the unmount, stays under the bound plus the
    slack that cache.h documents; the bytes written are the store's own
    figure (feedfs-cache stats, from the owner: only what was stored,
    issue 17 item 7), and more than twice the bound;
  - under a umask of 022, every file the store made, later ones (flushes,
    compactions) included, is 0600 (issue 17 item 12)."""

import os
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

MB = 1 << 20
N = 64
FC = os.path.join(fflib.BUILDDIR, "feedfs-cache")
# A common shell umask: files RocksDB makes after the open are 0644 less
# this unless feedfs sets its own.
os.umask(0o022)
t = fflib.Test()
data = t.gen(t.path("data"), n=N, classes=4, seed=21)
cfg = t.config(t.path("feedfs.conf"), data, {
    "a": dict(epochs=1, seed=1),
    # the same prefix as a, everything after it different
    "b": dict(epochs=1, seed=99, batch_size=6,
              pipeline="decode resize(72) cache center_crop(60) flip(0.5)",
              dtype="uint8", layout="HWC"),
})


def hit_rate(m, job):
    h = m.job_stat("feedfs_cache_hits_total", job)
    miss = m.job_stat("feedfs_cache_misses_total", job)
    check(h + miss > 0, "job %s: no cache lookups" % job)
    return h, miss, h / (h + miss)


ref_a = t.ref(cfg, "a", 0, t.path("ref", "a0"))
ref_b = t.ref(cfg, "b", 0, t.path("ref", "b0"))

# ---- two jobs, one prefix ---------------------------------------------------
with fflib.Mount(t, cfg, t.path("mnt")) as m:
    m.read_epoch("a", 0, ref_a)
    h, miss, _ = hit_rate(m, "a")
    check((h, miss) == (0, N), "cold epoch of a: %d hits %d misses, "
          "expected 0 and %d" % (h, miss, N))
    m.read_epoch("b", 0, ref_b)
    h, miss, rate = hit_rate(m, "b")
    log("job b after job a: %d hits, %d misses (%.1f%%)"
        % (h, miss, 100 * rate))
    check(rate >= 0.99, "job b's first epoch: %.1f%% hits, expected >= 99%%"
          % (100 * rate))
    st = m.stats()
    check(st["feedfs_cache_read_bytes_total"] > 0, "no cache bytes read")
    check(st["feedfs_cache_written_bytes_total"] > 0, "no cache bytes written")
    disk = st["feedfs_cache_disk_bytes"]

# ---- a remount starts warm ---------------------------------------------------
with fflib.Mount(t, cfg, t.path("mnt")) as m:
    st = m.stats()
    check(st["feedfs_cache_disk_bytes"] > 0, "remount: the cache is empty")
    log("cache bytes per image (resize(72), 72x~96x3 uint8): %.0f"
        % (st["feedfs_cache_disk_bytes"] / N))
    m.read_epoch("a", 0, ref_a)
    h, miss, rate = hit_rate(m, "a")
    log("remount, job a: %d hits, %d misses (%.1f%%)" % (h, miss, 100 * rate))
    check(rate >= 0.99, "first epoch after a remount: %.1f%% hits, "
          "expected >= 99%%" % (100 * rate))

    # ---- a source file changed after caching --------------------------------
    # Sample 0's file gets another image (of another generated set) and a
    # new mtime; b has not read anything in this mount yet.
    other = t.gen(t.path("other"), n=8, classes=1, seed=77)
    with open(m.p("b", "samples.tsv")) as f:
        victim = f.readline().split("\t")[1]
    victim = os.path.join(data, victim.strip())
    src = os.path.join(other, sorted(os.listdir(other))[0])
    src = os.path.join(src, sorted(os.listdir(src))[0])
    st0 = os.stat(victim)
    shutil.copyfile(src, victim)
    os.utime(victim, ns=(st0.st_atime_ns, st0.st_mtime_ns + 5 * 10**9))
    ref_b2 = t.ref(cfg, "b", 0, t.path("ref", "b0-changed"))
    check(any(open(os.path.join(ref_b, f), "rb").read() !=
              open(os.path.join(ref_b2, f), "rb").read()
              for f in os.listdir(ref_b)),
          "the rewritten file changed nothing in b's reference")
    m.read_epoch("b", 0, ref_b2)
    h, miss, _ = hit_rate(m, "b")
    check((h, miss) == (N - 1, 1), "after rewriting %s: %d hits %d misses, "
          "expected %d and 1" % (victim, h, miss, N - 1))
    log("changed source: 1 miss, bytes equal the new reference")

# ---- the size bound under continuous insertion --------------------------------
# 160 images (--big: some up to 700 px) resized to a short side of 256:
# ~250 KB a value, ~40M put into a 16M cache.
big = t.gen(t.path("big"), n=160, classes=2, seed=3, big=True)
bound = 16 * MB
bcfg = t.config(t.path("bound.conf"), big, {
    "v": dict(epochs=1, shuffle="no", batch_size=16,
              pipeline="decode resize(256) cache center_crop(32)",
              dtype="uint8", layout="HWC"),
}, cache_dir=t.path("bcache"), cache_size="16M", memory="64M",
   cache_stale=0)  # every entry stale: insertion never stops
# cache.h: over by at most min(64M, bound/32) plus a memtable (the cache's
# memory is memory/8 = 8M, a memtable mem/8 = 1M) once flushes settle;
# while running, the two memtables RocksDB may be flushing at a check
# count too (seen on a loaded machine: 18.4M).  RocksDB's metadata files
# (MANIFEST, OPTIONS, LOG: kept under 2 x 1M) come on top for du.
slack = bound // 32 + 1 * MB
running_slack = slack + 2 * 1 * MB + bound // 32 * 2
meta = 3 * MB
ref_v = t.ref(bcfg, "v", 0, t.path("ref", "v0"))
peak = 0
with fflib.Mount(t, bcfg, t.path("mnt")) as m:
    d = m.p("v", "epoch-0000")
    for name in sorted(os.listdir(d)):
        got = fflib.read_file(os.path.join(d, name))
        with open(os.path.join(ref_v, name), "rb") as f:
            check(got == f.read(), "%s differs from feedfs-ref's" % name)
        peak = max(peak, m.stats()["feedfs_cache_disk_bytes"])
    # The store's own figures, from the owner through its control socket:
    # written counts what was stored, never a denied put.
    out = subprocess.run([FC, "--cache-dir", t.path("bcache"), "stats"],
                         stdout=subprocess.PIPE, check=True).stdout.decode()
    fs = dict(line.split("\t", 1) for line in out.splitlines()
              if "\t" in line)
    check("written_bytes" in fs, "feedfs-cache stats has no written_bytes:\n"
          + out)
    written = int(fs["written_bytes"])
    ins, den = int(fs["inserts"]), int(fs["admission_denied"])
    log("size bound: %.1fM stored (%d inserts, %d denied, %s evictions; the "
        "mount says %.1fM), disk peak %.1fM, bound 16M + %.1fM"
        % (written / MB, ins, den, fs["evictions"],
           m.stats()["feedfs_cache_written_bytes_total"] / MB, peak / MB,
           slack / MB))
    check(den == 0, "cache_stale = 0 admits every value, yet %d denied" % den)
    check(written > 2 * bound, "only %d bytes stored: not a test of the bound"
          % written)
    check(int(fs["evictions"]) > 0, "no eviction: not a test of the bound")
    check(peak <= bound + running_slack,
          "disk use %d over the bound %d + %d" % (peak, bound, running_slack))
du = int(subprocess.check_output(["du", "-sb", t.path("bcache")]).split()[0])
log("size bound: du after the unmount %.1fM" % (du / MB))
check(du <= bound + slack + meta, "du %d over the bound %d + %d + %d"
      % (du, bound, slack, meta))

# ---- the store's files are private, later ones too ----------------------------
# The bound test above flushed and compacted many times over 16M: every
# table, manifest and log made since the open must be 0600 (umask 077 in
# feedfs's main), the directory 0700.
mode = os.stat(t.path("bcache")).st_mode & 0o777
check(mode == 0o700, "%s is %o, expected 700" % (t.path("bcache"), mode))
files = 0
for root, dirs, names in os.walk(t.path("bcache")):
    for n in names:
        p = os.path.join(root, n)
        st = os.lstat(p)
        if not os.path.isfile(p):
            continue
        files += 1
        check(st.st_mode & 0o077 == 0, "%s is %o: others may read it"
              % (p, st.st_mode & 0o777))
check(files > 3, "only %d files in the store" % files)
log("umask: %d files of the store, all private" % files)
