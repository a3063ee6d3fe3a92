#!/usr/bin/python3
"""test_mixture.py - a job over two weighted sources (issue 14), mounted:

- epoch order: every batch of the whole epoch has the weights' share of
  each source within one sample; the mount's bytes equal feedfs-ref's;
  ids.npy identifies the source (ids [0, 40) are web's, [40, 64)
  curated's) and labels go through the union of the classes (samples.tsv,
  info.json);
- determinism: a second mount with threads=2 serves the same bytes as the
  first with threads=1;
- a weight change (a write of JOB/mixture) takes effect at the next epoch
  not opened yet and not before: epoch 0, read before the write, is
  unchanged; epoch 1 has the new shares and equals feedfs-ref of a job
  whose mixture_schedule pins those weights from epoch 1; reading
  epoch-NNNN/mixture opens that epoch, so a later write skips it;
- rank views of a mixture (world 2 and 3) cover the epoch exactly once
  (DistributedSampler's padding aside), byte for byte as feedfs-ref;
- order = relaxed serves each position of the mixture's order once;
- bad writes (malformed, negative, unknown source, zero sum, non-owner)
  fail with EINVAL (EACCES for another user) and change nothing, and the
  log says why;
- feedfs_source_samples_total counts per source.
"""

import errno
import json
import os
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

try:
    import numpy as np
except ImportError:
    fflib.skip("numpy is missing")

PIPELINE = ("decode resize(40) cache random_resized_crop(32) flip(0.5) "
            "normalize(imagenet)")
NWEB, NCUR, B = 40, 24, 10
N = NWEB + NCUR

t = fflib.Test()
web = t.gen(t.path("web"), n=NWEB, classes=3, seed=1)
cur = t.gen(t.path("curated"), n=NCUR, classes=3, seed=2)
# curated's classes: class001, class002, class009: the union is web's
# class000..class002, then class009 (label 3)
os.rename(os.path.join(cur, "class000"), os.path.join(cur, "class009"))


def config(path, threads):
    common = dict(batch_size=B, epochs=4, seed=11, pipeline=PIPELINE)
    jobs = {
        "mix": dict(mixture="web:0.7 curated:0.3"),
        # what mix serves once web:0.5 curated:0.5 is written after epoch 0
        "pinned": dict(mixture="web:0.7 curated:0.3",
                       mixture_schedule="1:web:0.5,curated:0.5"),
        "rel": dict(mixture="web:0.7 curated:0.3", order="relaxed"),
    }
    lines = ["[mount]", "cache_dir = %s" % t.path("cache"),
             "cache_size = 1G", "threads = %d" % threads, "memory = 128M",
             "readahead = 2", "", "[dataset web]", "root = %s" % web, "",
             "[dataset curated]", "root = %s" % cur]
    for name, keys in jobs.items():
        keys.update(common)
        keys = fflib.job(**keys)
        del keys["dataset"]
        lines += ["", "[job %s]" % name]
        lines += ["%s = %s" % kv for kv in keys.items()]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


cfg1 = config(t.path("one.conf"), 1)
cfg2 = config(t.path("two.conf"), 2)


def ref(job, epoch, rank=0, world=1):
    return t.ref(cfg1, job, epoch,
                 t.path("ref-%s-%d-%d-%d" % (job, epoch, rank, world)),
                 rank=rank, world=world)


def nbatches(world):
    per = -(-N // world)
    return -(-per // B)


def read_epoch(m, job, epoch, rank=0, world=1):
    """{batch file name: bytes} of an epoch (of a rank view)."""
    d = [job] + ([] if world == 1 else ["rank-%d-of-%d" % (rank, world)])
    d = m.p(*d, "epoch-%04d" % epoch)
    out = {}
    for b in range(nbatches(world)):
        for suf in (".npy", ".labels.npy", ".ids.npy"):
            name = "batch-%06d%s" % (b, suf)
            out[name] = fflib.read_file(os.path.join(d, name), drop=True)
    return out


def same_as_ref(files, refdir, what):
    for name, data in files.items():
        with open(os.path.join(refdir, name), "rb") as f:
            check(f.read() == data, "%s: %s differs from feedfs-ref"
                  % (what, name))


def arr(data):
    return np.load(__import__("io").BytesIO(data))


def ids_of(files, world=1):
    return [arr(files["batch-%06d.ids.npy" % b])
            for b in range(nbatches(world))]


def check_shares(files, w_web, what):
    for b, ids in enumerate(ids_of(files)):
        L = len(ids)
        n_web = int((ids < NWEB).sum())
        want = w_web * L
        check(abs(n_web - want) < 1, "%s: batch %d has %d of %d from web, "
              "wanted %.1f" % (what, b, n_web, L, want))
        check(((ids >= 0) & (ids < N)).all(), "%s: ids out of range" % what)


def read_text(path):
    with open(path) as f:
        return f.read()


def write_mixture(path, line):
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def expect_errno(want, fn, what):
    try:
        fn()
    except OSError as e:
        check(e.errno in want, "%s: errno %d (%s), wanted %s"
              % (what, e.errno, e.strerror, want))
        return
    fflib.fail("%s succeeded" % what)


with fflib.Mount(t, cfg1, t.path("m1")) as m:
    check(" rw," in " " + [l for l in open("/proc/self/mounts")
                           if m.mnt in l][0].split()[3] + ",",
          "a mount with a mixture is not read-write")
    info = json.loads(read_text(m.p("mix", "info.json")))
    check(info["classes"] == ["class000", "class001", "class002",
                              "class009"], "classes: %s" % info["classes"])
    check(info["class_sources"] == [["web"], ["web", "curated"],
                                    ["web", "curated"], ["curated"]],
          "class_sources: %s" % info["class_sources"])
    check([(s["name"], s["first_id"], s["samples"]) for s in info["sources"]]
          == [("web", 0, NWEB), ("curated", NWEB, NCUR)],
          "sources: %s" % info["sources"])
    check(info["epoch_samples"] == N, "epoch_samples %s" % info)
    tsv = [l.split("\t") for l in read_text(m.p("mix", "samples.tsv"))
           .splitlines()]
    check(len(tsv) == N, "samples.tsv has %d lines" % len(tsv))
    label = {int(r[0]): int(r[2]) for r in tsv}
    check(all(r[3] == ("web" if int(r[0]) < NWEB else "curated")
              for r in tsv), "samples.tsv: wrong source column")
    check(tsv[NWEB][1].startswith("class001/") and label[NWEB] == 1,
          "curated's first sample: %s" % tsv[NWEB])
    check(sorted(os.listdir(m.p("mix")))[:3] == ["epoch-0000", "epoch-0001",
                                                 "epoch-0002"]
          and "mixture" in os.listdir(m.p("mix"))
          and "mixture" in os.listdir(m.p("mix", "epoch-0000")),
          "mixture files are not listed")
    st = os.stat(m.p("mix", "mixture"))
    check(st.st_mode & 0o777 == 0o644, "JOB/mixture mode %o" % st.st_mode)
    check(os.stat(m.p("mix", "epoch-0000", "mixture")).st_mode & 0o777
          == 0o444, "epoch-NNNN/mixture is not read-only")

    # ---- epoch 0: shares, ref, labels --------------------------------------
    check(read_text(m.p("mix", "mixture")) == "web:0.7 curated:0.3\n",
          "JOB/mixture reads %r" % read_text(m.p("mix", "mixture")))
    e0 = read_epoch(m, "mix", 0)
    same_as_ref(e0, ref("mix", 0), "mix epoch 0")
    check_shares(e0, 0.7, "epoch 0")
    for b in range(nbatches(1)):
        ids = arr(e0["batch-%06d.ids.npy" % b])
        lab = arr(e0["batch-%06d.labels.npy" % b])
        check(all(lab[i] == label[int(x)] for i, x in enumerate(ids)),
              "batch %d: labels disagree with samples.tsv" % b)
    log("epoch 0: shares 0.7/0.3 in each batch, bytes equal feedfs-ref")

    # ---- bad writes change nothing -----------------------------------------
    mix = m.p("mix", "mixture")
    for line in ("web=0.5 curated=0.5\n", "web:-0.5 curated:1\n",
                 "web:0.5 other:0.5\n", "web:0 curated:0\n", "web:x\n",
                 "web:0.5 web:0.5\n", "\n"):
        expect_errno((errno.EINVAL,), lambda: write_mixture(mix, line),
                     "writing %r" % line)
        check(read_text(mix) == "web:0.7 curated:0.3\n",
              "a bad write %r changed the weights" % line)
    check("refused: unknown source 'other'" in m.log(),
          "the log does not say why a write was refused:\n" + m.log())
    expect_errno((errno.EROFS,), lambda: os.open(
        m.p("mix", "epoch-0000", "mixture"), os.O_WRONLY),
        "opening epoch-0000/mixture for writing")
    expect_errno((errno.EROFS,), lambda: os.open(
        m.p("mix", "info.json"), os.O_WRONLY), "opening info.json to write")
    if os.getuid() == 0:
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                os.setresgid(65534, 65534, 65534)
                os.setresuid(65534, 65534, 65534)
                write_mixture(mix, "web:0.1 curated:0.9\n")
                code = 1
            except OSError as e:
                code = 0 if e.errno in (errno.EACCES, errno.EPERM) else 2
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        check(os.WEXITSTATUS(status) == 0,
              "a write by uid 65534 was not refused with EACCES/EPERM "
              "(child status %d)" % os.WEXITSTATUS(status))
        check(read_text(mix) == "web:0.7 curated:0.3\n",
              "a non-owner's write changed the weights")
        log("bad writes: EINVAL, non-owner EACCES/EPERM, nothing changed")
    else:
        log("bad writes: EINVAL, nothing changed (not root: the "
            "non-owner case is not run)")

    # ---- a change takes effect at the next unopened epoch ------------------
    write_mixture(mix, "web:0.5 curated:0.5\n")
    check(read_text(mix) == "web:0.5 curated:0.5\n", "the write did not "
          "take: %r" % read_text(mix))
    check(read_text(m.p("mix", "epoch-0000", "mixture"))
          == "web:0.7 curated:0.3\n", "epoch 0's weights changed")
    check(read_epoch(m, "mix", 0) == e0, "epoch 0 changed after the write")
    e1 = read_epoch(m, "mix", 1)
    check_shares(e1, 0.5, "epoch 1 after the write")
    same_as_ref(e1, ref("pinned", 1), "mix epoch 1 after the write")
    check(read_text(m.p("mix", "epoch-0001", "mixture"))
          == "web:0.5 curated:0.5\n", "epoch 1's weights")
    # reading epoch 2's weights opens it: a write now starts at epoch 3
    check(read_text(m.p("mix", "epoch-0002", "mixture"))
          == "web:0.5 curated:0.5\n", "epoch 2's weights")
    write_mixture(mix, "web:1 curated:0\n")
    check(read_text(m.p("mix", "epoch-0002", "mixture"))
          == "web:0.5 curated:0.5\n", "epoch 2 changed after it was opened")
    check(read_text(m.p("mix", "epoch-0003", "mixture"))
          == "web:1 curated:0\n", "epoch 3 did not get the new weights")
    e3 = read_epoch(m, "mix", 3)
    check(all((ids < NWEB).all() for ids in ids_of(e3)),
          "epoch 3 (web:1 curated:0) has curated samples")
    log("a write takes effect at the next unopened epoch, not before")

    # ---- rank views cover the epoch once -----------------------------------
    order = np.concatenate(ids_of(read_epoch(m, "pinned", 1)))
    for world in (2, 3):
        views = []
        for rank in range(world):
            f = read_epoch(m, "pinned", 1, rank, world)
            same_as_ref(f, ref("pinned", 1, rank, world),
                        "rank %d of %d" % (rank, world))
            views.append(np.concatenate(ids_of(f, world)))
        per = -(-N // world)
        padded = np.concatenate([order, order[:per * world - N]])
        for rank in range(world):
            check((views[rank] == padded[rank::world]).all(),
                  "rank %d of %d: not positions R, R+W, ..." % (rank, world))
        got = sorted(np.concatenate(views)[:].tolist())
        check(got == sorted(padded.tolist()),
              "ranks of %d do not cover the epoch once" % world)
    log("rank views of 2 and 3 cover the epoch once, equal feedfs-ref")

    # ---- relaxed order ------------------------------------------------------
    r0 = read_epoch(m, "rel", 0)
    want = np.concatenate(ids_of(read_epoch(m, "mix", 0)))
    check(sorted(np.concatenate(ids_of(r0)).tolist())
          == sorted(want.tolist()),
          "relaxed: the epoch's samples differ from the strict order's")
    log("order = relaxed: each position of the mixture's order served once")

    stats = read_text(m.p(".feedfs", "stats"))
    check('feedfs_source_samples_total{job="mix",source="curated"}' in stats,
          "no per-source counter in stats")
    nweb = [float(l.split()[-1]) for l in stats.splitlines() if l.startswith(
        'feedfs_source_samples_total{job="mix",source="web"}')]
    check(nweb and nweb[0] > 0, "web's samples are not counted")

# ---- determinism: remount, two threads -------------------------------------
with fflib.Mount(t, cfg2, t.path("m2")) as m:
    check(read_epoch(m, "mix", 0) == e0,
          "epoch 0 differs across remounts and thread counts")
    # no write in this mount: epoch 1 has the config's weights
    e1b = read_epoch(m, "mix", 1)
    same_as_ref(e1b, ref("mix", 1), "epoch 1 of a fresh mount")
    check_shares(e1b, 0.7, "epoch 1 of a fresh mount")
    check(read_epoch(m, "pinned", 1) == read_epoch(m, "pinned", 1),
          "rereads differ")
    log("remount with threads=2: the same bytes; weights are per mount")
sys.exit(0)
