#!/usr/bin/python3
"""test_shrink_crops - random_resized_crop after shrink draws torchvision's
crops of the SOURCE (issue 36).

The default train job caches `decode(scaled) shrink(512)`, an image whose
short side is at most 512, and random_resized_crop draws its box in the
source's pixels (the frame the cached image keeps).  For sources that
shrink(512) shrinks (1600x1200, 4000x600: most of its draws fall back to
the central crop of ratio 4/3, 700x2100) and one it keeps (500x375),
tests/xfrun prints DRAWS boxes of feedfs's crop (keys 0..DRAWS-1), and
torchvision 0.14's RandomResizedCrop.get_params draws as many on a PIL
image of the source's size (after torch.manual_seed): a two-sample
chi-square test per source on the joint (width, height) of the box in
10 x 10 bins of the source's sides, on its position (left, top) in 10
bins each of the room it leaves, and on the rate of the fallback (the
whole side taken), p > 1e-4 each; every box lies inside the source.

On main (no shrink op) xfrun refuses the pipeline: the test fails there.
Needs FF_BUILDDIR (tests/xfrun).  Exit 0 pass, 1 fail, 77 when numpy,
PIL, torch or torchvision is missing.
"""
import math
import os
import subprocess
import sys
import tempfile
from collections import Counter

try:
    import numpy as np
    from PIL import Image
    import torch
    import torchvision.transforms as T
except ImportError as e:
    print("SKIP: %s" % e)
    sys.exit(77)

BUILD = os.environ.get("FF_BUILDDIR", ".")
XFRUN = os.path.join(BUILD, "tests", "xfrun")
PIPELINE = ("decode(scaled) shrink(512) cache random_resized_crop(224) "
            "flip(0.5) normalize(imagenet)")
DRAWS = int(os.environ.get("FF_CROP_DRAWS", "40000"))
SOURCES = [(1600, 1200), (4000, 600), (700, 2100), (500, 375)]

failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def chi2_sf(x, df):
    """P(X > x) for chi-square with df degrees of freedom (Wilson-Hilferty,
    as test_augment.py)."""
    if df <= 0:
        return 1.0
    z = ((x / df) ** (1.0 / 3) - (1 - 2.0 / (9 * df))) / math.sqrt(
        2.0 / (9 * df))
    return 0.5 * math.erfc(z / math.sqrt(2))


def two_sample(a, b, what):
    na, nb = sum(a.values()), sum(b.values())
    keys = set(a) | set(b)
    x = 0.0
    for k in keys:
        ta = a.get(k, 0) + b.get(k, 0)
        ea, eb = ta * na / (na + nb), ta * nb / (na + nb)
        x += (a.get(k, 0) - ea) ** 2 / ea + (b.get(k, 0) - eb) ** 2 / eb
    p = chi2_sf(x, len(keys) - 1)
    print("chi-square %s: %d categories, x2 %.1f, p %.4f"
          % (what, len(keys), x, p), flush=True)
    check(p > 1e-4, "%s: feedfs's crops differ from torchvision's "
          "(x2 %.1f over %d categories, p %.2g)" % (what, x, len(keys), p))


def categories(boxes, w, h):
    """Counters of the box's size, its position in the room left, and
    whether it takes a whole side (the fallback's mark)."""
    size, pos, whole = Counter(), Counter(), Counter()
    for x, y, bw, bh in boxes:
        size[(min(bw * 10 // (w + 1), 9), min(bh * 10 // (h + 1), 9))] += 1
        rx, ry = w - bw + 1, h - bh + 1
        pos[(x * 10 // rx, y * 10 // ry)] += 1
        whole[(bw == w, bh == h)] += 1
    return size, pos, whole


def feedfs_boxes(path):
    r = subprocess.run([XFRUN, PIPELINE, path, os.path.join(TMP, "o.raw"),
                        "--rrc-only", "--count", str(DRAWS), "--dtype",
                        "float32"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        check(False, "xfrun %s: %s" % (path, r.stderr.strip()))
        return []
    return [tuple(map(int, line.split())) for line in r.stdout.splitlines()]


def torch_boxes(w, h, seed):
    img = Image.new("RGB", (w, h))
    torch.manual_seed(seed)
    out = []
    for _ in range(DRAWS):
        i, j, bh, bw = T.RandomResizedCrop.get_params(
            img, [0.08, 1.0], [3.0 / 4.0, 4.0 / 3.0])
        out.append((j, i, bw, bh))
    return out


def main():
    global TMP
    if not os.access(XFRUN, os.X_OK):
        print("FAIL: %s not built (set FF_BUILDDIR)" % XFRUN)
        return 1
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="shrinkcrops.") as TMP:
        for n, (w, h) in enumerate(SOURCES):
            path = os.path.join(TMP, "src%dx%d.jpg" % (w, h))
            rng = np.random.default_rng(n)
            Image.fromarray(rng.integers(0, 256, (h, w, 3), np.uint8)).save(
                path, quality=80)
            ours = feedfs_boxes(path)
            check(len(ours) == DRAWS, "%dx%d: %d boxes from xfrun, want %d"
                  % (w, h, len(ours), DRAWS))
            if len(ours) != DRAWS:
                continue
            outside = [b for b in ours if not (
                0 <= b[0] and 0 <= b[1] and b[2] >= 1 and b[3] >= 1 and
                b[0] + b[2] <= w and b[1] + b[3] <= h)]
            check(not outside, "%dx%d: boxes outside the source: %s"
                  % (w, h, outside[:3]))
            theirs = torch_boxes(w, h, 1000 + n)
            a, b = categories(ours, w, h), categories(theirs, w, h)
            for what, ca, cb in zip(("size", "position", "fallback"), a, b):
                two_sample(ca, cb, "%dx%d %s" % (w, h, what))
            print("%dx%d: mean box %.0fx%.0f (torchvision %.0fx%.0f), whole "
                  "width %.3f (%.3f)" % (
                      w, h, np.mean([o[2] for o in ours]),
                      np.mean([o[3] for o in ours]),
                      np.mean([o[2] for o in theirs]),
                      np.mean([o[3] for o in theirs]),
                      np.mean([o[2] == w for o in ours]),
                      np.mean([o[2] == w for o in theirs])), flush=True)
    print("%d checks, %d failed" % (checks, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
