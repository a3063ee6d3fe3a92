#!/usr/bin/python3
"""test_views.py - views for self-supervised training (issue 28): DINO's
multi-crop as 2 global views at 64 and 4 local views at 32.

- the epoch directory lists batch-NNNNNN.viewV.npy for V = 1..5 beside
  each batch's .npy (view 0), .labels.npy and .ids.npy, as feedfs-ref's
  files; info.json names every view's file, pipeline and shape;
- shapes: the global views at 64, the local ones at 32;
- the draws are independent: two views of the same sample differ (the
  global pair, and every pair of local views), while their labels and ids
  are one file for all views;
- the bytes are deterministic: equal to the in-process library's
  (feedfs-ref --view V), on a reread after the page cache was dropped, and
  after a remount with another thread count; a rank view's view files too;
- the seeds: a job without views, or with shuffle_seed and aug_seed set to
  its seed, has the bytes of view 0; shuffle_seed alone changes the order
  and not a sample's pixels, aug_seed alone the pixels and not the order;
- .feedfs/stats counts each view as job="ssl.viewV";
- p=P and solarize in views (issue 36): every file equals feedfs-ref's,
  and a solarize(128, p=0) added last to a view's tail changes no byte
  of any file of its job;
- feedfs.Job.epoch(e, views=True) and feedfs.torch.Loader(views=True) hand
  over the list of views, equal to feedfs-ref's; a Loader's checkpoint
  names the shuffle_seed (a checkpoint without it, of an older feedfs, is
  still taken)."""

import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, fail, log  # noqa: E402

try:
    import numpy as np
    import torch
except ImportError as e:
    fflib.skip("numpy/torch not importable: %s" % e)

N, B, V = 20, 8, 6
GLOBAL = ("decode resize(100) cache random_resized_crop(64, 0.4, 1.0) "
          "flip(0.5) normalize(imagenet)")
LOCAL = "random_resized_crop(32, 0.05, 0.4) flip(0.5) normalize(imagenet)"
AUGTAIL1 = ("random_resized_crop(32) flip(0.5) trivial_augment "
            "normalize(imagenet) random_erasing(0.5)")
AUGTAIL2 = ("random_resized_crop(32) rand_augment(2, 9) "
            "color_jitter(0.4, 0.4, 0.4, 0.1) normalize(imagenet) "
            "random_erasing(1.0)")

# issue 36: p=P and solarize in views, as the README's DINO and BYOL
# write them; an op with p=0 added last changes no byte.
PGLOBAL = ("decode resize(100) cache random_resized_crop(64, 0.4, 1.0) "
           "flip(0.5) color_jitter(0.4, 0.4, 0.2, 0.1, p=0.8) grayscale(0.2) "
           "gaussian_blur(7, 0.1, 2.0) normalize(imagenet)")
PTAIL = ("random_resized_crop(64, 0.4, 1.0) flip(0.5) "
         "color_jitter(0.4, 0.4, 0.2, 0.1, p=0.8) grayscale(0.2) "
         "gaussian_blur(7, 0.1, 2.0, p=0.1)")

t = fflib.Test()
data = t.gen(t.path("data"), n=N, classes=3, seed=4)
cfg = t.config(t.path("feedfs.conf"), data, {
    "ssl": {"epochs": 2, "seed": 5, "batch_size": B, "pipeline": GLOBAL,
            "views": V, "view.2-5": LOCAL},
    "plain": dict(epochs=2, seed=5, batch_size=B, pipeline=GLOBAL),
    "seeds": dict(epochs=2, seed=1, batch_size=B, pipeline=GLOBAL,
                  shuffle_seed=5, aug_seed=5),
    "shuf": dict(epochs=2, seed=5, batch_size=B, pipeline=GLOBAL,
                 shuffle_seed=9),
    "aug": dict(epochs=2, seed=5, batch_size=B, pipeline=GLOBAL,
                aug_seed=9),
    # issue 28's per-sample ops in views' tails (torchvision's order).
    "sslaug": {"epochs": 1, "seed": 3, "batch_size": B, "pipeline": GLOBAL,
               "views": 3, "view.1": AUGTAIL1, "view.2": AUGTAIL2},
    "sslp": {"epochs": 1, "seed": 3, "batch_size": B, "pipeline": PGLOBAL,
             "views": 3,
             "view.1": PTAIL + " solarize(128, p=0.2) normalize(imagenet)",
             "view.2": PTAIL + " solarize(128, p=0) normalize(imagenet)"},
    "sslq": {"epochs": 1, "seed": 3, "batch_size": B, "pipeline": PGLOBAL,
             "views": 3,
             "view.1": PTAIL + " solarize(128, p=0.2) normalize(imagenet)",
             "view.2": PTAIL + " normalize(imagenet)"},
}, threads=2, memory="32M")


def ref(jobname, epoch, outdir, view=0, rank=0, world=1):
    """feedfs-ref's files of (job, epoch, rank view) and of its view."""
    os.makedirs(outdir, exist_ok=True)
    cmd = [fflib.FFREF, "--rank", str(rank), "--world", str(world),
           "--view", str(view), cfg, jobname, str(epoch), outdir]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(r.returncode == 0, "%s: %s" % (" ".join(cmd), r.stderr.decode()))
    return outdir


refs = {}
for e in (0, 1):
    for v in range(V):  # one directory holds every view's files
        refs[e] = ref("ssl", e, t.path("ref", str(e)), view=v)
rank_ref = t.path("ref", "rank")
for v in range(V):
    ref("ssl", 1, rank_ref, view=v, rank=1, world=2)
for j in ("plain", "seeds", "shuf", "aug"):
    refs[j] = t.ref(cfg, j, 0, t.path("ref", j))
for v in range(3):
    refs["sslaug"] = ref("sslaug", 0, t.path("ref", "sslaug"), view=v)
    for j in ("sslp", "sslq"):
        refs[j] = ref(j, 0, t.path("ref", j), view=v)

sys.path.insert(0, os.path.join(fflib.SRCDIR, "python"))
import feedfs  # noqa: E402
import feedfs.torch  # noqa: E402

nb = (N + B - 1) // B


def views_of(d, b):
    return [np.load(os.path.join(d, "batch-%06d%s.npy"
                                 % (b, "" if v == 0 else ".view%d" % v)))
            for v in range(V)]


def read_all(m, threads):
    """Every file of both epochs, as bytes (each read twice, the page
    cache dropped between), equal to feedfs-ref's."""
    got = {}
    for e in (0, 1):
        d = m.p("ssl", "epoch-%04d" % e)
        names = sorted(os.listdir(d))
        check(names == sorted(os.listdir(refs[e])),
              "%s lists %s, feedfs-ref %s" % (d, names,
                                              sorted(os.listdir(refs[e]))))
        for n in names:
            a = fflib.read_file(os.path.join(d, n), drop=True)
            b = fflib.read_file(os.path.join(d, n))
            check(a == b, "%s/%s: two reads differ" % (d, n))
            check(len(a) == os.stat(os.path.join(d, n)).st_size,
                  "%s/%s: read != stat size" % (d, n))
            with open(os.path.join(refs[e], n), "rb") as f:
                check(a == f.read(), "%s/%s differs from feedfs-ref's (threads"
                      " = %d)" % (d, n, threads))
            got[e, n] = a
    log("threads = %d: %d files of 2 epochs equal feedfs-ref's, twice"
        % (threads, len(got)))
    return got


with fflib.Mount(t, cfg, t.path("mnt")) as m:
    info = json.load(open(m.p("ssl", "info.json")))
    check(len(info["views"]) == V, "info.json views: %s" % info["views"])
    for v, iv in enumerate(info["views"]):
        s = 64 if v < 2 else 32
        check(iv["view"] == v and iv["shape"] == [B, 3, s, s] and
              iv["file"] == ("batch-NNNNNN.npy" if v == 0
                             else "batch-NNNNNN.view%d.npy" % v), iv)
        check(iv["pipeline"] == (GLOBAL if v < 2 else
                                 "decode resize(100) cache " + LOCAL), iv)
    check(info["shuffle_seed"] == 5 and info["aug_seed"] == 5, info)
    first = read_all(m, 2)
    # Shapes, and independent draws.
    for e in (0, 1):
        d = m.p("ssl", "epoch-%04d" % e)
        for b in range(nb):
            xs = views_of(d, b)
            n = len(np.load(os.path.join(d, "batch-%06d.ids.npy" % b)))
            for v, x in enumerate(xs):
                s = 64 if v < 2 else 32
                check(x.shape == (n, 3, s, s), "view %d: %s" % (v, x.shape))
            for i in range(n):
                check(not np.array_equal(xs[0][i], xs[1][i]),
                      "epoch %d batch %d sample %d: global views equal"
                      % (e, b, i))
                for v in range(2, V):
                    for w in range(v + 1, V):
                        check(not np.array_equal(xs[v][i], xs[w][i]),
                              "sample %d: views %d and %d equal" % (i, v, w))
    log("views 0-1 at 64, 2-5 at 32; no two views of a sample are equal")
    # A rank view's files of a view.
    d = m.p("ssl", "rank-1-of-2", "epoch-0001")
    for v in range(V):
        n = "batch-000000%s.npy" % ("" if v == 0 else ".view%d" % v)
        with open(os.path.join(rank_ref, n), "rb") as f:
            check(fflib.read_file(os.path.join(d, n)) == f.read(),
                  "rank-1-of-2 %s differs from feedfs-ref's" % n)
    check(not os.path.exists(os.path.join(
        m.p("ssl", "epoch-0000"), "batch-000000.view6.npy")), "view 6")
    check(not os.path.exists(os.path.join(
        m.p("plain", "epoch-0000"), "batch-000000.view1.npy")),
        "a job without views has a view 1")
    # Augmentations and random_erasing in the views' tails: every file
    # equals feedfs-ref's; view 2 erases every sample (p = 1.0): a box of
    # exact zeros that view 1's draws need not have.
    m.read_epoch("sslaug", 0, refs["sslaug"])
    d = m.p("sslaug", "epoch-0000")
    for b in range(nb):
        x2 = np.load(os.path.join(d, "batch-%06d.view2.npy" % b))
        check(x2.shape[1:] == (3, 32, 32), "sslaug view 2: %s" % (x2.shape,))
        for i in range(len(x2)):
            check(np.any(np.all(x2[i] == 0, axis=0)),
                  "sslaug batch %d sample %d: view 2 not erased" % (b, i))
    log("trivial_augment, rand_augment, color_jitter and random_erasing in "
        "views' tails equal feedfs-ref's")
    # p= and solarize (issue 36): every file equals feedfs-ref's; solarize
    # with p=0 as the last pixel op changes nothing (sslp's view 2 is
    # sslq's), while the same job's other files are the same too.
    m.read_epoch("sslp", 0, refs["sslp"])
    m.read_epoch("sslq", 0, refs["sslq"])
    for n in sorted(os.listdir(refs["sslp"])):
        same = fflib.read_file(m.p("sslp", "epoch-0000", n)) == \
            fflib.read_file(m.p("sslq", "epoch-0000", n))
        check(same, "sslp %s differs from sslq's: adding solarize(128, "
              "p=0) changed bytes" % n)
    log("p= and solarize in views equal feedfs-ref's; solarize(128, p=0) "
        "changes no byte")
    # The seeds.
    d0 = m.p("ssl", "epoch-0000")
    for j in ("plain", "seeds"):
        m.read_epoch(j, 0, refs[j])
        for b in range(nb):
            for suffix in (".npy", ".labels.npy", ".ids.npy"):
                n = "batch-%06d%s" % (b, suffix)
                check(first[0, n] == fflib.read_file(m.p(j, "epoch-0000", n)),
                      "%s %s differs from view 0's" % (j, n))
    pix = {}
    for b in range(nb):
        for i, x in zip(np.load(os.path.join(d0, "batch-%06d.ids.npy" % b)),
                        np.load(os.path.join(d0, "batch-%06d.npy" % b))):
            pix[int(i)] = x
    for j in ("shuf", "aug"):
        ids, same = [], 0
        for b in range(nb):
            base = m.p(j, "epoch-0000", "batch-%06d" % b)
            for i, x in zip(np.load(base + ".ids.npy"), np.load(base + ".npy")):
                ids.append(int(i))
                same += np.array_equal(x, pix[int(i)])
        order = [int(i) for b in range(nb) for i in np.load(
            os.path.join(d0, "batch-%06d.ids.npy" % b))]
        if j == "shuf":
            check(ids != order and same == N,
                  "shuffle_seed: order changed %s, %d of %d samples equal"
                  % (ids != order, same, N))
        else:
            check(ids == order and same == 0,
                  "aug_seed: order kept %s, %d of %d samples equal"
                  % (ids == order, same, N))
    log("seed alone = both seeds set to it = view 0; shuffle_seed moves "
        "samples, aug_seed redraws them")
    stats = open(m.p(".feedfs", "stats")).read()
    for v in range(1, V):
        check('job="ssl.view%d"' % v in stats, "stats lack ssl.view%d" % v)

    # The Python package.
    job = feedfs.Job(m.p("ssl"))
    check(job.views == V, "Job.views %d" % job.views)
    for b, (xs, y) in enumerate(job.epoch(1, views=True)):
        check(len(xs) == V, "Job.epoch views=True: %d arrays" % len(xs))
        for v, x in enumerate(xs):
            check(np.array_equal(x, views_of(refs[1], b)[v]),
                  "Job.epoch(1, views=True) batch %d view %d" % (b, v))
    for reuse in (False, True):
        loader = feedfs.torch.Loader(job, epochs=[1, 0], views=True,
                                     reuse_buffers=reuse, device=None)
        for e in (1, 0):
            loader.set_epoch(e)
            for b, (xs, y) in enumerate(loader):
                want = views_of(refs[e], b)
                check(len(xs) == V and all(
                    np.array_equal(x.numpy(), w) for x, w in zip(xs, want)),
                    "Loader views=True epoch %d batch %d" % (e, b))
        for x, y in feedfs.torch.Loader(job, epochs=[0], device=None):
            check(isinstance(x, torch.Tensor) and x.shape[2] == 64,
                  "Loader without views= yields view 0")
    log("Job.epoch and Loader hand over every view")
    # A checkpoint names the job's order: another shuffle_seed is another
    # job; another aug_seed is the same order; a checkpoint of a feedfs
    # without shuffle_seed is taken by its seed.
    st = feedfs.torch.Loader(m.p("plain"), epochs=2).state_dict()
    check(st["job"]["shuffle_seed"] == 5, "fingerprint %s" % st["job"])
    try:
        feedfs.torch.Loader(m.p("shuf"), epochs=2).load_state_dict(st)
        fail("a checkpoint of another shuffle_seed was taken")
    except ValueError as ex:
        check("shuffle_seed" in str(ex), str(ex))
    feedfs.torch.Loader(m.p("aug"), epochs=2).load_state_dict(st)
    del st["job"]["shuffle_seed"]
    feedfs.torch.Loader(m.p("plain"), epochs=2).load_state_dict(st)
    log("Loader checkpoints: shuffle_seed in the fingerprint")

# A remount with one thread serves the same bytes.
with fflib.Mount(t, cfg, t.path("mnt"), "-o", "threads=1") as m:
    again = read_all(m, 1)
    check(again == first, "the remount serves other bytes")
log("PASS")
