#!/usr/bin/python3
"""test_remote_response.py - every response checked where its headers end
(issue 34, section 2).

Two shards of 8 images served by nginx (through tests/remote_servers.py's
Proxy), by a small server that trickles, and by `python3 -m http.server`:

- the index's streaming GET cut halfway, and its resume (Range:
  bytes=N-) answered with a 200 of the whole object: the answer is
  refused before a byte of it is used (bad_responses{kind="not_206"}),
  the resume tried again, and the shard indexed whole: every sample in
  samples.tsv, no "not indexed" in the log, every batch feedfs-ref's;
  the same with a 206 from another offset (kind="content_range"); a
  remount finds the kept index whole;
- a server that trickles 64 bytes a second: the mount fails, saying so,
  within a bound derived from remote_timeout (it hung for minutes);
- a long index (a shard sent at 256 KiB/s): the log says how far it got
  while it runs, and the mount serves it;
- `python3 -m http.server`, which ignores Range: the mount is refused
  with a message that names Range (every read failed after it mounted).
"""

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
data = t.gen(t.path("data"), n=16, classes=2, seed=35)
images = []
for ci, c in enumerate(sorted(os.listdir(data))):
    for f in sorted(os.listdir(os.path.join(data, c))):
        with open(os.path.join(data, c, f), "rb") as fh:
            images.append((ci, fh.read()))


def make_shard(path, items, filler=0):
    """A ustar shard of items; filler: a member of that many bytes that is
    no sample (KEY.bin), first."""
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
        if filler:
            ti = tarfile.TarInfo("filler.bin")
            ti.size = filler
            tf.addfile(ti, io.BytesIO(os.urandom(filler)))
        for i, (ci, img) in items:
            for name, payload in (("s%04d.jpg" % i, img),
                                  ("s%04d.cls" % i, b"%d" % ci)):
                ti = tarfile.TarInfo(name)
                ti.size = len(payload)
                tf.addfile(ti, io.BytesIO(payload))


www, local = t.path("www"), t.path("local")
os.makedirs(www)
os.makedirs(local)
SHARDS = [list(enumerate(images))[s * 8:(s + 1) * 8] for s in range(2)]
for s in range(2):
    make_shard(os.path.join(local, "shard-%d.tar" % s), SHARDS[s])
    make_shard(os.path.join(www, "shard-%d.tar" % s), SHARDS[s])
SHARD0 = os.path.getsize(os.path.join(www, "shard-0.tar"))
TIMEOUT, RETRIES = 2, 2


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
remote_timeout = %d
remote_retries = %d

[job j]
dataset = d
batch_size = 4
epochs = 4
shuffle = no
pipeline = decode resize(24) center_crop(16)
dtype = uint8
layout = HWC
on_error = fail
""" % (cache, shards, TIMEOUT, RETRIES))
    return path


lcfg = conf(t.path("local.conf"), local + "/shard-*.tar", t.path("lc"))
REF = t.ref(lcfg, "j", 0, t.path("ref"))
NB = len([n for n in os.listdir(REF) if n.endswith(".ids.npy")])


def same_epoch(m, e, what):
    for b in range(NB):
        name = "batch-%06d.npy" % b
        try:
            got = fflib.read_file(m.p("j", "epoch-%04d" % e, name))
        except OSError as x:
            fflib.fail("%s: batch %d: %s\n%s" % (what, b, x,
                                                  m.log()[-3000:]))
        with open(os.path.join(REF, name), "rb") as f:
            check(got == f.read(), "%s: batch %d differs from feedfs-ref's"
                  % (what, b))


def bad(m, kind):
    key = 'feedfs_remote_bad_responses_total{dataset="d",kind="%s"}' % kind
    with open(m.p(".feedfs", "stats")) as f:
        for line in f:
            if line.startswith(key + " "):
                return float(line.split()[1])
    fflib.fail("%s is not in .feedfs/stats" % key)


def indexed_whole(m, what):
    with open(m.p("j", "samples.tsv")) as f:
        n = len(f.read().splitlines())
    check(n == len(images), "%s: %d of %d samples indexed\n%s"
          % (what, n, len(images), m.log()[-2000:]))
    check("not indexed" not in m.log(), "%s: the log says a shard is "
          "damaged:\n%s" % (what, m.log()[-2000:]))


def refused(cfg, mnt, bound):
    """feedfs on cfg must stop before serving, within bound seconds:
    (exit status, output, seconds)."""
    os.makedirs(mnt, exist_ok=True)
    t0 = time.monotonic()
    p = subprocess.Popen([fflib.FEEDFS, "-f", cfg, mnt],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        out, _ = p.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        subprocess.run(["fusermount3", "-u", mnt])
        p.kill()
        out, _ = p.communicate()
        fflib.fail("%s: mounted, or hung past %d s:\n%s"
                   % (cfg, bound, out.decode(errors="replace")[-2000:]))
    return p.returncode, out.decode(errors="replace"), \
        time.monotonic() - t0


# ---- 1. a resumed index GET answered from elsewhere ----------------------
with rs.Nginx(www, t.path("ng")) as ng, \
        rs.Proxy("127.0.0.1", ng.port) as px:
    for n, (mode, params, kind) in enumerate((
            ("full200", {}, "not_206"),
            ("range_from", dict(offset=0), "content_range"))):
        cfg = conf(t.path("resume%d.conf" % n), px.url +
                   "/shard-{0..1}.tar", t.path("c1-%d" % n))
        px.plan([("truncate", dict(when="stream", times=1,
                                   keep=SHARD0 // 2)),
                 (mode, dict(when="resume", times=1, **params))])
        with fflib.Mount(t, cfg, t.path("mnt")) as m:
            indexed_whole(m, "resume answered by %s" % mode)
            check(bad(m, kind) >= 1, "resume answered by %s: "
                  "bad_responses{kind=%s} is 0" % (mode, kind))
            same_epoch(m, 0, "resume answered by %s" % mode)
        px.set("pass")
        with fflib.Mount(t, cfg, t.path("mnt")) as m:
            indexed_whole(m, "remount after %s" % mode)
        log("index resume answered by %s: refused (%s), tried again, "
            "indexed whole" % (mode, kind))

# ---- 2. a server that trickles: the index stream has a minimum rate ------
with rs.FileServer(www, rate=64) as fs:
    cfg = conf(t.path("trickle.conf"), fs.url + "/shard-{0..1}.tar",
               t.path("c2"))
    # each try gives up after remote_timeout below the rate; the retries'
    # backoff is at most 5 s each; 60 s more for a loaded machine
    bound = (RETRIES + 1) * TIMEOUT + RETRIES * 5 + 60
    rc, out, took = refused(cfg, t.path("mnt"), bound)
    check(rc == 2 and "bytes a second" in out,
          "trickle: exit %d, expected 2 and the rate said:\n%s"
          % (rc, out[-2000:]))
    log("a server at 64 B/s: the mount failed in %.1f s (bound %d s): %s"
        % (took, bound, out.strip().splitlines()[-1]))

# ---- 3. a long index says how far it got ---------------------------------
big = t.path("big")
os.makedirs(big)
make_shard(os.path.join(big, "shard-0.tar"), SHARDS[0], filler=3 << 20)
make_shard(os.path.join(big, "shard-1.tar"), SHARDS[1])
with rs.FileServer(big, rate=256 << 10) as fs:
    cfg = conf(t.path("long.conf"), fs.url + "/shard-{0..1}.tar",
               t.path("c3"))
    with fflib.Mount(t, cfg, t.path("mnt"), timeout=120) as m:
        same_epoch(m, 0, "a long index")
        lines = [ln for ln in m.log().splitlines()
                 if "shard-0.tar: indexing" in ln]
        check(lines, "a long index: no progress in the log:\n%s"
              % m.log()[-2000:])
    log("a long index: %d progress line(s), the first: %s"
        % (len(lines), lines[0]))

# ---- 4. a server without Range: found out at mount ------------------------
with rs.PyHttpServer(www, t.path("pyhttp")) as ps:
    cfg = conf(t.path("norange.conf"), ps.url + "/shard-{0..1}.tar",
               t.path("c4"))
    rc, out, took = refused(cfg, t.path("mnt"), 90)
    check(rc == 2 and "Range" in out,
          "python3 -m http.server: exit %d, expected 2 and Range named:\n%s"
          % (rc, out[-2000:]))
    log("python3 -m http.server: refused: %s" % out.strip().splitlines()[-1])
log("ok")
