#!/usr/bin/python3
"""test_remote_heal.py - a failure of a remote source's availability heals
once the source answers; one of the bytes stays (issue 34, section 3).

Four shards served by nginx through tests/remote_servers.py's Proxy;
cache_size = 0 (every read fetches), remote_retries = 0, readahead = 0,
batch_size = 4.  Job f (on_error = fail) has no shuffle: each batch holds
the samples of one shard; job s (substitute) is shuffled.  The faults
are set on the ranges of one shard (shard-000001.tar):

1. 503 (the source unavailable): f's batch fails with EIO, errors.tsv
   names the samples that failed with "HTTP status 503" and
   feedfs_sample_unavailable_total counts them.  The proxy passing
   again, the batch is read again until it reads (the breaker, if the
   failures opened it, fails reads at once until its probe): equal to
   feedfs-ref's.
2. 503 on the next batch, then 412 (the object changed, a property of
   the bytes): the batch read again fails for the change; errors.tsv and
   feedfs.BatchError give that reason (the latest), not the 503.  The
   proxy passing again (a batch of that shard reads), the batch still
   fails (a changed object fails until a remount, as before).
3. s, the shard at 503: a batch with samples of it reads with them
   substituted, counted in feedfs_substituted_total and
   feedfs_sample_unavailable_total, listed in errors.tsv, and the log
   says that the samples of a source that does not answer are
   substituted.
4. s, every shard at 503: no sample can replace another, the batch
   fails, feedfs_substituted_total stays as it was and the log says no
   sample was substituted; the proxy passing again, the batch is read
   again until it reads, each slot equal to its sample in feedfs-ref's
   (some may still be substituted while the breaker closes).

The reasons of a source at 503 are "HTTP status 503", or once the
breaker opened, "the server does not answer".
"""

import errno
import io
import os
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402
import remote_servers as rs  # noqa: E402

sys.path.insert(0, os.path.join(fflib.SRCDIR, "python"))
import feedfs  # noqa: E402
import numpy as np  # noqa: E402

why = rs.Nginx.unavailable()
if why:
    fflib.skip(why)

t = fflib.Test()
NSHARDS, BAD = 4, "shard-000001.tar"
data = t.gen(t.path("data"), n=32, classes=4, seed=34)
local = t.path("shards")
rs.make_shards(data, local, NSHARDS)
PIPE = "decode resize(24) center_crop(16)"


def conf(path, shards):
    lines = ["[mount]", "cache_dir = %s" % t.path("cache"),
             "cache_size = 0", "threads = 2", "memory = 64M",
             "readahead = 0", "", "[dataset data]", "shards = %s" % shards,
             "label = cls", "remote_retries = 0", "remote_timeout = 2"]
    for name, on_error in (("f", "fail"), ("s", "substitute")):
        # f: each batch one shard's; s: shuffled, a shard's samples
        # spread (a substitute is of another shard mostly: the breaker,
        # one per server, opens after 5 failures in a row)
        k = fflib.job(epochs=10, batch_size=4, pipeline=PIPE,
                      shuffle="no" if name == "f" else "yes",
                      dtype="uint8", layout="HWC", on_error=on_error)
        lines += ["", "[job %s]" % name] + ["%s = %s" % kv
                                            for kv in k.items()]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


ref_cfg = conf(t.path("local.conf"), os.path.join(local, "shard-*.tar"))
refs = {}


def ref(job, b, suffix=".npy"):
    if job not in refs:
        refs[job] = t.ref(ref_cfg, job, 0, t.path("ref-" + job))
    with open(os.path.join(refs[job], "batch-%06d%s" % (b, suffix)),
              "rb") as f:
        return f.read()


def ref_sample(job, i):
    """Sample i's pixels in job's epoch 0 of feedfs-ref."""
    for b in range(8):
        ids = ref_ids(job, b)
        if i in ids:
            return np.load(io.BytesIO(ref(job, b)))[ids.index(i)]
    fflib.fail("no sample %d in feedfs-ref's epoch 0 of %s" % (i, job))


def ref_ids(job, b):
    ref(job, b)
    return [int(i) for i in np.load(os.path.join(
        refs[job], "batch-%06d.ids.npy" % b))]


def path(m, job, b, suffix=".npy"):
    return m.p(job, "epoch-0000", "batch-%06d%s" % (b, suffix))


def name(got):
    return errno.errorcode.get(got, got) if isinstance(got, int) \
        else "its bytes"


def read(m, job, b):
    """The batch's bytes, or the errno of its read."""
    try:
        return fflib.read_file(path(m, job, b))
    except OSError as e:
        return e.errno


def errors(m, job):
    """errors.tsv of job as {id: reason}."""
    out = {}
    with open(m.p(job, "errors.tsv")) as f:
        for line in f:
            if not line.startswith("#"):
                i, _, why = line.rstrip("\n").split("\t", 2)
                out[int(i)] = why
    return out


def until(m, what, cond, bound=60):
    """Poll cond() every 0.25 s until it is true; the seconds it took.
    (The breaker that the failures opened fails reads at once until its
    probe is answered, 1 s after it opened at first.)  bound: a bound on
    a hang."""
    t0 = time.monotonic()
    while not cond():
        check(time.monotonic() - t0 < bound, "%s: not within %d s:\n%s"
              % (what, bound, m.log()[-2000:]))
        time.sleep(0.25)
    return time.monotonic() - t0


def read_until_read(m, job, b, what):
    """Read the batch until it reads (until's bound): (bytes, seconds)."""
    got = []

    def ok():
        got[:] = [read(m, job, b)]
        return isinstance(got[0], bytes)
    took = until(m, what, ok)
    return got[0], took


def bad_ids(m):
    with open(m.p("f", "samples.tsv")) as f:
        return sorted(int(ln.split("\t")[0]) for ln in f if BAD in ln)


with rs.Nginx(local, t.path("ng")) as ng, \
        rs.Proxy("127.0.0.1", ng.port) as px:
    cfg = conf(t.path("remote.conf"), "%s/shard-{000000..%06d}.tar"
               % (px.url, NSHARDS - 1))
    with fflib.Mount(t, cfg, t.path("mnt")) as m:
        ids = bad_ids(m)
        check(len(ids) == 8 and ids == list(range(ids[0], ids[0] + 8)),
              "the samples of %s are %s, not 8 in a row" % (BAD, ids))
        b1, b2 = ids[0] // 4, ids[0] // 4 + 1
        check(read(m, "f", 0) == ref("f", 0), "no fault: batch 0 differs")

        # 1. 503: the batch fails; the proxy passing, it reads again
        s0 = m.stats()
        px.set("status", code=503, when="range", path=BAD)
        got = read(m, "f", b1)
        check(got == errno.EIO, "503: batch %d gave %s, not EIO"
              % (b1, name(got)))
        errs = errors(m, "f")
        listed = [i for i in ids[:4] if i in errs]
        check(listed and all("503" in errs[i] or "does not answer" in
                             errs[i] for i in listed),
              "503: errors.tsv says %r of samples %s"
              % ([errs.get(i) for i in ids[:4]], ids[:4]))
        s1 = m.stats()
        px.set("pass")
        got, took = read_until_read(
            m, "f", b1, "503 over: batch %d still fails (a failure of the "
            "source's availability kept after it answers again)" % b1)
        check(got == ref("f", b1), "503 over: batch %d differs" % b1)
        # (a failed slot stops the batch: those in flight fail too)
        check(s1.get("feedfs_sample_unavailable_total", 0)
              - s0.get("feedfs_sample_unavailable_total", 0) >= len(listed),
              "503: feedfs_sample_unavailable_total did not count the "
              "%d samples errors.tsv lists: %s" % (
                  len(listed), {k: v for k, v in s1.items()
                                if "sample" in k}))
        log("503: batch %d failed, and read %.1f s after the server "
            "answered again" % (b1, took))

        # 2. 503, then 412: the latest reason; the changed object stays
        px.set("status", code=503, when="range", path=BAD)
        check(read(m, "f", b2) == errno.EIO, "503: batch %d read" % b2)
        errs = errors(m, "f")
        listed = [i for i in ids[4:] if i in errs]
        check(listed and all("503" in errs[i] or "does not answer" in
                             errs[i] for i in listed),
              "errors.tsv does not say 503 of batch %d's samples: %r"
              % (b2, [errs.get(i) for i in ids[4:]]))
        first = listed[0]
        px.set("change", when="range", path=BAD)
        # read again (the breaker's fast failures meanwhile are the
        # source's too) until the change is met
        until(m, "the object changed: errors.tsv keeps the first reason "
              "of sample %d, not the latest" % first,
              lambda: read(m, "f", b2) == errno.EIO and
              "changed" in errors(m, "f").get(first, ""))
        try:
            for _ in feedfs.Job(m.p("f")).epoch(0, start=b2):
                break
            fflib.fail("feedfs.Job read batch %d" % b2)
        except feedfs.BatchError as e:
            check(e.batch == b2 and any(i == first and "changed" in w
                                        for i, _, w in e.failed),
                  "BatchError: batch %d, failed %r" % (e.batch, e.failed))
            check("changed" in str(e), "BatchError does not give the "
                  "latest reason of sample %d: %s" % (first, e))
        px.set("pass")
        # the breaker closed (a batch of the shard reads), the batch
        # whose object changed still fails
        until(m, "the proxy passing, batch %d of %s" % (b1, BAD),
              lambda: isinstance(read(m, "f", b1), bytes))
        got = read(m, "f", b2)
        check(got == errno.EIO, "the object changed, then the proxy "
              "passing: batch %d gave %s, not EIO (a failure of the bytes "
              "was made again)" % (b2, name(got)))
        check("changed" in errors(m, "f").get(first, ""), "errors.tsv: %r"
              % errors(m, "f").get(first))
        log("503 then 412: errors.tsv and BatchError say the object "
            "changed; the batch stays failed")

    # a mount of its own: the change above failed that object for good
    with fflib.Mount(t, cfg, t.path("mnt")) as m:
        # 3. substitute, one shard at 503: substituted, counted, listed
        bad = set(ids)
        sb = [b for b in range(8) if bad & set(ref_ids("s", b))]
        b3 = sb[0]
        want = sorted(bad & set(ref_ids("s", b3)))
        s0 = m.stats()
        px.set("status", code=503, when="range", path=BAD)
        got = read(m, "s", b3)
        check(isinstance(got, bytes), "substitute, one shard at 503: batch"
              " %d gave %s:\n%s" % (b3, name(got), m.log()[-2000:]))
        s1 = m.stats()
        subst = s1["feedfs_substituted_total"] - \
            s0.get("feedfs_substituted_total", 0)
        check(subst == len(want), "substitute: feedfs_substituted_total "
              "grew by %d, not %d" % (subst, len(want)))
        got_ids = [int(i) for i in np.load(
            m.p("s", "epoch-0000", "batch-%06d.ids.npy" % b3))]
        check(not set(got_ids) & bad, "substitute: batch %d holds "
              "samples of %s: %s" % (b3, BAD, got_ids))
        errs = errors(m, "s")
        check(all("503" in errs.get(i, "") or "does not answer" in
                  errs.get(i, "") for i in want),
              "substitute: errors.tsv says %r of the substituted samples"
              % [errs.get(i) for i in want])
        check(s1["feedfs_sample_unavailable_total"] -
              s0.get("feedfs_sample_unavailable_total", 0) >= len(want),
              "substitute: feedfs_sample_unavailable_total did not count "
              "the %d samples" % len(want))
        check("does not answer: its samples are substituted" in m.log(),
              "substitute: the log does not say that the samples of a "
              "source that does not answer are substituted:\n%s"
              % m.log()[-2000:])
        log("substitute, one shard at 503: %d samples substituted, "
            "counted and listed" % subst)

        # 4. substitute, every shard at 503: nothing to substitute
        b3 = sb[1]
        px.set("status", code=503, when="range")
        s0 = m.stats()
        text0 = len(m.log())
        got = read(m, "s", b3)
        check(got == errno.EIO, "substitute, every shard at 503: batch %d "
              "gave %s, not EIO" % (b3, name(got)))
        s1 = m.stats()
        check(s1["feedfs_substituted_total"] ==
              s0.get("feedfs_substituted_total", 0),
              "every shard at 503: feedfs_substituted_total grew")
        new = m.log()[text0:]
        check("substituted by" not in new, "the log says samples were "
              "substituted, and none was:\n%s" % new[-2000:])
        check(s1.get("feedfs_sample_unavailable_total", 0) >
              s0.get("feedfs_sample_unavailable_total", 0),
              "feedfs_sample_unavailable_total did not count")
        px.set("pass")
        got, took = read_until_read(
            m, "s", b3, "substitute: batch %d still fails once every "
            "shard answers again" % b3)
        # (read while the breaker's probe closes it, some samples may
        # still be substituted: each slot holds its sample's pixels)
        px_ids = [int(i) for i in np.load(
            m.p("s", "epoch-0000", "batch-%06d.ids.npy" % b3))]
        got = np.load(io.BytesIO(got))
        for k, i in enumerate(px_ids):
            check(np.array_equal(got[k], ref_sample("s", i)),
                  "substitute: batch %d slot %d differs from sample %d of "
                  "feedfs-ref once every shard answers" % (b3, k, i))
        log("substitute, every shard at 503: failed, nothing counted as "
            "substituted; read %.1f s after the server answered again"
            % took)
log("PASS")
