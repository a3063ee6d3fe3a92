#!/usr/bin/python3
"""test_remote_http.py - tar shards served over HTTPS and HTTP (issue 30).

The same 48 images as four tar shards on local disk and served by
Debian's nginx (tests/remote_servers.py): over HTTPS with a test CA
(ca_file =), and over HTTP from a list file whose URLs carry a signed
query string.

- the decisive test: the remote job's batches (cold epoch, then a warm
  one) are byte-identical to feedfs-ref's over the local shards, and so
  are a rank view and a mixture of a remote and a local dataset;
- the first epoch of a job that caches a prefix fetches nothing by range
  (the index pass filled the cache: issue 38); a job without a cache op
  fetches each image member once per epoch, by range requests carrying
  If-Match (bytes fetched within 1.05x of the members' bytes); the warm
  epoch fetches nothing;
- the index is kept in cache_dir/shard-index: a remount makes one probe
  of each shard (a GET of its first byte: its size and ETag) and GETs no
  whole shard;
- the query string of a signed URL appears nowhere (samples.tsv, the
  log, errors.tsv, .feedfs/stats), and neither does the CA's server key;
- a shard replaced on the server (another ETag) fails its samples with
  EIO and a log line, and other samples are still served right;
- the server stopped: reads fail (EIO) within the retries' time and the
  breaker opens (reads then fail at once); the server back, reads work
  again;
- feedfs-fill over the remote shards fills the cluster tier, and a mount
  with an empty local cache finds every prefix there; feedfs --check
  reads every remote member's header.
"""

import errno
import glob
import io
import os
import shutil
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

PIPE = "decode resize(40) center_crop(32) cache"
SECRET = "SECRETSIG0123456789"
t = fflib.Test()
data = t.gen(t.path("data"), n=48, classes=4, seed=30)
files = []
for ci, c in enumerate(sorted(os.listdir(data))):
    for f in sorted(os.listdir(os.path.join(data, c))):
        files.append((ci, os.path.join(data, c, f)))

www = t.path("www")
local = t.path("local")
os.makedirs(os.path.join(www, "ds"))
os.makedirs(local)


def make_shard(path, items, xor=0):
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tf:
        for i, (ci, src) in items:
            with open(src, "rb") as f:
                img = bytes(b ^ xor for b in f.read()) if xor else f.read()
            for name, payload in (("s%04d.jpg" % i, img),
                                  ("s%04d.cls" % i, b"%d" % ci)):
                ti = tarfile.TarInfo(name)
                ti.size = len(payload)
                ti.mtime = 1700000000
                tf.addfile(ti, io.BytesIO(payload))


member_bytes = 0
for s in range(4):
    items = [(i, files[i]) for i in range(s, len(files), 4)]
    make_shard(os.path.join(local, "shard-%d.tar" % s), items)
    shutil.copy(os.path.join(local, "shard-%d.tar" % s),
                os.path.join(www, "ds", "shard-%d.tar" % s))
    member_bytes += sum(os.path.getsize(f[1]) for _, f in items)
N = len(files)

ca = rs.TestCA(t.path("ca"))
ngs = rs.Nginx(www, t.path("ngs"), https=True, ca=ca).start()
ng = rs.Nginx(www, t.path("ng")).start()
with open(t.path("list.txt"), "w") as f:
    f.write("# signed URLs\n")
    for s in range(4):
        f.write("%s/ds/shard-%d.tar?X-Amz-Signature=%s&X-Amz-Credential=AK\n"
                % (ng.url, s, SECRET))

cache = t.path("cache")


def conf(path, remote, extra_ds=""):
    lines = ["[mount]", "cache_dir = %s" % cache, "cache_size = 1G",
             "threads = 2", "memory = 256M", "readahead = 2", ""]
    if remote:
        lines += ["[dataset rem]",
                  "shards = %s/ds/shard-{0..3}.tar" % ngs.url,
                  "ca_file = %s" % ca.ca_file,
                  "remote_timeout = 5", "remote_retries = 2", "",
                  "[dataset lst]", "shards = %s" % t.path("list.txt"), ""]
    else:
        for name in ("rem", "lst"):
            lines += ["[dataset %s]" % name,
                      "shards = %s/shard-*.tar" % local, ""]
    lines += ["[dataset loc]", "shards = %s/shard-*.tar" % local, ""]
    jobs = {"r": dict(dataset="rem"), "q": dict(dataset="lst", epochs=1),
            "mix": dict(mixture="rem:0.5 loc:0.5", epochs=1),
            "nc": dict(dataset="rem", pipeline="decode resize(40) "
                       "center_crop(32)", epochs=10, shuffle="no"),
            "nc1": dict(dataset="rem", pipeline="decode resize(40) "
                        "center_crop(32)", epochs=1)}
    for name, keys in jobs.items():
        k = dict(batch_size=8, epochs=2, shuffle="yes", pipeline=PIPE,
                 dtype="uint8", layout="HWC", seed=5, on_error="fail")
        k.update(keys)
        lines += ["[job %s]" % name] + ["%s = %s" % kv for kv in k.items()]
        lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path


cfg = conf(t.path("remote.conf"), True)
lcfg = conf(t.path("local.conf"), False)


def rstat(m, name, ds="rem"):
    key = 'feedfs_remote_%s{dataset="%s"}' % (name, ds)
    with open(m.p(".feedfs", "stats")) as f:
        for line in f:
            if line.startswith(key + " "):
                return float(line.split()[1])
    fflib.fail("%s is not in .feedfs/stats" % key)


def same_as_ref(m, job, e, rank=0, world=1):
    ref = t.ref(lcfg, job, e, t.path("ref-%s-%d-%d" % (job, e, rank)),
                rank=rank, world=world)
    sub = ("rank-%d-of-%d" % (rank, world),) if world > 1 else ()
    for name in sorted(os.listdir(ref)):
        with open(os.path.join(ref, name), "rb") as f:
            check(fflib.read_file(m.p(job, *sub, "epoch-%04d" % e, name))
                  == f.read(), "%s %s epoch %d %s differs from feedfs-ref "
                  "over the local shards" % (job, sub, e, name))


with fflib.Mount(t, cfg, t.path("mnt")) as m:
    # the first epoch over HTTPS: identical to the local shards, and read
    # from the cache the index pass filled
    same_as_ref(m, "r", 0)
    check(rstat(m, "bytes_total") == 0,
          "the first epoch of job r fetched %d bytes by range (the index "
          "pass should have cached its prefixes)" % rstat(m, "bytes_total"))
    # a job without a cache op: every member by range, once an epoch (of
    # one epoch: no readahead into the next)
    same_as_ref(m, "nc1", 0)
    cold = rstat(m, "bytes_total")
    # (bytes=0-0: the first byte of each shard, its size and ETag)
    reqs = [r for r in ngs.requests()
            if r["range"] not in (None, "bytes=0-0")]
    check(all(r["if_match"] and r["if_match"].startswith('"')
              for r in reqs), "a range request without If-Match")
    check(all(r["status"] == 206 for r in reqs),
          "range answers: %s" % sorted({r["status"] for r in reqs}))
    check(member_bytes <= cold <= 1.05 * member_bytes,
          "cold epoch fetched %d bytes for %d bytes of members\n%s"
          % (cold, member_bytes, "".join(
              line for line in open(m.p(".feedfs", "stats"))
              if line.startswith("feedfs_remote"))))
    log("first epochs over HTTPS == local: job r nothing by range, job nc1 "
        "(no cache op) %d range requests, %d bytes for %d member bytes"
        % (len(reqs), cold, member_bytes))
    # warm epoch: nothing fetched
    same_as_ref(m, "r", 1)
    check(rstat(m, "bytes_total") == cold,
          "the warm epoch fetched %d bytes" % (rstat(m, "bytes_total")
                                               - cold))
    check(len([r for r in ngs.requests()
               if r["range"] not in (None, "bytes=0-0")]) == len(reqs),
          "the warm epoch made range requests")
    log("warm epoch: identical, nothing fetched")
    # signed URLs over HTTP: same samples, the query nowhere
    same_as_ref(m, "q", 0)
    # a rank view and a mixture of a remote and a local dataset
    same_as_ref(m, "r", 0, rank=1, world=2)
    same_as_ref(m, "mix", 0)
    log("rank view and remote+local mixture == feedfs-ref over local")
    texts = {"log": m.log()}
    for job in ("r", "q", "mix"):
        for name in ("samples.tsv", "errors.tsv", "info.json"):
            texts["%s/%s" % (job, name)] = open(m.p(job, name)).read()
    texts["stats"] = open(m.p(".feedfs", "stats")).read()
    for k, v in texts.items():
        check(SECRET not in v and "X-Amz" not in v,
              "the signed query is in %s" % k)
    rows = [line.split("\t") for line in texts["q/samples.tsv"].splitlines()]
    check(rows[0][1].startswith("shard-0.tar:s"), "q samples.tsv: %s"
          % rows[0])
    check(glob.glob(os.path.join(cache, "shard-index", "*")),
          "no kept shard index")

# a remount: the kept index, a probe of each shard (a GET of its first
# byte: its size and ETag), no GET of a whole shard
before = len(ngs.requests())
with fflib.Mount(t, cfg, t.path("mnt")) as m:
    new = ngs.requests()[before:]
    check([(r["method"], r["range"]) for r in new] ==
          [("GET", "bytes=0-0")] * 4,
          "remount made %s" % [(r["method"], r["range"]) for r in new])
    same_as_ref(m, "r", 1)
    check(rstat(m, "bytes_total") == 0 and
          rstat(m, "index_bytes_total") == 0,
          "a warm remount fetched bytes")
    log("remount: a probe of each shard, the kept index, a warm epoch "
        "fetches nothing")

    # the object replaced on the server: its samples fail, the rest serve
    same_as_ref(m, "nc", 0)
    items = [(i, files[i]) for i in range(1, len(files), 4)]
    make_shard(os.path.join(www, "ds", "shard-1.tar.new"), items, xor=1)
    os.rename(os.path.join(www, "ds", "shard-1.tar.new"),
              os.path.join(www, "ds", "shard-1.tar"))
    ref = t.ref(lcfg, "nc", 1, t.path("ref-nc-1"))
    failed = ok = 0
    for name in sorted(os.listdir(ref)):
        if not name.endswith(".npy") or name.endswith("labels.npy"):
            continue
        try:
            got = fflib.read_file(m.p("nc", "epoch-0001", name))
        except OSError as e:
            check(e.errno == errno.EIO, "%s: %s" % (name, e))
            failed += 1
            continue
        with open(os.path.join(ref, name), "rb") as f:
            check(got == f.read(), "%s: other bytes after the change" % name)
        ok += 1
    check(failed > 0, "no batch failed after the shard changed")
    check(rstat(m, "changed_total") >= 1, "changed_total is 0")
    check("changed since it was indexed" in m.log(),
          "no log line of the change:\n%s" % m.log()[-2000:])
    log("shard replaced: %d batches failed (EIO), %d served as before"
        % (failed, ok))

    # the server stopped: bounded failures, the breaker; then back
    ngs.stop()
    t0 = time.monotonic()
    fails = 0
    # (batches 0 and 1 of epoch 2 may have been made ahead, before)
    for b in range(2, 6):
        try:
            fflib.read_file(m.p("nc", "epoch-0002", "batch-%06d.npy" % b))
        except OSError as e:
            check(e.errno == errno.EIO, "server down: %s" % e)
            fails += 1
    took = time.monotonic() - t0
    check(fails == 4, "server down: %d of 4 batches failed" % fails)
    check(rstat(m, "breaker_opens_total") >= 1, "the breaker never opened")
    check(rstat(m, "fast_failed_total") >= 1, "no read failed at once")
    # retries: 3 tries of 5 s at most each, and backoff; 6 batches
    check(took < 120, "server down: reads took %.0f s" % took)
    log("server down: 4 batches failed in %.1f s, breaker open" % took)
    ngs.start()
    # A batch that failed stays failed (as for a local dataset), and the
    # readahead builds the two after the one read: so each try reads a
    # batch not built yet, 0 or 3 of a later epoch (shuffle = no: those
    # hold no sample of the changed shard), while the breaker probes.
    back = None
    tries = [(e, b) for e in range(3, 10) for b in (0, 3)]
    for e, b in tries:
        name = "batch-%06d.npy" % b
        try:
            back = fflib.read_file(m.p("nc", "epoch-%04d" % e, name))
            break
        except OSError:
            time.sleep(3)
    check(back is not None, "the server back: reads still fail")
    ref = t.ref(lcfg, "nc", e, t.path("ref-nc-back"))
    with open(os.path.join(ref, name), "rb") as f:
        check(back == f.read(), "the server back: other bytes")
    check("the server answers again" in m.log(), "no log line of the "
          "server's return")
    log("server back: reads work again after %.1f s" %
        (time.monotonic() - t0))

# feedfs-fill over remote shards warms the cluster tier; a mount with an
# empty local cache then finds every prefix there
MEMCACHED = "/usr/bin/memcached"
if os.access(MEMCACHED, os.X_OK):
    import subprocess
    port = fflib.free_port()
    argv = [MEMCACHED, "-p", str(port), "-l", "127.0.0.1", "-U", "0", "-m",
            "64"] + (["-u", "root"] if os.geteuid() == 0 else [])
    mc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    try:
        for _ in range(500):
            if fflib.accepts(port):
                break
            time.sleep(0.01)
        # the changed shard put back (another ETag: indexed again)
        shutil.copy(os.path.join(local, "shard-1.tar"),
                    os.path.join(www, "ds", "shard-1.tar"))
        with open(cfg) as f:
            text = f.read()
        c2 = t.path("fill.conf")
        with open(c2, "w") as f:
            f.write(text.replace("cache_dir = %s" % cache, "cache_dir = %s\n"
                                 "cluster = 127.0.0.1:%d"
                                 % (t.path("cache2"), port)))
        # the mount below without a local cache: every prefix of job q is
        # the tier's (the index pass of dataset rem, the same images,
        # would else have put them in the local cache first)
        c3 = t.path("tier.conf")
        with open(c3, "w") as f:
            f.write(text.replace("cache_dir = %s" % cache, "cache_dir = %s\n"
                                 "cluster = 127.0.0.1:%d"
                                 % (t.path("cache3"), port)).replace(
                                     "cache_size = 1G", "cache_size = 0"))
        fill = os.path.join(fflib.BUILDDIR, "feedfs-fill")
        outs = []
        for _ in range(2):
            r = subprocess.run([fill, c2, "q"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
            check(r.returncode == 0, "feedfs-fill: %s" % r.stdout.decode())
            outs.append(r.stdout.decode())
        check("%d computed, 0 already there" % N in outs[0] and
              "0 computed, %d already there" % N in outs[1],
              "feedfs-fill over remote shards:\n%s" % "".join(outs))
        check(SECRET not in "".join(outs), "the signed query in fill's "
              "output")
        with fflib.Mount(t, c3, t.path("mnt")) as m:
            same_as_ref(m, "q", 0)
            hits = m.job_stat("feedfs_cluster_hits_total", "q")
            check(hits == N, "cluster hits %d of %d" % (hits, N))
        log("feedfs-fill over remote shards: %d computed, then all there; "
            "a mount hits the tier for each" % N)
    finally:
        mc.terminate()
        mc.wait()
else:
    log("no %s: feedfs-fill over remote shards not checked" % MEMCACHED)
# feedfs --check reads every member's header over the network too
import subprocess  # noqa: E402
r = subprocess.run([fflib.FEEDFS, "--check", cfg], stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT)
out = r.stdout.decode()
check(r.returncode == 0 and "no problems in %d samples" % (3 * N) in out,
      "feedfs --check over remote shards:\n%s" % out)
check(SECRET not in out, "the signed query in feedfs --check's output")
log("feedfs --check over remote shards: no problems in %d samples" % (3 * N))
ngs.stop()
ng.stop()
log("ok")
