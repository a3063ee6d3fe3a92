#!/usr/bin/python3
"""test_remote_identity.py - a remote object's version (issue 34, section 1).

One notion of a remote shard's version keys its kept index and is sent
and checked with every request: a strong ETag (If-Match), else
Last-Modified and the size (If-Unmodified-Since), else the mount is
refused and says why.  Two shards of 8 images (all padded to one size,
so that members swapped in place are whole JPEGs of other samples) are
served by:

- nginx with `etag off` (Last-Modified only): shard-0 replaced on the
  server by its members in reverse order, the same size, a later mtime.
  Every batch reads the old shard's bytes or fails (EIO, "changed since
  it was indexed"), never another member's pixels; the members' range
  requests carried If-Unmodified-Since; a remount indexes the new shard
  and serves feedfs-ref's bytes again;
- a server of weak ETags (W/"...") and Last-Modified that compares
  If-Match strongly, as RFC 9110 says (a weak tag there gets 412): the
  mount serves feedfs-ref's bytes, and no request carried a weak tag in
  If-Match;
- a server of 130-byte ETags (a quoted SHA-512 hex digest): the mount
  serves feedfs-ref's bytes, every member's range request carried the
  whole tag in If-Match, and the breaker never opened;
- a server of only a weak ETag, and one of no validator at all: the
  mount is refused (exit 2) with a message that says why.
"""

import errno
import io
import os
import subprocess
import sys
import tarfile
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402
import remote_servers as rs  # noqa: E402

why = rs.Nginx.unavailable()
if why:
    fflib.skip(why)

t = fflib.Test()
data = t.gen(t.path("data"), n=16, classes=2, seed=34)
images = []
for ci, c in enumerate(sorted(os.listdir(data))):
    for f in sorted(os.listdir(os.path.join(data, c))):
        with open(os.path.join(data, c, f), "rb") as fh:
            images.append((ci, fh.read()))
# One size for every image (zeros after the JPEG's end): a member read at
# another member's offset is then a whole JPEG of another sample.
SIZE = max(len(b) for _, b in images) + 1
images = [(ci, b + b"\0" * (SIZE - len(b))) for ci, b in images]


def make_shard(path, items, mtime):
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
        for i, (ci, img) in items:
            for name, payload in (("s%04d.jpg" % i, img),
                                  ("s%04d.cls" % i, b"%d" % ci)):
                ti = tarfile.TarInfo(name)
                ti.size = len(payload)
                ti.mtime = 1700000000
                tf.addfile(ti, io.BytesIO(payload))
    os.utime(path, (mtime, mtime))


T0 = int(time.time()) - 3600
www, local = t.path("www"), t.path("local")
os.makedirs(www)
os.makedirs(local)
SHARDS = [list(enumerate(images))[s * 8:(s + 1) * 8] for s in range(2)]
for s in range(2):
    make_shard(os.path.join(local, "shard-%d.tar" % s), SHARDS[s], T0)
    make_shard(os.path.join(www, "shard-%d.tar" % s), SHARDS[s], T0)


def conf(path, shards, cache):
    with open(path, "w") as f:
        f.write("""[mount]
cache_dir = %s
cache_size = 0
threads = 2
memory = 64M
readahead = 0

[dataset d]
shards = %s
remote_timeout = 5
remote_retries = 1

[job j]
dataset = d
batch_size = 4
epochs = 4
shuffle = no
pipeline = decode resize(24) center_crop(16)
dtype = uint8
layout = HWC
on_error = fail
""" % (cache, shards))
    return path


lcfg = conf(t.path("local.conf"), local + "/shard-*.tar", t.path("lc"))
REF = t.ref(lcfg, "j", 0, t.path("ref"))
NB = len([n for n in os.listdir(REF) if n.endswith(".ids.npy")])


def ref(name):
    with open(os.path.join(REF, name), "rb") as f:
        return f.read()


def batch(m, e, b):
    return fflib.read_file(m.p("j", "epoch-%04d" % e, "batch-%06d.npy" % b))


def stat(m, name):
    key = 'feedfs_remote_%s{dataset="d"}' % name
    with open(m.p(".feedfs", "stats")) as f:
        for line in f:
            if line.startswith(key + " "):
                return float(line.split()[1])
    fflib.fail("%s is not in .feedfs/stats" % key)


def same_epoch(m, e, what):
    for b in range(NB):
        try:
            got = batch(m, e, b)
        except OSError as x:
            fflib.fail("%s: epoch %d batch %d: %s\n%s"
                       % (what, e, b, x, m.log()[-3000:]))
        check(got == ref("batch-%06d.npy" % b),
              "%s: epoch %d batch %d differs from feedfs-ref's"
              % (what, e, b))


def refused(cfg, mnt, bound=90):
    """feedfs on cfg must stop before serving: (exit status, output)."""
    os.makedirs(mnt, exist_ok=True)
    p = subprocess.Popen([fflib.FEEDFS, "-f", cfg, mnt],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        out, _ = p.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        subprocess.run(["fusermount3", "-u", mnt])
        p.kill()
        out, _ = p.communicate()
        fflib.fail("%s was mounted (or hung %d s):\n%s"
                   % (cfg, bound, out.decode(errors="replace")[-2000:]))
    return p.returncode, out.decode(errors="replace")


member_reqs = lambda reqs: [  # noqa: E731
    r for r in reqs if r["range"] and r["range"] not in ("bytes=0-0",)
    and not r["range"].endswith("-")]

# ---- 1. no ETag: Last-Modified and the size, If-Unmodified-Since ---------
with rs.Nginx(www, t.path("ng"), etag=False) as ng:
    cfg = conf(t.path("noetag.conf"), ng.url + "/shard-{0..1}.tar",
               t.path("c1"))
    with fflib.Mount(t, cfg, t.path("mnt")) as m:
        # indexed; then shard-0 replaced: the same size, reversed, later
        make_shard(os.path.join(www, "shard-0.tar.new"),
                   list(reversed(SHARDS[0])), T0 + 100)
        check(os.path.getsize(os.path.join(www, "shard-0.tar.new")) ==
              os.path.getsize(os.path.join(www, "shard-0.tar")),
              "the replacement is not the same size")
        os.rename(os.path.join(www, "shard-0.tar.new"),
                  os.path.join(www, "shard-0.tar"))
        failed = 0
        for b in range(NB):
            try:
                got = batch(m, 0, b)
            except OSError as x:
                check(x.errno == errno.EIO, "batch %d: %s" % (b, x))
                failed += 1
                continue
            check(got == ref("batch-%06d.npy" % b),
                  "no ETag: batch %d was served with other bytes after "
                  "shard-0 was replaced by one of the same size" % b)
        check(failed == 2, "no ETag: %d of %d batches failed after shard-0 "
              "changed (its 2 should)" % (failed, NB))
        check(stat(m, "changed_total") >= 1, "changed_total is 0")
        check("changed since it was indexed" in m.log(),
              "no log line of the change:\n%s" % m.log()[-2000:])
        mr = member_reqs(ng.requests())
        check(mr and all(r["if_unmodified_since"] and not r["if_match"]
                         for r in mr),
              "no ETag: member requests without If-Unmodified-Since: %s"
              % mr[:3])
    log("no ETag: the replaced shard's batches fail (changed), the other "
        "shard's are served right; If-Unmodified-Since on %d requests"
        % len(mr))
    with fflib.Mount(t, cfg, t.path("mnt")) as m:
        same_epoch(m, 1, "no ETag, remounted")
        check(stat(m, "index_bytes_total") > 0, "the remount did not index "
              "the replaced shard again")
    log("no ETag: a remount indexes the new shard and serves it right")
    make_shard(os.path.join(www, "shard-0.tar"), SHARDS[0], T0 + 200)

# ---- 2. weak ETags: compared weakly, never sent in If-Match --------------
with rs.FileServer(www, etag="weak") as fs:
    cfg = conf(t.path("weak.conf"), fs.url + "/shard-{0..1}.tar",
               t.path("c2"))
    with fflib.Mount(t, cfg, t.path("mnt")) as m:
        same_epoch(m, 0, "weak ETag")
    check(not any(r["if_match"] for r in fs.requests),
          "weak ETag: sent in If-Match: %s"
          % [r["if_match"] for r in fs.requests if r["if_match"]][:2])
    mr = member_reqs(fs.requests)
    check(mr and all(r["if_unmodified_since"] for r in mr),
          "weak ETag: member requests without If-Unmodified-Since")
    log("weak ETag: served right; If-Unmodified-Since, never If-Match")

# ---- 3. a 130-byte ETag: kept whole -------------------------------------
with rs.FileServer(www, etag="long") as fs:
    cfg = conf(t.path("long.conf"), fs.url + "/shard-{0..1}.tar",
               t.path("c3"))
    with fflib.Mount(t, cfg, t.path("mnt")) as m:
        same_epoch(m, 0, "130-byte ETag")
        check(stat(m, "breaker_opens_total") == 0, "the breaker opened")
    mr = member_reqs(fs.requests)
    check(mr and all(r["if_match"] and len(r["if_match"]) == 130
                     for r in mr),
          "130-byte ETag: If-Match of member requests: %s"
          % sorted({len(r["if_match"] or "") for r in mr}))
    log("130-byte ETag: served right, sent whole in If-Match")

# ---- 4. what cannot be a version: refused at mount ----------------------
for kind, lm, words in (("weak", False, ("weak ETag", "Last-Modified")),
                        (None, False, ("no ETag", "Last-Modified"))):
    with rs.FileServer(www, etag=kind, last_modified=lm) as fs:
        cfg = conf(t.path("bad.conf"), fs.url + "/shard-{0..1}.tar",
                   t.path("c4"))
        rc, out = refused(cfg, t.path("mnt"))
        check(rc == 2 and all(w in out for w in words),
              "ETag %s, no Last-Modified: exit %d, expected 2 and %s:\n%s"
              % (kind, rc, words, out[-2000:]))
        log("ETag %s, no Last-Modified: refused: %s"
            % (kind, out.strip().splitlines()[-1]))
log("ok")
