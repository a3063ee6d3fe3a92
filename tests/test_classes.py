#!/usr/bin/python3
"""test_classes.py - one class space for a folder and shards (issue 26).

A mixture of an ImageFolder dataset and WebDataset shards of the same
classes used to count each class twice: the folder's classes are its
directory names, the shards' the integers of their .cls members, and the
mixture merges by name.  With `classes = FILE` in both [dataset] sections
(one name a line, class i on line i + 1):

(a) the folder's, the shards' and the mixture's info.json all list the
    file's classes, in its order (not the folder's sorted order);
(b) every sample's label, in samples.tsv and in the .labels.npy of an
    epoch (by .ids.npy), is the line of its class in the file, whichever
    source it comes from; the same image in the folder and in a shard has
    the same label;
(c) bad class lists and datasets stop the mount with exit status 2 and
    a message that names the file and line: an empty line, a name twice,
    a missing file, a class directory the list lacks, a manifest label
    past its end.
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
    from PIL import Image
except ImportError as e:
    fflib.skip("numpy/PIL not importable: %s" % e)

t = fflib.Test()
rng = np.random.default_rng(261)
# Listed in an order that is not the folder's sorted one.
CLASSES = ["tabby", "beagle", "goldfish"]
clsfile = t.path("classes.txt")
with open(clsfile, "w") as f:
    f.write("\n".join(CLASSES) + "\n")


def image_bytes(k, fmt):
    a = rng.integers(0, 256, (40 + k % 7, 48, 3)).astype(np.uint8)
    b = io.BytesIO()
    Image.fromarray(a).save(b, fmt, quality=90)
    return b.getvalue()


# The folder: 4 images a class; the shards: the same images (and 2 more
# a class, some WebP), labelled by their line in the class list.
data = t.path("data")
by_bytes = {}  # image bytes -> class name
shard_items = []  # (key, ext, bytes, class name)
for ci, name in enumerate(CLASSES):
    os.makedirs(os.path.join(data, name))
    for k in range(6):
        fmt, ext = ("WEBP", "webp") if k % 3 == 2 else ("JPEG", "jpg")
        img = image_bytes(ci * 10 + k, fmt)
        by_bytes[img] = name
        if k < 4:
            with open(os.path.join(data, name, "%d.%s" % (k, ext)), "wb") as f:
                f.write(img)
        shard_items.append(("%s_%d" % (name, k), ext, img, name))
shards = t.path("shards")
os.makedirs(shards)
for s in range(2):
    with tarfile.open(os.path.join(shards, "shard-%d.tar" % s), "w") as tf:
        for key, ext, img, name in shard_items[s::2]:
            for mname, payload in ((key + "." + ext, img),
                                   (key + ".cls", b"%d\n" %
                                    CLASSES.index(name))):
                ti = tarfile.TarInfo(mname)
                ti.size = len(payload)
                tf.addfile(ti, io.BytesIO(payload))


def conf(path, classes_line="classes = %s" % clsfile, root=data,
         extra_dir=()):
    job = ("batch_size = 4\nepochs = 1\nshuffle = no\ndtype = uint8\n"
           "layout = HWC\npipeline = decode resize(32) center_crop(32) "
           "cache\non_error = fail\n")
    text = ("[mount]\ncache_dir = %s\ncache_size = 1G\nthreads = 2\n"
            "memory = 256M\n\n"
            "[dataset dir]\nroot = %s\n%s\n%s\n\n"
            "[dataset sh]\nshards = %s/*.tar\nlabel = cls\n%s\n\n"
            "[job d]\ndataset = dir\n%s\n[job s]\ndataset = sh\n%s\n"
            "[job mix]\nmixture = dir:0.4 sh:0.6\n%s") % (
                t.path("cache"), root, classes_line, "\n".join(extra_dir),
                shards, classes_line, job, job, job)
    with open(path, "w") as f:
        f.write(text)
    return path


def source_bytes(rel):
    """The image bytes of a samples.tsv path (a file or SHARD:MEMBER)."""
    if ":" in rel:
        shard, member = rel.split(":", 1)
        with tarfile.open(os.path.join(shards, shard)) as tf:
            return tf.extractfile(member).read()
    with open(os.path.join(data, rel), "rb") as f:
        return f.read()


# Without a class list: the mixture counts every class twice.
with fflib.Mount(t, conf(t.path("none.conf"), classes_line=""),
                 t.path("mnt0")) as m:
    with open(m.p("mix", "info.json")) as f:
        before = json.load(f)["num_classes"]
log("without classes = FILE: the mixture has %d classes" % before)

with fflib.Mount(t, conf(t.path("cls.conf")), t.path("mnt")) as m:
    for job in ("d", "s", "mix"):
        with open(m.p(job, "info.json")) as f:
            info = json.load(f)
        check(info["classes"] == CLASSES and info["num_classes"] == 3,
              "%s: classes %s (%s), want %s" % (
                  job, info["classes"], info["num_classes"], CLASSES))
    log("(a) d, s and mix: one class space %s" % CLASSES)
    same = 0
    for job in ("d", "s", "mix"):
        with open(m.p(job, "samples.tsv")) as f:
            rows = [line.rstrip("\n").split("\t") for line in f]
        want_n = 12 if job == "d" else 18 if job == "s" else 30
        check(len(rows) == want_n, "%s: %d samples, want %d" % (
            job, len(rows), want_n))
        labels = {}
        for row in rows:
            sid, rel, label = row[:3]
            # a mixture's fourth field is the source
            src = row[3] if job == "mix" else "sh" if job == "s" else "dir"
            check((src == "sh") == (":" in rel), "%s: %s from %s" % (
                job, rel, src))
            name = by_bytes[source_bytes(rel)]
            check(int(label) == CLASSES.index(name),
                  "%s: %s has label %s, want %d (%s)" % (
                      job, rel, label, CLASSES.index(name), name))
            labels[int(sid)] = int(label)
        info = json.load(open(m.p(job, "info.json")))
        for b in range(info["batches_per_epoch"]):
            base = m.p(job, "epoch-0000", "batch-%06d" % b)
            ids = np.load(base + ".ids.npy")
            ys = np.load(base + ".labels.npy")
            for i, y in zip(ids, ys):
                check(labels[int(i)] == int(y), "%s batch %d: id %d has "
                      "label %d in labels.npy, %d in samples.tsv"
                      % (job, b, i, y, labels[int(i)]))
                same += 1
    log("(b) %d labels of d, s and mix: the line of their class" % same)
    check(m.alive(), "feedfs died")

# ---- (c) errors: exit status 2, FILE:LINE --------------------------------


def refused(name, text=None, want=(), **kw):
    bad = t.path(name + ".classes")
    if text is not None:
        with open(bad, "w") as f:
            f.write(text)
    cfg = conf(t.path(name + ".conf"), classes_line="classes = %s" % bad,
               **kw)
    mnt = t.path("mnt-" + name)
    os.makedirs(mnt, exist_ok=True)
    r = subprocess.run([fflib.FEEDFS, "-f", cfg, mnt], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60)
    out = r.stdout.decode(errors="replace").strip()
    check(r.returncode == 2, "%s: exit status %d, want 2: %s" % (
        name, r.returncode, out))
    for w in want:
        check(w % dict(f=bad, c=cfg) in out, "%s: %r not in %r" % (
            name, w % dict(f=bad, c=cfg), out))
    log("(c) %-8s -> %s" % (name, out.splitlines()[-1]))


refused("empty", "tabby\n\ngoldfish\n",
        ["%(f)s:2: empty class name"])
refused("twice", "tabby\nbeagle\ngoldfish\nbeagle\n",
        ["%(f)s:4: class 'beagle' is also line 2"])
refused("control", "tabby\nbea\tgle\n",
        ["%(f)s:2: control character 0x09"])
refused("missing", None, ["%(c)s:9: classes: %(f)s: No such file"])
refused("short", "tabby\ngoldfish\n",
        ["/beagle: class directory not in classes %(f)s"])
log("ok")
