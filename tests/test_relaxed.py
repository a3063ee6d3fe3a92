#!/usr/bin/python3
"""test_relaxed.py - order = relaxed: a batch takes the samples of its epoch
that are ready first, yet every sample is delivered exactly once per epoch
and rank view, with the same bytes as in strict order (a sample's bytes
depend on (seed, epoch, id) only), and a batch's content, once chosen,
stays the same when it is released and made again.

A relaxed job and a strict job with the same seed and pipeline share the
dataset; one image is made very large (slow to decode) so that the relaxed
order has something to move."""

import os
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

try:
    import numpy as np
except ImportError:
    fflib.skip("needs /usr/bin/python3 with python3-numpy")

N = 45
t = fflib.Test()
data = t.gen(t.path("data"), n=N, classes=3, seed=11)
# One slow sample: a 5000x3500 JPEG (about 0.3 s to decode here).
slow = os.path.join(data, "class001", "zz-slow.jpg")
r = subprocess.run(["/usr/bin/python3", "-c",
                    "import sys; from PIL import Image; "
                    "Image.new('RGB', (5000, 3500), (90, 140, 30))"
                    ".save(sys.argv[1], quality=95)", slow])
check(r.returncode == 0, "cannot write the slow image")

PIPE = ("decode resize(120) cache random_resized_crop(112) flip(0.5) "
        "normalize(imagenet)")
cfg = t.config(t.path("feedfs.conf"), data, {
    "strict": dict(epochs=2, seed=5, pipeline=PIPE),
    "relaxed": dict(epochs=2, seed=5, pipeline=PIPE, order="relaxed"),
}, threads=2, memory="16M", readahead=3)
# 8 x 3 x 112 x 112 float32 = 1.2 MB a batch: 16M holds about a dozen, so
# the second pass below finds the first batches released.

def load_view(m, job, epoch, world, rank, drop=False):
    """[(ids, labels, images)] of every batch of a view, read through the
    mount with plain reads (drop: out of the page cache afterwards)."""
    parts = [job] + (["rank-%d-of-%d" % (rank, world)] if world > 1 else [])
    d = m.p(*parts, "epoch-%04d" % epoch)
    names = sorted(x for x in os.listdir(d) if x.endswith(".ids.npy"))
    out = []
    for n in names:
        base = n[:-len(".ids.npy")]
        arrs = []
        for suffix in (".ids.npy", ".labels.npy", ".npy"):
            raw = fflib.read_file(os.path.join(d, base + suffix), drop=drop)
            hl = 10 + int.from_bytes(raw[8:10], "little")
            hdr = raw[10:hl].decode()
            dtype = np.int64 if suffix != ".npy" else np.float32
            a = np.frombuffer(raw[hl:], dtype=dtype)
            if suffix == ".npy":
                a = a.reshape((-1, 3, 112, 112))
            check("'shape': (%d," % (len(arrs[0]) if arrs else len(a))
                  in hdr, "%s%s: header %s" % (base, suffix, hdr))
            arrs.append(a)
        out.append(tuple(arrs))
    return out


with fflib.Mount(t, cfg, t.path("mnt")) as m:
    labels = {}
    with open(m.p("relaxed", "samples.tsv")) as f:
        for line in f:
            sid, path, lab = line.rstrip("\n").split("\t")
            labels[int(sid)] = int(lab)
    check(len(labels) == N + 1, "samples.tsv has %d lines" % len(labels))
    moved = 0
    for world, rank in ((1, 0), (2, 1)):
        for epoch in (0, 1):
            rel = load_view(m, "relaxed", epoch, world, rank)
            st = load_view(m, "strict", epoch, world, rank)
            check([len(b[0]) for b in rel] == [len(b[0]) for b in st],
                  "batch sizes differ from strict's")
            srows = {}
            for ids, labs, imgs in st:
                for i, sid in enumerate(ids):
                    srows.setdefault(int(sid), []).append(imgs[i])
            rids = []
            for ids, labs, imgs in rel:
                for i, sid in enumerate(ids):
                    sid = int(sid)
                    rids.append(sid)
                    check(labs[i] == labels[sid], "label of %d" % sid)
                    check(any(np.array_equal(imgs[i], x)
                              for x in srows.get(sid, [])),
                          "sample %d: bytes differ from strict order's" % sid)
            sids = [int(x) for b in st for x in b[0]]
            # Exactly once: the same multiset of ids as the planned epoch
            # (a rank view pads by repeating, as DistributedSampler does).
            check(sorted(rids) == sorted(sids),
                  "epoch %d view %d/%d: ids %s, planned %s"
                  % (epoch, rank, world, sorted(rids), sorted(sids)))
            moved += rids != sids
            log("relaxed epoch %d rank %d of %d: %d samples, each once%s"
                % (epoch, rank, world, len(rids),
                   "" if rids == sids else " (order moved)"))

    # Chosen content is fixed: read epoch 0 again after its batches were
    # released (16M holds a dozen batches; we have read ~40 since).
    first = load_view(m, "relaxed", 0, 1, 0)
    again = load_view(m, "relaxed", 0, 1, 0, drop=True)
    again2 = load_view(m, "relaxed", 0, 1, 0)
    for a, b, c in zip(first, again, again2):
        check(np.array_equal(a[0], b[0]) and np.array_equal(a[0], c[0]),
              "a batch's ids changed after it was made again")
        check(np.array_equal(a[2], c[2]), "a batch's bytes changed")
    st = m.stats()
    check(st.get("feedfs_batch_errors_total", 0) == 0, "batch errors")
    log("relaxed order moved samples in %d of 4 epoch views" % moved)
