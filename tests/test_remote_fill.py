#!/usr/bin/python3
"""test_remote_fill.py - feedfs-fill over remote shards while the source
is out (issue 34, section 5).

Four shards served by nginx through tests/remote_servers.py's Proxy, a
memcached as the cluster tier, a job with on_error = substitute (where an
"unreadable" sample lets feedfs-fill exit 0).  The shards are indexed while
the proxy passes (the probes and the index streams), then every member's
range request fails:

- with a 503, then with the connection reset: feedfs-fill exits 1 and
  counts every sample as "unavailable" (the source did not answer), not
  one as "unreadable" (it said "16 unreadable" and exited 0: a part
  reported done with nothing in it);
- the proxy passing again: a run fills every sample and exits 0.
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
import remote_servers as rs  # noqa: E402

MEMCACHED = "/usr/bin/memcached"
why = rs.Nginx.unavailable()
if why:
    fflib.skip(why)
if not os.access(MEMCACHED, os.X_OK):
    fflib.skip("%s is not installed" % MEMCACHED)

t = fflib.Test(needs_fuse=False)
N = 16
data = t.gen(t.path("data"), n=N, classes=2, seed=36)
local = t.path("shards")
rs.make_shards(data, local, 4)

port = fflib.free_port()
argv = [MEMCACHED, "-p", str(port), "-l", "127.0.0.1", "-U", "0", "-m",
        "64"] + (["-u", "root"] if os.geteuid() == 0 else [])
mc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL)
for _ in range(500):
    if fflib.accepts(port):
        break
    time.sleep(0.01)
check(fflib.accepts(port), "memcached does not listen")


def conf(path, shards):
    with open(path, "w") as f:
        f.write("""[mount]
cache_dir = %s
cache_size = 1G
threads = 2
memory = 64M
cluster = 127.0.0.1:%d

[dataset d]
shards = %s
remote_timeout = 2
remote_retries = 1

[job j]
dataset = d
batch_size = 4
epochs = 1
shuffle = no
pipeline = decode resize(24) cache center_crop(16)
dtype = uint8
layout = HWC
on_error = substitute
""" % (t.path("cache"), port, shards))
    return path


def fill(cfg):
    """feedfs-fill's exit status and its counts (from its summary)."""
    r = subprocess.run([os.path.join(fflib.BUILDDIR, "feedfs-fill"), cfg,
                        "j"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=600)
    out = r.stdout.decode(errors="replace")
    summary = [ln for ln in out.splitlines() if ": part " in ln]
    check(summary, "feedfs-fill printed no summary:\n%s" % out[-2000:])
    counts = {k: int(v) for v, k in re.findall(
        r"(\d+) (computed|unreadable|unavailable|failed)", summary[-1])}
    return r.returncode, counts, out


try:
    with rs.Nginx(local, t.path("ng")) as ng, \
            rs.Proxy("127.0.0.1", ng.port) as px:
        cfg = conf(t.path("fill.conf"), px.url +
                   "/shard-{000000..000003}.tar")
        for mode, params in (("status", dict(code=503)), ("reset", {})):
            px.set(mode, when="member", **params)
            rc, counts, out = fill(cfg)
            check(counts.get("unreadable") == 0,
                  "%s: the outage counted as unreadable samples (exit %d):"
                  "\n%s" % (mode, rc, out[-2000:]))
            check(rc == 1 and counts.get("unavailable") == N,
                  "%s: exit %d, %s; expected 1 and %d unavailable:\n%s"
                  % (mode, rc, counts, N, out[-2000:]))
            check(px.stats().get("fault_" + mode, 0) > 0,
                  "%s: no request met the fault" % mode)
            log("%s on every member: exit 1, %s" % (mode, counts))
        px.set("pass")
        rc, counts, out = fill(cfg)
        check(rc == 0 and counts.get("computed") == N and
              counts.get("unavailable") == 0,
              "the source back: exit %d, %s:\n%s" % (rc, counts,
                                                     out[-2000:]))
        log("the source back: exit 0, %s" % counts)
finally:
    mc.terminate()
    mc.wait()
log("ok")
