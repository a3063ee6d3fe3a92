#!/usr/bin/python3
"""test_augment_mount.py - the augmentations of issue 28 through a real
mount: job t is torchvision's ResNet-50 recipe as far as per-sample ops go
("decode resize(256) cache random_resized_crop(224) flip(0.5)
trivial_augment normalize(imagenet)", float32 CHW), job a the rest
(rand_augment, auto_augment, color_jitter, grayscale; uint8 HWC).

  - every file of epochs 0 and 1 equals feedfs-ref's (in process, no
    FUSE, no threads), read cold and again after its pages were dropped;
  - a remount on the same cache (hits) serves the same bytes;
  - trivial_augment changes what the pipeline without it serves (the
    augmentation is applied, not skipped)."""

import os
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

N = 24
BASE = "decode resize(256) cache random_resized_crop(224) flip(0.5)"
JOBS = {
    "t": dict(pipeline=BASE + " trivial_augment normalize(imagenet)"),
    "a": dict(pipeline="decode resize(80) cache random_resized_crop(64) "
              "rand_augment(2,9) auto_augment(imagenet) "
              "color_jitter(0.4,0.4,0.4,0.1) grayscale(0.2)",
              dtype="uint8", layout="HWC"),
    "b": dict(pipeline=BASE + " normalize(imagenet)"),
}
for j in JOBS.values():
    j.update(epochs=2, seed=5, batch_size=8)

t = fflib.Test()
data = t.gen(t.path("data"), n=N, classes=3, seed=28)
cfg = t.config(t.path("feedfs.conf"), data, JOBS, memory="256M")
refs = {(j, e): t.ref(cfg, j, e, t.path("ref", "%s%d" % (j, e)))
        for j in ("t", "a", "b") for e in (0, 1)}


def ref_file(job, e, name):
    with open(os.path.join(refs[(job, e)], name), "rb") as f:
        return f.read()


# trivial_augment is applied: t's images differ from b's (same draws
# before it, same seed)
names = [n for n in os.listdir(refs[("t", 0)])
         if n.endswith(".npy") and n.count(".") == 1]
check(any(ref_file("t", 0, n) != ref_file("b", 0, n) for n in names),
      "trivial_augment left every batch as the pipeline without it")


def read_all(m, drop):
    for job in ("t", "a"):
        for e in (0, 1):
            d = m.p(job, "epoch-%04d" % e)
            got = sorted(os.listdir(d))
            check(got == sorted(os.listdir(refs[(job, e)])),
                  "%s lists %s" % (d, got))
            for name in got:
                b = fflib.read_file(os.path.join(d, name), drop=drop)
                check(b == ref_file(job, e, name),
                      "%s/%s differs from feedfs-ref's" % (d, name))


with fflib.Mount(t, cfg, t.path("mnt1")) as m:
    read_all(m, drop=True)
    log("mount 1: epochs 0 and 1 of t and a equal feedfs-ref's")
    read_all(m, drop=True)
    log("mount 1, second read: the same bytes")
with fflib.Mount(t, cfg, t.path("mnt2")) as m:
    read_all(m, drop=False)
    check(m.job_stat("feedfs_cache_hits_total", "t") >= N,
          "the remount made t's samples without the cache")
    log("mount 2 (a remount, from the cache): the same bytes")
log("ok")
