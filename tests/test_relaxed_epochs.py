#!/usr/bin/python3
"""test_relaxed_epochs.py - issue 25 class 4: order = relaxed over hundreds
of epochs, every batch of every epoch read, at memory = 16M.

A relaxed batch's choice (its ids, 4 bytes a sample) was kept for the life
of the mount, finished epochs too: the metadata reached its cap after about
a million samples served, and from then on every open was refused with
ENOMEM, .feedfs/stats included (an ImageNet run at the default memory
failed around epoch 80 of 90).  test_memory_relaxed.py read one batch per
epoch, so its views never finished and never grew past a batch.

Checks, reading the .npy and .ids.npy of every batch of 400 epochs of 4096
samples in batches of 256 (1.6 million samples, about 1.6 times the
metadata cap's worth of choices; few enough names that the mount need not
ask the kernel to forget any):
  - no read fails, .feedfs/stats stays readable, nothing is refused at the
    metadata cap (feedfs_metadata_refused_total) and the metadata stays
    under its cap;
  - every epoch holds each sample exactly once, and every batch's images
    are those of its ids (the pipeline has no random op, so a sample's
    bytes are a function of its id);
  - the relaxed views kept stay bounded (the finished epochs' choices are
    forgotten at the cap, least recently used first);
  - the last epochs, and the oldest epoch still remembered, read again
    have the same bytes (the room the reread needs is not made by
    forgetting the very epoch being read);
  - the first epoch, forgotten long ago, is refused with ESTALE when read
    again, never chosen again with other samples (feedfs.conf(5), order),
    and the stats count the epochs forgotten and the opens refused.
"""

import errno
import hashlib
import os
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

N = 4096
BS = 256
NB = N // BS
EPOCHS = 400
SRC = 8  # distinct images, hard-linked N times

t = fflib.Test()
src = t.path("src")
os.makedirs(src)
rng = np.random.default_rng(25)
for i in range(SRC):
    a = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
    Image.fromarray(a).save(os.path.join(src, "%d.jpg" % i), quality=95)
data = t.path("data")
for c in range(4):
    os.makedirs(os.path.join(data, "class%d" % c))
for i in range(N):
    os.link(os.path.join(src, "%d.jpg" % (i % SRC)),
            os.path.join(data, "class%d" % (i % 4), "img%05d.jpg" % i))

cfg = t.config(t.path("feedfs.conf"), data, {
    "rel": dict(epochs=EPOCHS, seed=3, pipeline="decode center_crop(8)",
                order="relaxed", batch_size=BS, dtype="uint8",
                layout="HWC"),
}, threads=2, memory="16M", readahead=2, cache_size=0)

SAMPLE = 8 * 8 * 3


def batch_path(m, e, b, suffix):
    return m.p("rel", "epoch-%04d" % e, "batch-%06d%s" % (b, suffix))


with fflib.Mount(t, cfg, t.path("mnt")) as m:
    hl_img = fflib.npy_header_len(batch_path(m, 0, 0, ".npy"))
    hl_ids = fflib.npy_header_len(batch_path(m, 0, 0, ".ids.npy"))
    img_of = {}  # sample id -> its bytes, from the first epoch

    def read_batch(e, b):
        """(ids, images bytes, ids bytes) of batch b of epoch e; the
        images must be those of the ids."""
        try:
            img = fflib.read_file(batch_path(m, e, b, ".npy"))
            raw = fflib.read_file(batch_path(m, e, b, ".ids.npy"))
        except OSError as ex:
            fflib.fail("epoch %d batch %d: %s" % (e, b, ex))
        ids = np.frombuffer(raw[hl_ids:], dtype="<i8")
        px = img[hl_img:]
        check(len(px) == len(ids) * SAMPLE,
              "epoch %d batch %d: %d bytes of images for %d ids" %
              (e, b, len(px), len(ids)))
        for k, sid in enumerate(ids.tolist()):
            row = px[k * SAMPLE:(k + 1) * SAMPLE]
            if sid not in img_of:
                img_of[sid] = row
            elif img_of[sid] != row:
                fflib.fail("epoch %d batch %d: slot %d is not sample %d's "
                           "image" % (e, b, k, sid))
        return ids, img, raw

    def read_epoch(e):
        """Every batch of epoch e; each sample must come once.  Returns
        the files' bytes by batch."""
        seen = []
        files = []
        for b in range(NB):
            ids, img, raw = read_batch(e, b)
            seen.append(ids)
            files.append((img, raw))
        seen = np.sort(np.concatenate(seen))
        check(np.array_equal(seen, np.arange(N)),
              "epoch %d: not every sample once (%d ids, %d distinct)" %
              (e, len(seen), len(np.unique(seen))))
        return files

    peak_meta = peak_views = 0
    first = {}  # (epoch, batch) -> digest of its two files as first read
    for e in range(EPOCHS):
        for b, (img, raw) in enumerate(read_epoch(e)):
            first[e, b] = hashlib.sha256(img + raw).digest()
        if e % 20 == 19:
            try:
                st = m.stats()
            except OSError as ex:
                fflib.fail("epoch %d: .feedfs/stats: %s" % (e, ex))
            peak_meta = max(peak_meta, st["feedfs_metadata_bytes"])
            peak_views = max(peak_views, st["feedfs_relaxed_views"])
            check(st["feedfs_metadata_refused_total"] == 0,
                  "epoch %d: %d opens refused at the metadata cap" %
                  (e, st["feedfs_metadata_refused_total"]))
            check(st["feedfs_metadata_bytes"]
                  <= st["feedfs_metadata_limit_bytes"],
                  "epoch %d: metadata %d over its cap %d" %
                  (e, st["feedfs_metadata_bytes"],
                   st["feedfs_metadata_limit_bytes"]))
    st = m.stats()
    log("%d epochs of %d samples, every batch read: metadata peak %.2f MB "
        "(cap %.2f MB; nodes %.2f MB), relaxed views kept at most %d, "
        "refused %d" %
        (EPOCHS, N, peak_meta / 1e6, st["feedfs_metadata_limit_bytes"] / 1e6,
         st["feedfs_node_bytes"] / 1e6, peak_views,
         st["feedfs_metadata_refused_total"]))
    check(len(img_of) == N, "%d samples seen of %d" % (len(img_of), N))
    # A finished epoch's choices are 4 bytes a sample: no more views than
    # the cap holds of them can be kept.
    most = st["feedfs_metadata_limit_bytes"] // (4 * N)
    check(peak_views <= most,
          "%d relaxed views kept of %d epochs (the cap holds %d)" %
          (peak_views, EPOCHS, most))

    # The epochs read last are remembered: read again, the same bytes.
    # So is the oldest one remembered (epochs are forgotten oldest first),
    # though it is the first to go when room is needed: the room its own
    # opens need is not taken from it.
    oldest = int(st["feedfs_relaxed_forgotten_total"])
    for e in (oldest, EPOCHS - 2, EPOCHS - 1):
        for b in range(NB):
            _, img, raw = read_batch(e, b)
            check(hashlib.sha256(img + raw).digest() == first[e, b],
                  "epoch %d batch %d: other bytes when read again" % (e, b))
    log("epochs %d (the oldest remembered), %d and %d read again: the same "
        "bytes" % (oldest, EPOCHS - 2, EPOCHS - 1))

    # Epoch 0 was forgotten long ago: its batches are refused (ESTALE),
    # never chosen again with other samples than were read.
    for b in (0, NB - 1):
        try:
            fflib.read_file(batch_path(m, 0, b, ".npy"))
            fflib.fail("epoch 0 batch %d (forgotten) read again" % b)
        except OSError as ex:
            check(ex.errno == errno.ESTALE,
                  "epoch 0 batch %d: %s, not ESTALE" % (b, ex))
    st = m.stats()
    log("%d epochs forgotten, %d opens refused with ESTALE" %
        (st["feedfs_relaxed_forgotten_total"],
         st["feedfs_relaxed_stale_total"]))
    # At most `most` finished epochs fit under the cap, so every other one
    # must have been forgotten.  (How many more depends on how much of the
    # cap the kernel's inodes take at the time, nodes 0.1 to 1.6 MB: not a
    # fixed share of EPOCHS.)
    check(st["feedfs_relaxed_forgotten_total"] >= EPOCHS - most - 1,
          "only %d epochs forgotten (the cap holds %d of %d)" %
          (st["feedfs_relaxed_forgotten_total"], most, EPOCHS))
    # (The kernel tries an open that gets ESTALE once more.)
    check(st["feedfs_relaxed_stale_total"] >= 2, "stale opens counted")
    check(st["feedfs_metadata_refused_total"] == 0, "opens refused")
    check(st.get("feedfs_batch_errors_total", 0) == 0, "batch errors")
