#!/usr/bin/python3
"""test_schedule_mount.py - a resolution schedule through the mount (issue
28): a train job ramping 32 -> 96 over epochs 1..4 (FFCV's progressive
resizing) next to a val job at its own, larger size (FixRes).

- info.json's epoch_sizes are FFCV's get_resolution, computed here as
  FFCV's train_imagenet.py computes it (also for FFCV's own 16-epoch
  ResNet-50 numbers, 160..171 over epochs 11..13);
- the memory budget counts an epoch's batches at that epoch's size;
- the batches of epochs at both ends and mid-ramp, read in a mixed order:
  the size stat gives before any read is the size read, the .npy header
  has the epoch's shape, and the bytes equal the in-process library's for
  that size: feedfs-ref of a job without a schedule whose crop is that
  size (same seed), and feedfs-ref of the scheduled job itself;
- the val job beside it serves its own size, equal to feedfs-ref;
- order = relaxed with the same schedule: each sample's pixels at the
  epoch's size equal the strict job's for the same id;
- feedfs.Job.shape_of / Job.epoch and feedfs.torch.Loader hand over each
  epoch's shape, with the same bytes, also across epochs of different
  sizes in one Loader."""

import json
import os
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

try:
    import numpy as np
    import torch
except ImportError as e:
    fflib.skip("numpy/torch not importable: %s" % e)

N, B, EPOCHS = 20, 8, 6
LO, HI, E0, E1 = 32, 96, 1, 4


def get_resolution(epoch, min_res, max_res, end_ramp, start_ramp):
    """FFCV's examples/imagenet-example/train_imagenet.py, as it is."""
    assert min_res <= max_res
    if epoch <= start_ramp:
        return min_res
    if epoch >= end_ramp:
        return max_res
    interp = np.interp([epoch], [start_ramp, end_ramp], [min_res, max_res])
    final_res = int(np.round(interp[0] / 32)) * 32
    return final_res


def crop(size):
    return ("decode resize(100) cache random_resized_crop(%d) flip(0.5) "
            "normalize(imagenet)" % size)


t = fflib.Test()
data = t.gen(t.path("data"), n=N, classes=3, seed=8)
sched = "%d..%d @ epochs %d..%d" % (LO, HI, E0, E1)
sizes = [get_resolution(e, LO, HI, E1, E0) for e in range(EPOCHS)]
check(sizes == [32, 32, 64, 64, 96, 96], "FFCV's sizes %s" % sizes)
jobs = {
    "train": dict(epochs=EPOCHS, seed=11, batch_size=B,
                  pipeline=crop(224), resolution=sched),
    "val": dict(epochs=1, shuffle="no", batch_size=B,
                pipeline="decode resize(144) center_crop(128) cache "
                         "normalize(imagenet)"),
    "relaxed": dict(epochs=EPOCHS, seed=11, batch_size=B, order="relaxed",
                    pipeline=crop(224), resolution=sched),
    "ffcv16": dict(epochs=16, pipeline=crop(224),
                   resolution="160..171 @ epochs 11..13"),
}
cfg = t.config(t.path("feedfs.conf"), data, jobs, threads=2, memory="64M")
# The library at a fixed size: the same job without a schedule.
fixed = {"fix%d" % s: dict(epochs=EPOCHS, seed=11, batch_size=B,
                           pipeline=crop(s)) for s in set(sizes)}
fixcfg = t.config(t.path("fixed.conf"), data, fixed)

EPOCHS_READ = (5, 0, 2, 3)  # the end, the start, mid-ramp; mixed
refs = {}
for e in EPOCHS_READ:
    refs["train", e] = t.ref(cfg, "train", e, t.path("ref", "train", str(e)))
    refs["fix", e] = t.ref(fixcfg, "fix%d" % sizes[e], e,
                           t.path("ref", "fix", str(e)))
refs["val", 0] = t.ref(cfg, "val", 0, t.path("ref", "val", "0"))

sys.path.insert(0, os.path.join(fflib.SRCDIR, "python"))
import feedfs  # noqa: E402
import feedfs.torch  # noqa: E402

nb = (N + B - 1) // B
with fflib.Mount(t, cfg, t.path("mnt"), "-o", "readahead=0") as m:
    # The budget counts each epoch's batches at their size: reading all
    # of epoch 0 (32x32) holds less than one batch of epoch 5 (96x96)
    # would, and far less than one at the pipeline's written 224.
    base = m.stats()["feedfs_memory_bytes"]
    for b in range(nb):
        fflib.read_file(m.p("train", "epoch-0000", "batch-%06d.npy" % b))
    grew = m.stats()["feedfs_memory_peak_bytes"] - base
    check(0 < grew < B * 3 * sizes[5] ** 2 * 4,
          "reading epoch 0 took %d bytes of the budget" % grew)
    log("epoch 0 read whole: %d bytes of the budget (a batch of epoch 5: "
        "%d)" % (grew, B * 3 * sizes[5] ** 2 * 4))
    info = json.load(open(m.p("train", "info.json")))
    check(info["epoch_sizes"] == sizes,
          "epoch_sizes %s, FFCV's %s" % (info["epoch_sizes"], sizes))
    check(info["resolution"]["min_res"] == LO and
          info["resolution"]["max_res"] == HI and
          info["resolution"]["start_ramp"] == E0 and
          info["resolution"]["end_ramp"] == E1, info["resolution"])
    check(info["shape"] == [B, 3, sizes[0], sizes[0]], info["shape"])
    i16 = json.load(open(m.p("ffcv16", "info.json")))
    want16 = [get_resolution(e, 160, 171, 13, 11) for e in range(16)]
    check(i16["epoch_sizes"] == want16,
          "ffcv16: %s, FFCV's %s" % (i16["epoch_sizes"], want16))
    log("epoch_sizes are FFCV's get_resolution: %s; 160..171 over 11..13: "
        "%s" % (sizes, want16[10:]))

    # Sizes at stat time, before anything of the epoch is made.
    for e in EPOCHS_READ:
        for b in range(nb):
            n = B if b < nb - 1 else N - B * (nb - 1)
            p = m.p("train", "epoch-%04d" % e, "batch-%06d.npy" % b)
            hl = fflib.npy_header_len(p)
            check(os.stat(p).st_size == hl + n * 3 * sizes[e] ** 2 * 4,
                  "%s: size %d at stat time" % (p, os.stat(p).st_size))
    for e in EPOCHS_READ:
        d = m.p("train", "epoch-%04d" % e)
        m.read_epoch("train", e, refs["train", e])
        for b in range(nb):
            p = os.path.join(d, "batch-%06d.npy" % b)
            x = np.load(p)
            n = B if b < nb - 1 else N - B * (nb - 1)
            check(x.shape == (n, 3, sizes[e], sizes[e]),
                  "%s: shape %s at epoch %d" % (p, x.shape, e))
            check(len(fflib.read_file(p)) == os.stat(p).st_size,
                  "%s: read != stat size" % p)
            rf = os.path.join(refs["fix", e], "batch-%06d.npy" % b)
            check(np.array_equal(x, np.load(rf)),
                  "%s differs from the library's at size %d" % (p, sizes[e]))
        log("train epoch %d: %d batches of %dx%d equal the library's at "
            "that size" % (e, nb, sizes[e], sizes[e]))
    m.read_epoch("val", 0, refs["val", 0])
    check(np.load(m.p("val", "epoch-0000", "batch-000000.npy")).shape ==
          (B, 3, 128, 128), "val's shape")
    log("val at 128 (FixRes) beside the scheduled train job equals "
        "feedfs-ref")

    # order = relaxed: each id's pixels are the strict job's.
    for e in (0, 2, 5):
        strict = {}
        for b in range(nb):
            base = m.p("train", "epoch-%04d" % e, "batch-%06d" % b)
            for i, x in zip(np.load(base + ".ids.npy"), np.load(base + ".npy")):
                strict[int(i)] = x
        seen = 0
        for b in range(nb):
            base = m.p("relaxed", "epoch-%04d" % e, "batch-%06d" % b)
            xs, ids = np.load(base + ".npy"), np.load(base + ".ids.npy")
            check(xs.shape[1:] == (3, sizes[e], sizes[e]),
                  "%s.npy: shape %s" % (base, xs.shape))
            for i, x in zip(ids, xs):
                check(np.array_equal(x, strict[int(i)]),
                      "relaxed epoch %d: sample %d differs" % (e, i))
                seen += 1
        check(seen == N, "relaxed epoch %d: %d samples" % (e, seen))
    log("order = relaxed: every sample at its epoch's size, as strict's")

    # The Python package.
    job = feedfs.Job(m.p("train"))
    for e in range(EPOCHS):
        check(job.shape_of(e) == (B, 3, sizes[e], sizes[e]),
              "Job.shape_of(%d) = %s" % (e, job.shape_of(e)))
    for e in (5, 0):
        for b, (x, y) in enumerate(job.epoch(e)):
            want = np.load(os.path.join(refs["train", e], "batch-%06d.npy" % b))
            check(np.array_equal(x, want), "Job.epoch(%d) batch %d" % (e, b))
    for reuse in (False, True):
        loader = feedfs.torch.Loader(job, epochs=[0, 5, 2, 3],
                                     reuse_buffers=reuse, device=None)
        got = {}
        for e in (0, 5, 2, 3):
            loader.set_epoch(e)
            for b, (x, y) in enumerate(loader):
                check(isinstance(x, torch.Tensor) and
                      tuple(x.shape[1:]) == (3, sizes[e], sizes[e]),
                      "Loader epoch %d: shape %s" % (e, tuple(x.shape)))
                want = np.load(os.path.join(refs["train", e],
                                            "batch-%06d.npy" % b))
                check(np.array_equal(x.numpy(), want),
                      "Loader epoch %d batch %d differs" % (e, b))
                got[e, b] = x  # kept: later batches must not overwrite
        if not reuse:
            for (e, b), x in got.items():
                want = np.load(os.path.join(refs["train", e],
                                            "batch-%06d.npy" % b))
                check(np.array_equal(x.numpy(), want),
                      "kept batch %d of epoch %d changed" % (b, e))
    log("Job and Loader hand over each epoch's shape with its bytes")
log("PASS")
