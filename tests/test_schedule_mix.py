#!/usr/bin/python3
"""test_schedule_mix.py - a resolution schedule with a batch op (issue 28):
a train job ramping 32 -> 96 over epochs 1..4 whose pipeline ends in
cutmix(1.0), next to the same job without the batch op and one with
mixup(0.2).

- at epochs 0 (32x32) and 5 (96x96), read in that mixed order: the images'
  .npy header has the epoch's shape, the labels' is float32 (B,
  num_classes) at both (the labels do not depend on the resolution), and
  info.json says float32 and (B, num_classes);
- every file of both epochs of the cutmix and the mixup job equals
  feedfs-ref's (the mix in-process, at that epoch's size);
- the cutmix is at the epoch's size: each mixed image equals the plain
  job's image (same ids: the batch op changes no per-sample draw) outside
  one box inside the epoch's w x h, and the rolled image (batch.roll(1))
  inside it; the soft labels are lam one-hot(y) + (1 - lam)
  one-hot(y rolled) with lam = 1 - box area / (w h), the box seen in the
  pixels, at each epoch's own w x h;
- feedfs.Job hands over each epoch's image shape with (B, num_classes)
  float32 labels."""

import json
import os
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

try:
    import numpy as np
except ImportError as e:
    fflib.skip("numpy not importable: %s" % e)

N, B, C, EPOCHS = 20, 8, 3, 6
SIZES = {0: 32, 5: 96}  # "32..96 @ epochs 1..4" at its two ends
PLAIN = ("decode resize(100) cache random_resized_crop(224) flip(0.5) "
         "normalize(imagenet)")

t = fflib.Test()
data = t.gen(t.path("data"), n=N, classes=C, seed=5)
common = dict(epochs=EPOCHS, seed=7, batch_size=B,
              resolution="32..96 @ epochs 1..4")
jobs = {
    "plain": dict(common, pipeline=PLAIN),
    "cut": dict(common, pipeline=PLAIN + " cutmix(1.0)"),
    "mix": dict(common, pipeline=PLAIN + " mixup(0.2)"),
}
cfg = t.config(t.path("feedfs.conf"), data, jobs, threads=2, memory="64M")
refs = {(j, e): t.ref(cfg, j, e, t.path("ref", j, str(e)))
        for j in jobs for e in SIZES}

sys.path.insert(0, os.path.join(fflib.SRCDIR, "python"))
import feedfs  # noqa: E402

nb = (N + B - 1) // B


def box_of(mixed, plain):
    """The bounding box (y0, y1, x0, x1) of the pixels where mixed and
    plain (N C H W batches) differ in any sample, or None where they are
    equal (one box per batch: pixels that happen to be equal in one
    sample are covered by the others)."""
    diff = np.any(mixed != plain, axis=(0, 1))
    if not diff.any():
        return None
    ys, xs = np.nonzero(diff)
    return ys.min(), ys.max() + 1, xs.min(), xs.max() + 1


with fflib.Mount(t, cfg, t.path("mnt"), "-o", "readahead=0") as m:
    for j in ("cut", "mix"):
        info = json.load(open(m.p(j, "info.json")))
        check(info["labels_dtype"] == "float32" and
              info["labels_shape"] == [B, C] and info["num_classes"] == C,
              "%s info.json: %s %s" % (j, info["labels_dtype"],
                                       info["labels_shape"]))
        check(info["epoch_sizes"] == [32, 32, 64, 64, 96, 96],
              "%s epoch_sizes %s" % (j, info["epoch_sizes"]))
    boxes = {}
    for e in (5, 0):
        s = SIZES[e]
        for j in ("cut", "mix"):
            m.read_epoch(j, e, refs[j, e])
        for b in range(nb):
            n = B if b < nb - 1 else N - B * (nb - 1)
            cut = m.p("cut", "epoch-%04d" % e, "batch-%06d" % b)
            pl = m.p("plain", "epoch-%04d" % e, "batch-%06d" % b)
            x, y = np.load(cut + ".npy"), np.load(cut + ".labels.npy")
            px, py = np.load(pl + ".npy"), np.load(pl + ".labels.npy")
            check(x.shape == (n, 3, s, s), "%s.npy: %s at epoch %d"
                  % (cut, x.shape, e))
            check(y.dtype == np.float32 and y.shape == (n, C),
                  "%s.labels.npy: %s %s" % (cut, y.dtype, y.shape))
            ym = np.load(m.p("mix", "epoch-%04d" % e,
                             "batch-%06d.labels.npy" % b))
            check(ym.dtype == np.float32 and ym.shape == (n, C),
                  "mix labels %s %s at epoch %d" % (ym.dtype, ym.shape, e))
            check(np.array_equal(np.load(cut + ".ids.npy"),
                                 np.load(pl + ".ids.npy")),
                  "%s: ids differ from the plain job's" % cut)
            rolled = np.roll(px, 1, axis=0)
            box = box_of(x, px)
            if box is None:
                area = 0
            else:
                y0, y1, x0, x1 = box
                check(0 <= y0 < y1 <= s and 0 <= x0 < x1 <= s,
                      "box %s outside %dx%d" % (box, s, s))
                inside = np.zeros((s, s), bool)
                inside[y0:y1, x0:x1] = True
                want = np.where(inside, rolled, px)
                check(np.array_equal(x, want),
                      "%s: not the plain batch with its box from the "
                      "rolled batch" % cut)
                area = (y1 - y0) * (x1 - x0)
            lam = 1.0 - area / float(s * s)
            onehot = np.eye(C, dtype=np.float64)[py]
            wl = lam * onehot + (1.0 - lam) * np.roll(onehot, 1, axis=0)
            check(np.allclose(y, wl, atol=1e-6),
                  "%s: labels %s, lam %.6f of a %dx%d box at %dx%d wants %s"
                  % (cut, y.tolist(), lam, 0 if box is None else y1 - y0,
                     0 if box is None else x1 - x0, s, s, wl.tolist()))
            boxes[e, b] = (box, lam)
        log("epoch %d (%dx%d): cut and mix equal feedfs-ref; cutmix boxes "
            "and lambdas %s" % (e, s, s,
                                [boxes[e, b] for b in range(nb)]))
    job = feedfs.Job(m.p("cut"))
    check(job.soft_labels and job.num_classes == C, "Job.soft_labels")
    for e in (0, 5):
        for b, (x, y) in enumerate(job.epoch(e)):
            check(x.shape[1:] == (3, SIZES[e], SIZES[e]) and
                  y.dtype == np.float32 and y.shape[1] == C,
                  "Job.epoch(%d) batch %d: %s %s %s" % (e, b, x.shape,
                                                       y.dtype, y.shape))
    log("Job: each epoch's image shape, float32 (B, %d) labels" % C)
log("PASS")
