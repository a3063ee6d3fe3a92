#!/usr/bin/python3
"""test_cache_admission.py - a cache smaller than the data (issue 11),
through real mounts, counters read from .feedfs/stats:

  - the bytes of one entry are measured first (a mount with a large
    cache, one epoch): cache_size is then set to about half the cached
    set;
  - a mount with that cache reads 4 epochs (one cold, three warm): once
    full it inserts nothing more and evicts nothing, and every warm epoch
    (feedfs_epoch_cache_hits_total) hits >= 90% of the fraction of the
    data the cache holds; the bytes of a warm epoch are feedfs-ref's;
  - cache_format = lossless through a mount: a cold and a warm epoch
    equal feedfs-ref's (the raw pipeline's bytes), and its entries are
    smaller than raw ones."""

import os
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

MB = 1 << 20
N = 80
PIPE = "decode resize(368) cache center_crop(64)"
t = fflib.Test()
data = t.gen(t.path("data"), n=N, classes=4, seed=5)
JOBS = {"a": dict(epochs=4, seed=3, pipeline=PIPE, dtype="uint8",
                  layout="HWC")}


def stats(m):
    """{name or name{labels}: value} of .feedfs/stats."""
    out = {}
    with open(m.p(".feedfs", "stats")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def epoch_hits(s, job, e):
    return s.get('feedfs_epoch_cache_hits_total{job="%s",epoch="%d"}'
                 % (job, e), 0)


# ---- the bytes of one entry ---------------------------------------------
big = t.config(t.path("big.conf"), data, JOBS, cache_dir=t.path("c-big"),
               cache_size="1G")
with fflib.Mount(t, big, t.path("mnt")) as m:
    m.read_epoch("a", 0)
    s = stats(m)
entries, used = s["feedfs_cache_entries"], s["feedfs_cache_used_bytes"]
check(entries == N, "%d entries after a cold epoch, expected %d"
      % (entries, N))
per = used / entries
size = int(used * 0.5)
if size < 16 * MB:
    fflib.fail("the cached set (%d bytes) is too small for cache_size >= 16M"
               % used)
admit = size - size // 20
frac = (admit // per) / N  # the fraction of the data that fits
log("%d entries of %.0f bytes; cache_size %d: %.1f%% of the data fits"
    % (N, per, size, 100 * frac))

# ---- a partial cache over 4 epochs --------------------------------------
part = t.config(t.path("part.conf"), data, JOBS, cache_dir=t.path("c-part"),
                cache_size=str(size))
ref2 = t.ref(part, "a", 2, t.path("ref", "a2"))
with fflib.Mount(t, part, t.path("mnt")) as m:
    ins, wrote = [], []
    for e in range(4):
        m.read_epoch("a", e, ref2 if e == 2 else None)
        s = stats(m)
        ins.append(s["feedfs_cache_inserts_total"])
        wrote.append(s["feedfs_cache_written_bytes_total"])
        log("epoch %d: %d hits of %d; %d inserts, %d denied, %d evictions"
            % (e, epoch_hits(s, "a", e), N, ins[-1],
               s["feedfs_cache_admission_denied_total"],
               s["feedfs_cache_evictions_total"]))
    # Entries differ in size (aspect ratios): about what fits.
    check(abs(ins[0] - frac * N) <= 0.1 * frac * N + 1,
          "the cold epoch inserted %d, expected about %.0f (what fits)"
          % (ins[0], frac * N))
    check(s["feedfs_cache_used_bytes"] <= admit, "used %d > admit %d"
          % (s["feedfs_cache_used_bytes"], admit))
    check(ins[3] == ins[0], "inserts went on once full: %s" % ins)
    # Issue 17 item 7: what was stored, never a denied put.
    check(wrote[3] == wrote[0] and 0 < wrote[0] <= admit,
          "written bytes %s grew once full (admit %d)" % (wrote, admit))
    check(s["feedfs_cache_evictions_total"] == 0,
          "%d evictions" % s["feedfs_cache_evictions_total"])
    check(s["feedfs_cache_admission_denied_total"] ==
          s['feedfs_cache_misses_total{job="a"}'] - ins[0],
          "denied: every miss once full")
    for e in (1, 2, 3):
        h = epoch_hits(s, "a", e) / N
        check(h >= 0.9 * frac, "warm epoch %d: %.1f%% hits, expected >= "
              "90%% of %.1f%%" % (e, 100 * h, 100 * frac))

# ---- lossless through a mount --------------------------------------------
jobs = {"z": dict(JOBS["a"], cache_format="lossless")}
zc = t.config(t.path("z.conf"), data, jobs, cache_dir=t.path("c-z"),
              cache_size="1G")
ref_raw = t.ref(t.config(t.path("zr.conf"), data, {"z": JOBS["a"]}), "z", 2,
                t.path("ref", "z2"))
with fflib.Mount(t, zc, t.path("mnt")) as m:
    # Epoch 1's first batches are made ahead while epoch 0's last are
    # still being made: a sample in both misses in epoch 1 when its put
    # has not finished (a loaded machine).  Epoch 2's are made once every
    # sample was put, so all of them hit.
    m.read_epoch("z", 0)
    m.read_epoch("z", 1)
    m.read_epoch("z", 2, ref_raw)
    s = stats(m)
    check(epoch_hits(s, "z", 2) == N, "lossless warm epoch: %d hits"
          % epoch_hits(s, "z", 2))
    zper = s["feedfs_cache_used_bytes"] / s["feedfs_cache_entries"]
    log("lossless: %.0f bytes per entry, raw %.0f" % (zper, per))
    check(zper < per, "lossless entries are not smaller than raw")
log("ok")
