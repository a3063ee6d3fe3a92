#!/usr/bin/python3
"""test_png_memory.py - issue 25 class 3: a large 16-bit PNG is decoded
inside the memory budget's count, at 3 bytes a pixel.

A 16-bit PNG was decoded whole to RGBA16 (8 bytes a pixel) and then
converted into a second, RGB8 buffer (3 more), both malloc'd outside the
workers' arenas and outside the budget: a 212 KB file drove the daemon to
1968 MiB at memory = 64M while the budget showed 8 MB.

Here a dataset of 4000x4000 16-bit RGBA PNGs (about 540 KB each; 16
megapixels, 48 MB of RGB8, 128 MB of RGBA16) is read whole through a
mount with memory = 64M, four workers and max_pixels = 20000000.  Checks:
  - the bytes are right: each sample equals round(v / 257) of the written
    samples, center-cropped (the pipeline has no resize);
  - the budget counted the decoded image while a worker held it
    (feedfs_memory_peak_bytes >= 4000 * 4000 * 3; it stayed at a few MB),
    and passed its limit by one image at most: past the budget, a worker
    waits while another holds such buffers (four at once counted 200 MB);
  - the daemon's peak RSS (VmHWM) stays under memory + 100 MiB, as the
    budget promises (two workers: 339 MiB before, 104 MiB counted but not
    waited for; four workers: 62 MiB now, on the 2-core test machine);
    not checked under AddressSanitizer, whose shadow and quarantine are
    in the RSS.
"""

import os
import struct
import sys
import zlib

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

import numpy as np  # noqa: E402

W = H = 4000
N = 4
MIB = 1 << 20
CROP = 64


def chunk(kind, data):
    return (struct.pack(">I", len(data)) + kind + data +
            struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff))


def image16(i):
    """Sample i's RGBA16 pixels: gradients, different per sample."""
    y, x = np.mgrid[0:H, 0:W].astype(np.uint32)
    px = np.empty((H, W, 4), np.uint16)
    px[..., 0] = (x * 16 + i * 997) & 0xffff
    px[..., 1] = (y * 16 + i * 4099) & 0xffff
    px[..., 2] = ((x + y) * 8 + i * 12345) & 0xffff
    px[..., 3] = 0xffff
    return px


def write_png16(path, px):
    """px (H x W x 4 uint16) as an RGBA 16-bit PNG, filter Sub (the
    gradients then compress to almost nothing)."""
    raw = px.astype(">u2").view(np.uint8).reshape(H, W * 8)
    rows = np.empty((H, 1 + W * 8), np.uint8)
    rows[:, 0] = 1
    rows[:, 1:9] = raw[:, :8]
    rows[:, 9:] = raw[:, 8:] - raw[:, :-8]  # mod 256
    ihdr = struct.pack(">IIBBBBB", W, H, 16, 6, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) +
                chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) +
                chunk(b"IEND", b""))


def status(pid):
    """VmHWM of pid, in bytes."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def sanitized(pid):
    with open("/proc/%d/maps" % pid) as f:
        return "libasan" in f.read()


t = fflib.Test()
data = t.path("data")
os.makedirs(os.path.join(data, "class0"))
want = {}
y0, x0 = (H - CROP) // 2, (W - CROP) // 2
for i in range(N):
    px = image16(i)
    path = os.path.join(data, "class0", "img%d.png" % i)
    write_png16(path, px)
    crop = px[y0:y0 + CROP, x0:x0 + CROP, :3].astype(np.uint32)
    want[i] = ((crop + 128) // 257).astype(np.uint8)
log("%d PNGs of %dx%d, 16-bit RGBA, %d KB each" %
    (N, W, H, os.path.getsize(path) // 1024))

cfg = t.config(t.path("feedfs.conf"), data, {
    "big": dict(epochs=1, shuffle="no", pipeline="decode center_crop(%d)"
                % CROP, batch_size=2, dtype="uint8", layout="HWC",
                max_pixels=20000000),
}, threads=4, memory="64M", readahead=2, cache_size=0)

with fflib.Mount(t, cfg, t.path("mnt")) as m:
    pid = m.proc.pid
    imgs, labels, info = m.load_epoch("big", 0)
    ids = []
    for b in range(info["batches_per_epoch"]):
        ids.append(np.load(m.p("big", "epoch-0000",
                               "batch-%06d.ids.npy" % b)))
    ids = np.concatenate(ids)
    check(imgs.shape == (N, CROP, CROP, 3), "shape %s" % (imgs.shape,))
    for k, sid in enumerate(ids.tolist()):
        check(np.array_equal(imgs[k], want[sid]),
              "sample %d: not round(v / 257) of its pixels" % sid)
    st = m.stats()
    hwm = status(pid)
    log("memory = 64M: counted peak %.1f MB (limit %.1f MB), VmHWM %.1f MiB"
        % (st["feedfs_memory_peak_bytes"] / 1e6,
           st["feedfs_memory_limit_bytes"] / 1e6, hwm / MIB))
    check(st["feedfs_memory_peak_bytes"] >= W * H * 3,
          "the budget never counted a decoded image (peak %d bytes)" %
          st["feedfs_memory_peak_bytes"])
    # Past the budget, one worker's sample at a time (the others wait):
    # not four images at once.
    check(st["feedfs_memory_peak_bytes"] <= st["feedfs_memory_limit_bytes"]
          + W * H * 3 + 8 * MIB,
          "counted peak %d: more than one image past the limit %d" %
          (st["feedfs_memory_peak_bytes"], st["feedfs_memory_limit_bytes"]))
    if sanitized(pid):
        log("AddressSanitizer build: RSS not checked")
    else:
        check(hwm <= 64 * MIB + 100 * MIB,
              "VmHWM %.1f MiB over memory + 100 MiB" % (hwm / MIB))
