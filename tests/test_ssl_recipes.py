#!/usr/bin/python3
"""test_ssl_recipes - a script test (tests/) of the transforms layer
(p=P and solarize, transforms/pipeline*.c and ops.c, through
tests/augrun): the self-supervised recipes of the README (DINO's
DataAugmentationDINO, BYOL's and SimCLR's views; issue 36) against the
torchvision code that writes them.

The three [job ...] configs are read from README.md, so that the README
says what is tested.  Each view's ops after cache (its pipeline's tail,
or its view.K line) are checked against the recipe's own torchvision
Compose, written here as the recipes write it (RandomApply, ColorJitter,
RandomGrayscale, GaussianBlur, RandomSolarize):

1. Probabilities: for 40k keys, tests/augrun decisions gives what every
   op of the view drew (flip, color_jitter's p=, grayscale, blur's p=,
   solarize's p=); 40k forwards of the torchvision Compose record which
   of hflip, adjust_*, rgb_to_grayscale, gaussian_blur and solarize ran
   (their functions replaced by recorders; every draw is torch's own).
   A two-sample chi-square test on the joint outcome, p > 1e-4.
2. Pixels: for keys on random images, tests/augrun run applies the
   view's ops (uint8, before normalize) and prints each op's draws;
   torchvision.transforms.functional replays them: resized_crop and hflip
   on the PIL image (as torchvision runs them there), then ColorJitter
   with those factors and order, rgb_to_grayscale, gaussian_blur with
   that sigma and solarize, on the uint8 tensor.  Equal byte for byte,
   but for a blurred image: torch sums the k x k kernel in an order of
   its own, so a value may differ by 1 (never more), at most 1e-3 of the
   values of the blurred images (tests/test_blur_ref.py).
3. solarize alone at thresholds 0, 1, 100, 127.5, 128, 255 equals
   F.solarize, exactly.

Exit 0 pass, 1 fail, 77 when numpy, PIL, torch or torchvision is missing.
"""
import math
import os
import random
import re
import subprocess
import sys
import tempfile
from collections import Counter

try:
    import numpy as np
    import torch
    import torchvision.transforms as T
    import torchvision.transforms.functional as F
    from PIL import Image
except ImportError as e:
    print("SKIP: %s" % e)
    sys.exit(77)

BUILD = os.environ.get("FF_BUILDDIR", ".")
SRC = os.environ.get("FF_SRCDIR") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))
AUGRUN = os.path.join(BUILD, "tests", "augrun")
DRAWS = int(os.environ.get("FF_SSL_DRAWS", "40000"))
RUNS = int(os.environ.get("FF_SSL_RUNS", "24"))

torch.set_num_threads(1)
failures = []
nchecks = 0


def check(cond, what):
    global nchecks
    nchecks += 1
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def augrun(*args):
    r = subprocess.run([AUGRUN] + [str(a) for a in args],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        print("augrun %s: %s" % (args[:2], r.stderr.decode()))
        sys.exit(1)
    return r.stdout.decode()


# ---- the recipes as the README writes them -------------------------------

def readme_jobs():
    """{job: {key: value}} of the indented [job NAME] blocks of README.md."""
    jobs, cur = {}, None
    with open(os.path.join(SRC, "README.md")) as f:
        for line in f:
            m = re.match(r"^    \[job (\w+)\]$", line.rstrip("\n"))
            if m:
                cur = jobs.setdefault(m.group(1), {})
                continue
            if cur is not None and line.startswith("    ") and "=" in line:
                k, v = line.strip().split("=", 1)
                cur[k.strip()] = v.strip()
            else:
                cur = None
    return jobs


def view_tails(job):
    """The ops after cache of each view of a README job, as a list."""
    tail0 = job["pipeline"].split(" cache ", 1)[1]
    n = int(job.get("views", "1"))
    tails = [tail0] * n
    for k, v in job.items():
        m = re.match(r"^view\.(\d+)(?:-(\d+))?$", k)
        if m:
            lo = int(m.group(1))
            hi = int(m.group(2) or lo)
            for i in range(lo, hi + 1):
                tails[i] = v
    return tails


# ---- the recipes as their torchvision code writes them --------------------

def blur(p):
    return T.RandomApply([T.GaussianBlur(23, sigma=(0.1, 2.0))], p=p)


def byol_simclr_common(jitter):
    return [T.RandomResizedCrop(224), T.RandomHorizontalFlip(p=0.5),
            T.RandomApply([T.ColorJitter(*jitter)], p=0.8),
            T.RandomGrayscale(p=0.2)]


def torchvision_views():
    # DINO's main_dino.py, DataAugmentationDINO (its PIL GaussianBlur and
    # Solarization as torchvision's GaussianBlur and RandomSolarize)
    fcj = [T.RandomHorizontalFlip(p=0.5),
           T.RandomApply([T.ColorJitter(brightness=0.4, contrast=0.4,
                                        saturation=0.2, hue=0.1)], p=0.8),
           T.RandomGrayscale(p=0.2)]
    g1 = T.Compose([T.RandomResizedCrop(224, scale=(0.4, 1.0))] + fcj +
                   [blur(1.0)])
    g2 = T.Compose([T.RandomResizedCrop(224, scale=(0.4, 1.0))] + fcj +
                   [blur(0.1), T.RandomSolarize(128, p=0.2)])
    local = T.Compose([T.RandomResizedCrop(96, scale=(0.05, 0.4))] + fcj +
                      [blur(0.5)])
    # BYOL's T and T' (Grill et al. 2020, table 6)
    jit = (0.4, 0.4, 0.2, 0.1)
    byol0 = T.Compose(byol_simclr_common(jit) + [blur(1.0)])
    byol1 = T.Compose(byol_simclr_common(jit) +
                      [blur(0.1), T.RandomSolarize(128, p=0.2)])
    # SimCLR (Chen et al. 2020, appendix A), colour strength s = 1
    simclr = T.Compose(byol_simclr_common((0.8, 0.8, 0.8, 0.2)) +
                       [blur(0.5)])
    return {"dino": [g1, g2] + [local] * 8, "byol": [byol0, byol1],
            "simclr": [simclr, simclr]}


# ---- 1. the draws' probabilities -------------------------------------------

OPS = ("flip", "color_jitter", "grayscale", "gaussian_blur", "solarize")


def feedfs_outcomes(tail, n):
    out = Counter()
    text = augrun("decisions", "decode cache " + tail, 36, n)
    for line in text.splitlines():
        on = {}
        for tok in line.split():
            parts = tok.split(":")
            applied = parts[1] == "1" and (len(parts) < 3 or parts[2] == "1")
            on[parts[0]] = applied
        out[tuple(on.get(o, False) for o in OPS)] += 1
    return out


def torch_outcomes(compose, n):
    """n forwards of compose with the image functions recording."""
    ran = set()
    saved = {}

    def recorder(name):
        def f(img, *a, **k):
            ran.add(name)
            return img
        return f
    patch = {"hflip": "flip", "adjust_brightness": "color_jitter",
             "adjust_contrast": "color_jitter",
             "adjust_saturation": "color_jitter",
             "adjust_hue": "color_jitter",
             "rgb_to_grayscale": "grayscale",
             "gaussian_blur": "gaussian_blur", "solarize": "solarize",
             "resized_crop": None}
    for fn, name in patch.items():
        saved[fn] = getattr(F, fn)
        setattr(F, fn, recorder(name) if name else (lambda img, *a, **k:
                                                     img))
    out = Counter()
    try:
        img = torch.zeros((3, 32, 32), dtype=torch.uint8)
        torch.manual_seed(36)
        for _ in range(n):
            ran.clear()
            compose(img)
            out[tuple(o in ran for o in OPS)] += 1
    finally:
        for fn, f in saved.items():
            setattr(F, fn, f)
    return out


def chi2_sf(x, df):
    """P(X > x), chi-square with df degrees (Wilson-Hilferty)."""
    if df <= 0:
        return 1.0
    z = ((x / df) ** (1.0 / 3) - (1 - 2.0 / (9 * df))) / math.sqrt(
        2.0 / (9 * df))
    return 0.5 * math.erfc(z / math.sqrt(2))


def two_sample(a, b, what):
    na, nb = sum(a.values()), sum(b.values())
    x = 0.0
    keys = set(a) | set(b)
    for k in keys:
        t = a.get(k, 0) + b.get(k, 0)
        ea, eb = t * na / (na + nb), t * nb / (na + nb)
        x += (a.get(k, 0) - ea) ** 2 / ea + (b.get(k, 0) - eb) ** 2 / eb
    p = chi2_sf(x, len(keys) - 1)
    print("chi-square %s: %d outcomes, x2 %.1f, p %.4f"
          % (what, len(keys), x, p), flush=True)
    check(p > 1e-4, "%s: feedfs's draws differ from torchvision's (x2 %.1f "
          "over %d outcomes, p %.2g)" % (what, x, len(keys), p))


def rates(c):
    n = sum(c.values())
    return " ".join("%s %.3f" % (o, sum(v for k, v in c.items() if k[i]) / n)
                    for i, o in enumerate(OPS))


# ---- 2. the pixels, replayed -----------------------------------------------

def random_image(rng, w, h):
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 3 + y * 2) % 256, (x * y // 7) % 256,
                     (128 + 100 * np.sin(x / 9.0 + y / 13.0))], axis=-1)
    noise = np.frombuffer(rng.randbytes(w * h * 3), np.uint8).reshape(
        h, w, 3) % 48
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def jitter_ranges(tail):
    m = re.search(r"color_jitter\(([^)]*)\)", tail)
    return [float(a) for a in m.group(1).split(",") if "=" not in a]


def replay(img, lines, tail):
    """torchvision's functional ops on img (HWC uint8) with the draws of
    augrun run's lines; (image HWC, whether it was blurred)."""
    pil = Image.fromarray(img)
    t = None
    blurred = False
    for line in lines:
        tok = line.split()
        name, applied = tok[0], tok[1] == "1"
        if not applied or name == "normalize":
            continue
        if name == "random_resized_crop":
            x, y, w, h = (int(v) for v in tok[2:6])
            size = int(re.search(r"random_resized_crop\((\d+)",
                                 tail).group(1))
            pil = F.resized_crop(pil, y, x, h, w, [size, size],
                                 T.InterpolationMode.BILINEAR)
            continue
        if name == "flip":
            if tok[2] == "1":
                pil = F.hflip(pil)
            continue
        if t is None:
            t = torch.from_numpy(np.asarray(pil).copy()).permute(2, 0, 1)
        if name == "color_jitter":
            order = torch.tensor([int(c) for c in tok[3]])
            on = [c == "1" for c in tok[8]]
            f = [float(v) if o else None for v, o in zip(tok[4:8], on)]
            saved = T.ColorJitter.__dict__["get_params"]  # staticmethod
            T.ColorJitter.get_params = staticmethod(
                lambda *a: (order, f[0], f[1], f[2], f[3]))
            try:
                t = T.ColorJitter(*jitter_ranges(tail))(t)
            finally:
                T.ColorJitter.get_params = saved
        elif name == "grayscale":
            if tok[3] == "1":
                t = F.rgb_to_grayscale(t, num_output_channels=3)
        elif name == "gaussian_blur":
            k, sigma = int(tok[2]), float(tok[3])
            t = F.gaussian_blur(t, [k, k], [sigma, sigma])
            blurred = True
        elif name == "solarize":
            t = F.solarize(t, float(tok[2]))
        else:
            check(False, "replay: unexpected op %s" % name)
    if t is None:
        return np.asarray(pil), blurred
    return t.permute(1, 2, 0).contiguous().numpy(), blurred


def part_pixels(tmp, recipe, v, tail, rng, tally):
    inp, outp = os.path.join(tmp, "in"), os.path.join(tmp, "out")
    for _ in range(RUNS):
        w, h = rng.choice([(256, 192), (200, 300), (320, 240), (240, 240)])
        img = random_image(rng, w, h)
        img.tofile(inp)
        key = rng.getrandbits(64)
        lines = augrun("run", "decode cache " + tail, key, w, h, inp,
                       outp).splitlines()
        ow, oh = (int(s) for s in lines[-1].split())
        got = np.fromfile(outp, np.uint8).reshape(oh, ow, 3)
        want, blurred = replay(img, lines[:-1], tail)
        what = "%s view %d key %d on %dx%d" % (recipe, v, key, w, h)
        if got.shape != want.shape:
            check(False, "%s: shape %s, torchvision %s"
                  % (what, got.shape, want.shape))
            continue
        d = np.abs(got.astype(np.int16) - want.astype(np.int16))
        if not blurred:
            tally["exact"] += 1
            check(d.max() == 0, "%s: not byte-equal (%d values differ, by "
                  "up to %d)" % (what, int((d > 0).sum()), int(d.max())))
        else:
            tally["blurred"] += 1
            tally["values"] += d.size
            tally["off"] += int((d > 0).sum())
            check(d.max() <= 1, "%s: a blurred value off by %d"
                  % (what, int(d.max())))


def part_solarize(tmp):
    rng = random.Random(128)
    inp, outp = os.path.join(tmp, "in"), os.path.join(tmp, "out")
    for th in (0, 1, 100, 127.5, 128, 255):
        img = np.frombuffer(rng.randbytes(64 * 48 * 3), np.uint8).reshape(
            48, 64, 3)
        img.tofile(inp)
        lines = augrun("run", "decode cache center_crop(64, 48) "
                       "solarize(%r)" % th, 1, 64, 48, inp,
                       outp).splitlines()[1:]
        got = np.fromfile(outp, np.uint8).reshape(48, 64, 3)
        want = F.solarize(torch.from_numpy(img.copy()).permute(2, 0, 1), th)
        tok = lines[0].split()
        check(tok[:2] == ["solarize", "1"] and float(tok[2]) == th,
              lines[0])
        check(np.array_equal(got, want.permute(1, 2, 0).numpy()),
              "solarize(%r) differs from F.solarize" % th)


def main():
    if not os.access(AUGRUN, os.X_OK):
        print("FAIL: %s is not built" % AUGRUN)
        return 1
    jobs = readme_jobs()
    tv = torchvision_views()
    rng = random.Random(36)
    tally = Counter()
    with tempfile.TemporaryDirectory(prefix="test_ssl_recipes.") as tmp:
        part_solarize(tmp)
        for recipe in ("dino", "byol", "simclr"):
            check(recipe in jobs, "README has no [job %s]" % recipe)
            if recipe not in jobs:
                continue
            tails = view_tails(jobs[recipe])
            check(len(tails) == len(tv[recipe]), "%s: %d views, the "
                  "recipe %d" % (recipe, len(tails), len(tv[recipe])))
            done = {}
            for v, (tail, comp) in enumerate(zip(tails, tv[recipe])):
                if tail in done:  # the same ops as view done[tail]
                    check(comp is tv[recipe][done[tail]], "%s view %d"
                          % (recipe, v))
                    continue
                done[tail] = v
                fo = feedfs_outcomes(tail, DRAWS)
                to = torch_outcomes(comp, DRAWS)
                print("%s view %d: feedfs %s\n%s view %d: torch  %s"
                      % (recipe, v, rates(fo), recipe, v, rates(to)))
                two_sample(fo, to, "%s view %d" % (recipe, v))
                part_pixels(tmp, recipe, v, tail, rng, tally)
    frac = tally["off"] / max(1, tally["values"])
    print("pixels: %d replays byte-equal; %d blurred, %.5f%% of their "
          "values off by 1" % (tally["exact"], tally["blurred"], 100 * frac))
    check(tally["exact"] > 0 and tally["blurred"] > 0, "replays: %s" % tally)
    check(frac <= 1e-3, "blurred values off by 1: %.5f%% > 0.1%%"
          % (100 * frac))
    print("%d checks, %d failures" % (nchecks, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
