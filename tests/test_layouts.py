#!/usr/bin/python3
"""test_layouts.py - `feedfs PATH MNT` without a config, for each way
people lay datasets out (issue 36 §2), through real mounts:

(a) torchvision's ImageNet layout, ROOT with train/ and val/: job train
    from train/ (its classes, not "train" and "val"), job val from val/,
    whose class folders (a subset of train's here) are labelled by name as
    train's are; the start says where each job reads;
(b) ROOT/train given: val from the val/ beside it, said at the start;
(c) ROOT/train whose val/ has a class train has not: no val job, one line
    that says so and why;
(d) a class tree with no val/ beside it: no val job, one line; -o
    val.epochs=2 is refused (no job val), never a val over training
    images;
(e) a folder of WebDataset .tar shards: served as shards (was: parsed as
    a config, "a NUL byte in the line"), labels from .cls, no val job
    (said); (f) one .tar given: the same; (g) shards without .cls
    members: no labels (-1); (h) ROOT with train/ and val/ folders of
    shards: both jobs.
--check on (a) reports both jobs' datasets.
"""

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

try:
    import numpy as np
except ImportError as e:
    fflib.skip("numpy not importable: %s" % e)

t = fflib.Test()
OPTS = "cache_dir=%s,cache_size=0,threads=2,memory=256M,batch_size=4" % (
    t.path("cache"))


def samples(m, job):
    with open(m.p(job, "samples.tsv")) as f:
        return [(x.split("\t")[1], int(x.split("\t")[2]))
                for x in f.read().splitlines()]


def info(m, job):
    with open(m.p(job, "info.json")) as f:
        return json.load(f)


def start_lines(m):
    return [x for x in m.log().splitlines() if x.startswith("feedfs:")]


def mount(src, name):
    return fflib.Mount(t, src, t.path("mnt-" + name), "-o", OPTS)


def jobs(m):
    return sorted(x for x in os.listdir(m.mnt) if not x.startswith(".")
                  and x != "README")


# ---- (a) ROOT with train/ and val/ ----------------------------------------
root = t.path("imagenet")
os.makedirs(root)
t.gen(os.path.join(root, "train"), n=30, classes=3, seed=1)
t.gen(os.path.join(root, "val"), n=9, classes=3, seed=2)
classes = sorted(os.listdir(os.path.join(root, "train")))
# val/ without its middle class: labels go by name, as train's.
shutil.rmtree(os.path.join(root, "val", classes[1]))
with mount(root, "root") as m:
    check(jobs(m) == ["train", "val"], "jobs %s" % jobs(m))
    tr, va = info(m, "train"), info(m, "val")
    check(tr["classes"] == classes, "train's classes %s, want %s (the "
          "class folders of train/)" % (tr["classes"], classes))
    check(va["classes"] == classes, "val's classes %s" % va["classes"])
    st, sv = samples(m, "train"), samples(m, "val")
    check(len(st) == 30 and len(sv) == 6, "train %d, val %d samples"
          % (len(st), len(sv)))
    for path, label in st + sv:
        check(path.split("/")[0] == classes[label],
              "%s labelled %d (%s)" % (path, label, classes[label]))
    said = start_lines(m)
    check(any("job train from %s/train" % root in x and
              "job val from %s/val" % root in x for x in said),
          "the start did not say where the jobs read:\n%s" % "\n".join(said))
    x, y, _ = m.load_epoch("val")
    check(sorted(y.tolist()) == sorted(l for _, l in sv),
          "val labels %s" % y.tolist())
    log("(a) " + [x for x in said if "job train from" in x][0])
r = subprocess.run([fflib.FEEDFS, "--check", "-o", OPTS, root],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
out = r.stdout.decode()
check("%s/train: 30 samples, 3 classes" % root in out and
      "%s/val: 6 samples, 3 classes" % root in out,
      "--check ROOT:\n%s%s" % (out, r.stderr.decode()))

# ---- (b) ROOT/train: val from the val/ beside it --------------------------
with mount(os.path.join(root, "train"), "train") as m:
    check(jobs(m) == ["train", "val"], "jobs %s" % jobs(m))
    check(len(samples(m, "val")) == 6, "val %d samples"
          % len(samples(m, "val")))
    said = start_lines(m)
    check(any("job val from %s/val" % root in x for x in said),
          "the start did not say where val reads:\n%s" % "\n".join(said))
    log("(b) " + [x for x in said if "job val from" in x][0])

# ---- (c) a val/ with a class train has not -------------------------------
root2 = t.path("other")
os.makedirs(root2)
t.gen(os.path.join(root2, "train"), n=12, classes=2, seed=3)
t.gen(os.path.join(root2, "val"), n=6, classes=3, seed=4)
with mount(os.path.join(root2, "train"), "other") as m:
    check(jobs(m) == ["train"], "jobs %s, want only train" % jobs(m))
    said = [x for x in start_lines(m) if "no val job" in x]
    check(len(said) == 1 and "class002" in said[0],
          "the start should say why there is no val job:\n%s" % m.log())
    log("(c) " + said[0])

# ---- (d) a class tree alone ------------------------------------------------
data = t.gen(t.path("data"), n=12, classes=2, seed=5)
with mount(data, "data") as m:
    check(jobs(m) == ["train"], "jobs %s, want only train" % jobs(m))
    st = samples(m, "train")
    check(len(st) == 12, "train %d samples" % len(st))
    said = [x for x in start_lines(m) if "no val job" in x]
    check(len(said) == 1, "the start should say there is no val job:\n"
          + m.log())
    log("(d) " + said[0])
os.makedirs(t.path("mnt-x"))
r = subprocess.run([fflib.FEEDFS, "-f", "-o", OPTS + ",val.epochs=2", data,
                    t.path("mnt-x")], stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, timeout=60)
check(r.returncode == 2 and b"no job val" in r.stderr,
      "-o val.epochs=2 without a val job: exit %d: %s"
      % (r.returncode, r.stderr.decode()))


# ---- (e)-(h) tar shards -------------------------------------------------------
def write_shard(path, items, cls=True):
    with tarfile.open(path, "w") as tf:
        for key, jpg, label in items:
            members = [(key + ".jpg", jpg)]
            if cls:
                members.append((key + ".cls", str(label).encode()))
            for name, payload in members:
                ti = tarfile.TarInfo(name)
                ti.size = len(payload)
                tf.addfile(ti, io.BytesIO(payload))


imgs = []
for c, name in enumerate(classes):
    d = os.path.join(root, "train", name)
    for f in sorted(os.listdir(d))[:4]:
        with open(os.path.join(d, f), "rb") as fp:
            imgs.append((f[:-4], fp.read(), c))
shards = t.path("shards")
os.makedirs(shards)
write_shard(os.path.join(shards, "pets-000000.tar"), imgs[:6])
write_shard(os.path.join(shards, "pets-000001.tar"), imgs[6:])
with mount(shards, "shards") as m:
    check(jobs(m) == ["train"], "jobs %s" % jobs(m))
    st = samples(m, "train")
    check(len(st) == 12, "shards: %d samples" % len(st))
    want = {k: c for k, _, c in imgs}
    for path, label in st:
        key = path.split(":")[1][:-4]
        check(want[key] == label, "%s labelled %d, .cls says %d"
              % (path, label, want[key]))
    x, y, _ = m.load_epoch("train")
    check(x.shape[0] == 12, "an epoch of %d images" % x.shape[0])
    said = [x for x in start_lines(m) if "no val job" in x]
    check(len(said) == 1 and "shards" in said[0],
          "the start should say the shards are one split:\n" + m.log())
    log("(e) " + said[0])
with mount(os.path.join(shards, "pets-000001.tar"), "one") as m:
    st = samples(m, "train")
    check(len(st) == 6, "one shard: %d samples" % len(st))
    log("(f) one .tar: %d samples" % len(st))
nocls = t.path("nocls")
os.makedirs(nocls)
write_shard(os.path.join(nocls, "a.tar"), imgs[:5], cls=False)
with mount(nocls, "nocls") as m:
    st = samples(m, "train")
    check(len(st) == 5 and all(l == -1 for _, l in st),
          "shards without .cls: %s" % st)
    check(info(m, "train")["classes"] == [], "classes %s"
          % info(m, "train")["classes"])
    log("(g) shards without .cls: 5 samples, no labels")
wds = t.path("wds")
os.makedirs(os.path.join(wds, "train"))
os.makedirs(os.path.join(wds, "val"))
write_shard(os.path.join(wds, "train", "t-0.tar"), imgs[:8])
write_shard(os.path.join(wds, "val", "v-0.tar"), imgs[8:])
with mount(wds, "wds") as m:
    check(jobs(m) == ["train", "val"], "jobs %s" % jobs(m))
    check(len(samples(m, "train")) == 8 and len(samples(m, "val")) == 4,
          "train/val shards: %d, %d" % (len(samples(m, "train")),
                                        len(samples(m, "val"))))
    log("(h) ROOT of shard folders: " + [
        x for x in start_lines(m) if "job train from" in x][0])
log("ok")
