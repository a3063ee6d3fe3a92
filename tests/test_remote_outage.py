#!/usr/bin/python3
"""test_remote_outage.py - S3 stopped mid-epoch and back: the batches that
failed meanwhile read again (issue 34, section 3).

As the issue's trial did: shards in moto's S3 server (SigV4 checked),
cache_size = 0, readahead = 2; jobs f (on_error = fail), s (substitute)
and r (order = relaxed), all of the same seed.  Batch 0 of f and s is
read (not r's: its lookahead would fetch ahead most of the members of
the epoch, which the three jobs share); then moto is stopped (SIGSTOP:
connections are accepted and never answered, as a hung server's) and
batch 6 of each is read: EIO, within the bound the
retries give; the readahead of f's read makes batches 7 and 8, which
fail too.  f's batch 6 is read again every 0.25 s until moto has been
stopped for 10 s (FF_OUTAGE), as a trainer that retries would.  Then moto is continued (SIGCONT).  From then on:

- f's batch 6 is read again every 0.25 s until it reads (60 s at
  most: a bound on a hang): the seconds from SIGCONT to that read are
  the figure the issue asks for (the breaker's half-open probe decides
  it: its wait doubles from 1 s while its probes fail, up to 30 s);
- the two batches the readahead made during the outage read at their
  first read;
- s's and r's failed batches read; every batch read equals feedfs-ref's
  over the same shards on local disk (r's: every sample of the epoch
  exactly once, each batch's ids and labels agreeing with samples.tsv);
- .feedfs/stats: feedfs_sample_unavailable_total counted the samples
  that failed; feedfs_substituted_total did not count s's samples, none
  of which could be substituted, and the log did not say they were.
"""

import errno
import os
import signal
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402
import remote_servers as rs  # noqa: E402

t = fflib.Test()
why = rs.S3Server.unavailable()
if why:
    fflib.skip(why)

import numpy as np  # noqa: E402

NSHARDS, RETRIES, TIMEOUT = 4, 1, 1
# remote_read's bound on a reader's wait, and 30 s for a loaded machine
# seconds moto is stopped (FF_OUTAGE: another, to measure)
OUTAGE = float(os.environ.get("FF_OUTAGE", "10"))
# the batch read during the outage (0 is read before it, and the
# readahead makes 1 and 2 then)
OUT = 6
HOLD = (RETRIES + 1) * (TIMEOUT + 1) + RETRIES * 5 + 5 + 30
PIPE = "decode resize(24) center_crop(16)"
data = t.gen(t.path("data"), n=64, classes=4, seed=34)
local = t.path("shards")
rs.make_shards(data, local, NSHARDS)
JOBS = (("f", dict(on_error="fail")), ("s", dict(on_error="substitute")),
        ("r", dict(on_error="fail", order="relaxed")))


def conf(path, shard_keys):
    lines = ["[mount]", "cache_dir = %s" % t.path("cache"),
             "cache_size = 0", "threads = 2", "memory = 128M",
             "readahead = 2", "", "[dataset data]"]
    lines += ["%s = %s" % kv for kv in shard_keys.items()]
    lines += ["label = cls", "remote_retries = %d" % RETRIES,
              "remote_timeout = %d" % TIMEOUT]
    for name, keys in JOBS:
        k = fflib.job(epochs=4, batch_size=4, pipeline=PIPE, dtype="uint8",
                      layout="HWC", **keys)
        lines += ["", "[job %s]" % name] + ["%s = %s" % kv
                                            for kv in k.items()]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


ref_cfg = conf(t.path("local.conf"),
               {"shards": os.path.join(local, "shard-*.tar")})
refs = {}


def ref(job, b, suffix=".npy"):
    if job not in refs:
        refs[job] = t.ref(ref_cfg, job, 0, t.path("ref-" + job))
    with open(os.path.join(refs[job], "batch-%06d%s" % (b, suffix)),
              "rb") as f:
        return f.read()


def read(m, job, b, suffix=".npy"):
    """The file's bytes, or the errno of its read (timed against HOLD)."""
    t0 = time.monotonic()
    try:
        return fflib.read_file(m.p(job, "epoch-0000",
                                   "batch-%06d%s" % (b, suffix)))
    except OSError as e:
        return e.errno
    finally:
        took = time.monotonic() - t0
        check(took < HOLD, "%s batch %d: a read held %.0f s, longer than "
              "the retries allow" % (job, b, took))


def name(got):
    return errno.errorcode.get(got, got) if isinstance(got, int) \
        else "its bytes"


def stat(m, key, job):
    """key{job="JOB"} in .feedfs/stats (0 when it is not there)."""
    want = '%s{job="%s"} ' % (key, job)
    with open(m.p(".feedfs", "stats")) as f:
        for line in f:
            if line.startswith(want):
                return int(line.split()[1])
    return 0


with rs.S3Server(t.path("s3")) as s3:
    s3.make_bucket("bkt")
    s3.upload_dir("bkt", local, prefix="ds/")
    cfg = conf(t.path("s3.conf"), dict(
        shards="s3://bkt/ds/shard-{000000..%06d}.tar" % (NSHARDS - 1),
        s3_endpoint=s3.endpoint, s3_region=s3.region, s3_path_style="yes"))
    os.environ.update(s3.env())
    with fflib.Mount(t, cfg, t.path("mnt"), timeout=60) as m:
        for job in ("f", "s"):
            check(read(m, job, 0) == ref(job, 0), "%s batch 0 differs"
                  % job)
        # (not r: its lookahead, in view order, would fetch most of the
        # epoch's members ahead, and f's and s's batches hold the same
        # samples: the outage must find nothing fetched ahead for them)
        nb = len([n for n in os.listdir(m.p("f", "epoch-0000"))
                  if n.endswith(".ids.npy")])
        u0 = {j: stat(m, "feedfs_sample_unavailable_total", j)
              for j, _ in JOBS}
        sub0 = stat(m, "feedfs_substituted_total", "s")
        log0 = len(m.log())

        # the outage
        os.kill(s3.proc.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            for job in ("f", "s", "r"):
                got = read(m, job, OUT)
                check(got == errno.EIO, "moto stopped: %s batch %d gave %s,"
                      " not EIO" % (job, OUT, name(got)))
            # f's readahead (the two batches after) is made and fails
            deadline = time.monotonic() + HOLD
            while stat(m, "feedfs_batch_errors_total", "f") < 3:
                check(time.monotonic() < deadline, "f's readahead of "
                      "batches %d and %d did not fail while moto was "
                      "stopped (%d batch errors)" % (OUT + 1, OUT + 2,
                                                     stat(m,
                      "feedfs_batch_errors_total", "f")))
                time.sleep(0.2)
            # OUTAGE s in all, as the trial (5 to 15 s), f's
            # batch read again every 0.25 s meanwhile, as a trainer that
            # retries would: each read fails (at once, the breaker open;
            # its probes fail, and its wait doubles)
            while time.monotonic() - stopped < OUTAGE:
                got = read(m, "f", OUT)
                check(got == errno.EIO, "moto stopped: f batch %d gave %s"
                      % (OUT, name(got)))
                time.sleep(0.25)
        finally:
            os.kill(s3.proc.pid, signal.SIGCONT)
        back = time.monotonic()
        outage = back - stopped
        u1 = {j: stat(m, "feedfs_sample_unavailable_total", j)
              for j, _ in JOBS}
        sub1 = stat(m, "feedfs_substituted_total", "s")
        said = m.log()[log0:]

        # back: f's failed batch reads again
        tries = 0
        while True:
            got = read(m, "f", OUT)
            tries += 1
            if isinstance(got, bytes):
                healed = time.monotonic() - back
                break
            check(time.monotonic() - back < 60, "f batch %d still fails "
                  "60 s after moto answers again (%s; %d reads):\n%s"
                  % (OUT, name(got), tries, m.log()[-3000:]))
            time.sleep(0.25)
        check(got == ref("f", OUT), "f batch %d differs from feedfs-ref's"
              % OUT)
        for b in (OUT + 1, OUT + 2):
            got = read(m, "f", b)
            check(got == ref("f", b), "f batch %d, made by the readahead "
                  "during the outage, gave %s at its first read after it"
                  % (b, name(got)))
        got = read(m, "s", OUT)
        check(got == ref("s", OUT), "s batch %d gave %s after the outage, "
              "not feedfs-ref's bytes" % (OUT, name(got)))
        # r: the whole epoch, every sample once
        ids, tsv = [], {}
        with open(m.p("r", "samples.tsv")) as f:
            for line in f:
                i, _, lab = line.rstrip("\n").split("\t")
                tsv[int(i)] = int(lab)
        for b in range(nb):
            got = read(m, "r", b)
            check(isinstance(got, bytes), "r batch %d gave %s after the "
                  "outage" % (b, name(got)))
            bi = np.load(m.p("r", "epoch-0000", "batch-%06d.ids.npy" % b))
            bl = np.load(m.p("r", "epoch-0000",
                             "batch-%06d.labels.npy" % b))
            check([tsv[int(i)] for i in bi] == [int(x) for x in bl],
                  "r batch %d: labels %s for ids %s" % (b, bl, bi))
            ids += [int(i) for i in bi]
        check(sorted(ids) == sorted(tsv), "r's epoch 0 holds %s, not "
              "every sample once" % sorted(ids))
        # what the outage counted, and said
        for j, _ in JOBS:
            check(u1[j] > u0[j], "%s: feedfs_sample_unavailable_total "
                  "counted nothing during the outage" % j)
        check(sub1 == sub0, "s: feedfs_substituted_total counted %d "
              "samples during the outage, which no sample replaced"
              % (sub1 - sub0))
        check("substituted by" not in said, "the log says samples were "
              "substituted while every sample failed:\n%s" % said[-2000:])
        check(m.alive(), "feedfs died")
        st = m.stats()
        log("S3 stopped %.1f s: batches of f, s, r failed (f's readahead "
            "too); %.1f s after S3 answered again f's failed batch read "
            "(%d reads, breaker opened %d times), then every failed batch"
            % (outage, healed, tries,
               st.get("feedfs_remote_breaker_opens_total", 0)))
log("PASS")
