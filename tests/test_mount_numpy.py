#!/usr/bin/python3
"""test_mount_numpy.py - the mount's batches through numpy and torch: np.load,
np.memmap (mmap MAP_SHARED), np.load(mmap_mode), torch.from_numpy, each
equal to feedfs-ref's arrays; labels and ids consistent with samples.tsv;
shuffle, the val order, the partial last batch, and rank views that shard
as torch's DistributedSampler does."""

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
    from torch.utils.data.distributed import DistributedSampler
except ImportError as e:
    fflib.skip("numpy/torch not importable: %s" % e)

N, B = 45, 8
t = fflib.Test()
data = t.gen(t.path("data"), n=N, classes=3, seed=5)
cfg = t.config(t.path("feedfs.conf"), data, {
    "train": dict(epochs=2, seed=1234),
    "val": dict(epochs=1, shuffle="no",
                pipeline="decode resize(72) center_crop(64) cache",
                dtype="uint8", layout="HWC"),
    "half": dict(epochs=1, seed=99,
                 pipeline="decode resize(72) center_crop(64) cache flip(0.5) "
                          "normalize(imagenet)",
                 dtype="float16", layout="HWC"),
    "dl": dict(epochs=1, seed=3, drop_last="yes"),
}, threads=2)
refs = {}
for jobname, epoch in (("train", 0), ("train", 1), ("val", 0), ("half", 0)):
    refs[jobname, epoch] = t.ref(cfg, jobname, epoch,
                                 t.path("ref", jobname, str(epoch)))

with fflib.Mount(t, cfg, t.path("mnt")) as m:
    info = {j: json.load(open(m.p(j, "info.json")))
            for j in ("train", "val", "half", "dl")}
    labels_of = {}
    for jobname in ("train", "val", "half"):
        with open(m.p(jobname, "samples.tsv")) as f:
            rows = [line.rstrip("\n").split("\t") for line in f]
        check([int(r[0]) for r in rows] == list(range(N)), "samples.tsv ids")
        labels_of[jobname] = np.array([int(r[2]) for r in rows])
    check(info["train"]["shape"] == [B, 3, 64, 64], info["train"])
    check(info["val"]["shape"] == [B, 64, 64, 3], info["val"])
    check(info["half"]["shape"] == [B, 64, 64, 3] and
          info["half"]["dtype"] == "float16", info["half"])
    nb = info["train"]["batches_per_epoch"]
    check(nb == (N + B - 1) // B, "batches_per_epoch %d" % nb)

    epoch_ids = {}
    # The package's reader (python/feedfs, what examples/pytorch_train.py
    # reads through), from the source tree.
    sys.path.insert(0, os.path.join(fflib.SRCDIR, "python"))
    import feedfs

    def read_into(path, buf):
        return torch.from_numpy(feedfs.read_into(path, buf.numpy()))
    reuse = {np.dtype(info[j]["dtype"]).str: torch.from_numpy(np.empty(
        info[j]["shape"], dtype=info[j]["dtype"])) for j in info}
    for (jobname, epoch), ref in sorted(refs.items()):
        inf = info[jobname]
        dtype = np.dtype(inf["dtype"])
        d = m.p(jobname, "epoch-%04d" % epoch)
        ids_all = []
        for b in range(nb):
            base = os.path.join(d, "batch-%06d" % b)
            rbase = os.path.join(ref, "batch-%06d" % b)
            want_len = B if b < nb - 1 else N - B * (nb - 1)
            shape = (want_len,) + tuple(inf["shape"][1:])

            x = np.load(base + ".npy")
            rx = np.load(rbase + ".npy")
            check(x.dtype == dtype, "%s.npy: dtype %s" % (base, x.dtype))
            check(x.shape == shape, "%s.npy: shape %s, want %s"
                  % (base, x.shape, shape))
            check(np.array_equal(x, rx), "%s.npy differs from feedfs-ref"
                  % base)
            if dtype.kind == "f":
                # normalized ImageNet values: roughly -2.2 .. 2.7
                xf = x.astype(np.float32)
                check(xf.min() >= -2.2 and xf.max() <= 2.7 and xf.std() > 0.1,
                      "%s.npy: values out of range" % base)

            # np.memmap maps the file (MAP_SHARED through the mount).
            off = fflib.npy_header_len(base + ".npy")
            check(off % 64 == 0, "%s.npy: data at %d" % (base, off))
            mm = np.memmap(base + ".npy", dtype=dtype, mode="r", offset=off,
                           shape=shape)
            check(np.array_equal(mm, rx), "%s.npy: memmap differs" % base)
            del mm
            mm = np.load(base + ".npy", mmap_mode="r")
            check(np.array_equal(mm, rx), "%s.npy: mmap_mode differs" % base)
            del mm
            # A plain read() after the header.
            raw = fflib.read_file(base + ".npy", bs=4096)
            check(np.array_equal(np.frombuffer(raw[off:], dtype=dtype)
                                 .reshape(shape), rx),
                  "%s.npy: raw data differs" % base)

            # The README's reading pattern: into one reused tensor
            # (feedfs.read_into, as feedfs.torch.Loader reads).
            out = read_into(base + ".npy", reuse[dtype.str])
            check(np.array_equal(out.numpy(), rx),
                  "%s.npy: read_into differs" % base)

            tx = torch.from_numpy(np.load(base + ".npy"))
            check(tuple(tx.shape) == shape, "torch shape %s" % (tx.shape,))
            check(torch.equal(tx, torch.from_numpy(rx)),
                  "%s.npy: torch tensor differs" % base)

            y = np.load(base + ".labels.npy")
            ids = np.load(base + ".ids.npy")
            for a, kind in ((y, "labels"), (ids, "ids")):
                check(a.dtype == np.int64 and a.shape == (want_len,),
                      "%s.%s.npy: %s %s" % (base, kind, a.dtype, a.shape))
                check(np.array_equal(a, np.load("%s.%s.npy" % (rbase, kind))),
                      "%s.%s.npy differs from feedfs-ref" % (base, kind))
            check(np.array_equal(y, labels_of[jobname][ids]),
                  "%s: labels do not match samples.tsv for the ids" % base)
            ids_all.append(ids)
        ids_all = np.concatenate(ids_all)
        check(sorted(ids_all.tolist()) == list(range(N)),
              "%s epoch %d: ids are not a permutation of the samples"
              % (jobname, epoch))
        epoch_ids[jobname, epoch] = ids_all
        log("%s epoch %d: %d batches equal feedfs-ref (load, memmap, "
            "read, torch)" % (jobname, epoch, nb))
        # past the last batch
        check(not os.path.exists(os.path.join(d, "batch-%06d.npy" % nb)),
              "batch %d exists" % nb)

    # Linux 6.6+ maps direct I/O files shared: batch files then take one
    # copy (issue 10), and the memmaps above went through that path.
    rel = tuple(int(x) for x in os.uname().release.split(".")[:2]
                if x.isdigit())
    want = "direct I/O" if rel >= (6, 6) else "page cache"
    check("batch files: " + want in m.log(),
          "the log does not say batch files use %s" % want)
    log("batch files: %s" % want)

    tr0, tr1 = epoch_ids["train", 0], epoch_ids["train", 1]
    check(not np.array_equal(tr0, tr1), "train epochs 0 and 1 have one order")
    check(not np.array_equal(tr0, np.arange(N)), "train epoch 0 not shuffled")
    check(np.array_equal(epoch_ids["val", 0], np.arange(N)),
          "val epoch 0 is not 0..n-1 in order")

    # Rank views shard the epoch as DistributedSampler does, and a sample's
    # bytes do not depend on the view it is read through.
    full = {}
    for b in range(nb):
        x = np.load(m.p("train", "epoch-0001", "batch-%06d.npy" % b))
        for i, sid in enumerate(np.load(m.p("train", "epoch-0001",
                                            "batch-%06d.ids.npy" % b))):
            full[int(sid)] = x[i]
    for world in (2, 3, 7):
        for rank in range(world):
            want = [int(tr1[p]) for p in DistributedSampler(
                list(range(N)), num_replicas=world, rank=rank, shuffle=False)]
            got = []
            d = m.p("train", "rank-%d-of-%d" % (rank, world), "epoch-0001")
            names = sorted(os.listdir(d))
            nbr = len(names) // 3
            check(nbr == (len(want) + B - 1) // B,
                  "%s: %d batches for %d samples" % (d, nbr, len(want)))
            for b in range(nbr):
                ids = np.load(os.path.join(d, "batch-%06d.ids.npy" % b))
                got += ids.tolist()
                if world == 2:
                    x = np.load(os.path.join(d, "batch-%06d.npy" % b))
                    for i, sid in enumerate(ids):
                        check(np.array_equal(x[i], full[int(sid)]),
                              "%s batch %d: sample %d differs from the "
                              "whole epoch's" % (d, b, sid))
            check(got == want, "%s: ids %s, DistributedSampler %s"
                  % (d, got, want))
    log("rank views of 2, 3, 7 shard as DistributedSampler")

    # drop_last = yes: no partial batch, and rank views cut (not padded)
    # as DistributedSampler(drop_last=True) does.
    dl = info["dl"]
    check(dl["batches_per_epoch"] == N // B, "drop_last: %d batches"
          % dl["batches_per_epoch"])
    d = m.p("dl", "epoch-0000")
    check(sorted(os.listdir(d)) == sorted(
        "batch-%06d%s" % (b, k) for b in range(N // B)
        for k in (".npy", ".labels.npy", ".ids.npy")),
        "drop_last: %s" % sorted(os.listdir(d)))
    order = np.concatenate([np.load(os.path.join(d, "batch-%06d.ids.npy" % b))
                            for b in range(N // B)])
    check(len(set(order.tolist())) == N // B * B, "drop_last: repeated ids")
    for b in range(N // B):
        check(np.load(os.path.join(d, "batch-%06d.npy" % b)).shape ==
              (B, 3, 64, 64), "drop_last: batch %d shape" % b)
    # order[p] is the sample at position p of the epoch's order (p < 40;
    # the batches of the rank views below only take positions below 40)
    for world in (2, 4):
        for rank in range(world):
            d = m.p("dl", "rank-%d-of-%d" % (rank, world), "epoch-0000")
            pos = list(DistributedSampler(list(range(N)), num_replicas=world,
                                          rank=rank, shuffle=False,
                                          drop_last=True))
            nbr = len(pos) // B
            check(len(os.listdir(d)) == 3 * nbr, "%s: %d files, want %d"
                  % (d, len(os.listdir(d)), 3 * nbr))
            got = np.concatenate([np.load(os.path.join(
                d, "batch-%06d.ids.npy" % b)) for b in range(nbr)])
            want = [int(order[p]) for p in pos[:nbr * B] if p < len(order)]
            check(len(want) == nbr * B and got.tolist() == want,
                  "%s: ids %s, DistributedSampler %s" % (d, got, want))
    log("drop_last = yes: whole batches only, rank views as "
        "DistributedSampler(drop_last=True)")
    check(m.alive(), "feedfs died")
log("ok")
