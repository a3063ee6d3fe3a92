#!/usr/bin/python3
"""test_bufpool.py - a strict batch that finds no kept buffer when the
readahead queues it gets its images buffer when its first slot is made
(or its header first read): one a batch given back meanwhile hands on
to it, a kept one, or a fresh one (engine/batch.c: fill, hand_over,
batch_images_buf):

  - the first read of batch 0 (Python's 8 KB buffer: it waits for the
    batch) starts the epoch with readahead 4, so five batches are
    queued; with one worker, when batch 0 is in, the worker has just
    started batch 1: two buffers mapped
    (feedfs_batch_buffers_allocated_total; mapped at queueing, it was
    five, each a fresh buffer whose pages the kernel clears at first
    touch);
  - a header read of batch 3 (128 bytes, unbuffered: its slots need not
    be made) gives feedfs-ref's header;
  - then the epoch whole, and the next one (buffers handed on and taken
    again: feedfs_batch_buffers_reused_total), every byte feedfs-ref's;
  - a job whose epoch ends in a short batch (96 = 3 x 28 + 12), read a
    batch at a time with a pause for the kernel's release after each, at
    readahead 1: two buffers over two epochs (the batch read and the one
    ahead).  The short batch's buffer is a full one's, so the next full
    batch takes it again: sized to the short batch it fitted no other
    batch, and the two epochs mapped three buffers (in bench/run's
    default job, an 82 MB one besides the five full ones);
  - order = relaxed keeps its buffers from the start (its batches are
    filled as samples finish): its epoch reads whole."""

import os
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

N = 96
B = 16
# Slow enough that one worker is still on batch 1 when the stats are
# read, a few milliseconds after batch 0 is in: ~35 ms a sample here.
PIPE = ("decode resize(640) gaussian_blur(23,3.0,3.0) center_crop(600) "
        "normalize(imagenet)")

t = fflib.Test()
data = t.gen(t.path("data"), n=N, classes=3, seed=5)
jobs = {"s": fflib.job(pipeline=PIPE, batch_size=B, epochs=2,
                       shuffle="yes"),
        "r": fflib.job(pipeline=PIPE, batch_size=B, epochs=1,
                       order="relaxed")}
cfg = t.config(t.path("a.conf"), data, jobs, threads=1, readahead=4,
               memory="1G")
# The short batch's job: cheap samples, so that its batches are made long
# before they are read, and one ahead at a time.
SB = 28
short = {"t": fflib.job(pipeline="decode resize(48) center_crop(40) "
                        "normalize(imagenet)", batch_size=SB, epochs=2,
                        shuffle="yes")}
cfg_t = t.config(t.path("t.conf"), data, short, threads=1, readahead=1,
                 memory="256M")
ref_t = [t.ref(cfg_t, "t", e, t.path("ref-t%d" % e)) for e in range(2)]
ref0 = t.ref(cfg, "s", 0, t.path("ref-s0"))
ref1 = t.ref(cfg, "s", 1, t.path("ref-s1"))

with fflib.Mount(t, cfg, t.path("mnt")) as m:
    d = m.p("s", "epoch-0000")
    with open(os.path.join(d, "batch-000000.npy"), "rb") as f:
        head = f.read(128)
        mapped = m.stats().get("feedfs_batch_buffers_allocated_total", 0)
    with open(os.path.join(ref0, "batch-000000.npy"), "rb") as f:
        check(head == f.read(128), "batch 0's header is not feedfs-ref's")
    log("after batch 0's first read: %d buffers mapped (5 batches queued)"
        % mapped)
    check(mapped <= 2, "%d batch buffers mapped for 5 queued batches, of "
          "which two have started: at queueing, not at the first slot"
          % mapped)

    fd = os.open(os.path.join(d, "batch-000003.npy"), os.O_RDONLY)
    try:
        head = os.pread(fd, 128, 0)
    finally:
        os.close(fd)
    with open(os.path.join(ref0, "batch-000003.npy"), "rb") as f:
        check(head == f.read(128),
              "batch 3's header, read before its slots, is not feedfs-ref's")

    m.read_epoch("s", 0, ref0)
    m.read_epoch("s", 1, ref1)
    st = m.stats()
    log("two epochs: %d buffers mapped, %d reused"
        % (st.get("feedfs_batch_buffers_allocated_total", 0),
           st.get("feedfs_batch_buffers_reused_total", 0)))
    check(st.get("feedfs_batch_buffers_reused_total", 0) > 0,
          "no batch buffer was reused over two epochs")

    m.read_epoch("r", 0)
    check(m.alive(), "the daemon died")

with fflib.Mount(t, cfg_t, t.path("mnt")) as m:
    nb = (N + SB - 1) // SB
    for e in range(2):
        for i in range(nb):
            name = "batch-%06d.npy" % i
            got = fflib.read_file(m.p("t", "epoch-%04d" % e, name))
            with open(os.path.join(ref_t[e], name), "rb") as f:
                check(got == f.read(),
                      "job t epoch %d %s is not feedfs-ref's" % (e, name))
            time.sleep(0.2)  # the release reaches the daemon
    st = m.stats()
    mapped = st.get("feedfs_batch_buffers_allocated_total", 0)
    log("short last batch: two epochs of %d batches: %d buffers mapped, "
        "%d reused" % (nb, mapped,
                       st.get("feedfs_batch_buffers_reused_total", 0)))
    check(mapped == 2, "%d batch buffers mapped over two epochs that end in "
          "a short batch, at readahead 1 (the batch read and one ahead): "
          "2 would do" % mapped)
t.cleanup()
