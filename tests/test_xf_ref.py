#!/usr/bin/python3
"""test_xf_ref - the transforms against PIL 9.4 + torchvision 0.14.

Generates JPEGs with tests/gen-jpegs (plus a CMYK one written by PIL), runs
tests/xfrun on each and compares with what torchvision gives on the PIL
image:

- a full decode equals Image.open(p).convert('RGB') (YCbCr and grayscale
  exactly, CMYK within 1),
- "decode resize(S)" equals T.Resize(S) bit for bit at every size (the
  plain decode is Pillow's full one); "decode(scaled) resize(S)" where it
  is DCT-scaled only within a loose bound (a scaled IDCT is not Pillow's
  full decode followed by its filter), else bit for bit,
- shrink(S): T.Resize(S, LANCZOS) where the short side is over S, else the
  image as it is; random_resized_crop after it draws its box in the
  source's pixels (a Python copy of get_params on the source's size) and
  equals PIL's resize of that box of the shrunk image (fractional, Pillow's
  box argument) where the source was shrunk, the crop + resize of the
  source where not,
- resize(W,H), center_crop (with zero padding, half-to-even offsets) and
  their uint8 output exactly,
- float32 ToTensor/Normalize within 1e-6, float16 equal to numpy's
  float32 -> float16 of the float32 output,
- random_resized_crop: the box xfrun reports is the one a Python copy of
  torchvision's get_params gives with feedfs's counter-based draws, the
  output equals PIL's crop + resize of that box, the same key gives the
  same bytes and different keys different boxes; flip happens exactly when
  the draw is below P.

Needs FF_BUILDDIR (tests/xfrun, tests/gen-jpegs).  Exit 0 pass, 1 fail, 77
when numpy, PIL, torch or torchvision is missing.
"""
import glob
import math
import os
import subprocess
import sys
import tempfile

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
GEN = os.path.join(BUILD, "tests", "gen-jpegs")
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)

failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        print("FAIL:", what)


# ---- feedfs's random draws (transforms/rng.h), for the RRC/flip checks ----
M64 = (1 << 64) - 1


def rng_mix(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def rng_u64(key, counter):
    return rng_mix(key ^ rng_mix(counter & M64))


def rng_uniform(key, counter):
    return (rng_u64(key, counter) >> 11) * 2.0**-53


def rng_below(key, counter, n):
    i = 0
    while True:
        x = rng_u64(key, counter + (i << 48))
        m = x * n
        lo = m & M64
        if lo >= n or lo >= ((-n) & M64) % n:
            return m >> 64
        i += 1


def rrc_params(w, h, key, counter, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision 0.14 RandomResizedCrop.get_params, feedfs's draws."""
    area = h * w
    lr = (math.log(ratio[0]), math.log(ratio[1]))
    for a in range(10):
        c = counter + 4 * a
        target = area * (scale[0] + (scale[1] - scale[0]) * rng_uniform(key, c))
        aspect = math.exp(lr[0] + (lr[1] - lr[0]) * rng_uniform(key, c + 1))
        cw = int(round(math.sqrt(target * aspect)))
        ch = int(round(math.sqrt(target / aspect)))
        if 0 < cw <= w and 0 < ch <= h:
            top = rng_below(key, c + 2, h - ch + 1)
            left = rng_below(key, c + 3, w - cw + 1)
            return left, top, cw, ch
    in_ratio = w / h
    if in_ratio < min(ratio):
        cw = w
        ch = int(round(cw / min(ratio)))
    elif in_ratio > max(ratio):
        ch = h
        cw = int(round(ch * max(ratio)))
    else:
        cw, ch = w, h
    return (w - cw) // 2, (h - ch) // 2, cw, ch


# ---- running xfrun ----
def xfrun(pipeline, path, *opts):
    """(array or bytes, stdout) of one run; raises on failure."""
    out = os.path.join(TMP, "out.raw")
    p = subprocess.run([XFRUN, pipeline, path, out] + list(opts),
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("xfrun %r %s: %s" % (pipeline, path, p.stderr))
    with open(out, "rb") as f:
        return f.read(), p.stdout


def prefix(pipeline, path):
    data, so = xfrun(pipeline, path, "--prefix-only")
    w, h = map(int, so.split()[-2:])
    return np.frombuffer(data, np.uint8).reshape(h, w, 3)


def sample(pipeline, path, w, h, dtype="uint8", layout="HWC", key=0, *opts):
    data, so = xfrun(pipeline, path, "--dtype", dtype, "--layout", layout,
                     "--key", str(key), *opts)
    a = np.frombuffer(data, {"uint8": np.uint8, "float16": np.float16,
                             "float32": np.float32}[dtype])
    return a.reshape((h, w, 3) if layout == "HWC" else (3, h, w)), so


def resize_dims(w, h, s):
    if w <= h:
        return s, int(s * h / w)
    return int(s * w / h), s


def dct_scaled(w, h, tw, th):
    """Whether xf_run_prefix decodes at a DCT scale for target tw x th
    (with decode(scaled))."""
    for num in range(1, 8):
        if -(-w * num // 8) >= 2 * tw and -(-h * num // 8) >= 2 * th:
            return True
    return False


def maxdiff(a, b):
    a = np.asarray(a).astype(np.int64)
    b = np.asarray(b).astype(np.int64)
    if a.shape != b.shape:
        return 1 << 30
    return int(np.abs(a - b).max()) if a.size else 0


def test_image(path, idx):
    name = os.path.relpath(path, TMP)
    im0 = Image.open(path)
    mode = im0.mode
    img = im0.convert("RGB")
    w, h = img.size
    exact_decode = mode in ("RGB", "L")

    # Full decode.
    got = prefix("decode cache center_crop(%d,%d)" % (w, h), path)
    d = maxdiff(got, np.asarray(img))
    check(d <= (0 if exact_decode else 1),
          "%s (%s): decode differs from PIL by %d" % (name, mode, d))

    # Short-side resize, prefix only: exact with the plain decode.
    for s in (256, 64, min(w, h)):
        tw, th = resize_dims(w, h, s)
        ref = np.asarray(T.Resize(s)(img))
        for dec in ("decode", "decode(scaled)"):
            got = prefix("%s resize(%d) cache center_crop(8)" % (dec, s),
                         path)
            check(got.shape == (th, tw, 3),
                  "%s: %s resize(%d) shape %s, want %s"
                  % (name, dec, s, got.shape, (th, tw, 3)))
            d = maxdiff(got, ref)
            if dec != "decode" and dct_scaled(w, h, tw, th):
                md = float(np.abs(got.astype(int) - ref.astype(int)).mean())
                check(md < 3.0, "%s: DCT-scaled resize(%d) mean diff %.2f"
                      % (name, s, md))
            else:
                check(d <= (0 if exact_decode else 1),
                      "%s: %s resize(%d) differs from T.Resize by %d"
                      % (name, dec, s, d))

    # shrink(S): Lanczos past S, else the image; its crops in the frame.
    for s in (max(min(w, h) - 1, 1), min(w, h), 96):
        sh = img if min(w, h) <= s else T.Resize(
            s, interpolation=T.InterpolationMode.LANCZOS)(img)
        pl = "decode shrink(%d) cache random_resized_crop(64)" % s
        data, so = xfrun(pl, path, "--prefix-only")
        dims = list(map(int, so.split()))
        got = np.frombuffer(data, np.uint8).reshape(dims[1], dims[0], 3)
        d = maxdiff(got, np.asarray(sh))
        check(d <= (0 if exact_decode else 1) and dims[2:] == [w, h],
              "%s: shrink(%d) differs from Resize(LANCZOS) by %d, "
              "dims %s" % (name, s, d, dims))
        for key in (idx * 3 + 1, idx * 3 + 2):
            out, so = sample(pl, path, 64, 64, "uint8", "HWC", key,
                             "--print-rrc")
            x, y, bw, bh = map(int, so.split())
            want = rrc_params(w, h, key, 3 << 32)
            check((x, y, bw, bh) == want, "%s shrink(%d) key %d: box %s, "
                  "want %s (in the source's pixels)"
                  % (name, s, key, (x, y, bw, bh), want))
            if sh is img:
                ref = img.crop((x, y, x + bw, y + bh)).resize(
                    (64, 64), Image.BILINEAR)
            else:
                fx, fy = sh.size[0] / w, sh.size[1] / h
                box = [float(np.float32(v)) for v in
                       (x * fx, y * fy, (x + bw) * fx, (y + bh) * fy)]
                box[2], box[3] = min(box[2], sh.size[0]), min(box[3],
                                                              sh.size[1])
                ref = sh.resize((64, 64), Image.BILINEAR, box=tuple(box))
            d = maxdiff(out, np.asarray(ref))
            check(d <= (0 if exact_decode else 1),
                  "%s shrink(%d) key %d: crop differs from PIL by %d"
                  % (name, s, key, d))

    # resize(W,H) to an odd size, up and down.
    for tw, th in ((97, 61), (w + 13, h // 2 + 1)):
        got, _ = sample("decode resize(%d,%d)" % (tw, th), path, tw, th)
        ref = np.asarray(img.resize((tw, th), Image.BILINEAR))
        if not dct_scaled(w, h, tw, th):
            d = maxdiff(got, ref)
            check(d <= (0 if exact_decode else 1),
                  "%s: resize(%d,%d) differs by %d" % (name, tw, th, d))

    # Center crops: padded, odd differences (half-to-even offsets).
    for cw, ch in ((w + 3, h - 1), (w - 3, h + 2), (w // 2 + 1, h // 3 + 2),
                   (w + 1, h + 1)):
        cw, ch = max(cw, 1), max(ch, 1)
        got, _ = sample("decode center_crop(%d,%d)" % (cw, ch), path, cw, ch)
        ref = np.asarray(T.CenterCrop((ch, cw))(img))
        d = maxdiff(got, ref)
        check(d <= (0 if exact_decode else 1),
              "%s: center_crop(%d,%d) differs by %d" % (name, cw, ch, d))

    # The classic eval pipeline, uint8 and float.
    pl = "decode resize(256) center_crop(224)"
    got, _ = sample(pl, path, 224, 224)
    ref_img = T.CenterCrop(224)(T.Resize(256)(img))
    d = maxdiff(got, np.asarray(ref_img))
    check(d <= (0 if exact_decode else 1),
          "%s: %s differs by %d" % (name, pl, d))
    # Floats are checked on feedfs's own uint8 pixels, so that a decode
    # difference does not hide a conversion error.
    base = Image.fromarray(np.ascontiguousarray(got))
    t = T.ToTensor()(base)
    nref = T.Normalize(MEAN, STD)(t).numpy()
    f32, _ = sample(pl + " normalize(imagenet)", path, 224, 224, "float32",
                    "CHW")
    d = float(np.abs(f32 - nref).max())
    check(d <= 1e-6, "%s: normalized float32 differs by %g" % (name, d))
    f16, _ = sample(pl + " normalize(imagenet)", path, 224, 224, "float16",
                    "CHW")
    check(np.array_equal(f16.view(np.uint16),
                         f32.astype(np.float16).view(np.uint16)),
          "%s: float16 is not float32.astype(float16)" % name)
    f32h, _ = sample(pl, path, 224, 224, "float32", "HWC")
    d = float(np.abs(f32h - t.numpy().transpose(1, 2, 0)).max())
    check(d == 0.0, "%s: ToTensor float32 HWC differs by %g" % (name, d))
    u8c, _ = sample(pl, path, 224, 224, "uint8", "CHW")
    check(np.array_equal(u8c, got.transpose(2, 0, 1)),
          "%s: uint8 CHW is not HWC transposed" % name)
    f16h, _ = sample(pl, path, 224, 224, "float16", "HWC")
    check(np.array_equal(f16h.view(np.uint16),
                         f32h.astype(np.float16).view(np.uint16)),
          "%s: float16 HWC is not float32.astype(float16)" % name)

    # Random resized crop after a cached resize.
    s = 160
    pre = T.Resize(s)(img)
    pw, ph = pre.size
    pre_exact = exact_decode
    pl = "decode resize(%d) cache random_resized_crop(96)" % s
    boxes = set()
    for key in (idx * 7 + 1, idx * 7 + 2, idx * 7 + 3):
        out, so = sample(pl, path, 96, 96, "uint8", "HWC", key, "--print-rrc")
        x, y, bw, bh = map(int, so.split())
        boxes.add((x, y, bw, bh))
        # The prefix ends at cache (op 2), so the RRC is op 3.
        want = rrc_params(pw, ph, key, 3 << 32)
        check((x, y, bw, bh) == want,
              "%s key %d: rrc box %s, want %s" % (name, key, (x, y, bw, bh),
                                                  want))
        check(0 <= x and 0 <= y and x + bw <= pw and y + bh <= ph,
              "%s: rrc box %s outside %dx%d" % (name, (x, y, bw, bh), pw, ph))
        if pre_exact:
            ref = np.asarray(pre.crop((x, y, x + bw, y + bh)).resize(
                (96, 96), Image.BILINEAR))
            d = maxdiff(out, ref)
            check(d == 0, "%s key %d: rrc output differs by %d"
                  % (name, key, d))
        again, _ = sample(pl, path, 96, 96, "uint8", "HWC", key)
        check(np.array_equal(out, again),
              "%s key %d: rrc not deterministic" % (name, key))
    check(len(boxes) > 1, "%s: three keys gave one rrc box" % name)

    # Flip, after a crop in the prefix (no cache: prefix ends at flip, op 2).
    cc = np.asarray(T.CenterCrop(48)(img))
    for key in range(idx * 5, idx * 5 + 5):
        out, _ = sample("decode center_crop(48) flip(0.5)", path, 48, 48,
                        "uint8", "HWC", key)
        flipped = rng_uniform(key, 2 << 32) < 0.5
        want = cc[:, ::-1] if flipped else cc
        d = maxdiff(out, want)
        check(d <= (0 if exact_decode else 1),
              "%s key %d: flip(0.5) (flipped=%s) differs by %d"
              % (name, key, flipped, d))


def test_errors(good):
    with open(good, "rb") as f:
        data = f.read()
    cases = {
        "truncated.jpg": (data[: len(data) // 2], "corrupt data"),
        "garbage.jpg": (b"\xff\xd8\xff\xe0" + bytes(range(256)) * 8,
                        "corrupt data"),
        "text.jpg": (b"this is not a jpeg\n", "not a JPEG"),
        "empty.jpg": (b"", "empty file"),
    }
    for fname, (blob, msg) in cases.items():
        p = os.path.join(TMP, fname)
        with open(p, "wb") as f:
            f.write(blob)
        r = subprocess.run([XFRUN, "decode center_crop(8)", p,
                            os.path.join(TMP, "o.raw")],
                           capture_output=True, text=True)
        check(r.returncode == 1 and msg in r.stderr,
              "%s: want exit 1 and %r, got %d %r" % (fname, msg, r.returncode,
                                                     r.stderr.strip()))
    r = subprocess.run([XFRUN, "decode center_crop(8) normalize(imagenet)",
                        good, os.path.join(TMP, "o.raw")],
                       capture_output=True, text=True)
    check(r.returncode == 1 and "normalize" in r.stderr,
          "normalize with uint8 not refused: %r" % r.stderr)


def main():
    global TMP
    for prog in (XFRUN, GEN):
        if not os.access(prog, os.X_OK):
            print("FAIL: %s not built (set FF_BUILDDIR)" % prog)
            return 1
    with tempfile.TemporaryDirectory(prefix="xfref.") as TMP:
        ds = os.path.join(TMP, "ds")
        big = os.path.join(TMP, "big")
        subprocess.run([GEN, ds, "--n", "24", "--classes", "2", "--seed",
                        "7"], check=True, capture_output=True)
        subprocess.run([GEN, big, "--n", "8", "--classes", "1", "--seed",
                        "7", "--big"], check=True, capture_output=True)
        paths = sorted(glob.glob(os.path.join(ds, "*", "*.jpg")))
        paths.append(os.path.join(big, "class000", "img000007.jpg"))
        # A CMYK JPEG (Adobe, inverted) as Photoshop would write one.
        src = Image.open(paths[0]).convert("RGB")
        cmyk = os.path.join(TMP, "cmyk.jpg")
        src.convert("CMYK").save(cmyk, quality=90)
        paths.append(cmyk)
        check(Image.open(cmyk).mode == "CMYK", "PIL did not write CMYK")
        modes = set()
        for i, p in enumerate(paths):
            modes.add(Image.open(p).mode)
            try:
                test_image(p, i)
            except Exception as e:  # one broken image must not hide others
                check(False, "%s: %s" % (p, e))
        check({"RGB", "L", "CMYK"} <= modes,
              "the images cover only modes %s" % sorted(modes))
        test_errors(paths[0])
    print("%d checks, %d failed" % (checks, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
