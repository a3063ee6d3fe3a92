#!/usr/bin/python3
"""test_text_layouts.py - captions and lists of labels (issue 39) through
the layouts `feedfs PATH MNT` takes without a config (issue 36), set with
-o text= and -o label=, on real mounts:

(a) ROOT with train/ and val/ class trees whose images have sidecars
    (img.txt beside img.jpg), -o text=txt: both jobs serve .text.jsonl,
    each line its image's sidecar, in batch order; the start counts no
    sidecar as a file not served (was: "N files ... are not served: N
    .txt"), and --check lists none as skipped;
(b) a folder of shards without .cls members (label = auto: no labels)
    whose samples have KEY.txt, one without: every caption served, and
    the sample without one is substituted, errors.tsv saying "no .txt
    member" (was: auto took the missing .txt for a missing .cls, kept cls,
    and every sample failed);
(c) one .tar, -o label=json:tags,text=json:caption: .labels.npy holds
    float32 multi-hot rows equal to the lists, the captions the .json's
    field, info.json says multi_label and text;
(d) ROOT with train/ and val/ folders of shards, -o text=txt: both jobs;
(e) -o text=bogus is refused (exit 2) in feedfs's words.
"""

import io
import json
import os
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

OPTS = ("cache_dir=%s,cache_size=0,threads=2,memory=256M,batch_size=4,"
        "on_error=substitute" % t.path("cache"))
CAPS = ['say "cheese"', "tab\there\nnewline", "", "caf\u00e9 \u4e2d\u6587",
        "emoji \U0001F600 \U0001F469\u200d\U0001F4BB", "back\\slash \x01"]


def caption(k):
    return CAPS[k % len(CAPS)] + ("" if k % len(CAPS) == 2 else " #%d" % k)


def mount(src, name, extra):
    return fflib.Mount(t, src, t.path("mnt-" + name), "-o",
                       OPTS + "," + extra)


def samples(m, job):
    """{sample id: (path, samples.tsv's label field)}."""
    out = {}
    with open(m.p(job, "samples.tsv")) as f:
        for line in f:
            r = line.rstrip("\n").split("\t")
            out[int(r[0])] = (r[1], r[2])
    return out


def read_lines(path):
    size = os.stat(path).st_size
    raw = fflib.read_file(path)
    check(size == len(raw), "%s: stat %d bytes, read %d" % (path, size,
                                                          len(raw)))
    return [json.loads(x) for x in raw[:-1].split(b"\n")] if raw else []


def check_text(m, job, want):
    """Every batch of epoch 0: its lines are its ids' captions (want:
    {id: caption}); no id without one.  The ids seen."""
    seen = []
    for b in range(feedfs.Job(m.p(job)).nbatches()):
        base = m.p(job, "epoch-0000", "batch-%06d" % b)
        fflib.read_file(base + ".npy")
        ids = np.load(base + ".ids.npy").tolist()
        got = read_lines(base + ".text.jsonl")
        check(all(want.get(i) is not None for i in ids),
              "%s holds ids without a caption: %s" % (base, ids))
        check(got == [want.get(i) for i in ids],
              "%s: lines %r, want %r" % (base, got,
                                         [want.get(i) for i in ids]))
        seen += ids
    return seen


def member(tf, name, b):
    ti = tarfile.TarInfo(name)
    ti.size = len(b)
    tf.addfile(ti, io.BytesIO(b))


def jpegs(n, seed):
    d = t.gen(t.path("jpegs-%d" % seed), n=n, classes=1, seed=seed)
    c = os.path.join(d, os.listdir(d)[0])
    out = []
    for f in sorted(os.listdir(c)):
        with open(os.path.join(c, f), "rb") as fp:
            out.append(fp.read())
    return out


# ---- (a) ROOT with train/ and val/ class trees, sidecars ------------------
root = t.path("imagenet")
os.makedirs(root)
t.gen(os.path.join(root, "train"), n=14, classes=2, seed=1)
t.gen(os.path.join(root, "val"), n=6, classes=2, seed=2)
side = {}
k = 0
for split in ("train", "val"):
    for dp, _, fs in sorted(os.walk(os.path.join(root, split))):
        for f in sorted(fs):
            p = os.path.join(dp, f)
            with open(p[:-4] + ".txt", "wb") as fp:
                fp.write(caption(k).encode())
            side[p] = caption(k)
            k += 1
with mount(root, "root", "text=txt") as m:
    for job in ("train", "val"):
        inf = json.load(open(m.p(job, "info.json")))
        check(inf["text"] is True, "%s: info.json %r" % (job, inf))
        want = {i: side[os.path.join(root, job, p)]
                for i, (p, _) in samples(m, job).items()}
        seen = check_text(m, job, want)
        check(sorted(set(seen)) == sorted(want), "%s: ids %s" % (job, seen))
    bad = [x for x in m.log().splitlines() if "not served" in x]
    check(not bad, "the start counts the sidecars as not served: %s" % bad)
    log("(a) ROOT train/val, sidecars: %d captions" % len(side))
r = subprocess.run([fflib.FEEDFS, "--check", "-o", OPTS + ",text=txt", root],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
out = r.stdout.decode()
check(r.returncode == 0 and "%s/train: 14 samples" % root in out and
      not any(".txt" in x for x in out.splitlines() if "skipped" in x),
      "--check ROOT, text=txt: exit %d\n%s%s"
      % (r.returncode, out, r.stderr.decode()))

# ---- (b) a folder of shards without .cls, with .txt ------------------------
imgs = jpegs(10, 3)
shd = t.path("shards")
os.makedirs(shd)
capb = {}
for s in range(2):
    with tarfile.open(os.path.join(shd, "c-%d.tar" % s), "w") as tf:
        for k in range(s, len(imgs), 2):
            key = "s_%02d" % k
            member(tf, key + ".jpg", imgs[k])
            if k != 7:
                member(tf, key + ".txt", caption(k).encode())
                capb[key] = caption(k)
with mount(shd, "shards", "text=txt") as m:
    st = samples(m, "train")
    check(len(st) == 10 and all(lab == "-1" for _, lab in st.values()),
          "label = auto without .cls: %s" % st)
    want = {i: capb.get(p.split(":")[1][:-4]) for i, (p, _) in st.items()}
    seen = check_text(m, "train", want)
    check(len(seen) == 10 and
          not [i for i in seen if want[i] is None],
          "the sample without .txt served: %s" % seen)
    err = fflib.read_file(m.p("train", "errors.tsv")).decode()
    check("s_07.jpg" in err and "no .txt member" in err,
          "errors.tsv: %r" % err)
    log("(b) folder of shards, no .cls: 9 captions, s_07 substituted")

# ---- (c) one .tar: lists of labels, captions in the .json ------------------
tags = {}
one = t.path("one.tar")
with tarfile.open(one, "w") as tf:
    for k, b in enumerate(imgs):
        key = "m_%02d" % k
        tags[key] = [] if k == 4 else sorted({k % 5, (k * 3) % 7})
        member(tf, key + ".jpg", b)
        member(tf, key + ".json", json.dumps(
            {"tags": tags[key], "caption": caption(k)}).encode())
with mount(one, "one", "label=json:tags,text=json:caption") as m:
    inf = json.load(open(m.p("train", "info.json")))
    K = 1 + max(max(v) for v in tags.values() if v)
    check(inf["multi_label"] is True and inf["text"] is True and
          inf["num_classes_from"] == "largest_index" and
          len(inf["classes"]) == K, "info.json %r" % inf)
    st = samples(m, "train")
    keys = {i: p.split(":")[1][:-4] for i, (p, _) in st.items()}
    check_text(m, "train", {i: caption(int(k[2:])) for i, k in keys.items()})
    for b in range(feedfs.Job(m.p("train")).nbatches()):
        base = m.p("train", "epoch-0000", "batch-%06d" % b)
        y = np.load(base + ".labels.npy")
        ids = np.load(base + ".ids.npy").tolist()
        want = np.zeros((len(ids), K), np.float32)
        for r_, i in enumerate(ids):
            want[r_, tags[keys[i]]] = 1
        check(y.dtype == np.float32 and np.array_equal(y, want),
              "%s: rows %s, want %s" % (base, y.tolist(), want.tolist()))
    log("(c) one .tar: multi-hot rows of %d classes, captions from .json"
        % K)

# ---- (d) ROOT with train/ and val/ folders of shards -----------------------
wds = t.path("wds")
capd = {}
for split, rng in (("train", range(0, 7)), ("val", range(7, 10))):
    os.makedirs(os.path.join(wds, split))
    with tarfile.open(os.path.join(wds, split, split + "-0.tar"), "w") as tf:
        for k in rng:
            key = "%s_%02d" % (split, k)
            member(tf, key + ".jpg", imgs[k])
            member(tf, key + ".cls", b"%d" % (k % 2))
            member(tf, key + ".txt", caption(k).encode())
            capd[key] = caption(k)
with mount(wds, "wds", "text=txt") as m:
    for job, n in (("train", 7), ("val", 3)):
        st = samples(m, job)
        want = {i: capd[p.split(":")[1][:-4]] for i, (p, _) in st.items()}
        check(len(st) == n, "%s: %d samples" % (job, len(st)))
        check(sorted(set(check_text(m, job, want))) == sorted(want),
              "%s: not every sample seen" % job)
    log("(d) ROOT of shard folders, captions in both jobs")

# ---- (e) a bad -o text= ------------------------------------------------------
os.makedirs(t.path("mnt-bogus"))
r = subprocess.run([fflib.FEEDFS, "-f", "-o", OPTS + ",text=bogus", wds,
                    t.path("mnt-bogus")], stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, timeout=60)
check(r.returncode == 2 and b"expected txt, json:KEY or none" in r.stderr,
      "-o text=bogus: exit %d: %s" % (r.returncode, r.stderr.decode()))
log("ok")
