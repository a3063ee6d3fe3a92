#!/usr/bin/python3
"""test_cache_format_mount.py - cache_format and "the same bytes on every
read" (issue 25, class 5), through real mounts, for each of raw, lossless
and jpeg(90) (three jobs of one prefix, uint8 HWC, so that the output is
the prefix image cropped), bytes compared with feedfs-ref's (in process,
no cache) everywhere:

  - jpeg(90)'s reference differs from raw's, lossless's equals it (the
    format is part of what a job serves, cache or not);
  - mount 1 (the cache's owner) reads epoch 0 cold (misses, stored), then
    epoch 1 (hits), then epoch 0 again once its batches were given back
    (the reread is made from cache hits, counted);
  - mount 2, a client of mount 1's cache, reads epoch 0 (hits through the
    owner);
  - both unmount; mount 3 on the same cache_dir (a remount) reads epoch 0
    and 1 from hits alone;
  - mount 4 with cache_size = 0 (no cache at all) reads epoch 0.

On main a jpeg(Q) miss served the raw prefix and a hit its JPEG round trip,
so the same batch differed after a remount."""

import os
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

N = 40
PIPE = "decode resize(96) cache center_crop(64)"
FORMATS = {"r": "raw", "l": "lossless", "q": "jpeg(90)"}
t = fflib.Test()
data = t.gen(t.path("data"), n=N, classes=4, seed=17)
C = t.path("cache")
JOBS = {name: dict(epochs=2, seed=3, pipeline=PIPE, dtype="uint8",
                   layout="HWC", batch_size=8, cache_format=fmt)
        for name, fmt in FORMATS.items()}
# readahead = 1 and a small memory: epoch 0's batches are given back while
# epoch 1 is read, so the reread of epoch 0 makes them again.
cfg = t.config(t.path("feedfs.conf"), data, JOBS, cache_dir=C,
               readahead=1, memory="32M")
off = t.config(t.path("off.conf"), data, JOBS, cache_dir=t.path("c-off"),
               cache_size=0, readahead=1, memory="32M")
refs = {(j, e): t.ref(cfg, j, e, t.path("ref", "%s%d" % (j, e)))
        for j in FORMATS for e in (0, 1)}


def ref_bytes(job, e):
    d = refs[(job, e)]
    out = {}
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as f:
            out[name] = f.read()
    return out


# ---- the references ----------------------------------------------------
r0, l0, q0 = ref_bytes("r", 0), ref_bytes("l", 0), ref_bytes("q", 0)
check(l0 == r0, "lossless's reference differs from raw's")
imgs = [n for n in r0 if n.endswith(".npy") and n.count(".") == 1]
check(any(q0[n] != r0[n] for n in imgs),
      "jpeg(90)'s reference equals raw's: the reference serves pixels no "
      "hit serves")
diff = max(max(abs(a - b) for a, b in zip(q0[n][128:], r0[n][128:]))
           for n in imgs)
log("feedfs-ref: jpeg(90) differs from raw by at most %d per channel" % diff)


def read_all(m, job, e, drop=False):
    """Every file of (job, epoch e) through m, compared with feedfs-ref's;
    drop: drop each file's pages after the read."""
    d = m.p(job, "epoch-%04d" % e)
    want = ref_bytes(job, e)
    names = sorted(os.listdir(d))
    check(names == sorted(want), "%s lists %s, feedfs-ref %s"
          % (d, names, sorted(want)))
    for name in names:
        got = fflib.read_file(os.path.join(d, name), drop=drop)
        check(got == want[name], "%s: %s/epoch-%04d/%s (%s) differs from "
              "feedfs-ref's" % (m.mnt, job, e, name, FORMATS[job]))


def hits(m, job):
    return m.job_stat("feedfs_cache_hits_total", job)


def misses(m, job):
    return m.job_stat("feedfs_cache_misses_total", job)


# ---- mount 1: cold, warm, and epoch 0 again once given back --------------
m1 = fflib.Mount(t, cfg, t.path("mnt1")).__enter__()
for j in FORMATS:
    read_all(m1, j, 0, drop=True)
    check(misses(m1, j) >= N, "mount 1, %s: %d misses in a cold epoch"
          % (j, misses(m1, j)))
for j in FORMATS:
    read_all(m1, j, 1, drop=True)
for j in FORMATS:
    h0 = hits(m1, j)
    read_all(m1, j, 0, drop=True)
    check(hits(m1, j) - h0 >= N // 2,
          "mount 1, %s: the reread of epoch 0 made %d samples from the "
          "cache; its batches were not given back" % (j, hits(m1, j) - h0))
log("mount 1: cold epoch 0, warm epoch 1, epoch 0 again from hits: "
    "feedfs-ref's bytes for %s" % ", ".join(FORMATS.values()))

# ---- mount 2, a client of mount 1's cache ------------------------------------
with fflib.Mount(t, cfg, t.path("mnt2")) as m2:
    check("attached to the cache in" in m2.log(),
          "mount 2 is not a client of mount 1's cache:\n" + m2.log())
    for j in FORMATS:
        read_all(m2, j, 0)
        check(hits(m2, j) >= N and misses(m2, j) == 0,
              "mount 2 (a client), %s: %d hits, %d misses"
              % (j, hits(m2, j), misses(m2, j)))
log("mount 2 (a client of mount 1): hits only, feedfs-ref's bytes")
m1.umount()

# ---- mount 3: a remount -------------------------------------------------------
with fflib.Mount(t, cfg, t.path("mnt3")) as m3:
    for j in FORMATS:
        for e in (0, 1):
            read_all(m3, j, e)
        check(hits(m3, j) >= 2 * N and misses(m3, j) == 0,
              "mount 3 (a remount), %s: %d hits, %d misses"
              % (j, hits(m3, j), misses(m3, j)))
log("mount 3 (a remount): hits only, feedfs-ref's bytes")

# ---- mount 4: no cache ----------------------------------------------------
with fflib.Mount(t, off, t.path("mnt4")) as m4:
    check(m4.stats()["feedfs_cache_enabled"] == 0,
          "mount 4 has a cache with cache_size = 0")
    for j in FORMATS:
        read_all(m4, j, 0)
log("mount 4 (cache_size = 0): feedfs-ref's bytes")
log("ok")
