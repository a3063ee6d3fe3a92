#!/usr/bin/python3
"""test_torchvision_val.py - the default jobs of `feedfs ROOT MNT`, ROOT
with train/ and val/ (torchvision's ImageNet layout), give what torchvision
gives: val epoch 0 compared sample by sample with ImageFolder(ROOT/val) +
Resize(256), CenterCrop(224), ToTensor(), Normalize(ImageNet) on PIL images
(mean absolute difference per sample under 2/255, labels and order exactly
ImageFolder's); train's first batch equals feedfs-ref's."""

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
    import torchvision
    import torchvision.transforms as T
except ImportError as e:
    fflib.skip("numpy/torch/torchvision not importable: %s" % e)

N = 16
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)

t = fflib.Test()
root = t.path("root")
os.makedirs(root)
data = t.gen(os.path.join(root, "val"), n=N, classes=3, seed=21, big=True)
t.gen(os.path.join(root, "train"), n=N, classes=3, seed=22, big=True)
tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(),
                T.Normalize(MEAN.tolist(), STD.tolist())])
ds = torchvision.datasets.ImageFolder(data, transform=tf)
check(len(ds) == N, "ImageFolder found %d images" % len(ds))

with fflib.Mount(t, root, t.path("mnt"), "-o",
                 "cache_dir=%s" % t.path("cache")) as m:
    check(sorted(os.listdir(m.mnt)) == [".feedfs", "README", "train", "val"],
          "ls: %s" % os.listdir(m.mnt))
    info = json.load(open(m.p("val", "info.json")))
    check(info["shape"][1:] == [3, 224, 224] and info["dtype"] == "float32"
          and info["layout"] == "CHW" and info["shuffle"] is False,
          "val info.json: %s" % info)
    check(info["classes"] == ds.classes, "classes %s, ImageFolder %s"
          % (info["classes"], ds.classes))
    tinfo = json.load(open(m.p("train", "info.json")))
    check(tinfo["shape"][1:] == [3, 224, 224] and tinfo["shuffle"] is True,
          "train info.json: %s" % tinfo)

    # Sample ids are ImageFolder's order; labels its targets.
    with open(m.p("val", "samples.tsv")) as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    paths = [os.path.relpath(p, data) for p, _ in ds.samples]
    check([r[1] for r in rows] == paths, "samples.tsv paths != ImageFolder")
    check([int(r[2]) for r in rows] == ds.targets,
          "samples.tsv labels != ImageFolder targets")

    xs, ys, ids = [], [], []
    for b in range(info["batches_per_epoch"]):
        base = m.p("val", "epoch-0000", "batch-%06d" % b)
        xs.append(np.load(base + ".npy"))
        ys.append(np.load(base + ".labels.npy"))
        ids.append(np.load(base + ".ids.npy"))
    x, y, ids = np.concatenate(xs), np.concatenate(ys), np.concatenate(ids)
    check(np.array_equal(ids, np.arange(N)), "val ids %s" % ids)
    check(np.array_equal(y, np.array(ds.targets)), "val labels %s, "
          "ImageFolder %s" % (y, ds.targets))

    worst = []
    for i in range(N):
        want, target = ds[i]
        check(target == y[i], "sample %d: label %d, ImageFolder %d"
              % (i, y[i], target))
        # back to pixel units (0..255) per channel
        d = np.abs(x[i] - want.numpy()) * STD[:, None, None] * 255
        worst.append((float(d.mean()), float(d.max()), i))
        log("sample %2d %-24s mean |diff| %.3f, max %.1f (pixel units)"
            % (i, paths[i], d.mean(), d.max()))
    mean_max = max(w[0] for w in worst)
    log("over %d samples: largest mean |diff| %.3f (sample %d), "
        "largest |diff| %.1f" % (N, mean_max, max(worst)[2],
                                 max(w[1] for w in worst)))
    for mean, mx, i in worst:
        check(mean < 2.0, "sample %d (%s): mean |diff| %.3f >= 2/255"
              % (i, paths[i], mean))

    # The train job of the default config equals feedfs-ref over ROOT.
    ref = t.ref(root, "train", 0, t.path("ref-train"))
    for name in ("batch-000000.npy", "batch-000000.ids.npy",
                 "batch-000000.labels.npy"):
        with open(os.path.join(ref, name), "rb") as f:
            check(fflib.read_file(m.p("train", "epoch-0000", name)) ==
                  f.read(), "train/epoch-0000/%s differs from feedfs-ref"
                  % name)
    check(m.alive(), "feedfs died")
log("ok")
