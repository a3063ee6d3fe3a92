#!/usr/bin/python3
"""test_text_remote.py - captions of remote shards (text = txt over HTTP,
issue 39): what they cost in bytes fetched, and that they travel.

Two shards of KEY.jpg, KEY.cls and KEY.txt (captions with quotes, tabs,
newlines, non-ASCII and emoji; one sample without a .txt), and the same
images in two shards without .txt members, served by nginx.  One mount,
cache off (cache_size = 0: every read fetches):

- the caption comes with the shard's index (its one streaming GET, which
  reads the whole shard with or without text): every member read asks
  for a range that starts and ends at image members (ranges of one shard
  within 16 KiB go as one GET, remote_fetch.c), never for a .txt, so
  a caption costs no request; the bytes fetched per sample with
  captions exceed those of the shards without .txt members by no more
  than a .txt member's bytes in the tar (what a merged range passes
  over), and over the same shards text = txt and none fetch alike;
- every batch's .text.jsonl, in strict order and in relaxed order with
  on_error = substitute (the sample without a .txt substituted), equals
  its ids' captions, its stat size the bytes read.
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
import remote_servers as rs  # noqa: E402

try:
    import numpy as np
except ImportError:
    fflib.skip("numpy is missing")

t = fflib.Test()
why = rs.Nginx.unavailable()
if why:
    fflib.skip(why)

NOTXT = 6
data = t.gen(t.path("data"), n=24, classes=2, seed=41)
files = []
for ci, c in enumerate(sorted(os.listdir(data))):
    for f in sorted(os.listdir(os.path.join(data, c))):
        files.append((ci, os.path.join(data, c, f)))
local, plain = t.path("shards"), t.path("plain")
os.makedirs(local)
os.makedirs(plain)
caps = {}  # member key: caption
spans = {}  # shard name: [(start, end) of each image member's data]
for s in range(2):
    name = "shard-%06d.tar" % s
    with tarfile.open(os.path.join(local, name), "w",
                      format=tarfile.USTAR_FORMAT) as tf, \
            tarfile.open(os.path.join(plain, "p" + name), "w",
                         format=tarfile.USTAR_FORMAT) as pf:
        for k in range(s, len(files), 2):
            ci, p = files[k]
            key = "s%d_%03d" % (s, k)
            tf.add(p, arcname=key + ".jpg")
            pf.add(p, arcname=key + ".jpg")
            for ext, b in (("cls", str(ci).encode()),
                           ("txt", ('"%d"\tcaf\u00e9\n\U0001F600 line %d'
                                    % (k, k)).encode())):
                if ext == "txt" and k == NOTXT:
                    continue
                ti = tarfile.TarInfo("%s.%s" % (key, ext))
                ti.size = len(b)
                tf.addfile(ti, io.BytesIO(b))
                if ext == "txt":
                    caps[key] = b.decode()
                    continue
                ti = tarfile.TarInfo("%s.%s" % (key, ext))
                ti.size = len(b)
                pf.addfile(ti, io.BytesIO(b))
for d, pre in ((local, ""), (plain, "p")):
    for s in range(2):
        name = "%sshard-%06d.tar" % (pre, s)
        with tarfile.open(os.path.join(d, name)) as tf:
            spans[name] = [(i.offset_data, i.offset_data + i.size)
                           for i in tf.getmembers()
                           if i.name.endswith(".jpg")]
# a .txt member's bytes in the tar: its header and its blocks
FOOT = sum(512 + -(-len(c.encode()) // 512) * 512 for c in caps.values()) \
    / len(caps)
os.symlink(os.path.join(plain, "pshard-000000.tar"),
           os.path.join(local, "pshard-000000.tar"))
os.symlink(os.path.join(plain, "pshard-000001.tar"),
           os.path.join(local, "pshard-000001.tar"))
BRACE = "shard-{000000..000001}.tar"
PBRACE = "pshard-{000000..000001}.tar"


def texts(m, job, e):
    """Every batch's captions checked against its ids'; the ids."""
    want = {}
    with open(m.p(job, "samples.tsv")) as f:
        for line in f:
            r = line.split("\t")
            key = r[1].rsplit(":", 1)[1].rsplit(".", 1)[0]
            want[int(r[0])] = caps.get(key)
    seen = []
    info = json.load(open(m.p(job, "info.json")))
    for b in range(info["batches_per_epoch"]):
        base = m.p(job, "epoch-%04d" % e, "batch-%06d" % b)
        size = os.stat(base + ".text.jsonl").st_size
        raw = fflib.read_file(base + ".text.jsonl")
        check(size == len(raw), "%s: stat %d, read %d" % (base, size,
                                                          len(raw)))
        got = [json.loads(x) for x in raw[:-1].split(b"\n")]
        ids = np.load(base + ".ids.npy").tolist()
        check(got == [want[i] if want[i] is not None else "" for i in ids],
              "%s: lines %r, ids %s" % (base, got, ids))
        try:
            fflib.read_file(base + ".npy")
        except OSError as ex:  # a sample without a caption, on_error fail
            check(ex.errno == 5 and info["on_error"] == "fail" and
                  any(want[i] is None for i in ids), "%s: %s" % (base, ex))
        check(info["on_error"] == "fail" or
              all(want[i] is not None for i in ids),
              "%s serves a sample without a caption: %s" % (base, ids))
        seen += ids
    return seen


with rs.Nginx(local, t.path("ng")) as ng:
    url = "%s/%s" % (ng.url, BRACE)
    lines = ["[mount]", "cache_dir = %s" % t.path("cache"),
             "cache_size = 0", "threads = 2", "memory = 128M",
             "readahead = 2", "",
             "[dataset cap]", "shards = %s" % url, "text = txt", "",
             "[dataset capn]", "shards = %s" % url, "",
             "[dataset img]", "shards = %s/%s" % (ng.url, PBRACE)]
    for name, keys in (("cap", dict(dataset="cap")),
                       ("capn", dict(dataset="capn")),
                       ("img", dict(dataset="img")),
                       ("caprel", dict(dataset="cap", order="relaxed",
                                       on_error="substitute"))):
        j = dict(batch_size=5, epochs=1, seed=3, shuffle="yes",
                 pipeline="decode resize(24) center_crop(16)",
                 on_error="fail")
        j.update(keys)
        lines += ["", "[job %s]" % name] + ["%s = %s" % kv for kv in
                                            j.items()]
    cfg = t.path("remote.conf")
    with open(cfg, "w") as f:
        f.write("\n".join(lines) + "\n")
    with fflib.Mount(t, cfg, t.path("mnt")) as m:
        # The index: each shard streamed whole once a dataset, as one
        # version of it (Range bytes=0- with If-Match, issue 34).
        idx = [r for r in ng.requests() if r["range"] == "bytes=0-" and
               r["method"] == "GET"]
        check(len(idx) == 6 and all(r["body"] == os.path.getsize(
            os.path.join(local, r["uri"].rsplit("/", 1)[1])) for r in idx),
            "the index: 2 whole reads a dataset: %s" % idx)

        def per_sample(job):
            """Range bytes per sample of reading job's epoch 0 (a batch
            failing for a sample without a caption read too), each range
            checked to span image members only."""
            before = len(ng.requests())
            if job == "cap":
                texts(m, job, 0)
            else:
                for b in range(5):
                    fflib.read_file(m.p(job, "epoch-0000",
                                        "batch-%06d.npy" % b))
            got = [r for r in ng.requests()[before:]
                   if r["range"] and r["range"] != "bytes=0-0"]
            n = pix = 0
            for r in got:
                a, b = (int(x) for x in r["range"][6:].split("-"))
                sp = spans[r["uri"].rsplit("/", 1)[1]]
                starts = [x for x, _ in sp]
                ends = [y - 1 for _, y in sp]
                check(a in starts and b in ends, "%s: a range %d-%d not "
                      "from an image member to one (%s)" % (job, a, b, r))
                for x, y in sp:
                    if a <= x and y - 1 <= b:
                        n += 1
                        pix += y - x
            # bytes past the images' own: the gaps merged ranges pass over
            return (sum(r["body"] for r in got) - pix) / n, pix / n, n

        img, ipix, n_img = per_sample("img")
        capn, _, n_capn = per_sample("capn")
        cap, _, n_cap = per_sample("cap")
        per_txt = sum(len(c.encode()) for c in caps.values()) / len(caps)
        log("bytes fetched per sample past the image's %.0f, cache off: "
            "%.1f with captions (%d samples), %.1f over the same shards "
            "without text = (%d), %.1f over shards without .txt members "
            "(%d); a caption is %.1f bytes, %.1f in the tar" % (
                ipix, cap, n_cap, capn, n_capn, img, n_img, per_txt, FOOT))
        check(n_img == 24 and n_capn == 24, "every sample read once")
        check(cap <= img + FOOT and capn <= img + FOOT,
              "per sample, captions cost %.1f bytes more, past a .txt "
              "member's %.1f" % (cap - img, FOOT))
        check(len(texts(m, "caprel", 0)) == 24, "caprel: an epoch of 24")
        for r in ng.requests():
            check(r["status"] in (200, 206), "a failed GET: %s" % r)
log("ok")
