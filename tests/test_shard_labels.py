#!/usr/bin/python3
"""test_shard_labels.py - a label is its class's index, for hard labels,
soft labels, classes = FILE and mixtures alike (issue 34, section 5).

Tar shards whose .cls labels are 0, 1, 3 and 7 (not 0..K-1), through a
real mount:

- without classes = FILE the classes are the distinct labels, in
  increasing order, named by their number: info.json says num_classes 4,
  classes ["0", "1", "3", "7"] and label_is "class_index"; every label
  (samples.tsv, .labels.npy) is its class's index, so classes[label] is
  the sample's .cls;
- soft labels (mixup_cutmix) are (B, 4): each row sums to 1, its mass
  on the columns of its own sample's class and of the sample before it
  (the batch rolled by one), one lambda per batch;
- with classes = FILE (8 names), the integers of .cls are lines of the
  file, as before: labels 0, 1, 3, 7, soft labels (B, 8) with their mass
  in those columns;
- a mixture of these shards and shards labelled 3 and 9 has the union of
  the classes by name ("0", "1", "3", "7", "9"), and classes[label] is
  each sample's .cls whichever source it comes from, in hard and soft
  labels.
"""

import io
import json
import os
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
RAW_A = [0, 1, 3, 7]  # the .cls of gen-jpegs' class folders 0..3
RAW_B = [3, 9]
B = 8


def shards(data, out, raw, nshards, prefix):
    """data's images in nshards tar shards under out, KEY.jpg and KEY.cls
    (class folder c labelled raw[c]); {member key: raw label}."""
    os.makedirs(out)
    files = []
    for ci, c in enumerate(sorted(os.listdir(data))):
        for f in sorted(os.listdir(os.path.join(data, c))):
            files.append((raw[ci], os.path.join(data, c, f)))
    keys = {}
    for s in range(nshards):
        with tarfile.open(os.path.join(out, "%s-%d.tar" % (prefix, s)),
                          "w", format=tarfile.USTAR_FORMAT) as tf:
            for i, (lab, p) in enumerate(files[s::nshards]):
                key = "%s%d_%03d" % (prefix, s, i)
                tf.add(p, arcname=key + ".jpg")
                b = b"%d\n" % lab
                ti = tarfile.TarInfo(key + ".cls")
                ti.size = len(b)
                tf.addfile(ti, io.BytesIO(b))
                keys[key] = lab
    return keys


raw = shards(t.gen(t.path("data-a"), n=40, classes=4, seed=34),
             t.path("a"), RAW_A, 2, "a")
raw.update(shards(t.gen(t.path("data-b"), n=12, classes=2, seed=35),
                  t.path("b"), RAW_B, 1, "b"))
names = ["c%d" % i for i in range(8)]
clsfile = t.path("classes.txt")
with open(clsfile, "w") as f:
    f.write("\n".join(names) + "\n")

SOFT = "mixup_cutmix(0.2, 1.0, 0.5)"
PIPE = "decode resize(24) center_crop(16)"
JOBS = {  # job: (dataset or mixture, batch op)
    "hard": ("dataset = a", ""), "soft": ("dataset = a", SOFT),
    "fhard": ("dataset = af", ""), "fsoft": ("dataset = af", SOFT),
    "mhard": ("mixture = a:0.5 b:0.5", ""),
    "msoft": ("mixture = a:0.5 b:0.5", SOFT)}
lines = ["[mount]", "cache_dir = %s" % t.path("cache"), "cache_size = 1G",
         "threads = 2", "memory = 128M", "",
         "[dataset a]", "shards = %s/*.tar" % t.path("a"), "label = cls", "",
         "[dataset af]", "shards = %s/*.tar" % t.path("a"), "label = cls",
         "classes = %s" % clsfile, "",
         "[dataset b]", "shards = %s/*.tar" % t.path("b"), "label = cls"]
for name, (src, op) in JOBS.items():
    lines += ["", "[job %s]" % name, src, "batch_size = %d" % B,
              "epochs = 2", "seed = 5", "shuffle = yes", "dtype = float16",
              "layout = HWC", "pipeline = %s %s" % (PIPE, op)]
cfg = t.path("labels.conf")
with open(cfg, "w") as f:
    f.write("\n".join(lines) + "\n")


def key_of(path):
    """The member key of a samples.tsv path SHARD:KEY.jpg."""
    return path.split(":", 1)[1].rsplit(".", 1)[0]


def want_class(job, info):
    """{sample id: the class index its .cls means in job}."""
    out = {}
    with open(m.p(job, "samples.tsv")) as f:
        for line in f:
            sid, path, label = line.rstrip("\n").split("\t")[:3]
            lab = raw[key_of(path)]
            # with classes = FILE, the integer is a line of the file;
            # else the class named by the number
            c = lab if job.startswith("f") else \
                info["classes"].index(str(lab)) if str(lab) in \
                info["classes"] else None
            check(c is not None, "%s: no class named %r in %s" % (
                job, str(lab), info["classes"]))
            check(int(label) == c, "%s: samples.tsv gives %s label %s, "
                  "not %d (classes %s, its .cls %d)" % (
                      job, path, label, c, info["classes"], lab))
            out[int(sid)] = c
    return out


def check_soft(job, b, y, cls, k):
    """Row i of soft labels y mixes the classes of sample i and i - 1."""
    check(y.dtype == np.float32 and y.shape == (len(cls), k),
          "%s batch %d: soft labels %s %s, not (%d, %d)"
          % (job, b, y.dtype, y.shape, len(cls), k))
    lams = set()
    for i, c in enumerate(cls):
        p = cls[i - 1]
        row = y[i]
        check(abs(float(row.sum()) - 1) < 1e-5, "%s batch %d row %d sums "
              "to %g: %s (classes %s)" % (job, b, i, row.sum(), row, cls))
        out = [j for j in range(k) if row[j] != 0 and j not in (c, p)]
        check(not out, "%s batch %d row %d: mass in columns %s, its "
              "sample's class is %d and the one before's %d: %s"
              % (job, b, i, out, c, p, row))
        if c != p:
            lams.add(round(float(row[c]), 5))
    check(len(lams) <= 1, "%s batch %d: lambdas %s, not one per batch"
          % (job, b, sorted(lams)))


with fflib.Mount(t, cfg, t.path("mnt")) as m:
    for job in JOBS:
        with open(m.p(job, "info.json")) as f:
            info = json.load(f)
        if job.startswith("f"):
            want = names
        elif job.startswith("m"):
            want = ["0", "1", "3", "7", "9"]
        else:
            want = ["0", "1", "3", "7"]
        check(info["classes"] == want and info["num_classes"] == len(want),
              "%s: classes %s (num_classes %s), not %s"
              % (job, info["classes"], info["num_classes"], want))
        cls = want_class(job, info)
        k = info["num_classes"]
        n = 0
        for e in range(2):
            for b in range(info["batches_per_epoch"]):
                base = m.p(job, "epoch-%04d" % e, "batch-%06d" % b)
                ids = np.load(base + ".ids.npy")
                y = np.load(base + ".labels.npy")
                bc = [cls[int(i)] for i in ids]
                if JOBS[job][1]:
                    check_soft(job, b, y, bc, k)
                else:
                    check(y.dtype == np.int64 and [int(v) for v in y] == bc,
                          "%s epoch %d batch %d: labels %s, not the class "
                          "indexes %s of ids %s" % (job, e, b, list(y), bc,
                                                    list(ids)))
                n += len(ids)
        check(info.get("label_is") == "class_index", "%s: info.json does "
              "not say what a label is: %r" % (job, info.get("label_is")))
        log("%s: classes %s; %d labels (%s) are their classes' indexes"
            % (job, info["classes"], n, "soft" if JOBS[job][1] else "hard"))
    check(m.alive(), "feedfs died")
log("PASS")
