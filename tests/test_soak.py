#!/usr/bin/python3
"""test_soak.py - load (issue 6): 32 concurrent readers over mixed jobs,
epochs and rank views for FF_SOAK_SECONDS (default 20), on a mount with a
small memory budget (batches are evicted and made again), every byte
compared with feedfs-ref.  Readers pick a random file of a random view and
read it whole (random block sizes), at random offsets (pread), or through
mmap, dropping the page cache so that feedfs serves each read.  The daemon
must survive and unmount cleanly (exit 0: under ASan, no leak)."""

import mmap
import os
import random
import sys
import threading
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

SECONDS = float(os.environ.get("FF_SOAK_SECONDS", "20"))
READERS = int(os.environ.get("FF_SOAK_READERS", "32"))

t = fflib.Test()
data = t.gen(t.path("data"), n=72, classes=4, seed=21)
cfg = t.config(t.path("feedfs.conf"), data, {
    "a": dict(epochs=3, seed=1, batch_size=8),
    "b": dict(epochs=3, seed=2, batch_size=5, dtype="uint8", layout="HWC",
              pipeline="decode resize(72) cache random_resized_crop(56) "
                       "flip(0.5)"),
    "c": dict(epochs=2, seed=3, batch_size=7, shuffle="no", dtype="float16",
              pipeline="decode resize(64) center_crop(48) cache "
                       "normalize(imagenet)"),
}, threads=3, memory="16M", readahead=2)

VIEWS = [("a", 0, 0, 1), ("a", 1, 1, 2), ("a", 2, 0, 3), ("a", 2, 2, 3),
         ("b", 0, 0, 1), ("b", 1, 0, 2), ("b", 2, 3, 4),
         ("c", 0, 0, 1), ("c", 1, 1, 2), ("c", 1, 0, 1)]
refs = {}
for v in VIEWS:
    d = t.ref(cfg, v[0], v[1], t.path("ref", "%s-%d-%d-%d" % v),
              rank=v[2], world=v[3])
    refs[v] = {}
    for name in os.listdir(d):
        with open(os.path.join(d, name), "rb") as f:
            refs[v][name] = f.read()


def view_dir(m, v):
    job, epoch, rank, world = v
    parts = [job] + (["rank-%d-of-%d" % (rank, world)] if world > 1 else [])
    return m.p(*parts, "epoch-%04d" % epoch)


errors = []
checked = [0] * READERS
reads = [0] * READERS


def reader(m, k, deadline):
    rng = random.Random(k)
    try:
        while time.monotonic() < deadline and not errors:
            v = rng.choice(VIEWS)
            name = rng.choice(sorted(refs[v]))
            want = refs[v][name]
            path = os.path.join(view_dir(m, v), name)
            how = rng.randrange(3)
            fd = os.open(path, os.O_RDONLY)
            try:
                if how == 0:  # whole, random block size
                    bs = rng.choice([1000, 4096, 65536 + 7, 1 << 20])
                    chunks = []
                    while True:
                        b = os.read(fd, bs)
                        if not b:
                            break
                        chunks.append(b)
                    got, off = b"".join(chunks), 0
                elif how == 1:  # a random window
                    off = rng.randrange(len(want) + 16)
                    got = os.pread(fd, rng.randrange(1, 300000), off)
                else:  # mmap
                    mm = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
                    got, off = mm[:], 0
                    mm.close()
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
            if got != want[off:off + len(got)] or (
                    how != 1 and len(got) != len(want)):
                errors.append("%s: %d bytes at %d differ from feedfs-ref "
                              "(read %d)" % (path, len(got), off, how))
            checked[k] += len(got)
            reads[k] += 1
    except Exception as e:  # noqa: BLE001 - reported below
        errors.append("reader %d: %r" % (k, e))


with fflib.Mount(t, cfg, t.path("mnt")) as m:
    t0 = time.monotonic()
    deadline = t0 + SECONDS
    threads = [threading.Thread(target=reader, args=(m, k, deadline))
               for k in range(READERS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(SECONDS + 300)
        check(not th.is_alive(), "a reader hangs")
    took = time.monotonic() - t0
    for e in errors[:10]:
        print(e, file=sys.stderr)
    check(not errors, "%d errors" % len(errors))
    check(m.alive(), "feedfs died")
    st = m.stats()
    log("%d readers x %.1f s (%.2f reader-minutes): %d reads, %.1f MB "
        "checked against feedfs-ref; %d batches made, peak memory %.1f MB"
        % (READERS, took, READERS * took / 60, sum(reads),
           sum(checked) / 1e6, st.get("feedfs_batches_total", 0),
           st.get("feedfs_memory_peak_bytes", 0) / 1e6))
sys.exit(0)
