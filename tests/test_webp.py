#!/usr/bin/python3
"""test_webp.py - WebP decoding (issue 26).

(a) WebPs of every kind PIL writes (lossy and lossless; RGB, RGBA with
    varied alpha, L; odd sizes; several qualities and methods): the prefix
    image of `decode` (xfrun) equals PIL's convert("RGB") of the same file
    byte for byte, alpha dropped as PIL drops it; a WebP named .jpg
    decodes (magic bytes, not the name).
(b) Through a mount: .webp files are samples of an ImageFolder, the
    uint8 val job (`decode resize(256) center_crop(224)`) equals
    torchvision's Resize(256) + CenterCrop(224) of the same files exactly,
    and a second epoch is all cache hits with the same bytes.
(c) Hostile WebPs through xfrun: a lossless header of 16384x16384
    (refused against max_pixels before any allocation), a file cut short,
    a damaged bitstream, an animated WebP, a RIFF that is not WEBP: each a
    clear error.
"""

import io
import os
import struct
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

try:
    import numpy as np
    from PIL import Image, features
    import torch  # noqa: F401
    import torchvision.transforms as T
except ImportError as e:
    fflib.skip("numpy/PIL/torch/torchvision not importable: %s" % e)
if not features.check("webp"):
    fflib.skip("this PIL has no WebP support")

XFRUN = os.path.join(fflib.BUILDDIR, "tests", "xfrun")


def xf_prefix(path, pipeline="decode cache center_crop(1)"):
    """The prefix image (HWC uint8) xfrun decodes, or the error text."""
    out = path + ".raw"
    r = subprocess.run([XFRUN, pipeline, path, out, "--prefix-only"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        return r.stderr.decode().strip()
    w, h = map(int, r.stdout.split())
    return np.fromfile(out, np.uint8).reshape(h, w, 3)


def smooth(rng, w, h):
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.stack([(xx * 255 // w), (yy * 255 // h), ((xx + yy) % 256)],
                   axis=2) + rng.integers(0, 40, (h, w, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def webp_bytes(im, **kw):
    b = io.BytesIO()
    im.save(b, "WEBP", **kw)
    return b.getvalue()


t = fflib.Test()
rng = np.random.default_rng(26)
wdir = t.path("webp")
os.makedirs(wdir)

# ---- (a) every kind PIL writes, against PIL's convert("RGB") ---------------
cases = []
for w, h in ((37, 29), (1, 1), (64, 48), (301, 157)):
    rgb = smooth(rng, w, h)
    alpha = rng.integers(0, 256, (h, w, 1)).astype(np.uint8)
    alpha[: h // 2] = 0  # fully transparent rows: their colour is kept
    rgba = Image.fromarray(np.concatenate([rgb, alpha], axis=2), "RGBA")
    for mode, im in (("rgb", Image.fromarray(rgb)), ("rgba", rgba),
                     ("l", Image.fromarray(rgb).convert("L"))):
        for lossless in (False, True):
            for q, m in ((75, 4), (10, 0), (100, 6)):
                if lossless and q != 75:
                    continue
                kw = dict(lossless=lossless, quality=q, method=m)
                if lossless and mode == "rgba":
                    kw["exact"] = True
                cases.append(("%s-%dx%d-%s-q%d" % (
                    mode, w, h, "ll" if lossless else "lossy", q),
                    webp_bytes(im, **kw)))
for name, data in cases:
    for ext in (".webp", ".jpg"):  # by magic bytes, not by name
        p = os.path.join(wdir, name + ext)
        with open(p, "wb") as f:
            f.write(data)
        got = xf_prefix(p)
        check(not isinstance(got, str), "%s: %s" % (name + ext, got))
        ref = np.asarray(Image.open(p).convert("RGB"))
        check(got.shape == ref.shape and np.array_equal(got, ref),
              "%s: decode differs from PIL convert('RGB') (max |diff| %s)" % (
                  name + ext, np.abs(got.astype(int) - ref).max()
                  if got.shape == ref.shape else (got.shape, ref.shape)))
log("(a) %d WebP kinds (lossy and lossless) decode as PIL's convert('RGB')"
    % len(cases))

# ---- (b) a mount of WebPs, against torchvision -----------------------------
data = t.path("data")
N = 12
for k in range(N):
    cls = os.path.join(data, "c%d" % (k % 3))
    os.makedirs(cls, exist_ok=True)
    w, h = int(rng.integers(230, 420)), int(rng.integers(230, 420))
    im = Image.fromarray(smooth(rng, w, h))
    if k % 4 == 1:
        im = im.convert("RGBA")
    with open(os.path.join(cls, "img%02d.webp" % k), "wb") as f:
        f.write(webp_bytes(im, lossless=(k % 2 == 0), quality=80))
cfg = t.config(t.path("webp.conf"), data, {
    "val8": dict(batch_size=4, epochs=2, shuffle="no", dtype="uint8",
                 layout="HWC",
                 pipeline="decode resize(256) center_crop(224) cache")})
crop = T.Compose([T.Resize(256), T.CenterCrop(224)])
with fflib.Mount(t, cfg, t.path("mnt")) as m:
    with open(m.p("val8", "samples.tsv")) as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    check(len(rows) == N, "samples.tsv has %d rows, want %d .webp files"
          % (len(rows), N))
    x, y, _ = m.load_epoch("val8", 0)
    worst = 0
    for i, (_, rel, label) in enumerate(rows):
        im = Image.open(os.path.join(data, rel)).convert("RGB")
        d = np.abs(x[i].astype(int) - np.asarray(crop(im)).astype(int)).max()
        worst = max(worst, d)
        check(d == 0, "val8 sample %d (%s): max |diff| %d vs torchvision"
              % (i, rel, d))
        check(int(label) == y[i], "label of %s" % rel)
    log("(b) uint8 val of %d WebPs: max |diff| %d vs torchvision"
        % (N, worst))
    x2, _, _ = m.load_epoch("val8", 1)
    check(np.array_equal(x, x2), "epoch 1 differs from epoch 0")
    misses = m.job_stat("feedfs_cache_misses_total", "val8")
    hits = m.job_stat("feedfs_cache_hits_total", "val8")
    check(misses == N and hits == N, "two epochs: %d misses, %d hits (want "
          "%d and %d)" % (misses, hits, N, N))
    check(m.alive(), "feedfs died")

# ---- (c) hostile WebPs ------------------------------------------------------
good_ll = webp_bytes(Image.fromarray(smooth(rng, 16, 16)), lossless=True)
good = webp_bytes(Image.fromarray(smooth(rng, 64, 64)), quality=90)
check(good_ll[12:16] == b"VP8L" and good_ll[20] == 0x2f, "not a VP8L file")
dims = struct.unpack("<I", good_ll[21:25])[0]
huge = good_ll[:21] + struct.pack("<I", (dims & 0xf0000000) | 0x0fffffff) + \
    good_ll[25:]
frame = good[12:]  # the VP8 chunk
anmf = struct.pack("<I", 0)[:3] * 2 + struct.pack("<I", 63)[:3] * 2 + \
    struct.pack("<I", 100)[:3] + b"\0" + frame
anim = (b"VP8X" + struct.pack("<I", 10) + bytes([0x02, 0, 0, 0]) +
        struct.pack("<I", 63)[:3] * 2 +
        b"ANIM" + struct.pack("<I", 6) + bytes(6) +
        b"ANMF" + struct.pack("<I", len(anmf)) + anmf)
anim = b"RIFF" + struct.pack("<I", 4 + len(anim)) + b"WEBP" + anim
# VP8's start code (9d 01 2a) damaged.  (Damage further into a lossy
# bitstream has no checksum to catch it: libwebp and PIL both decode it.)
check(good[12:16] == b"VP8 " and good[23:26] == b"\x9d\x01\x2a",
      "not a simple VP8 file")
bad = bytearray(good)
bad[24] ^= 0xff
hostile = {
    "huge": (huge, "image too large: 16384x16384 is more than max_pixels"),
    "cut": (good[:len(good) * 2 // 3], "corrupt WebP"),
    "cut-ll": (good_ll[:len(good_ll) - 9], "corrupt WebP"),
    "header-only": (good[:30], "corrupt WebP"),
    "bitstream": (bytes(bad), "corrupt WebP"),
    "animated": (anim, "animated WebP is not supported"),
    "not-webp": (b"RIFF" + good[4:8] + b"WAVE" + good[12:], "not a JPEG"),
}
for name, (data_, want) in sorted(hostile.items()):
    p = os.path.join(wdir, "bad-%s.webp" % name)
    with open(p, "wb") as f:
        f.write(data_)
    got = xf_prefix(p)
    check(isinstance(got, str) and want in got,
          "%s: got %r, want an error with %r" % (name, got if isinstance(
              got, str) else "an image", want))
    log("(c) %-11s -> %s" % (name, got.split(": ", 1)[1]))
log("ok")
