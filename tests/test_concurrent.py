#!/usr/bin/python3
"""test_concurrent.py - many readers at once on one mount with a small memory
budget: 8 readers on different (job, epoch, rank view)s, plus two readers
of the same files in lockstep, all compared with feedfs-ref; then a second
pass over everything (batches evicted meanwhile are made again, with the
same bytes).  The daemon must survive and unmount cleanly."""

import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

N = 64
t = fflib.Test()
data = t.gen(t.path("data"), n=N, classes=4, seed=9)
cfg = t.config(t.path("feedfs.conf"), data, {
    # 885 KB per batch: the 24 batches of a's views alone need 21 MB
    "a": dict(epochs=4, seed=1,
              pipeline="decode resize(112) cache random_resized_crop(96) "
                       "flip(0.5) normalize(imagenet)"),
    "b": dict(epochs=4, seed=2, batch_size=6,
              pipeline="decode resize(72) cache random_resized_crop(56) "
                       "flip(0.5)",
              dtype="uint8", layout="HWC"),
}, threads=2, memory="16M", readahead=2)

# (job, epoch, rank, world) of the 8 readers
VIEWS = [("a", 0, 0, 1), ("a", 1, 0, 1), ("a", 2, 0, 2), ("a", 3, 1, 2),
         ("b", 0, 0, 1), ("b", 1, 0, 2), ("b", 2, 1, 2), ("b", 3, 0, 1)]
refs = {}
for v in VIEWS:
    job, epoch, rank, world = v
    refs[v] = t.ref(cfg, job, epoch, t.path("ref", "%s-%d-%d-%d" % v),
                    rank=rank, world=world)


def view_dir(m, v):
    job, epoch, rank, world = v
    parts = [job] + (["rank-%d-of-%d" % (rank, world)] if world > 1 else [])
    return m.p(*parts, "epoch-%04d" % epoch)


errors = []


def reader(m, v, bs, barrier=None):
    """Read every file of view v (bs bytes per read) and compare."""
    try:
        d, ref = view_dir(m, v), refs[v]
        names = sorted(os.listdir(ref))
        got = sorted(os.listdir(d))
        if got != names:
            errors.append("%s lists %s" % (d, got))
            return
        for name in names:
            if barrier is not None:
                barrier.wait(timeout=120)
            data = fflib.read_file(os.path.join(d, name), bs, drop=True)
            with open(os.path.join(ref, name), "rb") as f:
                want = f.read()
            if data != want:
                errors.append("%s/%s differs from feedfs-ref (%d bytes, "
                              "want %d)" % (d, name, len(data), len(want)))
    except Exception as e:  # noqa: BLE001 - reported below
        errors.append("%s: %r" % (v, e))


def run_all(m, first):
    threads = [threading.Thread(target=reader,
                                args=(m, v, (1 << 16) + 4096 * i + 1000 * (i % 2)))
               for i, v in enumerate(VIEWS)]
    if first:
        # two more readers of one view, in lockstep: the same file at once
        bar = threading.Barrier(2)
        threads += [threading.Thread(target=reader, args=(m, VIEWS[0], bs, bar))
                    for bs in (4096, 1 << 20)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
        check(not th.is_alive(), "a reader is stuck")
    check(not errors, "\n".join(errors))


with fflib.Mount(t, cfg, t.path("mnt")) as m:
    run_all(m, True)
    s1 = m.stats()
    log("first pass: 10 readers ok; batches made %d, peak memory %d of %d"
        % (s1["feedfs_batches_total"], s1["feedfs_memory_peak_bytes"],
           s1["feedfs_memory_limit_bytes"]))
    check(m.alive(), "feedfs died")
    run_all(m, False)
    s2 = m.stats()
    nfiles = sum(len(os.listdir(r)) // 3 for r in refs.values())
    log("second pass ok; batches made %d for %d distinct batches, cache "
        "hits %d, misses %d" % (s2["feedfs_batches_total"], nfiles,
                                s2["feedfs_cache_hits_total"],
                                s2["feedfs_cache_misses_total"]))
    check(s2["feedfs_batch_errors_total"] == 0, "batch errors")
    # the budget is far below what the views hold: batches were released
    # and made again
    # (the readers drop the pages they read from the page cache, so the
    # second pass asks feedfs again)
    check(s2["feedfs_batches_total"] > s1["feedfs_batches_total"],
          "no batch was evicted and made again (%d made, %d distinct)"
          % (s2["feedfs_batches_total"], nfiles))
    # Once the (asynchronous) releases of the last files are through, the
    # batches held fit the budget again.
    for _ in range(100):
        s3 = m.stats()
        if s3["feedfs_memory_bytes"] <= s3["feedfs_memory_limit_bytes"]:
            break
        time.sleep(0.1)
    check(s3["feedfs_memory_bytes"] <= s3["feedfs_memory_limit_bytes"],
          "idle mount holds %d bytes of batches, limit %d"
          % (s3["feedfs_memory_bytes"], s3["feedfs_memory_limit_bytes"]))
    check(s2["feedfs_cache_hits_total"] > 0, "no cache hit")
    check(m.alive(), "feedfs died")
log("ok")
