#!/usr/bin/python3
"""test_remount.py - a remount right after an unmount finds the whole
cache (issue 26, "Remounting"): each round mounts, reads job v (whose
prefix the first round cached) and job w (a prefix new in each round, so
that the daemon has fresh values to write out when it closes the store),
and is unmounted with fusermount3 -u; the next round mounts as soon as
fusermount3 returns, while the old daemon is still closing its cache.
Every round's read of v must hit on every sample: the new mount waits
for the old daemon's close (within a bound) instead of missing.  Then
the same in the background mode, with a relative mountpoint and -o after
it, as a user (or mount.fuse3) gives them."""

import atexit
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
mnt = t.path("mnt")


def config(rnd):
    jobs = {"v": dict(epochs=1, shuffle="no", batch_size=16,
                      pipeline="decode resize(256) center_crop(224) cache "
                      "normalize(imagenet)"),
            "w": dict(epochs=1, shuffle="no", batch_size=16,
                      pipeline="decode resize(%d) center_crop(200) cache "
                      "normalize(imagenet)" % (240 + 4 * rnd))}
    return t.config(t.path("feedfs%d.conf" % rnd), data, jobs)


def stat(m, name):
    return m.job_stat(name, "v")


olds = []
m = None
for rnd in range(ROUNDS + 1):
    m = fflib.Mount(t, config(rnd), mnt).__enter__()
    m.read_epoch("v", 0)
    hits, misses = (stat(m, "feedfs_cache_hits_total"),
                    stat(m, "feedfs_cache_misses_total"))
    log("round %d: v %d hits, %d misses" % (rnd, hits, misses))
    if rnd == 0:
        check(misses == N, "the first mount should miss every sample")
    else:
        if hits != N:
            print(m.log())
        check(hits == N and misses == 0,
              "a mount started as fusermount3 -u returned: %d hits, %d "
              "misses of %d" % (hits, misses, N))
    m.read_epoch("w", 0)  # values to write out at the close
    subprocess.check_call(["fusermount3", "-u", m.mnt])
    olds.append(m)
for old in olds:
    rc = old.proc.wait(timeout=60)
    check(rc == 0, "an unmounted daemon exited with %d" % rc)
    if old in fflib._mounts:
        fflib._mounts.remove(old)

# The same in the background mode, as a user types it: a relative
# mountpoint with -o after it (mount.fuse3's order), from the test's dir.
atexit.register(fflib._force_umount, mnt)


def bg_round(rnd):
    r = subprocess.run([fflib.FEEDFS, os.path.basename(config(rnd)), "mnt",
                        "-o", "threads=2,log=bg.log"], cwd=t.dir,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=120)
    check(r.returncode == 0, "feedfs in the background: %d %s"
          % (r.returncode, r.stdout.decode()))
    fflib.Mount.read_epoch(Bg, "v", 0)
    hits, misses = (Bg.job_stat("feedfs_cache_hits_total", "v"),
                    Bg.job_stat("feedfs_cache_misses_total", "v"))
    log("background round %d: v %d hits, %d misses" % (rnd, hits, misses))
    if hits != N:
        with open(t.path("bg.log")) as f:
            print(f.read())
    check(hits == N and misses == 0,
          "a background mount started as fusermount3 -u returned: %d hits, "
          "%d misses of %d" % (hits, misses, N))
    fflib.Mount.read_epoch(Bg, "w", 0)
    subprocess.check_call(["fusermount3", "-u", mnt])


class Bg:
    """Enough of fflib.Mount to read through a background mount."""
    mnt = os.path.realpath(mnt)
    p = staticmethod(lambda *parts: os.path.join(Bg.mnt, *parts))
    job_stat = staticmethod(lambda n, j: fflib.Mount.job_stat(Bg, n, j))


for rnd in range(ROUNDS + 1, ROUNDS + 4):
    bg_round(rnd)
log("ok")
