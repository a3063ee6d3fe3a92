#!/usr/bin/python3
"""test_cluster_mount.py - the cluster tier through real mounts and
feedfs-fill, against three memcached servers started here on free
127.0.0.1 ports and killed here by pid (also on failure):

  - mount A (its own cache_dir) reads epoch 0 of job a: every sample a
    cluster miss, computed and stored in the cluster;
  - mount B (another cache_dir, the same cluster) reads epoch 0 of job a
    with >= 95% cluster hits, bytes equal to A's and to feedfs-ref's;
  - two feedfs-fill processes (--part 0/2 and 1/2, at once) fill for job c
    (another prefix); mount C's first epoch of c gets >= 95% cluster hits
    and feedfs-ref's bytes; a second fill run skips everything; each run
    has the sources 8 per worker ahead of its workers prefetched, every
    sample of its list but the first 16 once;
  - feedfs-fill of values of 1 (inline), 2, 11 and 25 chunks (1 MiB
    items): a second run skips every one of them;
  - a mount with cluster and no cluster_secret warns once that anyone who
    reaches memcached can plant values: in its log in the foreground, on
    the terminal that mounts it in the background; one with a secret does
    not;
  - cluster_secret: mount G (a secret) takes none of the values stored
    without one: it does not even see them (its keys are in the
    namespace of its secret), so none is a bad MAC; it stores its own;
    mount H (the same secret) hits >= 95% with feedfs-ref's bytes; mount
    I (another secret) hits none, counts no bad MAC, and stores its own
    beside them: mount H2 (the first secret again) still hits >= 95% with
    no bad MAC (issue 40: I read 300 values as bad MACs and overwrote
    them with its own); feedfs-fill with the secret redoes the unMAC'd
    values of job c, then skips them all;
    a secret file open to others: the mount serves without the tier and
    says why, feedfs-fill exits 2; an empty cluster_secret in the config:
    FILE:LINE and exit 2;
  - a server killed with -9 while mount D reads an epoch: every read
    succeeds with feedfs-ref's bytes, the failure is logged once and
    counted;
  - no memcached at all (cluster names a closed port): the mount starts
    and serves feedfs-ref's bytes;
  - cluster_auth naming a file that others can read: the mount says so
    and serves without the tier, feedfs-fill exits 2.

Exits 77 without /usr/bin/memcached."""

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
N = 64

if not os.access(MEMCACHED, os.X_OK):
    fflib.skip("%s is missing" % MEMCACHED)
check(os.access(FILL, os.X_OK), "%s is not built" % FILL)
t = fflib.Test()

servers = []  # [port, Popen]


def kill_servers():
    for s in servers:
        if s[1] is not None and s[1].poll() is None:
            os.kill(s[1].pid, signal.SIGKILL)
            s[1].wait()


atexit.register(kill_servers)  # runs before Test's cleanup (LIFO)


def start_server():
    port = free_port()
    argv = [MEMCACHED, "-p", str(port), "-l", "127.0.0.1", "-U", "0",
            "-m", "256", "-t", "2"]
    if os.geteuid() == 0:
        argv += ["-u", "root"]
    logf = open(t.path("memcached-%d.log" % port), "wb")
    p = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT)
    servers.append([port, p])
    for _ in range(500):
        if accepts(port):
            return port
        check(p.poll() is None, "memcached on port %d exited" % port)
        time.sleep(0.01)
    fflib.fail("memcached on port %d did not start" % port)


ports = [start_server() for _ in range(3)]
cluster = ",".join("127.0.0.1:%d" % p for p in ports)
log("memcached on ports %s" % ports)

data = t.gen(t.path("data"), n=N, classes=4, seed=13)
cfg = t.config(t.path("feedfs.conf"), data, {
    "a": dict(epochs=2, seed=3),
    # another prefix: nothing of a's serves it
    "c": dict(epochs=2, seed=5, batch_size=6,
              pipeline="decode resize(80) cache center_crop(64) flip(0.5)",
              dtype="uint8", layout="HWC"),
}, readahead=1)
ref_a = t.ref(cfg, "a", 0, t.path("ref", "a0"))
ref_c = t.ref(cfg, "c", 0, t.path("ref", "c0"))


def cluster_rate(m, job):
    h = m.job_stat("feedfs_cluster_hits_total", job)
    miss = m.job_stat("feedfs_cluster_misses_total", job)
    check(h + miss > 0, "job %s: no cluster lookups" % job)
    return h, miss, h / (h + miss)


def read_epoch(m, job, epoch, ref, between=None):
    """Every file of (job, epoch) through m, compared with ref; returns
    {name: bytes}.  between(i) runs before the i-th file."""
    d = m.p(job, "epoch-%04d" % epoch)
    names = sorted(os.listdir(d))
    check(names == sorted(os.listdir(ref)),
          "%s lists %s, the reference %s" % (d, names, os.listdir(ref)))
    got = {}
    for i, name in enumerate(names):
        if between:
            between(i)
        got[name] = fflib.read_file(os.path.join(d, name))
        with open(os.path.join(ref, name), "rb") as f:
            want = f.read()
        check(got[name] == want, "%s/%s differs from feedfs-ref's"
              % (d, name))
    return got


def mount(name, *opts):
    return fflib.Mount(t, cfg, t.path("mnt-" + name), "-o",
                       "cache_dir=%s,cluster=%s" % (t.path("cache-" + name),
                                                    cluster), *opts)


# The warning of a mount with cluster and no cluster_secret (fs/main.c).
NO_SECRET = "cluster without cluster_secret"

# ---- A computes, B finds it in the cluster ---------------------------------
with mount("A") as m:
    check(m.log().count(NO_SECRET) == 1, "mount A (no cluster_secret) does "
          "not warn once that anyone can plant values:\n" + m.log())
    bytes_a = read_epoch(m, "a", 0, ref_a)
    h, miss, _ = cluster_rate(m, "a")
    check(h == 0 and miss >= N, "mount A: %d cluster hits, %d misses; "
          "expected 0 and >= %d" % (h, miss, N))
    st = m.stats()
    check(st["feedfs_cluster_enabled"] == 1, "mount A: no cluster tier")
    check(st["feedfs_cluster_puts_total"] >= N,
          "mount A stored %d values, expected >= %d"
          % (st["feedfs_cluster_puts_total"], N))
    log("mount A: %d misses, %d bytes out" % (miss,
        st["feedfs_cluster_bytes_out_total"]))

with mount("B") as m:
    bytes_b = read_epoch(m, "a", 0, ref_a)
    check(bytes_b == bytes_a, "mount B's bytes differ from mount A's")
    h, miss, rate = cluster_rate(m, "a")
    check(rate >= 0.95, "mount B: %d cluster hits, %d misses (%.1f%%), "
          "expected >= 95%%" % (h, miss, 100 * rate))
    st = m.stats()
    check(st["feedfs_cluster_bytes_in_total"] > 0, "mount B: no bytes in")
    log("mount B: %d cluster hits, %d misses (%.1f%%), %.0f bytes in per hit"
        % (h, miss, 100 * rate, st["feedfs_cluster_bytes_in_total"] / h))

# ---- two feedfs-fill processes fill for job c ------------------------------


def fill(*args, conf=None, job="c", opts=""):
    return subprocess.Popen([FILL, "-o", "cluster=%s,threads=2%s"
                             % (cluster, opts), conf or cfg, job]
                            + list(args),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def summary(p, what, prefetch=False):
    out, err = p.communicate(timeout=120)
    out, err = out.decode(), err.decode()
    check(p.returncode == 0, "%s exited %d:\n%s%s"
          % (what, p.returncode, out, err))
    m = re.search(r"(\d+) samples, (\d+) computed, (\d+) already there", out)
    check(m is not None, "%s: no summary in %r" % (what, out))
    got = [int(x) for x in m.groups()]
    if prefetch:
        m = re.search(r"(\d+) sources prefetched", out)
        check(m is not None, "%s: no prefetch count in %r" % (what, out))
        got.append(int(m.group(1)))
    return got


# The workers (threads=2) have the source of the sample 8 per worker
# further on in their list read ahead (ds_sample_prefetch, as the mount's
# workers do): each sample of the list but the first 16 is asked for once,
# before a worker takes it.  A second run reads every source again (the
# key is its digest), so it prefetches as much.
AHEAD = 8 * 2
fills = [fill("--part", "%d/2" % k, "--epochs", "0-1") for k in (0, 1)]
parts = [summary(p, "feedfs-fill --part %d/2" % k, prefetch=True)
         for k, p in enumerate(fills)]
check(sum(p[0] for p in parts) == N and sum(p[1] for p in parts) == N,
      "the two parts: %s; expected %d samples computed in all" % (parts, N))
for k, p in enumerate(parts):
    check(p[3] == max(0, p[0] - AHEAD), "feedfs-fill --part %d/2 of %d "
          "samples prefetched %d sources; expected %d"
          % (k, p[0], p[3], max(0, p[0] - AHEAD)))
log("feedfs-fill parts 0/2 and 1/2 (samples, computed, there, "
    "prefetched): %s" % parts)
again = summary(fill("--part", "0/2"), "feedfs-fill --part 0/2, again",
                prefetch=True)
check(again[1] == 0 and again[2] == again[0],
      "a second run of part 0/2 computed %d, skipped %d of %d"
      % (again[1], again[2], again[0]))
check(again[3] == max(0, again[0] - AHEAD), "a second run of part 0/2 "
      "prefetched %d of %d sources" % (again[3], again[0]))
r = subprocess.run([FILL, cfg, "c"], stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE)
check(r.returncode == 2 and b"no cluster" in r.stderr,
      "feedfs-fill without cluster: exit %d, %r" % (r.returncode, r.stderr))

with mount("C") as m:
    read_epoch(m, "c", 0, ref_c)
    h, miss, rate = cluster_rate(m, "c")
    check(rate >= 0.95, "mount C after feedfs-fill: %d cluster hits, %d "
          "misses (%.1f%%), expected >= 95%%" % (h, miss, 100 * rate))
    log("mount C: %d cluster hits, %d misses (%.1f%%)"
        % (h, miss, 100 * rate))

# ---- feedfs-fill skips values of any chunk count --------------------------
# Values of w x h x 3 bytes in items of CLUSTER_CHUNK (1 MiB - 1 KiB) bytes;
# a head of 120 bytes holds the value when it fits.  The chunk keys "#10"
# and up were misparsed once, and such values never skipped.
CHUNK = 1024 * 1024 - 1024
SIZES = {"k1": (500, 500), "k2": (700, 600), "k11": (2000, 1900),
         "k25": (3000, 2900)}
few = t.gen(t.path("data-few"), n=6, classes=2, seed=21)
cfg_few = t.config(t.path("few.conf"), few, {
    name: dict(epochs=1, batch_size=3, dtype="uint8", layout="HWC",
               pipeline="decode resize(%d,%d) cache center_crop(32)" % wh)
    for name, wh in SIZES.items()}, cache_dir=t.path("cache-few"))
for name, (w, h) in SIZES.items():
    v = w * h * 3
    nchunks = 0 if 120 + v <= CHUNK else -(-v // CHUNK)
    first = summary(fill(conf=cfg_few, job=name), "feedfs-fill " + name)
    again = summary(fill(conf=cfg_few, job=name), "feedfs-fill %s, again"
                    % name)
    check(first[1] == 6 and again[1] == 0 and again[2] == 6,
          "job %s (%d chunks): a first run %s, a second %s; expected 6 "
          "computed, then 6 already there" % (name, nchunks, first, again))
    log("feedfs-fill of values of %s: the second run skips all 6"
        % ("%d chunks" % nchunks if nchunks else "one item"))

# ---- cluster_secret ---------------------------------------------------------
secret = t.path("tier.secret")
secret2 = t.path("tier2.secret")
for path, text in ((secret, "0123456789abcdef0123456789abcdef\n"),
                   (secret2, "fedcba9876543210fedcba9876543210\n")):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, text.encode())
    os.close(fd)

with mount("G", "-o", "cluster_secret=%s" % secret) as m:
    check(NO_SECRET not in m.log(), "mount G has a cluster_secret, and "
          "warns of none:\n" + m.log())
    read_epoch(m, "a", 0, ref_a)
    h, miss, _ = cluster_rate(m, "a")
    st = m.stats()
    check(h == 0 and st["feedfs_cluster_bad_mac_total"] == 0
          and st["feedfs_cluster_puts_total"] >= N,
          "mount G (a secret) over values without a MAC: %d hits, %d "
          "bad MACs, %d puts; expected 0, 0 and >= %d"
          % (h, st["feedfs_cluster_bad_mac_total"],
             st["feedfs_cluster_puts_total"], N))
    log("mount G (cluster_secret): none of the values without a MAC "
        "seen, %d of its own stored" % st["feedfs_cluster_puts_total"])

with mount("H", "-o", "cluster_secret=%s" % secret) as m:
    read_epoch(m, "a", 0, ref_a)
    h, miss, rate = cluster_rate(m, "a")
    check(rate >= 0.95 and m.stats()["feedfs_cluster_bad_mac_total"] == 0,
          "mount H (the same secret): %d hits, %d misses, %d bad MACs"
          % (h, miss, m.stats()["feedfs_cluster_bad_mac_total"]))
    log("mount H (the same secret): %d cluster hits (%.1f%%)"
        % (h, 100 * rate))

with mount("I", "-o", "cluster_secret=%s" % secret2) as m:
    read_epoch(m, "a", 0, ref_a)
    h, miss, _ = cluster_rate(m, "a")
    st = m.stats()
    check(h == 0 and st["feedfs_cluster_bad_mac_total"] == 0
          and st["feedfs_cluster_puts_total"] >= N,
          "mount I (another secret): %d cluster hits, %d bad MACs, %d "
          "puts; expected 0, 0 and >= %d"
          % (h, st["feedfs_cluster_bad_mac_total"],
             st["feedfs_cluster_puts_total"], N))
    log("mount I (another secret): no hits, no bad MAC, %d of its own "
        "stored" % st["feedfs_cluster_puts_total"])

# The values of the first secret outlived I's puts of the same keys.
with mount("H2", "-o", "cluster_secret=%s" % secret) as m:
    read_epoch(m, "a", 0, ref_a)
    h, miss, rate = cluster_rate(m, "a")
    bad = m.stats()["feedfs_cluster_bad_mac_total"]
    check(rate >= 0.95 and bad == 0,
          "mount H2 (the first secret, after I's puts): %d hits, %d "
          "misses, %d bad MACs; expected >= 95%% hits, no bad MAC"
          % (h, miss, bad))
    log("mount H2 (the first secret, after mount I): %d cluster hits "
        "(%.1f%%), no bad MAC" % (h, 100 * rate))

first = summary(fill(opts=",cluster_secret=" + secret),
                "feedfs-fill c with the secret")
again = summary(fill(opts=",cluster_secret=" + secret),
                "feedfs-fill c with the secret, again")
check(first[1] == N and again[1] == 0 and again[2] == N,
      "feedfs-fill with a secret over unMAC'd values: %s, then %s; "
      "expected %d computed, then all already there" % (first, again, N))
log("feedfs-fill with the secret: %d redone, then %d skipped"
    % (first[1], again[2]))

# Without -f: the warning is on the terminal that mounts, before feedfs
# goes to the background (and then in syslog).
mnt_bg = t.path("mnt-bg")
os.makedirs(mnt_bg)
r = subprocess.run([fflib.FEEDFS, "-o", "cache_dir=%s,cluster=%s"
                    % (t.path("cache-bg"), cluster), cfg, mnt_bg],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
try:
    err = r.stderr.decode()
    check(r.returncode == 0 and err.count(NO_SECRET) == 1,
          "feedfs in the background without cluster_secret: exit %d, "
          "stderr %r" % (r.returncode, err))
    deadline = time.monotonic() + 30
    while not os.path.exists(os.path.join(mnt_bg, "README")):
        check(time.monotonic() < deadline, "the background mount never "
              "served")
        time.sleep(0.1)
finally:
    fflib._force_umount(mnt_bg)
log("no cluster_secret: one warning in the log of a mount in the "
    "foreground, one on the terminal of one in the background; none with "
    "a secret")

os.chmod(secret2, 0o644)
with mount("J", "-o", "cluster_secret=%s" % secret2) as m:
    read_epoch(m, "c", 0, ref_c)
    check(m.stats()["feedfs_cluster_enabled"] == 0,
          "mount J: the cluster tier is on with a secret others can read")
    check("serving without the cluster tier" in m.log()
          and "cluster_secret" in m.log(),
          "mount J does not say why the tier is off:\n" + m.log())
r = subprocess.run([FILL, "-o", "cluster=%s,cluster_secret=%s"
                    % (cluster, secret2), cfg, "c"],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
check(r.returncode == 2 and b"cluster_secret" in r.stderr,
      "feedfs-fill with a secret others can read: exit %d, %r"
      % (r.returncode, r.stderr))
bad = t.path("bad-secret.conf")
with open(cfg) as f:
    lines = f.read().split("\n")
lines.insert(2, "cluster_secret =")
with open(bad, "w") as f:
    f.write("\n".join(lines))
r = subprocess.run([FILL, "-o", "cluster=" + cluster, bad, "c"],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
check(r.returncode == 2 and ("%s:3:" % bad).encode() in r.stderr
      and b"cluster_secret" in r.stderr,
      "an empty cluster_secret: exit %d, %r" % (r.returncode, r.stderr))
log("secret file of mode 0644: the mount serves without the tier, "
    "feedfs-fill exits 2; an empty cluster_secret: %s"
    % r.stderr.decode().strip())

# ---- a server killed mid-epoch ---------------------------------------------


def kill_one(i):
    if i == 2:  # after two batches' files
        os.kill(servers[0][1].pid, signal.SIGKILL)
        servers[0][1].wait()
        log("killed memcached on port %d" % servers[0][0])


# Prefixes only (cluster_batches = no): whole batches from the tier have
# their own dead-server test in test_batch_workers.py, and a batch found
# whole would make this epoch ask the dead server for no prefix at all.
with mount("D", "-o", "readahead=1,cluster_batches=no") as m:
    read_epoch(m, "a", 0, ref_a, between=kill_one)
    read_epoch(m, "c", 0, ref_c)
    st = m.stats()
    check(st["feedfs_cluster_errors_total"] > 0,
          "mount D: no cluster errors counted after a server died")
    said = m.log().count("warning: cluster:")
    check(said == 1, "mount D logged %d cluster warnings, expected 1" % said)
    log("mount D: all reads correct, %d cluster errors, logged once"
        % st["feedfs_cluster_errors_total"])

# ---- no memcached at all -----------------------------------------------------
kill_servers()
closed = free_port()
with fflib.Mount(t, cfg, t.path("mnt-E"), "-o",
                 "cache_dir=%s,cluster=127.0.0.1:%d"
                 % (t.path("cache-E"), closed)) as m:
    read_epoch(m, "a", 0, ref_a)
    h, miss, _ = cluster_rate(m, "a")
    check(h == 0, "mount E: %d cluster hits with no server" % h)
    check(m.stats()["feedfs_cluster_errors_total"] > 0,
          "mount E: no cluster errors counted")
    log("mount E (no server): served epoch 0, %d misses" % miss)

# ---- an auth file that others can read: refused, the mount serves -----------
auth = t.path("mc.auth")
with open(auth, "w") as f:
    f.write("user secret\n")
os.chmod(auth, 0o644)
with fflib.Mount(t, cfg, t.path("mnt-F"), "-o",
                 "cache_dir=%s,cluster=127.0.0.1:%d,cluster_auth=%s"
                 % (t.path("cache-F"), closed, auth)) as m:
    read_epoch(m, "c", 0, ref_c)
    check(m.stats()["feedfs_cluster_enabled"] == 0,
          "mount F: the cluster tier is on with a world-readable auth file")
    check("serving without the cluster tier" in m.log(),
          "mount F does not say why the tier is off:\n" + m.log())
r = subprocess.run([FILL, "-o", "cluster=127.0.0.1:%d,cluster_auth=%s"
                    % (closed, auth), cfg, "c"],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
check(r.returncode == 2 and b"cluster:" in r.stderr,
      "feedfs-fill with a world-readable auth file: exit %d, %r"
      % (r.returncode, r.stderr))
log("auth file of mode 0644: the mount serves without the tier, "
    "feedfs-fill exits 2")
log("ok")
