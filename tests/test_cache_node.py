#!/usr/bin/env python3
"""test_cache_node - cache_size = auto shares a node's disk between its users
(issue 40, 4), on a tmpfs of 256M the test mounts, with real users (root
and uid 65534, whose mount root starts with -o uid=).

Without a node config, each user's auto took half of what was free at its
own mount: the first user half the disk, the second half of the rest.
With /etc/feedfs/node.conf (here $FEEDFS_NODE_CONF) saying cache_total =
50%, and a registry directory (root's, 1777):
 (a) the first user alone gets the whole 128M;
 (b) a second user gets 64M, and the first, remounted, 64M too: the two
     together stay within the node's bound;
 (c) a third user's entry (a file of uid 4242) makes three shares; one
     untouched for 40 days, or one whose owner is not the uid its name
     says, counts for nobody;
 (d) a second cache of the first user splits that user's share;
 (e) a registry that is not root's 1777 applies no bound, said as a
     warning; a mistake in the node config stops the mount (exit 2,
     FILE:LINE).
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

if os.geteuid() != 0:
    fflib.skip("needs root (a tmpfs, a mount for uid 65534)")

t = fflib.Test()
os.chmod(t.dir, 0o711)
NOBODY = 65534
M = 1 << 20
fs = t.path("fs")
os.makedirs(fs)
r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256M,mode=755",
                    "feedfs-test", fs], stderr=subprocess.PIPE)
if r.returncode != 0:
    fflib.skip("cannot mount a tmpfs: %s" % r.stderr.decode())


def umount_fs():
    subprocess.run(["umount", "-l", fs], stderr=subprocess.DEVNULL)


import atexit  # noqa: E402
atexit.register(umount_fs)

data = t.gen(t.path("data"), n=12, classes=2, seed=3)
for d, _, files in os.walk(data):
    os.chmod(d, 0o755)
    for n in files:
        os.chmod(os.path.join(d, n), 0o644)
cfg = t.config(t.path("feedfs.conf"), data, {"train": dict(epochs=1)},
               cache_size="auto", threads=1)
os.chmod(cfg, 0o644)
reg = t.path("registry")
os.makedirs(reg)
os.chmod(reg, 0o1777)
node = t.path("node.conf")


def node_conf(text):
    with open(node, "w") as f:
        f.write(text)
    os.chmod(node, 0o644)


node_conf("# the node's\n[node]\ncache_total = 50%%\ncache_registry = %s\n" % reg)
os.environ["FEEDFS_NODE_CONF"] = node
owned = os.path.join(fs, "nobody")
os.makedirs(owned)
os.chown(owned, NOBODY, NOBODY)


def bound(cache_dir, *opts):
    """Mount with cache_dir (as uid 65534 when opts says so), and return
    the cache's bound (feedfs_cache_size_bytes) and the log."""
    mnt = t.path("mnt")
    args = ["-o", "cache_dir=%s,allow_other" % cache_dir] + list(opts)
    with fflib.Mount(t, cfg, mnt, *args) as m:
        b = int(m.stats()["feedfs_cache_size_bytes"])
        text = m.log()
    return b, text


def near(b, want, what, text):
    check(abs(b - want) <= 2 * M, "%s: a bound of %.1fM, expected %.1fM\n%s"
          % (what, b / M, want / M, text))


total = os.statvfs(fs).f_blocks * os.statvfs(fs).f_frsize
half = total // 2
# (a) the first user alone
b, text = bound(fs + "/root-cache")
near(b, half, "(a) root alone", text)
check("the node's bound" in text and "1 user " in text, "(a) the log: %s" % text)
log("(a) root alone: %.0fM of the node's %.0fM" % (b / M, half / M))
# (b) a second user, then the first again
b2, text = bound(owned + "/cache", "-o", "uid=65534,gid=65534")
near(b2, half // 2, "(b) uid 65534 second", text)
b1, text = bound(fs + "/root-cache")
near(b1, half // 2, "(b) root again", text)
check(b1 + b2 <= half + 2 * M, "(b) %d + %d over the bound %d" % (b1, b2, half))
log("(b) two users: %.0fM + %.0fM" % (b1 / M, b2 / M))
# (c) a third user's entry; a stale one and a forged one count for nobody
dev = os.stat(fs).st_dev
third = os.path.join(reg, "%x.4242.99" % dev)
with open(third, "w") as f:
    f.write("/somewhere")
os.chown(third, 4242, 4242)
stale = os.path.join(reg, "%x.4343.98" % dev)
with open(stale, "w") as f:
    f.write("/old")
os.chown(stale, 4343, 4343)
old = time.time() - 40 * 86400
os.utime(stale, (old, old))
forged = os.path.join(reg, "%x.4444.97" % dev)
with open(forged, "w") as f:
    f.write("/forged")  # root's, its name says 4444
b, text = bound(fs + "/root-cache")
near(b, half // 3, "(c) three users", text)
check("3 users" in text, "(c) the log: %s" % text)
log("(c) three users (a stale and a forged entry not counted): %.0fM" % (b / M))
os.unlink(third)
# (d) a second cache of root on the same filesystem
b, text = bound(fs + "/root-cache2")
near(b, half // 2 // 2, "(d) root's second cache", text)
check("2 caches" in text, "(d) the log: %s" % text)
log("(d) root's second cache: %.0fM (half of root's share)" % (b / M))
# (e) a registry that is not root's 1777; a broken node config
os.chmod(reg, 0o777)
b, text = bound(fs + "/root-cache2")
check("warning" in text and "not root's with the sticky bit" in text,
      "(e) no warning: %s" % text)
os.chmod(reg, 0o1777)
node_conf("[node]\ncache_total = lots\n")
mnt = t.path("mnt")
r = subprocess.run([fflib.FEEDFS, "-f", cfg, mnt], stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT, timeout=60)
out = r.stdout.decode()
check(r.returncode == 2 and "%s:2: cache_total = lots" % node in out,
      "(e) rc %d: %s" % (r.returncode, out))
check(not fflib._mounted(mnt), "(e) mounted")
log("(e) %s" % out.strip())
log("ok")
