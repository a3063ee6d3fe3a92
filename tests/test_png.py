#!/usr/bin/python3
"""test_png.py - PNG decoding (issue 20).

(a) Every kind of PNG, written here byte by byte (gray of 1, 2, 4, 8 and
    16 bits, gray+alpha, RGB and RGBA of 8 and 16 bits, palettes of 1 to 8
    bits with and without tRNS, each plain and Adam7-interlaced, with all
    five row filters) and by PIL (its own filter choices): the prefix image
    of `decode` (xfrun) equals PIL's convert("RGB") exactly for 8 bits and
    less, and round(v / 257) of the written samples for 16 bits; a PNG
    named .jpg decodes (magic bytes, not the name).
(b) Through a mount: a directory of PNGs of every mode, the val job with
    dtype uint8 (`decode resize(256) center_crop(224)`) equals torchvision's
    Resize(256) + CenterCrop(224) of the same files exactly (max difference
    0), and the default float val job equals the whole torchvision val
    transform within float rounding; a second epoch is all cache hits with
    the same bytes (each PNG decoded once).
(c) The hostile PNGs through xfrun: a 100000x100000 IHDR (refused against
    max_pixels before any allocation), a bad IHDR CRC, a bad IDAT CRC, a
    bad zlib checksum, a file cut in its IDAT and one with no IEND: each a
    clear error.
"""

import warnings
import os
import struct
import subprocess
import sys
import zlib

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

try:
    import numpy as np
    from PIL import Image
    import torch  # noqa: F401
    import torchvision.transforms as T
except ImportError as e:
    fflib.skip("numpy/PIL/torch/torchvision not importable: %s" % e)

XFRUN = os.path.join(fflib.BUILDDIR, "tests", "xfrun")
ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4),
         (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]  # x0, y0, dx, dy
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def chunk(t, d):
    return (struct.pack(">I", len(d)) + t + d +
            struct.pack(">I", zlib.crc32(t + d) & 0xffffffff))


def pack_row(row, depth):
    """One row of samples (ints) packed at depth bits, big-endian."""
    if depth == 16:
        return b"".join(struct.pack(">H", v) for v in row)
    if depth == 8:
        return bytes(row)
    out, acc, n = bytearray(), 0, 0
    for v in row:
        acc = (acc << depth) | v
        n += depth
        if n == 8:
            out.append(acc)
            acc, n = 0, 0
    if n:
        out.append(acc << (8 - n))
    return bytes(out)


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def filter_rows(rows, bpp, ftype):
    """The rows (bytes) with filter type ftype (0..4; 5: cycle them)."""
    out, prev = bytearray(), bytes(len(rows[0])) if rows else b""
    for k, cur in enumerate(rows):
        f = k % 5 if ftype == 5 else ftype
        out.append(f)
        for i, x in enumerate(cur):
            a = cur[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            pred = [0, a, b, (a + b) // 2, paeth(a, b, c)][f]
            out.append((x - pred) & 0xff)
        prev = cur
    return bytes(out)


def write_png(samples, ctype, depth, interlace=False, palette=None,
              trns=None, ftype=5):
    """A PNG of samples (h x w x channels ints) written by hand."""
    h, w = samples.shape[:2]
    ch = CHANNELS[ctype]
    bpp = max(1, ch * depth // 8)
    flat = samples.reshape(h, w, ch)

    def image(sub):
        rows = [pack_row([int(v) for v in r.reshape(-1)], depth) for r in sub]
        return filter_rows(rows, bpp, ftype) if rows else b""

    if interlace:
        raw = b""
        for x0, y0, dx, dy in ADAM7:
            sub = flat[y0::dy, x0::dx]
            if sub.shape[0] and sub.shape[1]:
                raw += image(sub)
    else:
        raw = image(flat)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(
        ">IIBBBBB", w, h, depth, ctype, 0, 0, 1 if interlace else 0))
    if palette is not None:
        out += chunk(b"PLTE", bytes(np.asarray(palette, np.uint8).ravel()))
    if trns is not None:
        out += chunk(b"tRNS", trns)
    z = zlib.compress(raw, 9)
    # in two IDAT chunks, as encoders split them
    out += chunk(b"IDAT", z[:len(z) // 2]) + chunk(b"IDAT", z[len(z) // 2:])
    return out + chunk(b"IEND", b"")


def xf_prefix(path, pipeline="decode cache center_crop(1)"):
    """The prefix image (HWC uint8) xfrun decodes, or the error text."""
    out = path + ".raw"
    r = subprocess.run([XFRUN, pipeline, path, out, "--prefix-only"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        return r.stderr.decode().strip()
    w, h = map(int, r.stdout.split())
    return np.fromfile(out, np.uint8).reshape(h, w, 3)


warnings.simplefilter("ignore")  # PIL on palettes with tRNS
t = fflib.Test()
rng = np.random.default_rng(20)
pdir = t.path("png")
os.makedirs(pdir)

# ---- (a) every kind, against PIL / round(v / 257) --------------------------
cases = []  # (name, bytes, expected RGB or None for PIL's)
W, H = 37, 29  # odd sizes: partial bytes per row, every Adam7 pass
for depth in (1, 2, 4, 8, 16):
    g = rng.integers(0, 1 << depth, (H, W, 1))
    for il in (False, True):
        cases.append(("gray%d%s" % (depth, "i" if il else ""),
                      write_png(g, 0, depth, il), None if depth < 16 else
                      np.repeat((g + 128) // 257, 3, axis=2)))
for depth in (8, 16):
    for ctype in (2, 4, 6):
        s = rng.integers(0, 1 << depth, (H, W, CHANNELS[ctype]))
        for il in (False, True):
            want = None
            if depth == 16:
                rgb = s[:, :, :3] if ctype != 4 else np.repeat(
                    s[:, :, :1], 3, axis=2)
                want = (rgb + 128) // 257
            cases.append(("c%d-%d%s" % (ctype, depth, "i" if il else ""),
                          write_png(s, ctype, depth, il), want))
for depth in (1, 2, 4, 8):
    n = 1 << depth
    pal = rng.integers(0, 256, (n, 3))
    idx = rng.integers(0, n, (H, W, 1))
    for il in (False, True):
        for trns in (None, bytes(rng.integers(0, 256, n).astype(np.uint8))):
            cases.append(("pal%d%s%s" % (depth, "i" if il else "",
                                         "t" if trns else ""),
                          write_png(idx, 3, depth, il, pal, trns), None))
# RGB with tRNS (a colour key), dropped as PIL drops it
s = rng.integers(0, 256, (H, W, 3))
cases.append(("rgb-trns", write_png(s, 2, 8, trns=b"\0\1\0\2\0\3"), None))
for ftype in range(5):
    s = rng.integers(0, 256, (H, W, 3))
    cases.append(("rgb-f%d" % ftype, write_png(s, 2, 8, ftype=ftype), None))
# PIL's own files, every mode it writes
base = (rng.random((H, W, 3)) * 255).astype(np.uint8)
for mode in ("RGB", "RGBA", "L", "LA", "P", "1", "I;16"):
    im = Image.fromarray(base).convert(mode if mode != "I;16" else "L")
    if mode == "I;16":
        im = Image.fromarray((np.asarray(im).astype(np.uint16) * 257))
    p = os.path.join(pdir, "pil-%s.png" % mode.replace(";", ""))
    im.save(p)
    with open(p, "rb") as f:
        data = f.read()
    want = None
    if mode == "I;16":
        v = np.asarray(Image.open(p)).astype(np.int64)
        want = np.repeat(((v + 128) // 257)[:, :, None], 3, axis=2)
    cases.append(("pil-%s" % mode.replace(";", ""), data, want))

for name, data, want in cases:
    for ext in (".png", ".jpg"):  # by magic bytes, not by name
        p = os.path.join(pdir, name + ext)
        with open(p, "wb") as f:
            f.write(data)
        got = xf_prefix(p)
        check(not isinstance(got, str), "%s: %s" % (name + ext, got))
        ref = want if want is not None else np.asarray(
            Image.open(p).convert("RGB"))
        check(got.shape == ref.shape and np.array_equal(got, ref),
              "%s: decode differs from %s (max |diff| %s)" % (
                  name + ext, "round(v/257)" if want is not None else
                  "PIL convert('RGB')", np.abs(got.astype(int) - ref).max()
                  if got.shape == ref.shape else got.shape))
log("(a) %d PNG kinds decode as PIL's convert('RGB') / round(v/257)"
    % len(cases))

# ---- (b) a mount of PNGs, against torchvision ------------------------------
data = t.path("data")
kinds = ["RGB", "RGBA", "L", "LA", "P", "interlaced"]
for k in range(18):
    cls = os.path.join(data, "c%d" % (k % 3))
    os.makedirs(cls, exist_ok=True)
    w, h = int(rng.integers(230, 420)), int(rng.integers(230, 420))
    # smooth content: a gradient plus noise, so resizing matters
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.stack([(xx * 255 // w), (yy * 255 // h), ((xx + yy) % 256)],
                   axis=2) + rng.integers(0, 40, (h, w, 3))
    img = np.clip(img, 0, 255).astype(np.uint8)
    kind = kinds[k % len(kinds)]
    p = os.path.join(cls, "img%02d.png" % k)
    if kind == "interlaced":
        with open(p, "wb") as f:
            f.write(write_png(img, 2, 8, interlace=True))
    else:
        Image.fromarray(img).convert(kind).save(p)
N = 18
cfg = t.config(t.path("png.conf"), data, {
    "val8": dict(batch_size=4, epochs=2, shuffle="no", dtype="uint8",
                 layout="HWC",
                 pipeline="decode resize(256) center_crop(224) cache"),
    "val": dict(batch_size=4, epochs=1, shuffle="no",
                pipeline="decode resize(256) center_crop(224) cache "
                         "normalize(imagenet)")})
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
crop = T.Compose([T.Resize(256), T.CenterCrop(224)])
full = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(),
                  T.Normalize(MEAN, STD)])


with fflib.Mount(t, cfg, t.path("mnt")) as m:
    with open(m.p("val8", "samples.tsv")) as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    check(len(rows) == N, "samples.tsv has %d rows" % len(rows))
    x, y, _ = m.load_epoch("val8", 0)
    worst = 0
    for i, (_, rel, label) in enumerate(rows):
        im = Image.open(os.path.join(data, rel)).convert("RGB")
        want = np.asarray(crop(im))
        d = np.abs(x[i].astype(int) - want.astype(int)).max()
        worst = max(worst, d)
        check(d == 0, "val8 sample %d (%s): max |diff| %d vs torchvision"
              % (i, rel, d))
        check(int(label) == y[i], "label of %s" % rel)
    log("(b) uint8 val of %d PNGs: max |diff| %d vs torchvision" % (N, worst))
    x2, _, _ = m.load_epoch("val8", 1)
    check(np.array_equal(x, x2), "epoch 1 differs from epoch 0")
    # each PNG decoded once (its key found again in epoch 1)
    misses = m.job_stat("feedfs_cache_misses_total", "val8")
    hits = m.job_stat("feedfs_cache_hits_total", "val8")
    check(misses == N and hits == N, "two epochs: %d misses, %d hits (want "
          "%d and %d)" % (misses, hits, N, N))
    xf, _, _ = m.load_epoch("val", 0)
    worst = 0.0
    for i, (_, rel, _) in enumerate(rows):
        want = full(Image.open(os.path.join(data, rel)).convert("RGB"))
        d = float(np.abs(xf[i] - want.numpy()).max())
        worst = max(worst, d)
        check(d < 1e-5, "val sample %d (%s): max |diff| %g" % (i, rel, d))
    log("(b) float32 val: max |diff| %.2g vs torchvision's val transform"
        % worst)
    check(m.alive(), "feedfs died")

# ---- (c) hostile PNGs --------------------------------------------------------
good = write_png(rng.integers(0, 256, (16, 16, 3)), 2, 8)
ihdr_end = 8 + 8 + 13 + 4
hostile = {
    "huge": (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(
        ">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0)) + good[ihdr_end:],
        "image too large: 100000x100000 is more than max_pixels"),
    "ihdr-crc": (good[:ihdr_end - 1] + bytes([good[ihdr_end - 1] ^ 1]) +
                 good[ihdr_end:], "corrupt PNG"),
    "idat-crc": (good[:-13] + bytes([good[-13] ^ 1]) + good[-12:],
                 "corrupt PNG"),
    "cut": (good[:len(good) // 2], "corrupt PNG"),
    "no-iend": (good[:-12], "corrupt PNG"),
    "not-png": (b"\x89PNG\r\n\x1a\x0a"[:7] + b"x" + good[8:], "not a JPEG"),
}
# a bad zlib checksum (adler32) under right CRCs
z = bytearray(zlib.compress(filter_rows([bytes(48)] * 16, 3, 0)))
z[-1] ^= 1
hostile["adler"] = (good[:ihdr_end] + chunk(b"IDAT", bytes(z)) +
                    chunk(b"IEND", b""), "corrupt PNG")
for name, (data_, want) in sorted(hostile.items()):
    p = os.path.join(pdir, "bad-%s.png" % name)
    with open(p, "wb") as f:
        f.write(data_)
    got = xf_prefix(p)
    check(isinstance(got, str) and want in got,
          "%s: got %r, want an error with %r" % (name, got if isinstance(
              got, str) else "an image", want))
    log("(c) %-9s -> %s" % (name, got.split(": ", 1)[1]))
log("ok")
