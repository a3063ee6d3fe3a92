#!/usr/bin/python3
"""test_multilabel.py - lists of labels (label = json:KEY whose value is a
list: multi-hot, issue 39) on a real mount.

Tar shards whose .json holds "tags" (lists of class indexes: one empty,
one a bare integer, one with a duplicate, one with index 12), "names"
(the same as class names; one names a class no file has) and a caption:

- ml (label = json:tags): labels.npy is float32 (B, 13), 13 the largest
  index + 1 (info.json: multi_label, num_classes_from largest_index);
  every row is the multi-hot of its sample's list, in strict order (from
  the plan), relaxed order (from the batch) and feedfs-ref's bytes; the
  caption of text = json:caption; samples.tsv's label is the list;
- mlc (classes = FILE of 10 names): rows of 10; the sample with index 12
  is a sample error (past the end of the list), substituted, and
  errors.tsv says why; never dropped silently;
- mln (label = json:names with classes = FILE): names are looked up in
  the file; a name not in it is a sample error;
- mlx (json:names without classes = FILE): every sample fails, saying so;
- mixup and mixup_cutmix over multi-hot rows: each row is the batch's
  own lambda times its row plus (1 - lambda) times the row before it (the
  batch rolled by one), as timm and torchvision mix soft labels, from
  the plan and as feedfs-ref makes them;
- a mixture of two multi-label datasets with classes files naming their
  classes in other orders: rows over the union of the classes, each
  sample's mass in the columns of its own names;
- Python: Job.multi_label, and the Loader's labels.
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
sys.path.insert(0, os.path.join(fflib.SRCDIR, "python"))
import feedfs  # noqa: E402

NAMES = ["cat", "dog", "car", "tree", "sky", "sea", "sun", "hat", "cup",
         "pen"]
NAMES2 = ["sun", "zebra", "cat"]  # the second set's classes, its order
B = 6


def tags_of(k):
    """Sample k's "tags" value (JSON)."""
    if k == 5:
        return []
    if k == 6:
        return 2  # a bare integer: a list of one
    if k == 8:
        return [3, 3, 1]
    if k == 10:
        return [12, 0]
    return sorted({k % 4, (k * 3) % 7})


def as_list(v):
    return sorted(set(v if isinstance(v, list) else [v]))


def shard(data, out, doc):
    """data's images in one shard: KEY.jpg and KEY.json = doc(k).  [key]"""
    os.makedirs(out)
    keys = []
    files = []
    for c in sorted(os.listdir(data)):
        for f in sorted(os.listdir(os.path.join(data, c))):
            files.append(os.path.join(data, c, f))
    with tarfile.open(os.path.join(out, "s.tar"), "w",
                      format=tarfile.GNU_FORMAT) as tf:
        for k, p in enumerate(files):
            key = "%s_%03d" % (os.path.basename(out), k)
            tf.add(p, arcname=key + ".jpg")
            b = json.dumps(doc(k)).encode()
            ti = tarfile.TarInfo(key + ".json")
            ti.size = len(b)
            tf.addfile(ti, io.BytesIO(b))
            keys.append(key)
    return keys


def doc1(k):
    names = [NAMES[i % 10] for i in as_list(tags_of(k))]
    if k == 4:
        names = ["unicorn"]
    return {"tags": tags_of(k), "names": names,
            "caption": "sample %d \u00e0 \U0001F431" % k}


def doc2(k):
    return {"names": [NAMES2[k % 3]] + ([NAMES2[(k + 1) % 3]] if k % 2
                                        else [])}


keys1 = shard(t.gen(t.path("d1"), n=24, classes=2, seed=3), t.path("s1"),
              doc1)
keys2 = shard(t.gen(t.path("d2"), n=9, classes=1, seed=4), t.path("s2"),
              doc2)
DOC = {k: doc1(i) for i, k in enumerate(keys1)}
DOC.update({k: doc2(i) for i, k in enumerate(keys2)})
cls1, cls2 = t.path("names1.txt"), t.path("names2.txt")
with open(cls1, "w") as f:
    f.write("\n".join(NAMES) + "\n")
with open(cls2, "w") as f:
    f.write("\n".join(NAMES2) + "\n")

PIPE = "decode resize(24) center_crop(16)"
MIXUP = PIPE + " mixup(0.4)"
MIXCUT = PIPE + " mixup_cutmix(0.3, 1.0, 0.5)"
JOBS = {
    "ml": dict(dataset="ml"),
    "mlrel": dict(dataset="ml", order="relaxed"),
    "mlc": dict(dataset="mlc", on_error="substitute"),
    "mln": dict(dataset="mln", on_error="substitute"),
    "mlx": dict(dataset="mlx"),
    "mlmix": dict(dataset="ml", pipeline=MIXUP),
    "mlcut": dict(dataset="ml", pipeline=MIXCUT, on_error="substitute"),
    "mixt": dict(mixture="mln:0.6 ml2:0.4", on_error="substitute"),
}
lines = ["[mount]", "cache_dir = %s" % t.path("cache"), "cache_size = 1G",
         "threads = 2", "memory = 128M", "",
         "[dataset ml]", "shards = %s/*.tar" % t.path("s1"),
         "label = json:tags", "text = json:caption", "",
         "[dataset mlc]", "shards = %s/*.tar" % t.path("s1"),
         "label = json:tags", "classes = %s" % cls1, "",
         "[dataset mln]", "shards = %s/*.tar" % t.path("s1"),
         "label = json:names", "classes = %s" % cls1, "",
         "[dataset mlx]", "shards = %s/*.tar" % t.path("s1"),
         "label = json:names", "",
         "[dataset ml2]", "shards = %s/*.tar" % t.path("s2"),
         "label = json:names", "classes = %s" % cls2]
for name, keys in JOBS.items():
    j = dict(batch_size=B, epochs=2, seed=9, shuffle="yes", pipeline=PIPE,
             dtype="float32", layout="CHW", on_error="fail")
    j.update(keys)
    lines += ["", "[job %s]" % name] + ["%s = %s" % kv for kv in j.items()]
cfg = t.path("ml.conf")
with open(cfg, "w") as f:
    f.write("\n".join(lines) + "\n")


def samples(m, job):
    """{sample id: (its member key, samples.tsv's label field)}."""
    out = {}
    with open(m.p(job, "samples.tsv")) as f:
        for line in f:
            r = line.rstrip("\n").split("\t")
            out[int(r[0])] = (r[1].split(":", 1)[1].rsplit(".", 1)[0], r[2])
    return out


def want_rows(m, job, field, classes):
    """{sample id: its multi-hot row over classes (info.json's), or None
    for a sample with no list that can be served}."""
    out = {}
    for sid, (key, lab) in samples(m, job).items():
        v = DOC[key].get(field)
        if field == "names":
            idx = [classes.index(n) if n in classes else None for n in v]
        else:
            idx = as_list(v)
        if v is None or None in idx or any(i >= len(classes) for i in idx):
            out[sid] = None
            check(lab == "-1", "%s: samples.tsv gives %s label %r" % (
                job, key, lab))
            continue
        row = np.zeros(len(classes), np.float32)
        row[idx] = 1
        out[sid] = row
        want = ",".join(str(i) for i in sorted(set(idx)))
        check(lab == want, "%s: samples.tsv gives %s label %r, not %r"
              % (job, key, lab, want))
    return out


def check_rows(m, job, e, want, mixed=False):
    """Every batch's labels (B, K) are its ids' rows, or with mixed the
    rows mixed with one lambda per batch, v2's roll by one."""
    info = feedfs.Job(m.p(job))
    K = info.num_classes
    for b in range(info.nbatches()):
        base = m.p(job, "epoch-%04d" % e, "batch-%06d" % b)
        y = np.load(base + ".labels.npy")
        ids = np.load(base + ".ids.npy").tolist()
        check(y.dtype == np.float32 and y.shape == (len(ids), K),
              "%s: labels %s %s, not float32 (%d, %d)"
              % (base, y.dtype, y.shape, len(ids), K))
        rows = [want[i] for i in ids]
        check(all(r is not None for r in rows),
              "%s holds a sample without labels: %s" % (base, ids))
        rows = np.stack(rows)
        if not mixed:
            check(np.array_equal(y, rows), "%s: rows\n%s\nnot\n%s"
                  % (base, y, rows))
            continue
        prev = np.roll(rows, 1, axis=0)
        # lambda from a column only the sample's own row has, if any
        lam = None
        for i in range(len(ids)):
            own = (rows[i] == 1) & (prev[i] == 0)
            if own.any():
                lam = y[i][own][0]
                break
        check(lam is not None, "%s: no column tells lambda" % base)
        a = np.float32(1.0) - lam  # float32(1 - lam) within an ulp
        exp = prev * a + rows * lam
        check(np.allclose(y, exp, atol=1e-6),
              "%s: mixed rows\n%s\nnot\n%s (lambda %r)" % (base, y, exp,
                                                           lam))
        check(np.all(y >= 0) and np.allclose(y.sum(1), (
            prev.sum(1) * a + rows.sum(1) * lam), atol=1e-5),
            "%s: row sums" % base)


with fflib.Mount(t, cfg, t.path("mnt")) as m:
    info = json.load(open(m.p("ml", "info.json")))
    check(info["multi_label"] is True and info["num_classes"] == 13 and
          info["num_classes_from"] == "largest_index" and
          info["classes"] == [str(i) for i in range(13)] and
          info["labels_dtype"] == "float32" and
          info["labels_shape"] == [B, 13] and info["text"] is True,
          "ml's info.json: %r" % info)
    infoc = json.load(open(m.p("mlc", "info.json")))
    check(infoc["num_classes"] == 10 and infoc["classes"] == NAMES and
          infoc["num_classes_from"] == "classes_file" and
          infoc["text"] is False, "mlc's info.json: %r" % infoc)
    mlw = want_rows(m, "ml", "tags", info["classes"])
    check(all(r is not None for r in mlw.values()), "ml has a bad sample")
    for e in range(2):
        check_rows(m, "ml", e, mlw)
        check_rows(m, "mlrel", e, mlw)
    # the caption of text = json:caption
    for b in range(feedfs.Job(m.p("ml")).nbatches()):
        base = m.p("ml", "epoch-0000", "batch-%06d" % b)
        ids = np.load(base + ".ids.npy").tolist()
        s = samples(m, "ml")
        check(feedfs.read_text(base + ".text.jsonl") ==
              [DOC[s[i][0]]["caption"] for i in ids], "ml's captions")
    m.read_epoch("ml", 1, ref=t.ref(cfg, "ml", 1, t.path("ref-ml")))
    m.read_epoch("mlmix", 0, ref=t.ref(cfg, "mlmix", 0, t.path("ref-mix")))

    # classes = FILE: indexes and names; out of range is an error
    mlcw = want_rows(m, "mlc", "tags", NAMES)
    check(sum(r is None for r in mlcw.values()) == 1, "mlc: one bad sample")
    mlnw = want_rows(m, "mln", "names", NAMES)
    check(sum(r is None for r in mlnw.values()) == 1, "mln: one bad sample")
    for e in range(2):
        check_rows(m, "mlc", e, mlcw)
        check_rows(m, "mln", e, mlnw)
    for job, why in (("mlc", "past the end of the classes list"),
                     ("mln", "names a class that is not in classes = FILE")):
        with open(m.p(job, "errors.tsv")) as f:
            errs = f.read()
        check(why in errs, "%s errors.tsv lacks %r:\n%s" % (job, why, errs))
    try:
        fflib.read_file(m.p("mlx", "epoch-0000", "batch-000000.npy"))
        fflib.fail("mlx: a class name without classes = FILE was served")
    except OSError as ex:
        check(ex.errno == 5, "mlx: %s" % ex)
    with open(m.p("mlx", "errors.tsv")) as f:
        check("no classes = FILE" in f.read(), "mlx: errors.tsv")

    # mixup, mixup_cutmix over multi-hot rows
    for e in range(2):
        check_rows(m, "mlmix", e, mlw, mixed=True)
        check_rows(m, "mlcut", e, mlw, mixed=True)

    # a mixture: the union of the classes by name
    minfo = json.load(open(m.p("mixt", "info.json")))
    union = NAMES + ["zebra"]
    check(minfo["classes"] == union and minfo["multi_label"] and
          minfo["num_classes_from"] == "sources",
          "mixture's classes %r" % minfo["classes"])
    mixw = want_rows(m, "mixt", "names", union)
    for e in range(2):
        check_rows(m, "mixt", e, mixw)

    # Python
    job = feedfs.Job(m.p("mlc"))
    check(job.multi_label and job.soft_labels and job.num_classes == 10 and
          not job.text, "Job of a multi-label job")
    for x, y, ids in job.epoch(0, ids=True):
        check(np.array_equal(y, np.stack([mlcw[i] for i in ids.tolist()])),
              "Job.epoch's multi-hot rows")
    try:
        import torch  # noqa: F401
        import feedfs.torch as ft
    except ImportError:
        ft = None
        log("torch is missing: the Loader's part is not run")
    if ft is not None:
        for x, y, text, ids in ft.Loader(m.p("ml"), epochs=[1], ids=True):
            check(y.dtype == torch.float32 and np.array_equal(
                y.numpy(), np.stack([mlw[i] for i in ids.tolist()])),
                "Loader's multi-hot rows")
log("ok")
