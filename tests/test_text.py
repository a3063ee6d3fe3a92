#!/usr/bin/python3
"""test_text.py - captions (text = txt | json:KEY, issue 39) through every
feature that moves samples, on a real mount.

Captions hold quotes, tabs, newlines, a carriage return, a backslash, a
control byte, a NUL, non-ASCII (Latin, CJK, Arabic), emoji (4-byte, a ZWJ
sequence), U+2028 and U+2029 (which str.splitlines would split at), and
the empty string.  They come from a tar shard's KEY.txt, an ImageFolder's
sidecar (img.txt beside img.jpg) and a manifest's third column.  One
sample of the shards has no .txt, one a .txt that is not UTF-8; of the
folder, one image has no sidecar, one a sidecar that is not UTF-8, and
(as root) one a sidecar that is another user's symbolic link to a file
that user may not read: each is a sample error (on_error); a sidecar
that is root's link out of the root is followed, its caption served.

For every job below, every batch's .text.jsonl is one JSON string a line
whose lines equal the captions of the batch's .ids.npy, in its order, and
its size at stat time equals the bytes read:

- strict (on_error = fail): the file from the plan; a batch holding a
  sample without a caption fails (EIO), and errors.tsv says why (no .txt
  member, not valid UTF-8);
- subst (on_error = substitute): the substitute's caption; every file of
  an epoch (its listing, .text.jsonl included) equal to feedfs-ref's, as
  a mixture's;
- relaxed (order = relaxed): a batch's content as chosen, the size of its
  text stat'ed before any read of the batch;
- rank views (rank-R-of-2 of strict and subst);
- views (views = 2): one text file per batch, for every view;
- mix: a mixture of two captioned shard sets;
- folder (sidecars), man (manifest);
- the cache: a job over the same shards without text hits every prefix
  the captioned job stored (the caption is in no key), and its image
  bytes equal the captioned job's;
- a listing of a relaxed epoch makes no batch (its text's size would);
- a remount reads the kept shard index, captions included; one kept in
  format 3 (no .txt text: the remote shards' digests before captions)
  is indexed again, the captions served as before, format 4 kept;
- feedfs --check names each sample without a caption and why, and does
  not list the sidecars as skipped files;
- Python: Job.epoch yields (x, y, text) (and ids after them), a job
  without text (x, y); feedfs.torch.Loader the same, through a resume
  mid-epoch and an elastic resume from 2 ranks to 1.
"""

import glob
import hashlib
import io
import json
import os
import struct
import subprocess
import sys
import tarfile

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

try:
    import numpy as np
except ImportError:
    fflib.skip("numpy is missing")

t = fflib.Test()
sys.path.insert(0, os.path.join(fflib.SRCDIR, "python"))
import feedfs  # noqa: E402

CAPS = [
    'a "quoted" caption',
    "tab\there, a newline\nthen more",
    "",
    "caf\u00e9 \u4e2d\u6587 \u0645\u0631\u062d\u0628\u0627",
    "emoji \U0001F600\U0001F680 and a ZWJ \U0001F469\u200d\U0001F4BB",
    "back\\slash / \r carriage \x01 control",
    "line sep \u2028 para sep \u2029 end",
    "nul \x00 inside",
    ' {"json": [1, 2]} ',
]
NOTXT, BADUTF = 7, 13  # shard samples without a usable .txt
B = 8


def caption(k):
    c = CAPS[k % len(CAPS)]
    return c if c == "" else "%s #%d" % (c, k)


def images(data):
    """data's images, (class index, path), sorted."""
    out = []
    for ci, c in enumerate(sorted(os.listdir(data))):
        for f in sorted(os.listdir(os.path.join(data, c))):
            if f.endswith(".jpg"):
                out.append((ci, os.path.join(data, c, f)))
    return out


def member(tf, name, b):
    ti = tarfile.TarInfo(name)
    ti.size = len(b)
    tf.addfile(ti, io.BytesIO(b))


def shards(files, out, prefix, nshards, cap, skip=()):
    """files in nshards shards under out: KEY.jpg, KEY.cls, KEY.txt (none
    for k in skip; NOTXT's missing and BADUTF's not UTF-8 when cap is
    caption).  {member key: caption}."""
    os.makedirs(out)
    keys = {}
    for s in range(nshards):
        with tarfile.open(os.path.join(out, "%s-%d.tar" % (prefix, s)),
                          "w", format=tarfile.GNU_FORMAT) as tf:
            for k in range(s, len(files), nshards):
                lab, p = files[k]
                key = "%s_%03d" % (prefix, k)
                tf.add(p, arcname=key + ".jpg")
                member(tf, key + ".cls", b"%d" % lab)
                if k in skip:
                    continue
                if cap is caption and k == BADUTF:
                    member(tf, key + ".txt", b"bad \xff\xfe utf-8")
                    continue
                member(tf, key + ".txt", cap(k).encode())
                keys[key] = cap(k)
    return keys


data = t.gen(t.path("data"), n=40, classes=2, seed=39)
files = images(data)
capa = shards(files, t.path("a"), "a", 2, caption, skip=(NOTXT,))
data2 = t.gen(t.path("data2"), n=12, classes=2, seed=40)
capb = shards(images(data2), t.path("b"), "b", 1,
              lambda k: "second set \u00fc #%d" % k)

# The folder's sidecars: the same captions; one missing, one not UTF-8;
# one a link out of the root (made by root: followed, as a Hugging Face
# snapshot's NAME.txt -> ../../blobs/HASH is), and, as root, one a link
# by another user (nobody) to a file that user may not read: refused
# (ds_guard.c), never read for them.
GUARDED = os.geteuid() == 0
capf = {}
for k, (lab, p) in enumerate(files):
    rel = os.path.relpath(p, data)
    side = p[:-4] + ".txt"
    if k == 3:
        continue
    if k == 5:
        with open(t.path("elsewhere.txt"), "w") as f:
            f.write("followed: a link out of the root #5")
        os.symlink(t.path("elsewhere.txt"), side)
        capf[rel] = "followed: a link out of the root #5"
        continue
    if k == 7 and GUARDED:
        with open(t.path("secret.txt"), "w") as f:
            f.write("root's only")
        os.chmod(t.path("secret.txt"), 0o600)
        os.symlink(t.path("secret.txt"), side)
        os.lchown(side, 65534, 65534)
        continue
    if k == 11:
        with open(side, "wb") as f:
            f.write(b"\xc3\x28 bad")
        continue
    with open(side, "wb") as f:
        f.write(caption(k).encode())
    capf[rel] = caption(k)

# The manifest's third column: no newline in a line (the rest kept).
capm = {}
with open(t.path("list.tsv"), "wb") as f:
    for k, (lab, p) in enumerate(files):
        rel = os.path.relpath(p, data)
        if k == 9:
            f.write(("%s\t%d\n" % (rel, lab)).encode())  # no caption
            continue
        c = caption(k).replace("\n", " ").replace("\r", " ")
        f.write(("%s\t%d\t%s\n" % (rel, lab, c)).encode())
        capm[rel] = c

PIPE = "decode resize(24) cache center_crop(16)"
JOBS = {
    "strict": dict(dataset="sh"),
    "subst": dict(dataset="sh", on_error="substitute"),
    "relaxed": dict(dataset="sh", on_error="substitute", order="relaxed"),
    "views": dict(dataset="sh", on_error="substitute", views=2,
                  **{"view.1": "center_crop(16) flip(1.0)"}),
    "mix": dict(mixture="sh:0.5 sh2:0.5", on_error="substitute"),
    "folder": dict(dataset="fo", on_error="substitute"),
    "man": dict(dataset="ma", on_error="substitute"),
    "plain": dict(dataset="pl", epochs=1),  # no readahead past epoch 0
}
lines = ["[mount]", "cache_dir = %s" % t.path("cache"), "cache_size = 1G",
         "threads = 2", "memory = 128M", "readahead = 2", "",
         "[dataset sh]", "shards = %s/*.tar" % t.path("a"), "text = txt", "",
         "[dataset sh2]", "shards = %s/*.tar" % t.path("b"), "text = txt",
         "", "[dataset pl]", "shards = %s/*.tar" % t.path("a"), "",
         "[dataset fo]", "root = %s" % data, "text = txt", "",
         "[dataset ma]", "root = %s" % data,
         "manifest = %s" % t.path("list.tsv"), "text = txt"]
for name, keys in JOBS.items():
    j = dict(dataset=None, batch_size=B, epochs=2, seed=5, shuffle="yes",
             pipeline=PIPE, dtype="float32", layout="CHW",
             on_error="fail", order="strict")
    j.update(keys)
    if j["dataset"] is None:
        del j["dataset"]
    lines += ["", "[job %s]" % name] + ["%s = %s" % kv for kv in j.items()]
cfg = t.path("text.conf")
with open(cfg, "w") as f:
    f.write("\n".join(lines) + "\n")


def read_lines(path):
    """The lines of a .text.jsonl, each parsed; its stat size checked
    against the bytes read first."""
    size = os.stat(path).st_size
    raw = fflib.read_file(path)
    check(size == len(raw), "%s: stat says %d bytes, read gives %d"
          % (path, size, len(raw)))
    check(raw == b"" or raw.endswith(b"\n"), "%s: no newline at its end"
          % path)
    out = [json.loads(x) for x in raw[:-1].split(b"\n")] if raw else []
    check(all(isinstance(x, str) for x in out), "%s: not strings" % path)
    return out, raw


def want_of(m, job):
    """{sample id: the caption the job serves for it} (None: it has none)."""
    with open(m.p(job, "samples.tsv")) as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    out = {}
    for r in rows:
        sid, path = int(r[0]), r[1].replace("\\t", "\t").replace(
            "\\\\", "\\")
        if ":" in path:
            key = path.split(":", 1)[1].rsplit(".", 1)[0]
            src = capb if key.startswith("b_") else capa
            out[sid] = src.get(key)
        elif job == "folder":
            out[sid] = capf.get(path)
        else:
            out[sid] = capm.get(path)
    return out


def check_epoch(m, job, e, want, rank=0, world=1, fails=False):
    """Every batch of (job, e, rank view): its text lines are its ids'
    captions.  With fails (on_error = fail), a batch holding a sample
    without one fails; else no batch holds one.  The ids seen."""
    d = m.p(job, "epoch-%04d" % e) if world == 1 else \
        m.p(job, "rank-%d-of-%d" % (rank, world), "epoch-%04d" % e)
    seen = []
    nb = feedfs.Job(m.p(job)).nbatches(world)
    for b in range(nb):
        base = os.path.join(d, "batch-%06d" % b)
        got, _ = read_lines(base + ".text.jsonl")
        ids = np.load(base + ".ids.npy").tolist()
        bad = [i for i in ids if want[i] is None]
        exp = [want[i] if want[i] is not None else "" for i in ids]
        check(got == exp, "%s: lines %r, the captions of ids %s: %r"
              % (base, got, ids, exp))
        if fails and bad:
            try:
                fflib.read_file(base + ".npy")
                fflib.fail("%s holds %s (no caption) and was read"
                           % (base, bad))
            except OSError as ex:
                check(ex.errno == 5, "%s: %s, not EIO" % (base, ex))
        else:
            check(not bad, "%s holds samples %s without a caption"
                  % (base, bad))
            fflib.read_file(base + ".npy")
        seen += ids
    return seen


with fflib.Mount(t, cfg, t.path("mnt")) as m:
    wants = {j: want_of(m, j) for j in JOBS if j != "plain"}
    info = json.load(open(m.p("strict", "info.json")))
    check(info["text"] is True and info["multi_label"] is False and
          info["text_file"] == "batch-NNNNNN.text.jsonl",
          "info.json of a captioned job: %r" % info)
    check(json.load(open(m.p("plain", "info.json")))["text"] is False,
          "a job without text says text: true")
    check(not any(n.endswith(".text.jsonl")
                  for n in os.listdir(m.p("plain", "epoch-0000"))),
          "a job without text lists .text.jsonl files")

    # The cache: the captioned job's prefixes serve the plain job, whose
    # only misses are the samples that fail in the captioned one.
    check_epoch(m, "subst", 0, wants["subst"])
    m0 = m.job_stat("feedfs_cache_misses_total", "plain")
    pl = [fflib.read_file(m.p("plain", "epoch-0000", "batch-%06d.npy" % b))
          for b in range(5)]
    missed = m.job_stat("feedfs_cache_misses_total", "plain") - m0
    check(missed == 2, "the job without text missed %d prefixes, not 2 "
          "(the captioned job's two samples without a caption)" % missed)

    # Every file of an epoch as feedfs-ref makes it (job_batch_text):
    # the listing, images, labels, ids and captions.
    m.read_epoch("subst", 1, ref=t.ref(cfg, "subst", 1, t.path("ref-s")))
    ref = t.ref(cfg, "mix", 1, t.path("ref-mix"))  # (lists "mixture" too)
    for n in sorted(os.listdir(ref)):
        with open(os.path.join(ref, n), "rb") as f:
            check(fflib.read_file(m.p("mix", "epoch-0001", n)) == f.read(),
                  "mix/epoch-0001/%s differs from feedfs-ref's" % n)

    # strict: from the plan; failing batches.
    for b in range(5):
        # the image bytes of a batch without a bad sample are the plain
        # job's: the caption is in no cached value either
        ids = np.load(m.p("strict", "epoch-0000", "batch-%06d.ids.npy" % b))
        if not any(wants["strict"][i] is None for i in ids.tolist()):
            check(fflib.read_file(m.p("strict", "epoch-0000",
                                      "batch-%06d.npy" % b)) == pl[b],
                  "strict batch %d's images differ from plain's" % b)
    for e in range(2):
        check_epoch(m, "strict", e, wants["strict"], fails=True)
    with open(m.p("strict", "errors.tsv")) as f:
        errs = f.read()
    check("no .txt member (text = txt)" in errs and
          "the .txt member is not valid UTF-8" in errs,
          "errors.tsv does not say why the captions failed:\n%s" % errs)

    # substitute, rank views
    check_epoch(m, "subst", 1, wants["subst"])
    for job, fails in (("strict", True), ("subst", False)):
        for r in range(2):
            check_epoch(m, job, 1, wants[job], rank=r, world=2, fails=fails)

    # relaxed: a listing makes no batch; a stat does, and tells the size
    # read; then every batch.
    made = m.job_stat("feedfs_batches_total", "relaxed")
    names = os.listdir(m.p("relaxed", "epoch-0001"))
    check("batch-000003.text.jsonl" in names, "relaxed lists no text")
    check(m.job_stat("feedfs_batches_total", "relaxed") == made,
          "a listing of a relaxed epoch made batches")
    st = os.stat(m.p("relaxed", "epoch-0001", "batch-000003.text.jsonl"))
    check(m.job_stat("feedfs_batches_total", "relaxed") > made,
          "a stat of a relaxed batch's text made no batch")
    got, raw = read_lines(m.p("relaxed", "epoch-0001",
                              "batch-000003.text.jsonl"))
    check(st.st_size == len(raw), "relaxed: stat before any read says %d, "
          "the read %d" % (st.st_size, len(raw)))
    for e in range(2):
        seen = check_epoch(m, "relaxed", e, wants["relaxed"])
        check(len(seen) == 40, "relaxed epoch %d: %d samples" % (e,
                                                                  len(seen)))

    # views: one text per batch, the same for every view
    check_epoch(m, "views", 0, wants["views"])
    for b, (xs, y, text, ids) in enumerate(
            feedfs.Job(m.p("views")).epoch(0, views=True, ids=True)):
        check(len(xs) == 2 and text == [wants["views"][i] for i in ids],
              "views batch %d: Job.epoch(views=True) text" % b)

    # mixture, folder sidecars, manifest
    for job in ("mix", "folder", "man"):
        for e in range(2):
            check_epoch(m, job, e, wants[job])
    mixw = wants["mix"]
    check(any(v is not None and v.startswith("second set") for v in
              mixw.values()), "the mixture's second source has no caption")
    with open(m.p("folder", "errors.tsv")) as f:
        errs = f.read()
    for why in ("no caption: its .txt sidecar is missing",
                "its .txt sidecar is not valid UTF-8") + \
            (("its .txt sidecar is a symbolic link to a file the link's "
              "owner may not read (not followed)",) if GUARDED else ()):
        check(why in errs, "folder errors.tsv lacks %r:\n%s" % (why, errs))
    check("root's only" not in errs and "#5" not in errs,
          "folder errors.tsv:\n%s" % errs)
    with open(m.p("man", "errors.tsv")) as f:
        errs = f.read()
    check("its manifest line has no third column" in errs,
          "man errors.tsv:\n%s" % errs)

    # Python: Job.epoch and the Loader
    job = feedfs.Job(m.p("subst"))
    check(job.text and not feedfs.Job(m.p("plain")).text, "Job.text")
    for b, got in enumerate(job.epoch(1)):
        check(len(got) == 3, "Job.epoch of a job with text yields %d items"
              % len(got))
        x, y, text = got
        check(isinstance(text, list) and len(text) == len(y),
              "batch %d: text %r" % (b, text))
    for x, y, text, ids in job.epoch(1, ids=True):
        check(text == [wants["subst"][i] for i in ids.tolist()],
              "Job.epoch(ids=True): text is not the ids' captions")
    for got in feedfs.Job(m.p("plain")).epoch(0):
        check(len(got) == 2, "a job without text yields %d items"
              % len(got))
    try:
        import torch  # noqa: F401
        import feedfs.torch as ft
    except ImportError:
        ft = None
        log("torch is missing: the Loader's part is not run")
    if ft is not None:
        ld = ft.Loader(job, epochs=[0, 1], ids=True)
        whole = [(t_, i.tolist()) for _, _, t_, i in ld]
        for text, ids in whole:
            check(text == [wants["subst"][i] for i in ids],
                  "Loader: text is not the ids' captions")
        # a resume mid-epoch yields the rest, captions included
        ld = ft.Loader(job, epochs=[0, 1], ids=True)
        it = iter(ld)
        first = [next(it)[2] for _ in range(2)]
        state = ld.state_dict()
        del it
        ld2 = ft.Loader(job, epochs=[0, 1], ids=True)
        ld2.load_state_dict(state)
        rest = [(t_, i.tolist()) for _, _, t_, i in ld2]
        check(first == [w[0] for w in whole[:2]] and rest == whole[2:5],
              "Loader resume: captions differ from an uninterrupted run")
        for x, y, text in ft.Loader(job, epochs=[0]):
            check(len(text) == len(y), "Loader without ids")
        # elastic: 2 ranks stopped after a batch, resumed by 1
        l2 = ft.Loader(job, epochs=[0], rank=0, world=2, ids=True)
        it = iter(l2)
        next(it)
        state = l2.state_dict()
        del it
        l1 = ft.Loader(job, epochs=[0], ids=True)
        l1.load_state_dict(state)
        n = 0
        for x, y, text, ids in l1:
            check(text == [wants["subst"][i] for i in ids.tolist()],
                  "elastic resume: text is not the ids' captions")
            n += len(ids)
        check(n > 0, "the elastic resume yielded nothing")

# feedfs --check names every sample without a caption, in every kind of
# dataset, with the reason a read gives.
r = subprocess.run([fflib.FEEDFS, "--check", cfg], stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT, timeout=300)
out = r.stdout.decode(errors="replace")
for why in ("no .txt member (text = txt)", "the .txt member is not valid "
            "UTF-8", "no caption: its .txt sidecar is missing",
            "no caption: its manifest line has no third column") + \
        (("its .txt sidecar is a symbolic link to a file the link's owner "
          "may not read (not followed)",) if GUARDED else ()):
    check(why in out, "--check does not say %r:\n%s" % (why, out[-3000:]))
check("not .txt" not in out, "--check lists the folder's sidecars as "
      "skipped files:\n%s" % out[-3000:])

# A remount reads the kept index (FFTARIX4): captions as before.
with fflib.Mount(t, cfg, t.path("mnt")) as m:
    check_epoch(m, "subst", 0, wants["subst"])


def index_v3(path):
    """The kept index at path rewritten as format 3 would have kept it
    (ds_tar_index.c): magic FFTARIX3, no .txt member's text, its SHA-256
    made right."""
    d = open(path, "rb").read()
    out, p = bytearray(b"FFTARIX3" + d[8:16]), 16
    nl = struct.unpack_from("<I", d, 12)[0]
    p += nl + 56 + 12
    n = struct.unpack_from("<Q", d, p)[0]
    out += d[16:p + 8]
    p += 8
    for _ in range(n):
        nl = struct.unpack_from("<I", d, p)[0]
        name = d[p + 4:p + 4 + nl]
        out += d[p:p + 4 + nl + 17]
        p += 4 + nl + 17
        dl = struct.unpack_from("<I", d, p)[0]
        p += 4
        if dl != 0xFFFFFFFF:
            text, p = d[p:p + dl], p + dl
        if dl == 0xFFFFFFFF or name.endswith(b".txt"):
            out += struct.pack("<I", 0xFFFFFFFF)
        else:
            out += struct.pack("<I", dl) + text
        rl = struct.unpack_from("<I", d, p)[0]
        out += d[p:p + 4 + rl]
        p += 4 + rl
    check(p == len(d) - 32, "%s: not a kept index of format 4" % path)
    with open(path, "wb") as f:
        f.write(bytes(out) + hashlib.sha256(bytes(out)).digest())


# An index kept by a feedfs of format 3 (the remote shards' digests,
# before captions: no .txt member's text) is indexed again, never read
# as shards without captions: a remount serves them as before and keeps
# format 4.
kept = glob.glob(t.path("cache", "shard-index", "*.idx"))
check(len(kept) >= 2, "kept indexes: %s" % kept)
for k in kept:
    index_v3(k)
with fflib.Mount(t, cfg, t.path("mnt")) as m:
    check_epoch(m, "subst", 0, wants["subst"])
for k in kept:
    with open(k, "rb") as f:
        check(f.read(8) == b"FFTARIX4", "%s is not kept again" % k)
log("ok")
