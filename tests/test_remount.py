#!/usr/bin/python3
"""test_remount.py - a remount right after an unmount finds the whole
cache (issue 26, "Remounting"): mount, read an epoch of a job whose
prefix is cached (all misses, stored), unmount with fusermount3 -u and,
as soon as fusermount3 returns (the old daemon may still be closing its
cache), mount again on the same cache_dir and read the epoch again:
every sample is a hit, round after round."""

import os
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

N = 400
ROUNDS = 4
t = fflib.Test()
data = t.gen(t.path("data"), n=N, classes=4, seed=5, big=True)
JOBS = {"v": dict(epochs=1, shuffle="no", batch_size=16,
                  pipeline="decode resize(256) center_crop(224) cache "
                  "normalize(imagenet)")}
cfg = t.config(t.path("feedfs.conf"), data, JOBS)
mnt = t.path("mnt")

m = fflib.Mount(t, cfg, mnt).__enter__()
m.read_epoch("v", 0)
check(m.job_stat("feedfs_cache_misses_total", "v") == N,
      "the first mount should miss every sample")
for rnd in range(ROUNDS):
    subprocess.check_call(["fusermount3", "-u", m.mnt])
    old = m
    m = fflib.Mount(t, cfg, mnt).__enter__()
    m.read_epoch("v", 0)
    hits = m.job_stat("feedfs_cache_hits_total", "v")
    misses = m.job_stat("feedfs_cache_misses_total", "v")
    log("remount %d: %d hits, %d misses" % (rnd, hits, misses))
    if hits != N:
        print(m.log())
    check(hits == N and misses == 0,
          "a mount started as fusermount3 -u returned: %d hits, %d misses "
          "of %d" % (hits, misses, N))
    rc = old.proc.wait(timeout=60)
    check(rc == 0, "the unmounted daemon exited with %d" % rc)
    fflib._mounts.remove(old) if old in fflib._mounts else None
m.umount()
log("ok")
