#!/usr/bin/python3
"""test_remote_fault_shard.py - faults on one remote shard, on_error decides
(issue 30).

Four shards served by nginx through tests/remote_servers.py's Proxy; the
mount (cache_size = 0, so every epoch fetches; remote_retries = 2,
remote_timeout = 2) indexes them while the proxy passes, then each fault
is injected into the range requests of one shard (shard-000001.tar):
a delay past the timeout, a truncated body, a reset, 503 and 429 on every
try, a 200 for a range, a wrong Content-Range, a longer body, a redirect
to another host, endless headers, a gigantic Content-Length, and the
object changed since it was indexed (a server that answers 412 to the
old ETag, and one that ignores If-Match and sends other bytes).  For each:

- the mount stays up;
- job f (on_error = fail): the batches with a sample of that shard fail
  with EIO, the others read; no read is held longer than the retries
  allow (a bound on a hang, with slack);
- job s (on_error = substitute): every batch reads, and errors.tsv names
  the samples of that shard;
- .feedfs/stats counts it: failed reads, the response kind
  (feedfs_remote_bad_responses_total{kind}), retries, changed objects;
- every batch that reads equals feedfs-ref's over the local shards.

Each fault has a mount of its own (the breaker one opened would fail the
next one's reads).  Last, the server down (every request reset): the
breaker opens and fails reads at once; the server back, the same epoch
reads whole within 90 s (the breaker probes and closes; the batches that
failed meanwhile, read ahead or read, are made again at their next read:
issue 34).

Then 503 twice and a 429 once (within the retries): every batch reads,
with the retries counted.
"""

import errno
import os
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402
import remote_servers as rs  # noqa: E402

t = fflib.Test()
why = rs.Nginx.unavailable()
if why:
    fflib.skip(why)

NSHARDS = 4
RETRIES, TIMEOUT = 2, 2
# remote_fetch.c: a reader waits at most (retries + 1) * (timeout + 1 s) +
# retries * 5 s (the backoff's cap) + 5 s; 30 s more for a loaded machine
HOLD = (RETRIES + 1) * (TIMEOUT + 1) + RETRIES * 5 + 5 + 30
PIPE = "decode resize(40) center_crop(32)"
data = t.gen(t.path("data"), n=24, classes=3, seed=40)
local = t.path("shards")
rs.make_shards(data, local, NSHARDS)
BAD = "shard-000001.tar"


def conf(path, shards):
    lines = ["[mount]", "cache_dir = %s" % t.path("cache"),
             "cache_size = 0", "threads = 2", "memory = 128M",
             "readahead = 2", "", "[dataset data]", "shards = %s" % shards,
             "label = cls", "remote_retries = %d" % RETRIES,
             "remote_timeout = %d" % TIMEOUT]
    for name, on_error in (("f", "fail"), ("s", "substitute")):
        k = fflib.job(epochs=1000, batch_size=4, pipeline=PIPE,
                      dtype="uint8", layout="HWC", on_error=on_error)
        lines += ["", "[job %s]" % name] + ["%s = %s" % kv
                                            for kv in k.items()]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def stats(m):
    """{(name, kind or None): value} of the remote counters."""
    out = {}
    with open(m.p(".feedfs", "stats")) as f:
        for line in f:
            if not line.startswith("feedfs_remote_"):
                continue
            key, val = line.rsplit(None, 1)
            name = key.split("{", 1)[0]
            kind = None
            if 'kind="' in key:
                kind = key.split('kind="', 1)[1].split('"', 1)[0]
            out[(name, kind)] = out.get((name, kind), 0) + float(val)
    return out


def delta(a, b, name, kind=None):
    return b.get((name, kind), 0) - a.get((name, kind), 0)


def bad_shard_batches(m, epoch):
    """The batches of job f's epoch with a sample of BAD (samples.tsv and
    the ids of feedfs-ref)."""
    with open(m.p("f", "samples.tsv")) as f:
        rows = [ln.rstrip("\n").split("\t") for ln in f]
    bad_ids = {int(r[0]) for r in rows if BAD in r[1]}
    ref = refs.get(epoch)
    if ref is None:
        # feedfs-ref over the same shards on local disk (the remote ones
        # give the same batches: test_remote_shards.py)
        ref = refs[epoch] = t.ref(ref_cfg, "f", epoch,
                                  t.path("ref-%d" % epoch))
    import numpy as np
    out = set()
    for n in os.listdir(ref):
        if n.endswith(".ids.npy"):
            ids = set(int(i) for i in np.load(os.path.join(ref, n)))
            if ids & bad_ids:
                out.add(n.split(".")[0])
    return out, bad_ids, ref


def read_epoch(m, job, epoch, ref=None):
    """{batch name: errno or 0} reading every batch's .npy, each read
    timed against HOLD; with ref (job f's feedfs-ref files), each batch
    read equals its .npy there."""
    d = m.p(job, "epoch-%04d" % epoch)
    res = {}
    for n in sorted(os.listdir(d)):
        if not n.endswith(".npy") or n.count(".") != 1:
            continue
        t0 = time.monotonic()
        try:
            got = fflib.read_file(os.path.join(d, n))
            res[n[:-4]] = 0
            if ref is not None:
                with open(os.path.join(ref, n), "rb") as f:
                    check(got == f.read(), "%s/epoch-%04d/%s differs from "
                          "feedfs-ref" % (job, epoch, n))
        except OSError as e:
            res[n[:-4]] = e.errno
        took = time.monotonic() - t0
        check(took < HOLD, "%s/%s: a read held %.0f s, longer than the "
              "retries allow (%d s)" % (job, n, took, HOLD))
    return res


def recover(m, epoch):
    """With the proxy passing: epoch of f reads whole (read again until
    it does, at most 90 s: the breaker fails reads at once until its
    probe closes it; a batch that failed meanwhile is made again at its
    next read) and equals feedfs-ref's.  Returns the epoch read."""
    px.set("pass")
    deadline = time.monotonic() + 90
    while True:
        _, _, ref = bad_shard_batches(m, epoch)
        res = read_epoch(m, "f", epoch, ref)
        if not any(res.values()):
            return epoch
        check(time.monotonic() < deadline, "no recovery 90 s after the "
              "fault: %s\nthe proxy's last requests: %s\n%s\n---- log:\n%s"
              % (res, px.log[-4:], stats(m), m.log()[-3000:]))
        time.sleep(1)


refs = {}
ref_cfg = conf(t.path("local.conf"), os.path.join(local, "shard-*.tar"))
FAULTS = [
    # (mode, params, the counter that must count it)
    ("delay", dict(seconds=TIMEOUT + 3), ("feedfs_remote_retries_total",
                                          None)),
    ("truncate", dict(keep=100), ("feedfs_remote_retries_total", None)),
    ("reset", {}, ("feedfs_remote_retries_total", None)),
    ("status", dict(code=503), ("feedfs_remote_retries_total", None)),
    ("status", dict(code=429, retry_after=1),
     ("feedfs_remote_retries_total", None)),
    ("full200", {}, ("feedfs_remote_bad_responses_total", "not_206")),
    ("bad_range", dict(shift=3), ("feedfs_remote_bad_responses_total",
                                  "content_range")),
    ("long", dict(extra=5000), ("feedfs_remote_bad_responses_total",
                                "long")),
    ("redirect", {}, ("feedfs_remote_bad_responses_total", "redirect")),
    ("endless_headers", {}, ("feedfs_remote_bad_responses_total",
                             "headers")),
    ("huge_length", {}, None),
    ("change", {}, ("feedfs_remote_changed_total", None)),
    ("change", dict(honour_if_match=False), ("feedfs_remote_changed_total",
                                             None)),
]

with rs.Nginx(local, t.path("ng")) as ng, \
        rs.Proxy("127.0.0.1", ng.port) as px:
    cfg = conf(t.path("a.conf"), "%s/shard-{000000..%06d}.tar"
               % (px.url, NSHARDS - 1))
    with fflib.Mount(t, cfg, t.path("mnt")) as m:
        epoch = recover(m, 0)
    log("index and a first epoch through the proxy: %s" % px.stats())
    only = os.environ.get("FF_FAULTS")  # a subset, to debug: "status,long"
    for mode, params, counter in FAULTS:
        if only and mode not in only.split(","):
            continue
        # a mount of its own (the index kept in cache_dir): a breaker
        # that one fault opened does not fail the next one's reads
        epoch += 1
        px.set("pass")
        with fflib.Mount(t, cfg, t.path("mnt")) as m:
            p = dict(params)
            if mode == "redirect":
                p["location"] = "http://localhost:%d" % ng.port
            px.set(mode, when="range", path=BAD, **p)
            s0 = stats(m)
            bad_batches, bad_ids, ref = bad_shard_batches(m, epoch)
            check(bad_batches, "no batch of epoch %d has a sample of %s"
                  % (epoch, BAD))
            res = read_epoch(m, "f", epoch, ref)
            check(m.alive(), "%s: feedfs died" % mode)
            failed = {b for b, e in res.items() if e}
            check(all(e in (0, errno.EIO) for e in res.values()),
                  "%s: errors other than EIO: %s" % (mode, res))
            check(failed, "%s: no batch failed" % mode)
            # Batches fetched ahead before the fault read; others fail
            # only while the breaker is open (it counts them).
            s1 = stats(m)
            check(failed <= bad_batches or
                  delta(s0, s1, "feedfs_remote_fast_failed_total") > 0,
                  "%s: failed batches %s, those with a sample of %s %s, "
                  "and the breaker failed none" % (
                      mode, sorted(failed), BAD, sorted(bad_batches)))
            # job s: substitutes, errors.tsv names BAD's samples
            f0 = stats(m)
            res_s = read_epoch(m, "s", epoch)
            check(all(e in (0, errno.EIO) for e in res_s.values()),
                  "%s: errors other than EIO: %s" % (mode, res_s))
            # a substitute fails too only while the breaker is open
            check(not any(res_s.values()) or delta(
                f0, stats(m), "feedfs_remote_fast_failed_total") > 0,
                "%s: on_error = substitute failed batches %s, and not "
                "the breaker" % (mode, res_s))
            with open(m.p("s", "errors.tsv")) as f:
                errs = f.read()
            check(BAD in errs, "%s: errors.tsv does not name %s:\n%s"
                  % (mode, BAD, errs[-2000:]))
            s1 = stats(m)
            if os.environ.get("FF_FAULTS"):
                print(m.log()[-3000:])
            gone = (delta(s0, s1, "feedfs_remote_failed_total")
                    + delta(s0, s1, "feedfs_remote_fast_failed_total"))
            check(gone >= 1, "%s: no read counted as failed: %s"
                  % (mode, {k: v for k, v in s1.items() if
                            v != s0.get(k, 0)}))
            if mode == "full200":
                # the whole object arrives: caught as a 200, or as more
                # bytes than asked (whichever the check meets first)
                counter = ("feedfs_remote_bad_responses_total", "not_206")
                if delta(s0, s1, *counter) < 1:
                    counter = ("feedfs_remote_bad_responses_total", "long")
            if counter is not None:
                check(delta(s0, s1, *counter) >= 1,
                      "%s: %s{%s} did not count it: %s" % (
                          mode, counter[0], counter[1],
                          {k: v for k, v in s1.items()
                           if v != s0.get(k, 0)}))
            if mode == "change":
                check("changed since it was" in m.log(), "no log line "
                      "says the object changed:\n%s" % m.log()[-3000:])
            log("%s %s: batches %s failed (on_error = fail), %s with "
                "on_error = substitute; counted: %s" % (
                    mode, params, sorted(failed),
                    sorted(b for b, e in res_s.items() if e),
                    {"%s%s" % (k[0][len("feedfs_remote_"):], "{%s}" % k[1]
                               if k[1] else ""): v - s0.get(k, 0)
                     for k, v in s1.items() if v != s0.get(k, 0)}))
            px.set("pass")
    # within the retries: 503 twice, a 429 once; every batch reads
    px.set("pass")
    with fflib.Mount(t, cfg, t.path("mnt")) as m:
        for mode, p, times in (("status", dict(code=503), 2),
                               ("status", dict(code=429), 1)):
            epoch += 1
            ref = bad_shard_batches(m, epoch)[2]
            s0 = stats(m)
            px.set(mode, when="range", path=BAD, times=times, **p)
            res = read_epoch(m, "f", epoch, ref)
            check(not any(res.values()), "%s %s x%d within the retries "
                  "failed batches: %s" % (mode, p, times, res))
            s1 = stats(m)
            check(delta(s0, s1, "feedfs_remote_retries_total") >= times,
                  "%d x %s: retries counted %s" % (
                      times, p, delta(s0, s1,
                                      "feedfs_remote_retries_total")))
        px.set("pass")
        check(m.alive(), "feedfs died")
    # the server down (every request reset): the breaker opens, reads
    # fail at once; the server back: it closes and every batch reads
    with fflib.Mount(t, cfg, t.path("mnt")) as m:
        epoch += 1
        ref = bad_shard_batches(m, epoch)[2]
        s0 = stats(m)
        px.set("reset", when="range")
        res = read_epoch(m, "f", epoch, ref)
        s1 = stats(m)
        check(delta(s0, s1, "feedfs_remote_breaker_opens_total") >= 1 and
              delta(s0, s1, "feedfs_remote_fast_failed_total") >= 1,
              "the server down: the breaker did not open: %s" % (
                  {k: v for k, v in s1.items() if v != s0.get(k, 0)}))
        epoch = recover(m, epoch + 1)
        log("the breaker opened while the server was down, and closed "
            "when it answered again")
    log("proxy: %s" % px.stats())
log("PASS")
