#!/usr/bin/python3
"""test_augment - the augmentations of issue 28 (transforms/augment.c)
against torchvision 0.14's own code, on uint8 tensors (the tensor path).

1. Replay: over many random draws on random images (odd sizes, 1x1, 1xN,
   Nx1, huge aspect ratios, flat images), tests/augrun draws the
   parameters of trivial_augment, rand_augment(N, M), auto_augment,
   color_jitter and grayscale and applies them; the test checks that each
   drawn magnitude is torchvision's (_augmentation_space's tensor at that
   bin, with the sign), that AutoAugment's steps are its IMAGENET policy's,
   and replays the parameters with torchvision (autoaugment._apply_op,
   ColorJitter.forward with get_params fixed to feedfs's draw,
   F.rgb_to_grayscale).
   - colour ops (Identity, Brightness, Color, Contrast, Sharpness,
     Posterize, Solarize, AutoContrast, Equalize, Invert, the four of
     ColorJitter, grayscale): equal EXACTLY, byte for byte;
   - geometric ops (ShearX, ShearY, TranslateX, TranslateY, Rotate; NEAREST,
     fill 0): a result that went through one may differ by more than
     1/255 on at most 0.1% of the pixels of all those results together
     (a coordinate within float32 rounding of a pixel boundary).
2. Every op alone at every one of TrivialAugmentWide's 31 bins, both signs,
   the same two rules.
3. Distributions: 100k draws of feedfs against 100k of torchvision's own
   sampling (TrivialAugmentWide and RandAugment forward with _apply_op
   recording, AutoAugment.get_params, ColorJitter.get_params,
   RandomGrayscale's torch.rand(1) < p, each after torch.manual_seed): a
   two-sample chi-square test per distribution (op x magnitude x sign;
   policy x applied x sign; the order permutation and each factor's range
   in 10 bins; grayscale's rate), p > 1e-4 each.

Needs FF_BUILDDIR (tests/augrun).  Exit 0 pass, 1 fail, 77 when numpy,
torch or torchvision is missing.
"""
import math
import os
import random
import subprocess
import sys
import tempfile
from collections import Counter

try:
    import numpy as np
    import torch
    import torchvision.transforms as T
    import torchvision.transforms.autoaugment as AA
    import torchvision.transforms.functional as F
except ImportError as e:
    print("SKIP: %s" % e)
    sys.exit(77)

BUILD = os.environ.get("FF_BUILDDIR", ".")
AUGRUN = os.path.join(BUILD, "tests", "augrun")
GEOMETRIC = {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate"}
NEAREST = T.InterpolationMode.NEAREST
ROUNDS = int(os.environ.get("FF_AUG_ROUNDS", "300"))
DRAWS = 100000

torch.set_num_threads(1)
failures = []
stats = Counter()


def check(cond, what):
    stats["checks"] += 1
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def augrun(*args):
    r = subprocess.run([AUGRUN] + [str(a) for a in args],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        print("augrun %s: %s" % (args, r.stderr.decode()))
        sys.exit(1)
    return r.stdout.decode()


def parse(line):
    """A parameter line of augrun: dict."""
    tok = line.split()
    if tok[0] == "J":
        return dict(kind="J", order=[int(c) for c in tok[1]],
                    factors=[float(x) for x in tok[2:6]],
                    on=[c == "1" for c in tok[6]])
    if tok[0] == "G":
        return dict(kind="G", apply=tok[1] == "1")
    d = dict(kind="A", steps=[])
    if tok[0] == "P":
        d.update(policy=int(tok[1]), probs=(float(tok[2]), float(tok[3])))
        tok = tok[4:]
    for s in tok:
        name, b, neg, on, mag = s.split(",")
        d["steps"].append((name, int(b), int(neg), on == "1", float(mag)))
    return d


SIZES = [(1, 1), (1, 7), (9, 1), (2, 2), (3, 3), (2, 5), (1, 300),
         (400, 1), (3, 200), (250, 2), (17, 13), (31, 64), (224, 224),
         (100, 75), (57, 91)]


def random_image(rng, w, h):
    kind = rng.random()
    if kind < 0.1:  # flat: autocontrast's and equalize's special cases
        v = np.full((h, w, 3), rng.randrange(256), np.uint8)
    elif kind < 0.25:  # few levels
        v = np.array(rng.choices([0, 17, 128, 255], k=w * h * 3),
                     np.uint8).reshape(h, w, 3)
    elif kind < 0.5:  # smooth, so that the ops see structure
        y, x = np.mgrid[0:h, 0:w]
        base = np.stack([(x * 7 + y * 3) % 256, (x * y) % 256,
                         (x * 2 + 40) % 256], axis=-1)
        v = base.astype(np.uint8)
    else:
        v = np.frombuffer(rng.randbytes(w * h * 3),
                          np.uint8).reshape(h, w, 3).copy()
    return v


def to_t(a):
    return torch.from_numpy(a.copy()).permute(2, 0, 1).contiguous()


def from_t(t):
    return t.permute(1, 2, 0).contiguous().numpy()


class Compare:
    """Results of colour-only and of geometric replays."""

    def __init__(self, label):
        self.label = label
        self.geo_pixels = 0
        self.geo_off = 0
        self.exact = 0

    def add(self, got, want, geometric, what):
        if got.shape != want.shape:
            check(False, "%s: shape %s, torchvision %s"
                  % (what, got.shape, want.shape))
            return
        if not geometric:
            self.exact += 1
            ok = np.array_equal(got, want)
            if not ok:
                d = np.argwhere(got != want)[0]
                check(False, "%s: not exact: at %s feedfs %d torchvision %d"
                      % (what, d.tolist(), got[tuple(d)], want[tuple(d)]))
            return
        diff = np.abs(got.astype(np.int16) - want.astype(np.int16)).max(-1)
        self.geo_pixels += diff.size
        self.geo_off += int((diff > 1).sum())

    def done(self):
        frac = self.geo_off / max(1, self.geo_pixels)
        print("%s: %d exact comparisons; geometric: %d of %d pixels off by "
              "more than 1/255 (%.5f%%)" % (self.label, self.exact,
                                            self.geo_off, self.geo_pixels,
                                            100 * frac), flush=True)
        check(frac <= 0.001, "%s: geometric pixels off %.5f%% > 0.1%%"
              % (self.label, 100 * frac))


# torchvision's spaces, for the magnitudes feedfs prints
def space(kind, w, h, nbins=31):
    if kind == "trivial":
        return T.TrivialAugmentWide()._augmentation_space(31)
    if kind == "rand":
        return T.RandAugment()._augmentation_space(31, (h, w))
    return T.AutoAugment()._augmentation_space(10, (h, w))


POLICY = T.AutoAugment(T.AutoAugmentPolicy.IMAGENET).policies


def check_magnitudes(kind, d, w, h, what):
    sp = space(kind, w, h)
    for k, (name, b, neg, on, mag) in enumerate(d["steps"]):
        check(name in sp, "%s: op %s not in torchvision's space"
              % (what, name))
        mags, signed = sp[name]
        want = float(mags[b].item()) if mags.ndim > 0 else 0.0
        if signed and neg == 1:
            want = -want
        check(mag == want or (want == 0 and mag == 0),
              "%s: %s bin %d magnitude %r, torchvision %r"
              % (what, name, b, mag, want))
        check((neg >= 0) == signed, "%s: %s sign drawn %d" % (what, name,
                                                              neg))
        if kind == "auto":
            pname, p, pbin = POLICY[d["policy"]][k]
            check(name == pname and b == (-1 if pbin is None else pbin),
                  "%s: step %d %s/%d, policy %d has %s/%s"
                  % (what, k, name, b, d["policy"], pname, pbin))
            check(on == (d["probs"][k] <= p), "%s: step %d on=%s, prob %r "
                  "p %r" % (what, k, on, d["probs"][k], p))


def replay_aug(img, d):
    t = to_t(img)
    geo = False
    for (name, b, neg, on, mag) in d["steps"]:
        if not on:
            continue
        geo = geo or name in GEOMETRIC
        t = AA._apply_op(t, name, mag, interpolation=NEAREST, fill=None)
    return from_t(t), geo


def replay_jitter(img, d, ranges):
    f = [x if on else None for x, on in zip(d["factors"], d["on"])]
    order = torch.tensor(d["order"])
    saved = T.ColorJitter.get_params
    T.ColorJitter.get_params = staticmethod(
        lambda *a: (order, f[0], f[1], f[2], f[3]))
    try:
        cj = T.ColorJitter(*ranges)
        out = cj(to_t(img))
    finally:
        T.ColorJitter.get_params = saved
    return from_t(out)


def replay_gray(img, d):
    t = to_t(img)
    if d["apply"]:
        t = F.rgb_to_grayscale(t, num_output_channels=3)
    return from_t(t)


def part_replay(tmp):
    rng = random.Random(2028)
    cmp = Compare("replay")
    inp, outp = os.path.join(tmp, "in"), os.path.join(tmp, "out")
    for rnd in range(ROUNDS):
        w, h = rng.choice(SIZES)
        img = random_image(rng, w, h)
        img.tofile(inp)
        which = rnd % 5
        key = rng.getrandbits(64)
        if which == 0:
            kind, pl = "trivial", "trivial_augment"
        elif which == 1:
            n, m = rng.randint(1, 4), rng.randint(0, 30)
            kind, pl = "rand", "rand_augment(%d,%d)" % (n, m)
        elif which == 2:
            kind, pl = "auto", "auto_augment(imagenet)"
        elif which == 3:
            ranges = [rng.choice([0, 0.1, 0.4, 0.8, 1.5]) for _ in range(3)]
            ranges.append(rng.choice([0, 0.05, 0.2, 0.5]))
            kind = "jitter"
            pl = "color_jitter(%s)" % ",".join("%g" % r for r in ranges)
        else:
            kind, pl = "gray", "grayscale(%g)" % rng.choice([0.2, 0.5, 1])
        line = augrun("draw", "decode resize(8,8) cache " + pl, 3, key, w, h,
                      inp, outp)
        d = parse(line)
        got = np.fromfile(outp, np.uint8).reshape(h, w, 3)
        what = "%s key %d on %dx%d (%s)" % (pl, key, w, h, line.strip())
        if kind in ("trivial", "rand", "auto"):
            check_magnitudes(kind, d, w, h, what)
            want, geo = replay_aug(img, d)
        elif kind == "jitter":
            want, geo = replay_jitter(img, d, ranges), False
        else:
            want, geo = replay_gray(img, d), False
        cmp.add(got, want, geo, what)
    cmp.done()


def part_ops(tmp):
    """Every op at every bin of TrivialAugmentWide's space, both signs,
    and ColorJitter's four and grayscale at random factors."""
    rng = random.Random(7)
    cmp = Compare("single ops")
    inp, outp = os.path.join(tmp, "in"), os.path.join(tmp, "out")
    sp = space("trivial", 0, 0)
    jobs = []
    for name, (mags, signed) in list(sp.items()) + [("Invert", (
            torch.tensor(0.0), False))]:
        if mags.ndim == 0:
            jobs += [(name, 0.0)] * 4
            continue
        for b in range(len(mags)):
            m = float(mags[b].item())
            jobs.append((name, m))
            if signed:
                jobs.append((name, -m))
    for _ in range(40):
        jobs.append(("brightness", float(np.float32(rng.uniform(0, 2)))))
        jobs.append(("contrast", float(np.float32(rng.uniform(0, 2)))))
        jobs.append(("saturation", float(np.float32(rng.uniform(0, 2)))))
        jobs.append(("hue", float(np.float32(rng.uniform(-0.5, 0.5)))))
        jobs.append(("grayscale", 0.0))
    for name, v in jobs:
        w, h = rng.choice(SIZES)
        img = random_image(rng, w, h)
        img.tofile(inp)
        augrun("op", name, repr(v), w, h, inp, outp)
        got = np.fromfile(outp, np.uint8).reshape(h, w, 3)
        t = to_t(img)
        if name == "brightness":
            want = F.adjust_brightness(t, v)
        elif name == "contrast":
            want = F.adjust_contrast(t, v)
        elif name == "saturation":
            want = F.adjust_saturation(t, v)
        elif name == "hue":
            want = F.adjust_hue(t, v)
        elif name == "grayscale":
            want = F.rgb_to_grayscale(t, num_output_channels=3)
        else:
            want = AA._apply_op(t, name, v, interpolation=NEAREST,
                                fill=None)
        cmp.add(got, from_t(want), name in GEOMETRIC,
                "%s(%r) on %dx%d" % (name, v, w, h))
    cmp.done()


# ---- distributions --------------------------------------------------------

def chi2_sf(x, df):
    """P(X > x) for chi-square with df degrees of freedom (Wilson-Hilferty;
    exact enough for a pass/fail threshold at 1e-4)."""
    if df <= 0:
        return 1.0
    z = ((x / df) ** (1.0 / 3) - (1 - 2.0 / (9 * df))) / math.sqrt(
        2.0 / (9 * df))
    return 0.5 * math.erfc(z / math.sqrt(2))


def two_sample(a, b, what):
    """Two-sample chi-square on the categories of Counters a and b."""
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
    check(p > 1e-4, "%s: feedfs's distribution differs from torchvision's "
          "(x2 %.1f over %d categories, p %.2g)" % (what, x, len(keys), p))


def feedfs_draws(pl, w=224, h=224, n=DRAWS):
    out = augrun("draws", "decode resize(8,8) cache " + pl, 3, 12345, n, w,
                 h)
    return [parse(line) for line in out.splitlines()]


def sgn(m):
    return math.copysign(1.0, m) < 0


def torch_forward_record(tf, n):
    """n forwards of tf with _apply_op recording (name, magnitude)."""
    rec = []
    saved = AA._apply_op

    def fake(img, name, mag, interpolation, fill):
        rec.append((name, mag))
        return img
    AA._apply_op = fake
    try:
        img = torch.zeros((3, 224, 224), dtype=torch.uint8)
        torch.manual_seed(28)
        calls = []
        for _ in range(n):
            start = len(rec)
            tf(img)
            calls.append(rec[start:])
    finally:
        AA._apply_op = saved
    return calls


def part_distributions():
    sp = space("trivial", 0, 0)
    # TrivialAugmentWide: (op, magnitude, sign)
    fd = Counter()
    for d in feedfs_draws("trivial_augment"):
        (name, b, neg, on, mag), = d["steps"]
        fd[(name, abs(mag), neg == 1)] += 1
    td = Counter()
    for steps in torch_forward_record(T.TrivialAugmentWide(), DRAWS):
        (name, mag), = steps
        signed = sp[name][1]
        td[(name, abs(mag), signed and sgn(mag))] += 1
    two_sample(fd, td, "trivial_augment op x magnitude x sign")
    # RandAugment(2, 9): the two steps' (op, sign), jointly
    fd = Counter()
    for d in feedfs_draws("rand_augment(2,9)"):
        fd[tuple((s[0], s[2] == 1) for s in d["steps"])] += 1
    rsp = space("rand", 224, 224)
    td = Counter()
    for steps in torch_forward_record(T.RandAugment(2, 9), DRAWS):
        td[tuple((nm, rsp[nm][1] and sgn(m)) for nm, m in steps)] += 1
    two_sample(fd, td, "rand_augment(2,9) ops x signs")
    # AutoAugment: policy x applied x signs
    fd = Counter()
    for d in feedfs_draws("auto_augment(imagenet)"):
        fd[(d["policy"],) + tuple((s[3], s[2] == 1) for s in
                                  d["steps"])] += 1
    asp = space("auto", 224, 224)
    td = Counter()
    torch.manual_seed(28)
    for _ in range(DRAWS):
        pid, probs, signs = T.AutoAugment.get_params(len(POLICY))
        key = [pid]
        for k, (name, p, _) in enumerate(POLICY[pid]):
            key.append((bool(probs[k] <= p),
                        bool(asp[name][1] and signs[k] == 0)))
        td[tuple(key)] += 1
    two_sample(fd, td, "auto_augment policy x applied x signs")
    # ColorJitter(0.4, 0.4, 0.4, 0.1): order; each factor in 10 bins
    ranges = [(0.6, 1.4)] * 3 + [(-0.1, 0.1)]
    fds = feedfs_draws("color_jitter(0.4,0.4,0.4,0.1)")
    torch.manual_seed(28)
    cj = T.ColorJitter(0.4, 0.4, 0.4, 0.1)
    tds = [T.ColorJitter.get_params(cj.brightness, cj.contrast,
                                    cj.saturation, cj.hue)
           for _ in range(DRAWS)]
    two_sample(Counter(tuple(d["order"]) for d in fds),
               Counter(tuple(t[0].tolist()) for t in tds),
               "color_jitter order")
    for k, nm in enumerate(("brightness", "contrast", "saturation", "hue")):
        lo, hi = ranges[k]
        fv = [d["factors"][k] for d in fds]
        tv = [t[1 + k] for t in tds]
        check(min(fv) >= lo and max(fv) <= hi, "%s factor outside %s..%s: "
              "%r..%r" % (nm, lo, hi, min(fv), max(fv)))

        def bins(vs):
            return Counter(min(9, int((v - lo) / (hi - lo) * 10)) for v in vs)
        two_sample(bins(fv), bins(tv), "color_jitter %s factor" % nm)
    # RandomGrayscale(0.3)
    fg = Counter(d["apply"] for d in feedfs_draws("grayscale(0.3)"))
    torch.manual_seed(28)
    tg = Counter(bool(torch.rand(1) < 0.3) for _ in range(DRAWS))
    two_sample(fg, tg, "grayscale(0.3) rate")


def main():
    if not os.access(AUGRUN, os.X_OK):
        print("FAIL: %s is not built" % AUGRUN)
        return 1
    with tempfile.TemporaryDirectory(prefix="test_augment.") as tmp:
        part_ops(tmp)
        part_replay(tmp)
    part_distributions()
    print("%d checks, %d failures" % (stats["checks"], len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
