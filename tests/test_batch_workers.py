#!/usr/bin/python3
"""test_batch_workers.py - batch workers (feedfs-fill --batches, issue 37)
through real mounts, against memcached servers started here on free
127.0.0.1 ports and killed here by pid (also on failure).  The reference
is a mount of the same config with cluster_batches = no.

  - same bytes: workers with --epochs (one with --world 2) fill the tier
    under cluster_secret; a mount reads every file of every epoch of five
    jobs (float32 with random_erasing; soft labels of mixup_cutmix with
    on_error = substitute; float16 HWC mixup; uint8 HWC; two views) and
    the rank views of 2:
    each equals the reference, every batch served whole from the tier
    (feedfs_cluster_batches_total, none made here); a remount too; reads
    at odd offsets and sizes, and three readers of a file at once in
    pieces of different sizes (a batch from the tier is converted as it
    is read), their samples' buffers kept and taken again; a second
    worker run finds them all there;
  - follow: a worker without --epochs stays within --window 3 of a
    reader: once it has stored the batches ahead of batch 0, the reader's
    next ones come from the tier, with the reference's bytes;
  - a worker killed with SIGKILL while it holds claims: every read
    completes with the reference's bytes, none waits 10 s or more (a
    bound on a hang only); the mount waited on its claims (counted);
  - a claim held by a live but stuck worker (renewed by the test):
    cluster_batch_wait = 2 bounds the wait, then the batch is made here
    (timeouts counted);
  - memcached killed mid-epoch, then restarted empty: reads go on with
    local batches, the reference's bytes;
  - a worker with another config for the same job name stores batches the
    mount never serves; chunks of stored batches overwritten: refused
    (counted), made here, never wrong;
  - a tier too small for what workers store (memcached -m 4, evicting):
    batches made here where chunks are gone, the reference's bytes.

Exits 77 without /usr/bin/memcached."""

import atexit
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import accepts, check, free_port, log  # noqa: E402

MEMCACHED = "/usr/bin/memcached"
FILL = os.path.join(fflib.BUILDDIR, "feedfs-fill")

if not os.access(MEMCACHED, os.X_OK):
    fflib.skip("%s is missing" % MEMCACHED)
check(os.access(FILL, os.X_OK), "%s is not built" % FILL)
t = fflib.Test()

servers = {}  # port -> Popen
workers = []  # Popen of feedfs-fill


def cleanup():
    for p in workers:
        if p.poll() is None:
            p.kill()
            p.wait()
    for p in servers.values():
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()


atexit.register(cleanup)  # before Test's cleanup (LIFO)


def start_server(port=None, mem=64):
    port = port or free_port()
    argv = [MEMCACHED, "-p", str(port), "-l", "127.0.0.1", "-U", "0",
            "-m", str(mem), "-t", "2"]
    if os.geteuid() == 0:
        argv += ["-u", "root"]
    logf = open(t.path("memcached-%d.log" % port), "ab")
    p = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT)
    servers[port] = p
    for _ in range(500):
        if accepts(port):
            return port
        check(p.poll() is None, "memcached on port %d exited" % port)
        time.sleep(0.01)
    fflib.fail("memcached on port %d did not start" % port)


def stop_server(port):
    p = servers.pop(port)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()


def mc(port, cmd, data=None):
    """A memcached text command (and a value's bytes); the reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(cmd.encode() + b"\r\n" +
                  (data + b"\r\n" if data is not None else b""))
        buf = b""
        while not re.search(rb"(END|OK|STORED|NOT_STORED|DELETED|"
                            rb"NOT_FOUND|ERROR)\r\n$", buf):
            d = s.recv(1 << 16)
            if not d:
                break
            buf += d
    return buf


def mc_keys(port):
    """Every key memcached holds (lru_crawler metadump: URL-encoded)."""
    out = mc(port, "lru_crawler metadump all").decode(errors="replace")
    return [urllib.parse.unquote(m.group(1))
            for m in re.finditer(r"key=(\S+)", out)]


def mc_get(port, key):
    r = mc(port, "get " + key)
    m = re.match(rb"VALUE \S+ \d+ (\d+)\r\n", r)
    if m is None:
        return None
    n = int(m.group(1))
    return r[m.end():m.end() + n]


def mc_stat(port, name):
    m = re.search(r"STAT %s (\d+)" % name, mc(port, "stats").decode())
    return int(m.group(1)) if m else 0


def fill(conf, job, *args, port, threads=2, opts=""):
    p = subprocess.Popen([FILL, "--batches", "-o",
                          "cluster=127.0.0.1:%d,threads=%d%s"
                          % (port, threads, opts), conf, job] + list(args),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    workers.append(p)
    return p


def done(p, what):
    out, err = p.communicate(timeout=600)
    out, err = out.decode(), err.decode()
    check(p.returncode == 0, "%s exited %d:\n%s%s"
          % (what, p.returncode, out, err))
    m = re.search(r"(\d+) made, (\d+) already there, (\d+) held", out)
    check(m is not None, "%s: no summary in %r" % (what, out))
    return [int(x) for x in m.groups()]


# ---- the dataset, the config, the reference --------------------------------

data = t.gen(t.path("data"), n=40, classes=4, seed=21)
secret = t.path("secret")
with open(secret, "w") as f:
    f.write("0123456789abcdef0123456789abcdef\n")
os.chmod(secret, 0o600)
JOBS = {
    "a": dict(epochs=3, seed=3, pipeline=fflib.TRAIN_PIPELINE +
              " random_erasing(0.5)"),
    "s": dict(epochs=2, seed=5, batch_size=6, on_error="substitute",
              pipeline=fflib.TRAIN_PIPELINE + " mixup_cutmix(0.8,1.0,0.5)"),
    # every batch mixup: mixed as the tier's samples are read
    # (tier_read), float16 HWC, a last batch of 5
    "h": dict(epochs=1, seed=13, batch_size=7, dtype="float16",
              layout="HWC", pipeline=fflib.TRAIN_PIPELINE + " mixup(0.8)"),
    "u": dict(epochs=2, seed=7, dtype="uint8", layout="HWC",
              pipeline="decode resize(72) cache random_resized_crop(64) "
                       "flip(0.5)"),
    "v": dict(epochs=2, seed=9, views=2,
              **{"view.1": "random_resized_crop(48) flip(0.5) "
                           "normalize(imagenet)"}),
}
# k: a heavy job of large batches, whose claims a worker holds a while.
K = dict(epochs=3, seed=11, batch_size=10,
         pipeline="decode resize(256) cache random_resized_crop(224) "
                  "flip(0.5) gaussian_blur(23,0.1,2.0) normalize(imagenet)")
cfg = t.config(t.path("feedfs.conf"), data, dict(JOBS, k=K), readahead=2)
# The same job names, another seed: other bytes.
other = t.config(t.path("other.conf"), data,
                 {"a": dict(JOBS["a"], seed=4)}, readahead=2)


def files(m, job, epoch, rank=None):
    d = m.p(job, "epoch-%04d" % epoch) if rank is None else \
        m.p(job, "rank-%d-of-2" % rank, "epoch-%04d" % epoch)
    return d, sorted(os.listdir(d))


def read_bounded(path, bound):
    """The bytes of path; no read may take bound seconds (a read still
    blocked after 6 x bound fails the test rather than hang it)."""
    out = []
    th = threading.Thread(target=lambda: out.append(fflib.read_file(path)),
                          daemon=True)
    t0 = time.monotonic()
    th.start()
    th.join(6 * bound)
    check(not th.is_alive(), "%s: still blocked after %d s" % (path,
                                                             6 * bound))
    check(time.monotonic() - t0 < bound, "%s took %.1f s"
          % (path, time.monotonic() - t0))
    return out[0]


def read_all(m, job, epoch, rank=None, between=None, bound=None):
    """{name: bytes} of every file of (job, epoch[, rank of 2]); between(i)
    runs before the i-th file; bound: no read takes that long."""
    d, names = files(m, job, epoch, rank)
    got = {}
    for i, n in enumerate(names):
        if between:
            between(i)
        p = os.path.join(d, n)
        got[n] = fflib.read_file(p) if bound is None else \
            read_bounded(p, bound)
    return got


VIEWS = [(j, e, None) for j in JOBS for e in range(JOBS[j]["epochs"])] + \
    [("a", e, r) for e in range(2) for r in (0, 1)]

ref = {}
port = start_server()
with fflib.Mount(t, cfg, t.path("mnt-ref"), "-o",
                 "cache_dir=%s,cluster=127.0.0.1:%d,cluster_batches=no,"
                 "cluster_secret=%s" % (t.path("cache-ref"), port,
                                        secret)) as m:
    for v in VIEWS + [("k", e, None) for e in range(3)]:
        ref[v] = read_all(m, *v)
    check(m.stats().get("feedfs_cluster_batches_total", 0) == 0,
          "cluster_batches = no: batches from the tier")
check(any(n.endswith(".view1.npy") for n in ref[("v", 0, None)]),
      "job v lists no view files: %s" % sorted(ref[("v", 0, None)]))
nbatches = sum(1 for v in VIEWS for n in ref[v]
               if re.fullmatch(r"batch-\d+(\.view\d+)?\.npy", n))
log("reference: %d batch image files" % nbatches)


def mount(name, port, *opts):
    o = "cache_dir=%s,cluster=127.0.0.1:%d" % (t.path("cache-" + name),
                                               port)
    return fflib.Mount(t, cfg, t.path("mnt-" + name), "-o",
                       ",".join([o] + list(opts)))


def compare(m, views, what):
    for v in views:
        got = read_all(m, *v)
        check(sorted(got) == sorted(ref[v]), "%s: %s lists %s, the "
              "reference %s" % (what, v, sorted(got), sorted(ref[v])))
        for n in got:
            check(got[n] == ref[v][n], "%s: %s %s differs from the "
                  "reference" % (what, v, n))


# ---- same bytes: workers with --epochs, under cluster_secret ---------------

sec = ",cluster_secret=" + secret
runs = [fill(cfg, j, "--epochs", "0-%d" % (JOBS[j]["epochs"] - 1),
             port=port, opts=sec) for j in JOBS]
runs.append(fill(cfg, "a", "--epochs", "0-1", "--world", "2", port=port,
                 opts=sec))
made = sum(done(p, "worker %d" % i)[0] for i, p in enumerate(runs))
check(made == nbatches, "the workers made %d batches, expected %d"
      % (made, nbatches))
for name in ("B", "B2"):  # a mount, then a remount
    with mount(name, port, "cluster_secret=" + secret) as m:
        compare(m, VIEWS, "mount " + name)
        st = m.stats()
        # Every batch read from the tier (those made here: readahead
        # into epoch 2 of the rank views, which no worker made).
        check(st["feedfs_cluster_batches_total"] == nbatches and
              st["feedfs_cluster_batch_refused_total"] == 0,
              "mount %s: %d batches from the tier, %d refused; expected "
              "%d and 0" % (name, st["feedfs_cluster_batches_total"],
                            st["feedfs_cluster_batch_refused_total"],
                            nbatches))
        log("mount %s: %d batches from the tier, %d bytes" % (
            name, st["feedfs_cluster_batches_total"],
            st["feedfs_cluster_batch_bytes_in_total"]))


def odd_reads(m, views, what):
    """A batch from the tier is converted as it is read (tier_read): reads
    at odd offsets and of odd sizes (in the header, across it, inside a
    value, across samples, past the end), the file mapped, and three
    threads at once in pieces of different sizes, each equal to the
    reference's bytes."""
    import mmap
    import random
    rnd = random.Random(37)
    for v in views:
        d, names = files(m, *v)
        for n in names:
            if not re.fullmatch(r"batch-\d+(\.view\d+)?\.npy", n):
                continue
            want = ref[v][n]
            fd = os.open(os.path.join(d, n), os.O_RDONLY)
            try:
                for _ in range(24):
                    off = rnd.choice([0, 1, 3, 127, 128, 129, 130,
                                      rnd.randrange(len(want)),
                                      len(want) - 3, len(want) + 5])
                    size = rnd.choice([1, 2, 3, 5, 4093, 65537,
                                       rnd.randrange(1, 3 << 20)])
                    got = os.pread(fd, size, off)
                    check(got == want[off:off + size], "%s: %s %s: %d "
                          "bytes at %d differ from the reference"
                          % (what, v, n, size, off))
                # mapped (FUSE_DIRECT_IO_ALLOW_MMAP): page faults as reads
                with mmap.mmap(fd, len(want), prot=mmap.PROT_READ) as mm:
                    check(mm[:] == want, "%s: %s %s mapped differs from "
                          "the reference" % (what, v, n))
            finally:
                os.close(fd)
            bad = []

            def piecewise(k, path=os.path.join(d, n)):
                with open(path, "rb", buffering=0) as f:
                    out = b"".join(iter(lambda: f.read(k), b""))
                if out != want:
                    bad.append(k)
            th = [threading.Thread(target=piecewise, args=(k,))
                  for k in (1000, 4096 * 3 + 1, 1 << 20)]
            for x in th:
                x.start()
            for x in th:
                x.join()
            check(not bad, "%s: %s %s read in pieces of %s differs"
                  % (what, v, n, bad))


# Batches made as read: their samples' buffers kept and taken again
# (engine/tier.c's tier_raw), not mapped anew for each batch.
with mount("P", port, "cluster_secret=" + secret) as m:
    compare(m, [("s", 0, None), ("s", 1, None)], "kept samples")
    st = m.stats()
    mapped = st.get("feedfs_batch_buffers_allocated_total", 0)
    again = st.get("feedfs_batch_buffers_reused_total", 0)
    n = st["feedfs_cluster_batches_total"]
    log("kept samples: %d buffers mapped, %d taken again, %d from the "
        "tier" % (mapped, again, n))
    # Each batch takes an images buffer and a samples' one: with the
    # images' alone taken again (a few mapped first), fewer than n.
    check(n == 14 and again >= n, "kept samples: %d buffers taken again "
          "for %d batches from the tier, %d mapped" % (again, n, mapped))
with mount("R", port, "cluster_secret=" + secret) as m:
    # Views whose readahead stays within what the workers made: rank 1's
    # epoch 1 would read ahead into its epoch 2, which no worker made,
    # and those two batches, made here, were counted whenever the tier's
    # lookups of them finished before the stats were read (a loaded
    # machine).
    odd_reads(m, [("s", 0, None), ("h", 0, None), ("v", 1, None),
                  ("a", 2, None), ("a", 0, 1)], "odd reads")
    st = m.stats()
    check(st["feedfs_cluster_batch_local_total"] == 0,
          "odd reads: %d batches made here (%s)"
          % (st["feedfs_cluster_batch_local_total"], ", ".join(
              "%s %d" % (k[len("feedfs_cluster_"):], v)
              for k, v in sorted(st.items())
              if k.startswith("feedfs_cluster_") and "{" not in k)))
again = done(fill(cfg, "a", "--epochs", "0-2", port=port, opts=sec),
             "worker again")
check(again[0] == 0 and again[1] == 15, "a second run: %s, expected 0 made, "
      "15 already there" % again)

# ---- follow: a worker stays within its window of the reader ---------------

stop_server(port)
port = start_server()
w = fill(cfg, "a", "--window", "3", port=port)
# readahead = 0: the mount claims only what the reader opens.
with mount("F", port, "readahead=0") as m:
    d, names = files(m, "a", 0)
    fflib.read_file(os.path.join(d, "batch-000000.npy"))
    # Batches 1..3 stored (a head and a chunk each) and their claims
    # dropped: 3 heads named ffb1:HEX without '#' or ':' after.
    t0 = time.monotonic()
    while time.monotonic() - t0 < 120:
        heads = [k for k in mc_keys(port)
                 if re.fullmatch(r"ffb1:[0-9a-f]{64}", k)]
        if len(heads) >= 3:
            break
        if w.poll() is not None:
            fflib.fail("the worker exited: %s" % w.stderr.read().decode())
        time.sleep(0.2)
    check(len(heads) >= 3, "the worker stored %d batches ahead of the "
          "reader in 120 s" % len(heads))
    compare(m, [("a", 0, None)], "mount F")
    n = m.job_stat("feedfs_cluster_batches_total", "a")
    check(n >= 3, "mount F: %d batches from the tier, expected >= 3" % n)
    log("follow: %d batches of epoch 0 from the tier" % n)
w.send_signal(signal.SIGTERM)
log("following worker: %d made, %d already there, %d held by others"
    % tuple(done(w, "following worker")))

# ---- a worker killed with SIGKILL while it holds claims --------------------
# The claims' names of job k's batches, from a worker run into a scratch
# server; then a worker follows a reader of k, and is killed as soon as it
# holds one of them (a batch of k takes it a while).

scratch = start_server()
done(fill(cfg, "k", "--epochs", "0-2", port=scratch), "scratch worker")
kclaims = [k + ":c" for k in mc_keys(scratch)
           if re.fullmatch(r"ffb1:[0-9a-f]{64}", k)]
stop_server(scratch)
check(len(kclaims) == 12, "%d batches of k, expected 12" % len(kclaims))
stop_server(port)
port = start_server()
w = fill(cfg, "k", "--window", "4", port=port, threads=1)
with mount("K", port, "cluster_batch_wait=60") as m:
    d, names = files(m, "k", 0)
    first = names.index("batch-000001.ids.npy")
    killed = []

    def kill_when_claiming(i):
        if i != first:
            return
        t0 = time.monotonic()
        while time.monotonic() - t0 < 120 and not killed:
            r = mc(port, "get " + " ".join(kclaims))
            if b"worker " in r:
                w.kill()
                killed.append(r.count(b"worker "))
            time.sleep(0.002)
        w.wait()

    # Batch 0 first (its position published), then the worker's claims.
    got = {}
    for e in range(3):
        got[e] = read_all(m, "k", e, bound=10,
                          between=kill_when_claiming if e == 0 else None)
        for n in got[e]:
            check(got[e][n] == ref[("k", e, None)][n],
                  "mount K: epoch %d %s differs" % (e, n))
    check(killed, "the worker held no claim in 120 s")
    waits = m.job_stat("feedfs_cluster_batch_waits_total", "k")
    check(waits >= 1, "mount K: no wait on the dead worker's claims")
    log("SIGKILL with %d claims held: every read < 10 s, %d waits on "
        "them, %d timeouts, %.1f s waited" % (
            killed[0], waits,
            m.job_stat("feedfs_cluster_batch_timeouts_total", "k"),
            m.stats()["feedfs_cluster_batch_wait_seconds_total"]))

# ---- a claim held by a live, stuck worker: cluster_batch_wait --------------
# The claims of every batch of epoch 2 (keys from a worker run into a
# scratch server), held here and renewed, as a hung worker would.

scratch = start_server()
done(fill(cfg, "a", "--epochs", "2-2", port=scratch), "scratch worker")
claims = [k + ":c" for k in mc_keys(scratch)
          if re.fullmatch(r"ffb1:[0-9a-f]{64}", k)]
stop_server(scratch)
check(len(claims) == 5, "%d claims, expected 5" % len(claims))


def hold():
    for k in claims:
        mc(port, "set %s 0 30 11" % k, b"worker hung")


hold()
with mount("H", port, "cluster_batch_wait=2") as m:
    got = read_all(m, "a", 2, between=lambda i: hold(), bound=10)
    for n in got:
        check(got[n] == ref[("a", 2, None)][n], "mount H: %s differs" % n)
    to = m.job_stat("feedfs_cluster_batch_timeouts_total", "a")
    check(to >= 1, "mount H: no wait ran out (%d)" % to)
    log("stuck worker: %d waits ran out after cluster_batch_wait = 2" % to)

# ---- memcached killed mid-epoch, then restarted empty ---------------------

done(fill(cfg, "a", "--epochs", "0-1", port=port), "worker before the stop")
with mount("D", port) as m:
    def stop_at(i):
        if i == 6:
            stop_server(port)

    got = read_all(m, "a", 0, between=stop_at, bound=30)
    for n in got:
        check(got[n] == ref[("a", 0, None)][n], "mount D: %s differs" % n)
    start_server(port)  # the same port, empty
    compare(m, [("a", 1, None)], "mount D after the restart")
    st = m.stats()
    check(st["feedfs_cluster_batch_local_total"] >= 1,
          "mount D: nothing made here while memcached was down")
    log("memcached down and back: %d from the tier, %d made here, %d "
        "errors" % (st["feedfs_cluster_batches_total"],
                    st["feedfs_cluster_batch_local_total"],
                    st["feedfs_cluster_batch_errors_total"]))

# ---- another config for the same job name; forged chunks -------------------

stop_server(port)
port = start_server()
made, _, _ = done(fill(other, "a", "--epochs", "0-0", port=port),
                  "worker of another config")
check(made == 5, "the other config's worker made %d batches" % made)
done(fill(cfg, "a", "--epochs", "1-1", port=port), "worker of epoch 1")
# Every chunk of every stored batch of epoch 1 changed in one pixel (its
# ids untouched: only the tag can tell).
forged = 0
for k in mc_keys(port):
    if re.fullmatch(r"ffb1:[0-9a-f]{64}#\d+", k):
        v = mc_get(port, k)
        if v:
            mc(port, "set %s 0 0 %d" % (k, len(v)),
               v[:100] + bytes([v[100] ^ 1]) + v[101:])
            forged += 1
check(forged >= 10, "%d chunks changed" % forged)
with mount("X", port) as m:
    compare(m, [("a", 0, None), ("a", 1, None)], "mount X")
    st = m.stats()
    check(st["feedfs_cluster_batches_total"] == 0,
          "mount X served %d batches of another config or forged"
          % st["feedfs_cluster_batches_total"])
    check(m.job_stat("feedfs_cluster_batch_refused_total", "a") == 5,
          "mount X refused %d forged batches, expected 5"
          % m.job_stat("feedfs_cluster_batch_refused_total", "a"))

# ---- a tier too small: evicting --------------------------------------------

stop_server(port)
port = start_server(mem=4)
big = t.config(t.path("big.conf"), data, {"a": dict(
    JOBS["a"], epochs=12,
    pipeline="decode resize(140) cache random_resized_crop(128) flip(0.5) "
             "normalize(imagenet)")}, readahead=2)
done(fill(big, "a", "--epochs", "0-11", port=port), "worker of a big job")
ev = mc_stat(port, "evictions")
check(ev > 0, "memcached -m 4 evicted nothing")
with fflib.Mount(t, big, t.path("mnt-R"), "-o",
                 "cache_dir=%s,cluster=127.0.0.1:%d,cluster_batches=no"
                 % (t.path("cache-R"), port)) as m:
    want = [read_all(m, "a", e) for e in (0, 11)]
with fflib.Mount(t, big, t.path("mnt-E"), "-o",
                 "cache_dir=%s,cluster=127.0.0.1:%d"
                 % (t.path("cache-E"), port)) as m:
    for e, w_ in zip((0, 11), want):
        got = read_all(m, "a", e)
        for n in got:
            check(got[n] == w_[n], "mount E: epoch %d %s differs" % (e, n))
    st = m.stats()
    check(st["feedfs_cluster_batch_local_total"] >= 1,
          "mount E: nothing made here though memcached evicted %d" % ev)
    log("evicting tier: %d evictions; %d from the tier, %d made here"
        % (ev, st["feedfs_cluster_batches_total"],
           st["feedfs_cluster_batch_local_total"]))
log("ok")
