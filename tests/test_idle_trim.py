#!/usr/bin/python3
"""test_idle_trim.py - a script test (tests/) of the engine's idle trim
(engine/idle.c, issue 36, section 3), through a real mount: an idle
mount gives back what only speed needs, counted, not timed.

A mount with idle_trim = 2 is read part of the way through an epoch of a
strict job (one batch left open, half read) and of a relaxed one, then
left alone:

- the trim happens (feedfs_idle_trims_total 1, said in the log with
  the resident bytes before and after, which /proc confirms) while
  nothing reads, and reading .feedfs/stats does not put it off;
- what it gave back is counted: the budget holds, besides metadata,
  exactly what it held before the first read (the workers' reserved
  scratch, the text files), no batch keeps its data (only the struct of
  the one held open stays), the workers keep no scratch, and
  the daemon's RSS fell by at least half of the bytes given back, to at
  most 256 MiB (not checked under AddressSanitizer, whose quarantine
  keeps what was freed);
- the next read is a cold start of the readahead, nothing worse: the
  half-read batch reads on from its open descriptor, every file of both
  epochs equals feedfs-ref's, the batches after a read are queued again,
  and the relaxed epoch delivers every sample exactly once, each with
  the pixels of the strict order's;
- reads arm it again: a second idle spell trims a second time.

On main the config's idle_trim key is refused ("unknown key"), and a
mount without it kept every batch and buffer while idle.
"""

import os
import re
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, fail, log  # noqa: E402

try:
    import numpy as np
except ImportError:
    fflib.skip("needs /usr/bin/python3 with python3-numpy")

N, B = 160, 32
PIPE = ("decode resize(256) cache random_resized_crop(224) flip(0.5) "
        "normalize(imagenet)")
t = fflib.Test()
data = t.gen(t.path("data"), n=N, classes=4, seed=36)
cfg = t.config(t.path("feedfs.conf"), data, {
    "strict": dict(epochs=2, seed=3, batch_size=B, pipeline=PIPE),
    "rel": dict(epochs=1, seed=3, batch_size=B, pipeline=PIPE,
                order="relaxed"),
}, threads=2, memory="512M", readahead=4, idle_trim=2)
refs = [t.ref(cfg, "strict", e, t.path("ref%d" % e)) for e in (0, 1)]
NB = (N + B - 1) // B


def rss(m):
    with open("/proc/%d/status" % m.proc.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    fail("no VmRSS")


def sanitized(m):
    """Whether the daemon runs under AddressSanitizer (CI's second pass):
    its shadow and quarantine hold what was freed, so RSS is ASan's."""
    with open("/proc/%d/maps" % m.proc.pid) as f:
        return "libasan" in f.read()


def wait_trims(m, n):
    """Poll the stats until the mount trimmed n times (a bound on a hang,
    not a time the test expects)."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        st = m.stats()
        if st["feedfs_idle_trims_total"] >= n:
            return st
        time.sleep(0.3)
    fail("no idle trim %d after 180 s: %s" % (n, m.stats()))


def ref_bytes(e, name):
    with open(os.path.join(refs[e], name), "rb") as f:
        return f.read()


def sample_pixels(d, names):
    """{id: image} of the batches names in directory d."""
    out = {}
    for n in names:
        ids = np.load(os.path.join(d, n + ".ids.npy"))
        x = np.load(os.path.join(d, n + ".npy"))
        for i, img in zip(ids, x):
            check(int(i) not in out, "sample %d twice in %s" % (i, d))
            out[int(i)] = img
    return out


with fflib.Mount(t, cfg, t.path("mnt")) as m:
    st = m.stats()
    data_start = st["feedfs_memory_bytes"] - st["feedfs_metadata_bytes"]
    d0 = m.p("strict", "epoch-0000")
    for b in range(2):
        for s in (".npy", ".labels.npy", ".ids.npy"):
            n = "batch-%06d%s" % (b, s)
            check(fflib.read_file(os.path.join(d0, n)) == ref_bytes(0, n),
                  "%s differs from feedfs-ref's" % n)
    # Batch 2 open across the trim, half read.
    held = os.open(os.path.join(d0, "batch-000002.npy"), os.O_RDONLY)
    want2 = ref_bytes(0, "batch-000002.npy")
    first = os.read(held, len(want2) // 2)
    check(first == want2[:len(first)], "batch 2's first half differs")
    drel = m.p("rel", "epoch-0000")
    rel_first = ["batch-%06d" % b for b in range(NB // 2)]
    rel = sample_pixels(drel, rel_first)
    before = m.stats()
    rss_before = rss(m)
    check(before["feedfs_idle_trims_total"] == 0,
          "trimmed while being read: %s" % before)
    check(before["feedfs_batches_in_memory"] >= 4,
          "readahead made only %d batches" % before["feedfs_batches_in_memory"])
    log("read: %d batches in memory, budget %.1f MiB, RSS %.1f MiB"
        % (before["feedfs_batches_in_memory"],
           before["feedfs_memory_bytes"] / 2**20, rss_before / 2**20))

    st = wait_trims(m, 1)
    rss_after = rss(m)
    gave = st["feedfs_idle_trimmed_bytes_total"]
    log("idle: trimmed %.1f MiB; budget %.1f MiB, %d batch structs, "
        "RSS %.1f MiB" % (gave / 2**20, st["feedfs_memory_bytes"] / 2**20,
                          st["feedfs_batches_in_memory"], rss_after / 2**20))
    check(st["feedfs_idle_trims_total"] == 1, "trims: %s" % st)
    data_now = st["feedfs_memory_bytes"] - st["feedfs_metadata_bytes"]
    check(gave > 0 and data_now == data_start,
          "the budget holds %d bytes besides metadata after the trim, %d "
          "before the first read" % (data_now, data_start))
    check(st["feedfs_batches_in_memory"] == 1,
          "%d batch structs kept (one is held open)"
          % st["feedfs_batches_in_memory"])
    check(st["feedfs_scratch_bytes"] == 0,
          "workers keep %d bytes of scratch" % st["feedfs_scratch_bytes"])
    if sanitized(m):
        log("AddressSanitizer build: RSS bounds not checked (the counted "
            "bytes above are)")
    else:
        check(rss_before - rss_after >= gave / 2,
              "RSS fell by %d bytes, the budget by %d"
              % (rss_before - rss_after, gave))
        check(rss_after <= 256 << 20, "RSS %d MiB > 256 MiB after the trim"
              % (rss_after >> 20))
    said = re.search(r"gave back (\d+) MiB .* resident (\d+) -> (\d+) MiB",
                     m.log())
    check(said is not None, "the log does not say it: %s" % m.log())
    log("the log: gave back %s MiB, resident %s -> %s MiB" % said.groups())
    if not sanitized(m):
        # The log's resident bytes are the process's: they fell, to
        # within a few MiB of what /proc says after the trim (nothing
        # runs then; before it, the readahead may still have grown).
        was, now = int(said.group(2)) << 20, int(said.group(3)) << 20
        check(now < was and abs(now - rss_after) < 32 << 20,
              "the log says resident %d -> %d MiB; /proc says %d after"
              % (was >> 20, now >> 20, rss_after >> 20))

    # The next reads: a cold start of the readahead, the same bytes.
    rest = b""
    while True:
        c = os.read(held, 1 << 20)
        if not c:
            break
        rest += c
    os.close(held)
    check(first + rest == want2, "batch 2 read across the trim differs")
    n = "batch-000003.npy"
    fd = os.open(os.path.join(d0, n), os.O_RDONLY)
    check(m.stats()["feedfs_batches_in_memory"] >= 3,
          "an open after the trim queued no readahead")
    os.close(fd)
    for e in (0, 1):
        m.read_epoch("strict", e, refs[e])
    rel.update(sample_pixels(
        drel, ["batch-%06d" % b for b in range(NB // 2, NB)]))
    check(sorted(rel) == list(range(N)), "the relaxed epoch delivered %d "
          "distinct samples of %d" % (len(rel), N))
    strict = sample_pixels(refs[0], ["batch-%06d" % b for b in range(NB)])
    for i in range(N):
        check(np.array_equal(rel[i], strict[i]),
              "relaxed sample %d differs from the strict order's" % i)
    log("after the trim: every file equals feedfs-ref's; the relaxed epoch "
        "has each sample once, with the strict order's pixels")
    wait_trims(m, 2)
    log("reads armed it again: a second trim")
log("PASS")
