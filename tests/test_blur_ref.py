#!/usr/bin/python3
"""test_blur_ref - gaussian_blur and random_erasing against torchvision 0.14.

- gaussian_blur(k, 0.1, 2.0): for many keys, the sigma feedfs drew (xfrun
  --print-params) is the float32 of its counter-based draw (the op's own
  counter, index << 32), and the pixels equal
  torchvision.transforms.functional.gaussian_blur(img, [k, k],
  [sigma, sigma]) of the uint8 tensor, except where the two float32 sums
  round differently: torch convolves with the k x k outer product (its own
  summation order), feedfs with two separable passes, so a pixel may
  differ by 1, and only where the exact (float64) sum lies within 1e-3 of
  a half; at most 1e-3 of the values may (typically 1e-5 do).  The AVX2
  and scalar (FEEDFS_XF_SCALAR=1) paths give the same bytes.
- random_erasing(0.5): the boxes of 100k keys (feedfs) against 100k draws
  of RandomErasing's p test and get_params (torch's generator), by
  two-sample chi-square tests of erased or not, the box height, width,
  top, left and (height, width) jointly, on a 40x30 output.
- the erased sample equals torchvision's F.erase(x, i, j, h, w, 0) of the
  same sample without random_erasing, exactly, in float32 CHW and float16
  HWC: the box is zeroed in the output dtype and layout.
- a mount with both ops serves the bytes of feedfs-ref (the in-process
  library), and a job with random_erasing differs from the same job
  without it (same seed: adding the op changed no earlier draw) only in
  the box xfrun reports for that sample's key, which is 0.

Exit 0 pass, 1 fail, 77 when numpy, torch, torchvision or FUSE is missing.
"""
import os
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

try:
    import numpy as np
    from PIL import Image
    import torch
    import torchvision.transforms as T
    import torchvision.transforms.functional as F
except ImportError as e:
    fflib.skip(str(e))

XFRUN = os.path.join(fflib.BUILDDIR, "tests", "xfrun")
M64 = (1 << 64) - 1
SAMPLE = 0x53414D504C453031  # RNG_DOMAIN_SAMPLE


def rng_mix(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def rng_uniform(key, counter):
    return (rng_mix(key ^ rng_mix(counter & M64)) >> 11) * 2.0**-53


def rng_key(domain, seed, epoch, sid):
    return rng_mix(rng_mix(rng_mix(rng_mix(domain) ^ seed) ^ epoch) ^ sid)


def xfrun(pipeline, src, out, *args, env=None):
    r = subprocess.run([XFRUN, pipeline, src, out] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env)
    check(r.returncode == 0, "xfrun %s: %s" % (pipeline, r.stderr.decode()))
    return r.stdout.decode().splitlines()


def params(lines):
    """[(sigma or None, box or None or '-')] of --print-params lines."""
    out = []
    for ln in lines:
        f = ln.split()
        sigma = box = None
        i = 0
        while i < len(f):
            if f[i] == "sigma":
                sigma = float(f[i + 1])
                i += 2
            elif f[i] == "erase" and f[i + 1] == "-":
                box = "-"
                i += 2
            else:
                box = tuple(int(v) for v in f[i + 1:i + 5])
                i += 5
        out.append((sigma, box))
    return out


t = fflib.Test()
rng = np.random.default_rng(28)

# ---- gaussian_blur against F.gaussian_blur ---------------------------------
values = differ = 0
for case in range(24):
    w, h = int(rng.integers(24, 161)), int(rng.integers(24, 161))
    k = int(rng.choice([3, 5, 9, 15, 23]))
    a = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    if case % 2:  # smooth content: sums near halves of other kinds
        a = np.asarray(Image.fromarray(a).resize((w // 6 + 2, h // 6 + 2))
                       .resize((w, h), Image.BILINEAR))
    src = t.path("blur%d.png" % case)
    Image.fromarray(a).save(src)
    pl = "decode center_crop(%d,%d) cache gaussian_blur(%d, 0.1, 2.0)" % (
        w, h, k)
    n, key = 8, 1000 * case
    out = t.path("blur.out")
    ps = params(xfrun(pl, src, out, "--count", str(n), "--key", str(key),
                      "--print-params"))
    got = np.fromfile(out, np.uint8).reshape(n, h, w, 3)
    env = dict(os.environ, FEEDFS_XF_SCALAR="1")
    xfrun(pl, src, out + ".scalar", "--count", str(n), "--key", str(key),
          env=env)
    check(open(out, "rb").read() == open(out + ".scalar", "rb").read(),
          "gaussian_blur: the AVX2 and scalar paths differ (%dx%d k %d)"
          % (w, h, k))
    x = torch.from_numpy(a.copy()).permute(2, 0, 1).contiguous()
    for s in range(n):
        sigma = float(np.float32(ps[s][0]))  # %.9g: a float32 exactly
        # op 3's draw: its own counter space
        want = float(np.float32(0.1 + (2.0 - 0.1) * rng_uniform(key + s,
                                                                  3 << 32)))
        check(sigma == want, "sigma %r, the counter-based draw gives %r"
              % (sigma, want))
        ref = F.gaussian_blur(x, [k, k], [sigma, sigma]).permute(1, 2, 0)
        ref = ref.numpy().astype(int)
        d = np.abs(got[s].astype(int) - ref)
        check(d.max() <= 1, "gaussian_blur differs by %d from torchvision"
              % d.max())
        values += d.size
        differ += int((d > 0).sum())
        # each differing value: the exact sum is within 1e-3 of a half
        kern = torch.exp(-0.5 * (torch.linspace(-(k - 1) / 2, (k - 1) / 2, k)
                                 / sigma) ** 2)
        kern = (kern / kern.sum()).double().numpy()
        r = k // 2
        pad = np.pad(a.astype(np.float64), ((r, r), (r, r), (0, 0)),
                     mode="reflect")
        for yy, xx, c in zip(*np.nonzero(d)):
            win = pad[yy:yy + k, xx:xx + k, c]
            exact = float((np.outer(kern, kern) * win).sum())
            check(abs(abs(exact - np.floor(exact)) - 0.5) < 1e-3,
                  "gaussian_blur (%d,%d,%d): %d vs torchvision %d, exact "
                  "sum %.6f is not near a half" % (xx, yy, c, got[s][yy, xx, c],
                                                   ref[yy, xx, c], exact))
check(differ <= values * 1e-3, "gaussian_blur: %d of %d values differ"
      % (differ, values))
log("gaussian_blur: %d of %d values differ by 1 from torchvision (%.2g), "
    "each where the exact sum is within 1e-3 of a half" % (
        differ, values, differ / values))

# ---- random_erasing's boxes against RandomErasing.get_params ---------------
W, H, N = 40, 30, 100000
ep = "decode center_crop(%d,%d) cache normalize(imagenet) random_erasing(0.5)"
ps = params(xfrun(ep % (W, H), "-", "-", "--dtype", "float32", "--count",
                  str(N), "--key", "77", "--params-only"))
ours = [b for _, b in ps]
torch.manual_seed(28)
re = T.RandomErasing(p=0.5, value=0)
img = torch.zeros(3, H, W)
theirs = []
for _ in range(N):
    if torch.rand(1) < re.p:
        i, j, hh, ww, _v = T.RandomErasing.get_params(
            img, scale=re.scale, ratio=re.ratio, value=[0])
        # the fallback "box" is the whole image, returned unerased
        theirs.append("-" if (hh, ww) == (H, W) else (i, j, hh, ww))
    else:
        theirs.append("-")


def chi2(name, fa, fb):
    """Two-sample chi-square of the categories fa(box), fb(box)."""
    ca, cb = {}, {}
    for v in fa:
        ca[v] = ca.get(v, 0) + 1
    for v in fb:
        cb[v] = cb.get(v, 0) + 1
    keys = sorted(set(ca) | set(cb), key=str)
    # merge the rare categories (expected < 10) into one
    a, b, ra, rb = [], [], 0, 0
    for k in keys:
        x, y = ca.get(k, 0), cb.get(k, 0)
        if x + y < 20:
            ra, rb = ra + x, rb + y
        else:
            a.append(x)
            b.append(y)
    if ra + rb > 0:
        a.append(ra)
        b.append(rb)
    stat = sum((x - y) ** 2 / (x + y) for x, y in zip(a, b) if x + y > 0)
    dof = len(a) - 1
    p = float(torch.special.gammaincc(torch.tensor(dof / 2.0,
                                                   dtype=torch.float64),
                                      torch.tensor(stat / 2.0,
                                                   dtype=torch.float64)))
    log("random_erasing %s: chi2 %.1f, %d dof, p %.3g" % (name, stat, dof, p))
    check(p > 1e-4, "random_erasing %s: feedfs's distribution differs from "
          "torchvision's (chi2 %.1f, %d dof, p %.3g)" % (name, stat, dof, p))


er_o = [b for b in ours if b != "-"]
er_t = [b for b in theirs if b != "-"]
chi2("erased", [b != "-" for b in ours], [b != "-" for b in theirs])
chi2("height", [b[2] for b in er_o], [b[2] for b in er_t])
chi2("width", [b[3] for b in er_o], [b[3] for b in er_t])
chi2("top", [b[0] for b in er_o], [b[0] for b in er_t])
chi2("left", [b[1] for b in er_o], [b[1] for b in er_t])
chi2("height x width", [b[2:] for b in er_o], [b[2:] for b in er_t])
check(all(0 <= b[0] and b[0] + b[2] <= H and b[1] + b[3] <= W
          for b in er_o), "a box outside the output")

# ---- the erased sample is F.erase of the sample without erasing -------------
src = t.path("blur3.png")
base = ("decode center_crop(64,48) cache random_resized_crop(32) flip(0.5) "
        "normalize(imagenet)")
for dtype, layout, npt in (("float32", "CHW", np.float32),
                           ("float16", "HWC", np.float16)):
    n = 40
    xfrun(base, src, t.path("noer"), "--dtype", dtype, "--layout", layout,
          "--count", str(n), "--key", "5")
    ps = params(xfrun(base + " random_erasing(0.6, 0.05, 0.4, 0.5, 2)", src,
                      t.path("er"), "--dtype", dtype, "--layout", layout,
                      "--count", str(n), "--key", "5", "--print-params"))
    noer = np.fromfile(t.path("noer"), npt).reshape(n, -1)
    er = np.fromfile(t.path("er"), npt).reshape(n, -1)
    erased = 0
    for s in range(n):
        x = torch.from_numpy(noer[s].copy())
        x = x.reshape(3, 32, 32) if layout == "CHW" else \
            x.reshape(32, 32, 3).permute(2, 0, 1)
        box = ps[s][1]
        if box != "-":
            erased += 1
            x = F.erase(x, box[0], box[1], box[2], box[3],
                        torch.tensor([0.0]).to(x.dtype)[:, None, None])
        want = x if layout == "CHW" else x.permute(1, 2, 0)
        check(want.contiguous().numpy().tobytes() == er[s].tobytes(),
              "%s %s sample %d: not F.erase of the sample without erasing"
              % (dtype, layout, s))
    check(5 < erased < n, "erased %d of %d at p 0.6" % (erased, n))

# ---- a mount: feedfs-ref's bytes, and only the box differs ------------------
data = t.gen(t.path("data"), n=40, classes=2, seed=4)
head = ("decode resize(72) cache random_resized_crop(64) flip(0.5) "
        "gaussian_blur(9, 0.1, 2.0) normalize(imagenet)")
cfg = t.config(t.path("feedfs.conf"), data, {
    "e": dict(pipeline=head + " random_erasing(0.5)", dtype="float16",
              layout="HWC", epochs=2, seed=11),
    "n": dict(pipeline=head, dtype="float16", layout="HWC", epochs=2,
              seed=11),
})
anyjpeg = os.path.join(data, sorted(os.listdir(data))[0],
                       sorted(os.listdir(os.path.join(
                           data, sorted(os.listdir(data))[0])))[0])
with fflib.Mount(t, cfg, t.path("mnt")) as m:
    for e in (0, 1):
        m.read_epoch("e", e, ref=t.ref(cfg, "e", e, t.path("ref-e%d" % e)))
        xe, _, info = m.load_epoch("e", e)
        xn, _, _ = m.load_epoch("n", e)
        ids = np.concatenate([
            np.load(m.p("e", "epoch-%04d" % e, "batch-%06d.ids.npy" % b))
            for b in range(info["batches_per_epoch"])])
        erased = 0
        for s, sid in enumerate(ids):
            key = rng_key(SAMPLE, 11, e, int(sid))
            box = params(xfrun(head + " random_erasing(0.5)", anyjpeg, "-",
                               "--dtype", "float16", "--key", str(key),
                               "--params-only"))[0][1]
            want = xn[s].copy()
            if box != "-":
                erased += 1
                want[box[0]:box[0] + box[2], box[1]:box[1] + box[3], :] = 0
            check(want.tobytes() == xe[s].tobytes(),
                  "epoch %d sample %d: the job with random_erasing is not "
                  "the one without it with box %s zeroed" % (e, sid, box))
        check(0 < erased < len(ids), "epoch %d: %d of %d erased"
              % (e, erased, len(ids)))
log("PASS")
