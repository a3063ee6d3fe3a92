#!/usr/bin/python3
"""test_remote_faults.py - remote shards behind a fault-injecting proxy
(tests/remote_servers.py: Proxy in front of nginx; issue 30).

Each fault is set on the proxy, then a batch not built yet is read:

- passing faults (a 503 twice, a 429, a reset, a truncated body, a 200
  with the whole object in place of a 206, a wrong Content-Range, a
  longer body): the batch is served, byte-identical to feedfs-ref over
  the local shards, the retry counted and the bad response counted by
  its kind in .feedfs/stats;
- lasting faults (a redirect to another host, endless headers, a
  gigantic Content-Length, a server slower than remote_timeout, an
  object changed by a server that ignores If-Match): the batch fails
  with EIO within the bound the retries give, the kind is counted, the
  daemon's RSS stays within memory + 100 MiB, and once the proxy passes
  again (the breaker closed by its probe) batches are served right.
"""

import errno
import io
import os
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

TIMEOUT, RETRIES = 2, 2
t = fflib.Test()
data = t.gen(t.path("data"), n=16, classes=2, seed=31)
files = []
for ci, c in enumerate(sorted(os.listdir(data))):
    for f in sorted(os.listdir(os.path.join(data, c))):
        files.append((ci, os.path.join(data, c, f)))
www, local = t.path("www"), t.path("local")
os.makedirs(www)
os.makedirs(local)
for s in range(4):
    with tarfile.open(os.path.join(local, "shard-%d.tar" % s), "w") as tf:
        for i in range(s, len(files), 4):
            ci, src = files[i]
            with open(src, "rb") as f:
                img = f.read()
            for name, payload in (("s%04d.jpg" % i, img),
                                  ("s%04d.cls" % i, b"%d" % ci)):
                ti = tarfile.TarInfo(name)
                ti.size = len(payload)
                tf.addfile(ti, io.BytesIO(payload))
    os.link(os.path.join(local, "shard-%d.tar" % s),
            os.path.join(www, "shard-%d.tar" % s))

ng = rs.Nginx(www, t.path("ng")).start()
px = rs.Proxy("127.0.0.1", ng.port).start()


def conf(path, shards):
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
epochs = 200
shuffle = no
pipeline = decode resize(24) center_crop(16)
dtype = uint8
layout = HWC
on_error = fail
""" % (t.path("cache"), shards, TIMEOUT, RETRIES))
    return path


cfg = conf(t.path("remote.conf"), px.url + "/shard-{0..3}.tar")
lcfg = conf(t.path("local.conf"), local + "/shard-*.tar")
refs = {}


def ref_batch(e, b):
    if e not in refs:
        refs[e] = t.ref(lcfg, "j", e, t.path("ref-%d" % e))
    with open(os.path.join(refs[e], "batch-%06d.npy" % b), "rb") as f:
        return f.read()


def stats(m):
    out = {}
    with open(m.p(".feedfs", "stats")) as f:
        for line in f:
            if line.startswith("feedfs_remote_"):
                k, v = line.rsplit(None, 1)
                out[k.replace('{dataset="d"}', "").replace(
                    '{dataset="d",kind="', ":").rstrip('"}')] = float(v)
    return out


def rss_mb(m):
    with open("/proc/%d/status" % m.proc.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


epoch = [0]


def next_batch():
    """A batch not built yet: (epoch, batch)."""
    e = epoch[0]
    epoch[0] += 1
    return e, 0


def read(m, e, b):
    return fflib.read_file(m.p("j", "epoch-%04d" % e, "batch-%06d.npy" % b))


def serve_again(m):
    """Once the proxy passes again: a fresh batch served right (the
    breaker, if open, closes with its probe)."""
    for _ in range(20):
        e, b = next_batch()
        try:
            got = read(m, e, b)
        except OSError:
            time.sleep(1.5)
            continue
        check(got == ref_batch(e, b), "epoch %d batch %d differs" % (e, b))
        return
    fflib.fail("batches still fail after the proxy passes again")


with fflib.Mount(t, cfg, t.path("mnt"), timeout=60) as m:
    e, b = next_batch()
    check(read(m, e, b) == ref_batch(e, b), "no fault: differs")
    passing = [("status", dict(code=503), 2, "retries"),
               ("status", dict(code=429), 1, "retries"),
               # (on a reused connection curl itself tries once more)
               ("reset", {}, 1, None),
               ("truncate", {}, 1, "bad_responses:short"),
               ("full200", {}, 1, "bad_responses:not_206"),
               ("bad_range", dict(shift=1), 1,
                "bad_responses:content_range"),
               ("long", dict(extra=100), 1, "bad_responses:long")]
    for mode, params, times, counter in passing:
        before = stats(m)
        px.set(mode, when="range", times=times, **params)
        e, b = next_batch()
        try:
            got = read(m, e, b)
        except OSError as x:
            fflib.fail("%s: the batch failed: %s\n%s" % (mode, x,
                                                         m.log()[-1500:]))
        check(got == ref_batch(e, b), "%s: other bytes" % mode)
        after = stats(m)
        if counter is not None:
            key = "feedfs_remote_" + counter.replace(":", "_total:") \
                if ":" in counter else "feedfs_remote_%s_total" % counter
            check(after.get(key, 0) > before.get(key, 0),
                  "%s: %s did not grow (%s)" % (mode, key, after))
            check(after["feedfs_remote_retries_total"] >
                  before["feedfs_remote_retries_total"],
                  "%s: no retry" % mode)
        px.set("pass")
        log("%s x%d: served, %s counted" % (mode, times, counter or
                                            "nothing"))
    lasting = [("redirect", dict(location="http://127.0.0.2:9"),
                "bad_responses:redirect"),
               ("endless_headers", {}, "bad_responses:headers"),
               ("huge_length", {}, None),
               ("delay", dict(seconds=TIMEOUT * 3), None),
               ("change", dict(honour_if_match=False), "changed")]
    bound = (RETRIES + 1) * (TIMEOUT + 1) + RETRIES * 5 + 5 + 10
    for mode, params, counter in lasting:
        before = stats(m)
        px.set(mode, when="range", **params)
        e, b = next_batch()
        t0 = time.monotonic()
        try:
            read(m, e, b)
            fflib.fail("%s: the batch was served" % mode)
        except OSError as x:
            check(x.errno == errno.EIO, "%s: %s" % (mode, x))
        took = time.monotonic() - t0
        check(took < bound, "%s: the read took %.0f s (bound %d s)"
              % (mode, took, bound))
        after = stats(m)
        if counter is not None:
            key = "feedfs_remote_" + counter.replace(":", "_total:") \
                if ":" in counter else "feedfs_remote_%s_total" % counter
            check(after.get(key, 0) > before.get(key, 0),
                  "%s: %s did not grow" % (mode, key))
        check(after["feedfs_remote_failed_total"] +
              after["feedfs_remote_fast_failed_total"] +
              after["feedfs_remote_changed_total"] >
              before["feedfs_remote_failed_total"] +
              before["feedfs_remote_fast_failed_total"] +
              before["feedfs_remote_changed_total"],
              "%s: no failure counted" % mode)
        check(m.alive(), "%s: the daemon died" % mode)
        rss = rss_mb(m)
        check(rss < 64 + 100, "%s: RSS %.0f MiB" % (mode, rss))
        px.set("pass")
        serve_again(m)
        log("%s: EIO in %.1f s, RSS %.0f MiB, served again after" %
            (mode, took, rss))
    text = m.log()
    check("changed since it was indexed" in text, "no log line of the "
          "changed object")
px.stop()
ng.stop()
log("ok")
