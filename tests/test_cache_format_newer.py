#!/usr/bin/python3
"""test_cache_format_newer.py - a cache_dir of a newer cache format
(issue 40, section 5), with a real newer feedfs: tests/format-peer, a copy
of cache/ built with the next CACHE_FORMAT_VERSION.

  - a store the peer made and closed: the mount says at mount, once, that
    cache_dir holds a newer format and serves without the cache
    (feedfs_cache_enabled 0, feedfs_cache_format_newer{build,cache_dir} 1,
    feedfs_cache_error); feedfs-ref's bytes; the store is left alone (the
    peer hits all its values after);
  - the peer running as the owner of cache_dir: the mount neither attaches
    nor puts (the peer counts its own inserts only), says so at mount, on
    the terminal of a mount in the background too, and in its stats;
  - the other way round, this build's mount owning cache_dir: the peer
    (newer) does not use the older owner: every get a miss, no put, its
    cache_error says why; the owner took none of its puts.
"""

import os
import re
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

PEER = os.path.join(fflib.BUILDDIR, "tests", "format-peer")
N = 20
check(os.access(PEER, os.X_OK), "%s is not built" % PEER)
t = fflib.Test()

data = t.gen(t.path("data"), n=24, classes=3, seed=9)
cfg = t.config(t.path("feedfs.conf"), data, {"a": dict(epochs=1)})
ref = t.ref(cfg, "a", 0, t.path("ref"))


def peer(cdir, what, n=N, **kw):
    return subprocess.run([PEER, cdir, what, str(n)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=60, **kw)


def figures(text):
    """format-peer's figures line as a dict."""
    m = re.search(r"^format (\d+) role (\w+) hits (\d+) misses (\d+) "
                  r"inserts (\d+) disabled (\d) dir_format (\d+)$", text, re.M)
    check(m is not None, "no figures in %r" % text)
    keys = ("format", "role", "hits", "misses", "inserts", "disabled",
            "dir_format")
    return {k: (v if k == "role" else int(v)) for k, v in zip(keys, m.groups())}


def gauge(m, name):
    with open(m.p(".feedfs", "stats")) as f:
        for line in f:
            if line.startswith(name):
                return line.strip()
    fflib.fail("%s is not in .feedfs/stats" % name)


NEWER = "newer than this feedfs's"


def check_left_alone(m, newer, what):
    said = m.log().count(NEWER)
    check(said == 1 and "serving without the cache" in m.log(),
          "%s: the mount said %d times that cache_dir is newer:\n%s"
          % (what, said, m.log()))
    m.read_epoch("a", 0, ref)
    st = m.stats()
    check(st["feedfs_cache_enabled"] == 0, "%s: feedfs_cache_enabled is 1"
          % what)
    g = gauge(m, "feedfs_cache_format_newer{")
    check(g == 'feedfs_cache_format_newer{build="%d",cache_dir="%d"} 1'
          % (newer - 1, newer), "%s: %s" % (what, g))
    check(st["feedfs_cache_error"] == 1, "%s: no feedfs_cache_error" % what)
    check(st["feedfs_cache_hits_total"] == 0, "%s: hits" % what)
    return g


# ---- a newer store, no owner ------------------------------------------------
cdir = t.path("cache-made")
r = peer(cdir, "make")
check(r.returncode == 0, "format-peer make: %r" % r.stderr)
with open(os.path.join(cdir, "format")) as f:
    newer = int(f.read())
with fflib.Mount(t, cfg, t.path("mnt1"), "-o", "cache_dir=" + cdir) as m:
    g = check_left_alone(m, newer, "a newer store")
r = peer(cdir, "count")
check(r.returncode == 0 and b"hits %d" % N in r.stdout,
      "the newer store after the mount: %r %r" % (r.stdout, r.stderr))
log("a newer store: left alone, said at mount, %s" % g)

# ---- a newer owner running -----------------------------------------------------
cdir = t.path("cache-owned")
own = subprocess.Popen([PEER, cdir, "own", str(N)], stdin=subprocess.PIPE,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
try:
    check(own.stdout.readline() == b"ready\n", "format-peer own: not ready")
    with fflib.Mount(t, cfg, t.path("mnt2"), "-o", "cache_dir=" + cdir) as m:
        check("attached to the cache" not in m.log(),
              "the mount attached to the newer owner:\n" + m.log())
        check_left_alone(m, newer, "a newer owner")
    # In the background: said on the terminal that mounts.
    bg = t.path("mnt-bg")
    os.makedirs(bg)
    r = subprocess.run([fflib.FEEDFS, "-o", "cache_dir=" + cdir, cfg, bg],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    try:
        err = r.stderr.decode()
        check(r.returncode == 0 and err.count(NEWER) == 1,
              "feedfs in the background on a newer owner's cache_dir: exit "
              "%d, stderr %r" % (r.returncode, err))
    finally:
        fflib._force_umount(bg)
    out, err = own.communicate(b"", timeout=60)
finally:
    if own.poll() is None:
        own.kill()
        own.wait()
f = figures(out.decode())
check(own.returncode == 0 and f["role"] == "owner" and f["inserts"] == N,
      "the newer owner after the mounts: %s, %r" % (f, err))
log("a newer owner: the mounts neither attached nor put (its inserts: %d)"
    % f["inserts"])

# ---- this build owns, the newer peer asks ---------------------------------------
cdir = t.path("cache-ours")
with fflib.Mount(t, cfg, t.path("mnt3"), "-o", "cache_dir=" + cdir) as m:
    m.read_epoch("a", 0, ref)
    ins = m.stats()["feedfs_cache_inserts_total"]
    r = peer(cdir, "use")
    text = r.stdout.decode()
    f = figures(text)
    check(r.returncode == 0 and f["role"] == "client" and f["hits"] == 0
          and f["disabled"] == 1 and f["dir_format"] == newer - 1
          and "older than this one's" in text,
          "the newer peer on an older owner: %r %r" % (text, r.stderr))
    time.sleep(0.5)  # puts are queued by the owner: none may come
    check(m.stats()["feedfs_cache_inserts_total"] == ins,
          "the older owner took the newer peer's puts")
log("the newer peer on this build's cache: %s"
    % re.search(r"^error (.*)$", text, re.M).group(1))
log("ok")
