#!/usr/bin/python3
"""test_prefetch.py - the workers have sources read ahead of them
(feedfs_prefetched_total) while, and only while, a job's samples read
their sources:

  - a cold epoch (cache misses) over a directory: sources are prefetched
    (every slot whose slot 8 per worker further on is planned asks for
    it), and its bytes are feedfs-ref's;
  - the warm epochs after it, served from the cache, prefetch at most a
    few (slots taken before the first hit of the epoch said so);
  - a job without a cache op reads its sources in every epoch and
    prefetches in every one;
  - tar shards: members are prefetched too (the member's range of its
    shard), and the bytes are feedfs-ref's;
  - a source removed after the scan: its prefetch fails quietly, and the
    read that follows substitutes it (on_error = substitute) as before."""

import io
import os
import sys
import tarfile
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

N = 96
B = 32
THREADS = 2
# Slot s of a batch has the slot 8 per worker (16) after it planned in
# the same batch for s < B - 16, and in the next batch only if that one is
# queued already: at least that many of each batch ask for their target,
# less the workers' first slots, taken before the job read a source.
LEAST = (N // B) * (B - 8 * THREADS) - THREADS
PIPE = "decode resize(48) cache center_crop(40)"
t = fflib.Test()
data = t.gen(t.path("data"), n=N, classes=3, seed=11)
# Digest memos are made only of files more than 2 s old (git's racy
# rule): without them a warm epoch reads every source for its digest, and
# prefetches it, rightly.
time.sleep(2.5)


def prefetched(m, job):
    return m.job_stat("feedfs_prefetched_total", job)


# ---- a directory: cold, then warm; and a job without a cache op ---------
jobs = {"c": dict(pipeline=PIPE, dtype="uint8", layout="HWC", epochs=3,
                  batch_size=B),
        "n": dict(pipeline="decode resize(48) center_crop(40)",
                  dtype="uint8", layout="HWC", epochs=2, batch_size=B)}
cfg = t.config(t.path("a.conf"), data, jobs, threads=THREADS, readahead=2)
with fflib.Mount(t, cfg, t.path("mnt")) as m:
    m.read_epoch("c", 0, t.ref(cfg, "c", 0, t.path("ref-c0")))
    cold = prefetched(m, "c")
    # Up to the readahead's batches of epoch 1 too, made as epoch 0 ends.
    check(cold >= LEAST and cold <= N + 2 * B,
          "a cold epoch of %d samples prefetched %d" % (N, cold))
    misses = m.job_stat("feedfs_cache_misses_total", "c")
    check(misses >= N, "%d misses in the cold epoch" % misses)
    for e in (1, 2):
        m.read_epoch("c", e, t.ref(cfg, "c", e, t.path("ref-c%d" % e)))
    warm = prefetched(m, "c") - cold
    hits = m.job_stat("feedfs_cache_hits_total", "c")
    # Epoch 1's first batches (the readahead's 2) may be made as epoch 0
    # ends, while its last puts are still queued: a sample whose put has
    # not landed misses once more (seen once in CI under ASan: 191 of 192).
    check(hits >= 2 * N - 2 * B, "%d hits in two warm epochs" % hits)
    check(warm <= 2 * THREADS,
          "two warm epochs (%d hits) prefetched %d sources" % (hits, warm))
    log("cold epoch: %d of %d prefetched; two warm epochs: %d"
        % (cold, N, warm))
    for e in (0, 1):
        m.read_epoch("n", e, t.ref(cfg, "n", e, t.path("ref-n%d" % e)))
    nc = prefetched(m, "n")
    check(nc >= 2 * LEAST,
          "a job without a cache op prefetched %d in two epochs" % nc)
    log("no cache op: %d prefetched in two epochs of %d" % (nc, N))

# ---- tar shards --------------------------------------------------------
shards = t.path("shards")
os.makedirs(shards)
classes = sorted(os.listdir(data))
files = [(ci, os.path.join(c, f)) for ci, c in enumerate(classes)
         for f in sorted(os.listdir(os.path.join(data, c)))]
for s in range(2):
    with tarfile.open(os.path.join(shards, "s%d.tar" % s), "w") as tf:
        for i, (ci, rel) in enumerate(files[s::2]):
            for ext, payload in (
                    ("jpg", open(os.path.join(data, rel), "rb").read()),
                    ("cls", b"%d\n" % ci)):
                ti = tarfile.TarInfo("k%04d.%s" % (2 * i + s, ext))
                ti.size = len(payload)
                ti.mtime = 1700000000
                tf.addfile(ti, io.BytesIO(payload))
scfg = t.path("s.conf")
with open(scfg, "w") as f:
    f.write("""[mount]
cache_dir = %s
cache_size = 1G
threads = %d
memory = 256M
readahead = 2

[dataset sh]
shards = %s
label = cls

[job sc]
dataset = sh
batch_size = %d
epochs = 1
seed = 5
pipeline = %s
dtype = uint8
layout = HWC
""" % (t.path("cache-sh"), THREADS, os.path.join(shards, "*.tar"), B, PIPE))
with fflib.Mount(t, scfg, t.path("mnt")) as m:
    m.read_epoch("sc", 0, t.ref(scfg, "sc", 0, t.path("ref-sc")))
    sp = prefetched(m, "sc")
    check(sp >= LEAST,
          "a cold epoch over shards prefetched %d of %d" % (sp, N))
    log("shards: %d of %d prefetched" % (sp, N))

# ---- a source gone after the scan ---------------------------------------
jobs = {"g": dict(pipeline=PIPE, dtype="uint8", layout="HWC", epochs=1,
                  batch_size=B, on_error="substitute", shuffle="no")}
gcfg = t.config(t.path("g.conf"), data, jobs, threads=THREADS, readahead=2,
                cache_dir=t.path("cache-g"))
with fflib.Mount(t, gcfg, t.path("mnt")) as m:
    gone = os.path.join(data, files[2 * B + 20][1])  # the last batch's
    os.rename(gone, gone + ".away")
    try:
        m.read_epoch("g", 0)
        sub = m.job_stat("feedfs_substituted_total", "g")
        check(sub == 1, "%d substituted for one source gone" % sub)
        check(prefetched(m, "g") >= LEAST - 1,
              "%d prefetched with a source gone" % prefetched(m, "g"))
    finally:
        os.rename(gone + ".away", gone)
    check(m.alive(), "the daemon died")
log("a source gone after the scan: substituted once, the rest prefetched")
t.cleanup()
