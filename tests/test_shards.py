#!/usr/bin/python3
"""test_shards.py - WebDataset tar shards read in place (issue 20).

The same 30 images (JPEG and PNG) as an ImageFolder directory and as four
tar shards, written by Python's tarfile (ustar, GNU and pax formats, long
names) and by GNU tar (--format=posix, --format=gnu):

- samples.tsv lists `SHARD:MEMBER` per sample, info.json the classes (the
  distinct .cls values);
- the val job over the shards gives the same multiset of (label, image
  bytes) as over the directory, and after the directory's epoch every
  shard sample is a cache hit (digests are of the image bytes, so a shard
  and an unpacked copy share entries);
- the shard mount's batches equal feedfs-ref's (the library in-process);
- the index is kept in cache_dir/shard-index: a remount reads it (the
  files are not rewritten), a touched shard is indexed again, a garbled
  index file is ignored and rewritten;
- label = json:KEY and label = none;
- a mixture of the shard dataset and the directory dataset serves what
  feedfs-ref computes, and so does a rank view; relaxed order serves each
  shard sample once;
- a shard rewritten under the mount fails its samples (EIO, "changed
  since it was indexed"), never serves other bytes;
- feedfs-fill fills the cluster tier from shards (then finds it all there),
  and a mount with an empty local cache hits the tier for every sample
  (where /usr/bin/memcached exists).
"""

import errno
import glob
import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

try:
    import numpy as np
    from PIL import Image
except ImportError as e:
    fflib.skip("numpy/PIL not importable: %s" % e)

PIPE = "decode resize(48) center_crop(40) cache"
t = fflib.Test()
data = t.gen(t.path("data"), n=24, classes=3, seed=20)
# six PNGs too, in every class
for k in range(6):
    cls = "class%03d" % (k % 3)
    src = os.path.join(data, cls, sorted(os.listdir(os.path.join(
        data, cls)))[0])
    im = Image.open(src).convert("RGBA" if k % 2 else "L")
    im.save(os.path.join(data, cls, "png%02d.png" % k))
classes = sorted(os.listdir(data))
files = []  # (class index, relative path)
for ci, c in enumerate(classes):
    for f in sorted(os.listdir(os.path.join(data, c))):
        files.append((ci, os.path.join(c, f)))
N = len(files)

shards = t.path("shards")
os.makedirs(shards)


def key_of(i, rel):
    # a long directory part for some: GNU 'L' / pax path records
    d = ("deep/" + "x" * 120 + "/") if i % 5 == 0 else ""
    return "%ss%04d_%s" % (d, i, os.path.basename(rel).split(".")[0])


def add(tf, name, payload):
    ti = tarfile.TarInfo(name)
    ti.size = len(payload)
    ti.mtime = 1700000000
    tf.addfile(ti, io.BytesIO(payload))


formats = [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT]
groups = [files[k::4] for k in range(4)]
members = {}  # member name -> (label, image bytes)
for s in range(3):
    with tarfile.open(os.path.join(shards, "shard-%02d.tar" % s), "w",
                      format=formats[s]) as tf:
        for ci, rel in groups[s]:
            i = files.index((ci, rel))
            key = key_of(i, rel)
            ext = rel.rsplit(".", 1)[1]
            with open(os.path.join(data, rel), "rb") as f:
                img = f.read()
            add(tf, key + "." + ext, img)
            add(tf, key + ".cls", b"%d\n" % ci)
            add(tf, key + ".json", json.dumps(
                {"caption": "a {tricky}, \"quoted\" [text]",
                 "nested": {"label": 99}, "label": ci}).encode())
            members["shard-%02d.tar:%s.%s" % (s, key, ext)] = (ci, img)
# the fourth shard by GNU tar, from an unpacked tree (posix = pax)
tree = t.path("tree")
for ci, rel in groups[3]:
    i = files.index((ci, rel))
    key = key_of(i, rel)
    ext = rel.rsplit(".", 1)[1]
    os.makedirs(os.path.join(tree, os.path.dirname(key)), exist_ok=True)
    shutil.copy(os.path.join(data, rel), os.path.join(tree, key + "." + ext))
    with open(os.path.join(tree, key + ".cls"), "w") as f:
        f.write("%d" % ci)
    with open(os.path.join(tree, key + ".json"), "w") as f:
        json.dump({"label": ci}, f)
    with open(os.path.join(data, rel), "rb") as f:
        members["sub/shard-03.tar:%s.%s" % (key, ext)] = (ci, f.read())
os.makedirs(os.path.join(shards, "sub"))
r = subprocess.run(["tar", "--format=posix", "--sort=name", "-cf",
                    os.path.join(shards, "sub", "shard-03.tar"), "-C", tree,
                    "."], stderr=subprocess.PIPE)
check(r.returncode == 0, "GNU tar: %s" % r.stderr.decode())
# GNU tar names members "./s0003_..."; the key keeps the "./": rename in
# the expectation
members = {(k.replace("shard-03.tar:", "shard-03.tar:./")
            if "shard-03" in k else k): v for k, v in members.items()}
with open(t.path("list.txt"), "w") as f:
    f.write("# the shards, one a line\n")
    for s in range(3):
        f.write("shards/shard-%02d.tar\n" % s)
    f.write("\n%s\n" % os.path.join(shards, "sub", "shard-03.tar"))

cache = t.path("cache")


def conf(path, shards_spec, label="cls", extra=None, **mount):
    m = dict(cache_dir=cache, cache_size="1G", threads=2, memory="256M",
             readahead=2)
    m.update(mount)
    lines = ["[mount]"] + ["%s = %s" % kv for kv in m.items()]
    lines += ["", "[dataset sh]", "shards = %s" % shards_spec,
              "label = %s" % label, "", "[dataset dir]", "root = %s" % data]
    jobs = {"val": dict(dataset="sh"), "dval": dict(dataset="dir")}
    jobs.update(extra or {})
    for name, keys in jobs.items():
        k = dict(batch_size=4, epochs=1, shuffle="no", pipeline=PIPE,
                 dtype="uint8", layout="HWC", seed=3)
        k.update(keys)
        lines += ["", "[job %s]" % name] + ["%s = %s" % kv for kv in
                                            k.items()]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def multiset(x, y):
    return sorted((int(lbl), hashlib.sha256(s.tobytes()).hexdigest())
                  for s, lbl in zip(x, y))


glob_spec = os.path.join(shards, "*.tar")
cfg = conf(t.path("a.conf"), t.path("list.txt"), extra={
    "mix": dict(mixture="sh:0.5 dir:0.5", shuffle="yes", epochs=2),
    "rel": dict(dataset="sh", shuffle="yes", order="relaxed",
                pipeline="decode resize(48) cache random_resized_crop(40) "
                         "flip(0.5)")})
idxdir = os.path.join(cache, "shard-index")
with fflib.Mount(t, cfg, t.path("mnt")) as m:
    with open(m.p("val", "samples.tsv")) as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    got = {r[1]: int(r[2]) for r in rows}
    want = {k: v[0] for k, v in members.items()}
    check(got == want, "samples.tsv:\n%s\nwant:\n%s" % (
        sorted(set(got.items()) ^ set(want.items()))[:6], len(want)))
    check([r[1] for r in rows] == sorted(got), "samples not sorted by path")
    xd, yd, _ = m.load_epoch("dval")
    xs, ys, info = m.load_epoch("val")
    check(info["classes"] == ["0", "1", "2"], "classes %s" % info["classes"])
    check(multiset(xd, yd) == multiset(xs, ys),
          "directory and shards differ as multisets of (label, image)")
    hits = m.job_stat("feedfs_cache_hits_total", "val")
    check(hits == N, "shard epoch after the directory's: %d hits of %d"
          % (hits, N))
    log("%d samples: shards == directory as (label, bytes); %d cache hits"
        % (N, hits))
    # the mixture, and the shard job, against feedfs-ref
    for job, e in (("mix", 0), ("mix", 1), ("val", 0)):
        ref = t.ref(cfg, job, e, t.path("ref-%s-%d" % (job, e)))
        for name in sorted(os.listdir(ref)):
            with open(os.path.join(ref, name), "rb") as f:
                check(fflib.read_file(m.p(job, "epoch-%04d" % e, name)) ==
                      f.read(), "%s/epoch-%04d/%s differs from feedfs-ref"
                      % (job, e, name))
    log("shard job and mixture (shards + directory) equal feedfs-ref")
    # a rank view, and relaxed order, over the shards
    ref = t.ref(cfg, "val", 0, t.path("ref-rank"), rank=1, world=2)
    for name in sorted(os.listdir(ref)):
        with open(os.path.join(ref, name), "rb") as f:
            check(fflib.read_file(m.p("val", "rank-1-of-2", "epoch-0000",
                                      name)) == f.read(),
                  "val/rank-1-of-2/%s differs from feedfs-ref" % name)
    ids = []
    for b in range(json.load(open(m.p("rel", "info.json")))[
            "batches_per_epoch"]):
        ids += list(np.load(m.p("rel", "epoch-0000",
                                "batch-%06d.ids.npy" % b)))
    check(sorted(ids) == list(range(N)), "relaxed order: ids %s" % ids)
    log("rank view as feedfs-ref; relaxed order serves each sample once")
    check(m.alive(), "feedfs died")
idx = {f: os.stat(os.path.join(idxdir, f)) for f in os.listdir(idxdir)}
check(len(idx) == 4, "shard-index holds %s" % sorted(idx))

# remount: the kept index is read, not rewritten; a touched shard and a
# garbled index file are indexed again
with fflib.Mount(t, cfg, t.path("mnt")) as m:
    x2, y2, _ = m.load_epoch("val")
    check(np.array_equal(x2, xs) and np.array_equal(y2, ys),
          "remount serves other bytes")
now = {f: os.stat(os.path.join(idxdir, f)) for f in os.listdir(idxdir)}
check(all(now[f].st_mtime_ns == idx[f].st_mtime_ns and
          now[f].st_ino == idx[f].st_ino for f in idx),
      "a remount rewrote the kept index")

# feedfs-cache -c: the fraction of each job cached, as the mount names and
# keys its samples (a member's memo is under SHARD:MEMBER with the shard's
# stat).  Memos are made only for sources older than the racy-timestamp
# grain (2 s), so wait that out first and read each job once more.
newest = max(os.stat(p).st_ctime for p in
             glob.glob(glob_spec) + [os.path.join(shards, "sub",
                                                  "shard-03.tar")])
time.sleep(max(0.0, newest + 2.5 - time.time()))
with fflib.Mount(t, cfg, t.path("mnt")) as m:
    m.load_epoch("val")
    m.load_epoch("dval")
r = subprocess.run([os.path.join(fflib.BUILDDIR, "feedfs-cache"), "-c", cfg,
                    "stats"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
out = r.stdout.decode()
for job in ("val", "dval"):
    check("job %s: %d of %d samples cached (100.0%%)" % (job, N, N) in out,
          "feedfs-cache -c stats, job %s:\n%s" % (job, out))
log("feedfs-cache -c: every shard member and file counted as cached")
os.utime(os.path.join(shards, "shard-01.tar"))
garbled = sorted(idx)[0]
with open(os.path.join(idxdir, garbled), "r+b") as f:
    f.seek(40)
    f.write(b"\xff" * 16)
with fflib.Mount(t, cfg, t.path("mnt")) as m:
    x3, y3, _ = m.load_epoch("val")
    check(np.array_equal(x3, xs) and np.array_equal(y3, ys),
          "after reindexing: other bytes")
now = {f: os.stat(os.path.join(idxdir, f)) for f in os.listdir(idxdir)}
changed = sorted(f for f in idx if now[f].st_ino != idx[f].st_ino)
check(len(changed) in (1, 2) and garbled in changed,
      "reindexed %s (want the touched shard's and %s)" % (changed, garbled))
log("kept index: read on remount; touched shard and garbled index redone")

# labels from .json, and none; a glob
for label, want_y in (("json:label", ys), ("none", -np.ones_like(ys))):
    c2 = conf(t.path("l.conf"), glob_spec, label=label)
    with fflib.Mount(t, c2, t.path("mnt")) as m:
        rows = open(m.p("val", "samples.tsv")).read().splitlines()
        check(len(rows) == N - len(groups[3]), "glob: %d samples" % len(rows))
        _, y, info = m.load_epoch("val")
        sub = [members[r.split("\t")[1]][0] for r in rows]
        exp = np.array(sub) if label != "none" else -np.ones(len(rows))
        check(np.array_equal(y, exp), "label = %s: %s" % (label, y))
    log("label = %s: ok" % label)

# a shard rewritten under the mount: its samples fail, others are served
c3 = conf(t.path("c.conf"), glob_spec, label="cls", threads=1,
          readahead=0)
with fflib.Mount(t, c3, t.path("mnt")) as m:
    victim = os.path.join(shards, "shard-00.tar")
    with open(victim, "r+b") as f:
        f.seek(0, 2)
        f.write(b"\0" * 1024)
    bad = 0
    nb = json.load(open(m.p("val", "info.json")))["batches_per_epoch"]
    for b in range(nb):
        try:
            fflib.read_file(m.p("val", "epoch-0000", "batch-%06d.npy" % b))
        except OSError as e:
            check(e.errno == errno.EIO, "errno %d" % e.errno)
            bad += 1
    check(bad > 0, "no batch failed after the shard changed")
    time.sleep(0.2)
    check("changed since it was indexed" in m.log(),
          "the log does not say the shard changed:\n%s" % m.log()[-2000:])
    check(m.alive(), "feedfs died")
log("a shard rewritten under the mount: %d batches EIO, logged" % bad)

# feedfs-fill fills the cluster tier from shards; a mount with an empty
# local cache then finds every prefix there
MEMCACHED = "/usr/bin/memcached"
if os.access(MEMCACHED, os.X_OK):
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    argv = [MEMCACHED, "-p", str(port), "-l", "127.0.0.1", "-U", "0", "-m",
            "64"] + (["-u", "root"] if os.geteuid() == 0 else [])
    mc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    try:
        for _ in range(500):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.01)
        c4 = conf(t.path("f.conf"), glob_spec, cache_dir=t.path("cache4"),
                  cluster="127.0.0.1:%d" % port)
        fill = os.path.join(fflib.BUILDDIR, "feedfs-fill")
        outs = []
        for _ in range(2):
            r = subprocess.run([fill, c4, "val"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
            check(r.returncode == 0, "feedfs-fill: %s" % r.stdout.decode())
            outs.append(r.stdout.decode())
        n3 = N - len(groups[3])
        check("%d computed, 0 already there" % n3 in outs[0] and
              "0 computed, %d already there" % n3 in outs[1],
              "feedfs-fill over shards:\n%s" % "".join(outs))
        with fflib.Mount(t, c4, t.path("mnt")) as m:
            x4, _, _ = m.load_epoch("val")
            hits = m.job_stat("feedfs_cluster_hits_total", "val")
            check(hits == n3, "cluster hits %d of %d" % (hits, n3))
        log("feedfs-fill over shards: %d computed, then all there; a mount "
            "hits the tier for each" % n3)
    finally:
        mc.terminate()
        mc.wait()
else:
    log("no %s: feedfs-fill over shards not checked" % MEMCACHED)
log("ok")
