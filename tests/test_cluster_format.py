#!/usr/bin/python3
"""test_cluster_format.py - the cluster tier keeps the job's cache_format
(issue 25, class 5), through real mounts and feedfs-fill against a
memcached server started here on a free 127.0.0.1 port and killed here by
pid (also on failure).  Jobs r (raw) and q (jpeg(90)) of one prefix, uint8
HWC, bytes compared with feedfs-ref's everywhere:

  - mount A (its own cache_dir) reads epoch 0 of r, then of q: cluster
    misses, stored in the tier; the bytes a jpeg(90) value takes in the
    tier (feedfs_cluster_bytes_out_total per put) are a fraction of a raw
    one's (the ratio is logged);
  - mount B (an empty cache_dir, the same tier) reads epoch 0 of q from
    tier hits (>= 95%, as few bytes in per hit as A put): the tier hit
    serves the local hit's bytes; B's remount reads it again from local
    hits alone (the tier's bytes kept as they came);
  - with cluster_secret: mount G sees none of the values stored without
    one (its secret's namespace) and stores MAC'd jpeg values, mount H
    (the same secret, an empty cache_dir) hits on them with the same bytes;
  - feedfs-fill fills the tier for job p (jpeg(90), another prefix); mount
    C's first epoch of p hits >= 95% with feedfs-ref's bytes, and a second
    fill finds every value there.

On main the tier kept raw pixels under a key without the format: a tier
hit of q served the raw prefix where a local hit served its JPEG round
trip.  Exits 77 without /usr/bin/memcached."""

import atexit
import os
import re
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import accepts, check, free_port, log  # noqa: E402

MEMCACHED = "/usr/bin/memcached"
FILL = os.path.join(fflib.BUILDDIR, "feedfs-fill")
N = 32

if not os.access(MEMCACHED, os.X_OK):
    fflib.skip("%s is missing" % MEMCACHED)
check(os.access(FILL, os.X_OK), "%s is not built" % FILL)
t = fflib.Test()
server = []  # the Popen


def kill_server():
    for p in server:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()


atexit.register(kill_server)  # runs before Test's cleanup (LIFO)


port = free_port()
argv = [MEMCACHED, "-p", str(port), "-l", "127.0.0.1", "-U", "0",
        "-m", "256", "-t", "2"]
if os.geteuid() == 0:
    argv += ["-u", "root"]
server.append(subprocess.Popen(argv, stdout=open(t.path("memcached.log"),
                                                 "wb"),
                               stderr=subprocess.STDOUT))
for _ in range(500):
    if accepts(port):
        break
    check(server[0].poll() is None, "memcached exited")
    time.sleep(0.01)
else:
    fflib.fail("memcached on port %d did not start" % port)
cluster = "127.0.0.1:%d" % port
log("memcached on port %d" % port)

PIPE = "decode resize(256) cache center_crop(224)"
data = t.gen(t.path("data"), n=N, classes=4, seed=23)
common = dict(epochs=1, seed=3, dtype="uint8", layout="HWC", batch_size=8)
cfg = t.config(t.path("feedfs.conf"), data, {
    "r": dict(common, pipeline=PIPE, cache_format="raw"),
    "q": dict(common, pipeline=PIPE, cache_format="jpeg(90)"),
    # another prefix, for feedfs-fill
    "p": dict(common, pipeline="decode resize(200) cache center_crop(160)",
              cache_format="jpeg(90)"),
}, readahead=1)
refs = {j: t.ref(cfg, j, 0, t.path("ref", j)) for j in ("r", "q", "p")}


def ref_bytes(job):
    out = {}
    for name in sorted(os.listdir(refs[job])):
        with open(os.path.join(refs[job], name), "rb") as f:
            out[name] = f.read()
    return out


check(ref_bytes("q") != ref_bytes("r"),
      "jpeg(90)'s reference equals raw's")


def read_all(m, job):
    d = m.p(job, "epoch-0000")
    want = ref_bytes(job)
    check(sorted(os.listdir(d)) == sorted(want), "%s: another listing" % d)
    for name in sorted(want):
        got = fflib.read_file(os.path.join(d, name))
        check(got == want[name], "%s: %s/epoch-0000/%s differs from "
              "feedfs-ref's" % (m.mnt, job, name))


def mount(name, *opts):
    return fflib.Mount(t, cfg, t.path("mnt-" + name), "-o",
                       "cache_dir=%s,cluster=%s" % (t.path("cache-" + name),
                                                    cluster), *opts)


def tier(m):
    st = m.stats()
    return (st["feedfs_cluster_puts_total"],
            st["feedfs_cluster_bytes_out_total"],
            st["feedfs_cluster_bytes_in_total"])


def rate(m, job):
    h = m.job_stat("feedfs_cluster_hits_total", job)
    miss = m.job_stat("feedfs_cluster_misses_total", job)
    return h, miss, h / max(1, h + miss)


# ---- A stores raw, then jpeg(90): the bytes a value takes in the tier -----
with mount("A") as m:
    read_all(m, "r")
    puts_r, out_r, _ = tier(m)
    check(puts_r >= N, "mount A stored %d raw values" % puts_r)
    read_all(m, "q")
    puts, out, _ = tier(m)
    puts_q, out_q = puts - puts_r, out - out_r
    check(puts_q >= N, "mount A stored %d jpeg(90) values" % puts_q)
per_r, per_q = out_r / puts_r, out_q / puts_q
ratio = per_r / per_q
log("tier value of a resize(256) prefix: raw %.0f bytes, jpeg(90) %.0f "
    "bytes: %.1fx smaller"
    % (per_r, per_q, ratio))
check(ratio >= 4, "a jpeg(90) value takes %.0f bytes in the tier, a raw one "
      "%.0f: only %.1fx smaller" % (per_q, per_r, ratio))

# ---- B: a tier hit serves the local hit's bytes; its remount, local hits --
with mount("B") as m:
    read_all(m, "q")
    h, miss, r = rate(m, "q")
    check(r >= 0.95, "mount B: %d tier hits, %d misses" % (h, miss))
    _, _, bytes_in = tier(m)
    check(bytes_in / h <= 1.05 * per_q,
          "mount B: %.0f bytes in per tier hit, the jpeg(90) values are "
          "%.0f" % (bytes_in / h, per_q))
    log("mount B: %d tier hits (%.0f%%), %.0f bytes in per hit"
        % (h, 100 * r, bytes_in / h))
with mount("B") as m:
    read_all(m, "q")
    h = m.job_stat("feedfs_cache_hits_total", "q")
    miss = m.job_stat("feedfs_cache_misses_total", "q")
    check(h >= N and miss == 0, "mount B's remount: %d local hits, %d misses"
          % (h, miss))
log("mount B's remount: %d local hits of the values the tier gave" % h)

# ---- cluster_secret: MAC'd jpeg values ----------------------------------------
secret = t.path("tier.secret")
fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
os.write(fd, b"0123456789abcdef0123456789abcdef\n")
os.close(fd)
with mount("G", "-o", "cluster_secret=" + secret) as m:
    read_all(m, "q")
    h, miss, r = rate(m, "q")
    st = m.stats()
    # Its keys are in its secret's namespace (issue 40): the values stored
    # without a secret are not even seen, let alone taken.
    check(h == 0 and st["feedfs_cluster_bad_mac_total"] == 0
          and st["feedfs_cluster_puts_total"] >= N,
          "mount G (a secret) over values without a MAC: %d tier hits, %d "
          "bad MACs, %d puts" % (h, st["feedfs_cluster_bad_mac_total"],
                                 st["feedfs_cluster_puts_total"]))
with mount("H", "-o", "cluster_secret=" + secret) as m:
    read_all(m, "q")
    h, miss, r = rate(m, "q")
    check(r >= 0.95 and m.stats()["feedfs_cluster_bad_mac_total"] == 0,
          "mount H (the same secret): %d tier hits, %d misses" % (h, miss))
log("cluster_secret: mount H hits %d MAC'd jpeg(90) values of mount G" % h)

# ---- feedfs-fill stores the job's format ----------------------------------


def fill():
    p = subprocess.run([FILL, "-o", "cluster=%s,threads=2" % cluster, cfg,
                        "p"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=300)
    out = p.stdout.decode()
    check(p.returncode == 0, "feedfs-fill exited %d:\n%s%s"
          % (p.returncode, out, p.stderr.decode()))
    m = re.search(r"(\d+) samples, (\d+) computed, (\d+) already there", out)
    check(m is not None, "feedfs-fill: no summary in %r" % out)
    return [int(x) for x in m.groups()]


first = fill()
check(first[1] == N, "feedfs-fill computed %s, expected %d" % (first, N))
with mount("C") as m:
    read_all(m, "p")
    h, miss, r = rate(m, "p")
    check(r >= 0.95, "mount C after feedfs-fill: %d tier hits, %d misses"
          % (h, miss))
    _, _, bytes_in = tier(m)
    log("mount C after feedfs-fill: %d tier hits (%.0f%%), %.0f bytes in "
        "per hit" % (h, 100 * r, bytes_in / h))
again = fill()
check(again[1] == 0 and again[2] == N,
      "a second feedfs-fill computed %d, found %d" % (again[1], again[2]))
log("ok")
