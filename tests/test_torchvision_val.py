#!/usr/bin/python3
"""test_torchvision_val.py - the default jobs of `feedfs ROOT MNT`, ROOT
with train/ and val/ (torchvision's ImageNet layout), give what torchvision
gives: val epoch 0 compared sample by sample with ImageFolder(ROOT/val) +
Resize(256), CenterCrop(224), ToTensor(), Normalize(ImageNet) on PIL
images, EXACTLY (issue 36: every value within 0.01 of a level, that is the
same uint8 pixels; labels and order exactly ImageFolder's), on gen-jpegs'
images (short sides 40..700) and on sources of 1600 x 1200 and more (to
4032 x 3024, a phone's; progressive; portrait), a PNG, a CMYK and a
grayscale JPEG, whose val output a DCT-scaled decode made differ by up to
6/255 before; train's first batch equals feedfs-ref's."""

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
    from PIL import Image
except ImportError as e:
    fflib.skip("numpy/torch/torchvision not importable: %s" % e)

N = 24
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)

# Large sources, made by PIL, beside gen-jpegs' (name, size, how).
BIG = [("big-1600x1200.jpg", (1600, 1200), dict(quality=90)),
       ("big-1200x1600.jpg", (1200, 1600), dict(quality=90)),
       ("big-2048x1536.jpg", (2048, 1536), dict(quality=85)),
       ("big-2400x1800p.jpg", (2400, 1800), dict(quality=88,
                                                 progressive=True)),
       ("big-4032x3024.jpg", (4032, 3024), dict(quality=92)),
       ("big-1600x1200.png", (1600, 1200), {}),
       ("big-1600x1200-cmyk.jpg", (1600, 1200), dict(quality=90,
                                                     mode="CMYK")),
       ("big-1600x1200-gray.jpg", (1600, 1200), dict(quality=90, mode="L"))]


def photo(rng, w, h):
    """w x h RGB with a photograph's 1/f spectrum and sensor noise."""
    f = np.hypot(np.fft.rfftfreq(w)[None, :], np.fft.fftfreq(h)[:, None])
    f[0, 0] = 1.0
    chans = []
    for _ in range(3):
        c = np.fft.irfft2((rng.normal(size=f.shape) +
                           1j * rng.normal(size=f.shape)) / f, s=(h, w))
        chans.append(c / (c.std() + 1e-9))
    img = 128 + 40 * np.stack(chans, axis=2) + rng.normal(0, 5, (h, w, 3))
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


t = fflib.Test()
root = t.path("root")
os.makedirs(root)
data = t.gen(os.path.join(root, "val"), n=N - len(BIG), classes=3, seed=21,
             big=True)
t.gen(os.path.join(root, "train"), n=N, classes=3, seed=22, big=True)
rng = np.random.default_rng(36)
for k, (fname, (w, h), how) in enumerate(BIG):
    im = photo(rng, w, h)
    how = dict(how)
    mode = how.pop("mode", "RGB")
    if mode != "RGB":
        im = im.convert(mode)
    im.save(os.path.join(data, "class%03d" % (k % 3), fname), **how)
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
        check(mx < 0.01, "sample %d (%s): differs from torchvision's by up "
              "to %.2f/255 (mean %.3f): not the same pixels"
              % (i, paths[i], mx, mean))

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
