#!/usr/bin/python3
"""test_fidelity - the default train job's crops keep torchvision's fine
detail (issue 36).

`feedfs DATASET_DIR MNT` serves train with RandomResizedCrop(224) +
RandomHorizontalFlip; torchvision takes the crop from the source image
(ImageFolder's PIL loader).  The measure is the mean |Laplacian| (4
neighbours, each channel, in 0..255 units) of the 224 x 224 crops: a crop
upscaled from fewer pixels than torchvision's has less of it.

The images have ImageNet's spread of sizes (about 460 x 375 on average,
from 200 x 150 to 1600 x 1200, portrait and landscape), a content with
detail at every scale (a 1/f spectrum like a photograph's, edges, and
sensor noise), written as JPEG (4:2:0), PNG, CMYK JPEG and grayscale JPEG.
feedfs: two epochs of its train job, each crop un-normalized back to
0..255 and rounded to uint8; torchvision: RandomResizedCrop(224) and
RandomHorizontalFlip(0.5) on ImageFolder's PIL images over TV_EPOCHS
epochs (8; torch.manual_seed(0)): its expected value, so that the ratio's
noise is feedfs's two epochs'.

Pass: over the whole set, feedfs's mean |Laplacian| >= 0.9 of
torchvision's; per source size >= 0.8 (the set has few of the largest).
It logs the ratio per source size (FF_FIDELITY_SCALE=N makes N times as
many images of each size, for a report).  Counts, never times.  On main
before issue 36 (train cached `decode resize(256)`, its crops upscaled
from the 256 image) it failed: 0.564 over the set, 0.37-0.78 per size;
with `decode(scaled) shrink(512)` it gives 0.996, 0.94-1.04 per size.

Exit 0 pass, 1 fail, 77 when numpy/torch/torchvision are missing or
FUSE cannot mount.
"""

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

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
TV_EPOCHS = 8
SCALE = int(os.environ.get("FF_FIDELITY_SCALE", "1"))
# (width, height, count): about ImageNet's spread of sizes.
SIZES = [(200, 150, 10), (320, 240, 12), (400, 350, 14), (375, 500, 8),
         (500, 375, 16), (500, 333, 8), (640, 480, 4), (800, 600, 3),
         (1024, 768, 2), (1600, 1200, 2)]


def photo(rng, w, h):
    """An RGB image of w x h with a photograph's 1/f spectrum, a few hard
    edges and sensor noise."""
    fy = np.fft.fftfreq(h)[:, None]
    fx = np.fft.rfftfreq(w)[None, :]
    f = np.sqrt(fx * fx + fy * fy)
    f[0, 0] = 1.0
    chans = []
    for _ in range(3):
        spec = (rng.normal(size=f.shape) + 1j * rng.normal(size=f.shape)) / f
        spec[0, 0] = 0
        c = np.fft.irfft2(spec, s=(h, w))
        chans.append(c / (c.std() + 1e-9))
    mix = rng.uniform(0.3, 1.0, (3, 3))
    img = np.tensordot(mix, np.stack(chans), axes=1).transpose(1, 2, 0)
    img = 128 + 40 * img
    for _ in range(6):  # hard-edged shapes at any scale
        x0, y0 = rng.integers(0, w), rng.integers(0, h)
        rw, rh = rng.integers(4, max(5, w // 3)), rng.integers(4, max(5, h // 3))
        img[y0:y0 + rh, x0:x0 + rw] += rng.uniform(-60, 60, 3)
    img += rng.normal(0, rng.uniform(3, 8), img.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def make_set(root):
    """The dataset: returns {relative path: (w, h, kind)}."""
    rng = np.random.default_rng(36)
    files, n = {}, 0
    for w, h, count in SIZES:
        for _ in range(count * SCALE):
            cls = "class%d" % (n % 3)
            os.makedirs(os.path.join(root, cls), exist_ok=True)
            im = photo(rng, w, h)
            kind = ("png" if n % 7 == 3 else "cmyk" if n % 11 == 5 else
                    "gray" if n % 13 == 8 else "jpeg")
            rel = os.path.join(cls, "img%04d.%s" % (
                n, "png" if kind == "png" else "jpg"))
            path = os.path.join(root, rel)
            if kind == "png":
                im.save(path)
            elif kind == "cmyk":
                im.convert("CMYK").save(path, quality=90)
            elif kind == "gray":
                im.convert("L").save(path, quality=90)
            else:
                im.save(path, quality=90, subsampling=2)
            files[rel] = (w, h, kind)
            n += 1
    return files


def laplacian(crop):
    """Mean |Laplacian| of a (224, 224, 3) array in 0..255 units."""
    a = crop.astype(np.float32)
    lap = (4 * a[1:-1, 1:-1] - a[:-2, 1:-1] - a[2:, 1:-1] - a[1:-1, :-2] -
           a[1:-1, 2:])
    return float(np.abs(lap).mean())


def main():
    t = fflib.Test()
    data = t.path("data")
    files = make_set(data)
    log("%d images, mean size %.0f x %.0f" % (
        len(files), np.mean([v[0] for v in files.values()]),
        np.mean([v[1] for v in files.values()])))

    # torchvision: ImageFolder's PIL images, its crop and flip.
    torch.manual_seed(0)
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip()])
    ds = torchvision.datasets.ImageFolder(data, transform=tf)
    paths = [os.path.relpath(p, data) for p, _ in ds.samples]
    tv = {}
    for _ in range(TV_EPOCHS):
        for i in range(len(ds)):
            tv.setdefault(paths[i], []).append(
                laplacian(np.asarray(ds[i][0])))

    # feedfs: the default train job, two epochs.
    ff = {}
    with fflib.Mount(t, data, t.path("mnt"), "-o",
                     "cache_dir=%s" % t.path("cache")) as m:
        info = json.load(open(m.p("train", "info.json")))
        check(info["shape"][1:] == [3, 224, 224] and
              info["dtype"] == "float32", "train info.json: %s" % info)
        with open(m.p("train", "samples.tsv")) as f:
            rows = [line.rstrip("\n").split("\t") for line in f]
        byid = {int(r[0]): r[1] for r in rows}
        check(sorted(byid.values()) == sorted(paths),
              "samples.tsv is not ImageFolder's files")
        for epoch in range(2):
            for b in range(info["batches_per_epoch"]):
                base = m.p("train", "epoch-%04d" % epoch, "batch-%06d" % b)
                x = np.load(base + ".npy")
                ids = np.load(base + ".ids.npy")
                px = x * STD[None, :, None, None] + MEAN[None, :, None, None]
                px = np.clip(np.rint(px * 255), 0, 255).astype(np.uint8)
                for k, sid in enumerate(ids):
                    ff.setdefault(byid[int(sid)], []).append(
                        laplacian(px[k].transpose(1, 2, 0)))
        check(m.alive(), "feedfs died")
    check(sorted(ff) == sorted(tv) and all(len(v) == 2 for v in ff.values()),
          "feedfs served %d images, %d crops" % (
              len(ff), sum(len(v) for v in ff.values())))

    # The ratios: per source size, and over the whole set.
    log("%-11s %-6s %7s %9s %11s %6s" % ("source", "images", "crops",
                                          "feedfs", "torchvision", "ratio"))
    worst = (9.0, None)
    for w, h, _ in SIZES:
        rels = [r for r, v in files.items() if v[:2] == (w, h)]
        a = np.mean([x for r in rels for x in ff[r]])
        b = np.mean([x for r in rels for x in tv[r]])
        kinds = sorted(set(files[r][2] for r in rels))
        log("%4dx%-6d %-6d %7d %9.3f %11.3f %6.3f  %s" % (
            w, h, len(rels), 2 * len(rels), a, b, a / b, ",".join(kinds)))
        worst = min(worst, (a / b, "%dx%d" % (w, h)))
    for kind in ("png", "cmyk", "gray"):
        rels = [r for r, v in files.items() if v[2] == kind]
        a = np.mean([x for r in rels for x in ff[r]])
        b = np.mean([x for r in rels for x in tv[r]])
        log("%-11s %-6d %7d %9.3f %11.3f %6.3f" % (
            kind, len(rels), 2 * len(rels), a, b, a / b))
    a = np.mean([x for v in ff.values() for x in v])
    b = np.mean([x for v in tv.values() for x in v])
    log("all         %-6d %7d %9.3f %11.3f %6.3f" % (
        len(ff), 2 * len(ff), a, b, a / b))
    check(a / b >= 0.9, "feedfs's crops keep %.3f of torchvision's fine "
          "detail (mean |Laplacian| %.3f vs %.3f), want >= 0.9"
          % (a / b, a, b))
    check(worst[0] >= 0.8, "source %s: feedfs's crops keep %.3f of "
          "torchvision's fine detail, want >= 0.8" % (worst[1], worst[0]))
    log("ok")


if __name__ == "__main__":
    main()
