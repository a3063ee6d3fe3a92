#!/usr/bin/python3
"""test_cache_dir_trust.py - trust in cache_dir is decided once, on its
descriptor, by every entry point (issue 25, class 1), as root:

- a cache_dir owned by another user (nobody), or writable by group or by
  others: the mount refuses it before it writes anything there, so no
  shard index appears in it, and still serves the shard dataset (bytes as
  feedfs-ref's); feedfs-fill over the same config writes nothing there
  either;
- a trusted cache_dir whose shard-index is a symlink to another
  directory: nothing is created at the target (mount and feedfs-fill),
  and the mount serves;
- cache_size = 0: nothing is written under cache_dir (the shard index is
  off with the cache);
- feedfs-cache stats | ls | verify on a store whose LOCK is a FIFO return
  promptly with an error naming LOCK; with LOCK a symlink they refuse the
  store (the symlink is not followed); a mount over such a store serves
  without the cache.
"""

import io
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

if os.geteuid() != 0:
    fflib.skip("needs root (chown to another user)")
NOBODY = 65534

t = fflib.Test()
data = t.gen(t.path("data"), n=12, classes=2, seed=25)
shards = t.path("shards")
os.makedirs(shards)
files = sorted((c, f) for c in sorted(os.listdir(data))
               for f in sorted(os.listdir(os.path.join(data, c))))
for s in range(2):
    with tarfile.open(os.path.join(shards, "shard-%d.tar" % s), "w") as tf:
        for i, (c, f) in enumerate(files[s::2]):
            for name, payload in (
                    ("s%d_%02d.jpg" % (s, i),
                     open(os.path.join(data, c, f), "rb").read()),
                    ("s%d_%02d.cls" % (s, i), c[-1].encode())):
                ti = tarfile.TarInfo(name)
                ti.size, ti.mtime = len(payload), 1700000000
                tf.addfile(ti, io.BytesIO(payload))
SPEC = os.path.join(shards, "*.tar")


def conf(path, cache_dir, cache_size="1G", cluster=None):
    lines = ["[mount]", "cache_dir = %s" % cache_dir,
             "cache_size = %s" % cache_size, "threads = 2",
             "memory = 256M", "readahead = 2"]
    if cluster:
        lines.append("cluster = %s" % cluster)
    lines += ["", "[dataset sh]", "shards = %s" % SPEC, "label = cls", "",
              "[job val]", "dataset = sh", "batch_size = 4", "epochs = 1",
              "shuffle = no", "pipeline = decode resize(40) cache center_crop(32)",
              "dtype = uint8", "layout = HWC"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


# the reference, through a trusted cache_dir of its own
ref = t.ref(conf(t.path("ref.conf"), t.path("refcache")), "val", 0,
            t.path("ref"))


def serves(cfg, what):
    """Mount cfg; epoch 0 of val equals the reference; the log."""
    with fflib.Mount(t, cfg, t.path("mnt")) as m:
        for name in sorted(os.listdir(ref)):
            with open(os.path.join(ref, name), "rb") as f:
                check(fflib.read_file(m.p("val", "epoch-0000", name)) ==
                      f.read(), "%s: val/epoch-0000/%s differs from "
                      "feedfs-ref" % (what, name))
        check(m.alive(), "%s: feedfs died" % what)
        return m.log()


def tree(d):
    """Every path under d (relative), for 'nothing was created'."""
    out = []
    for root, dirs, fs in os.walk(d):
        out += [os.path.relpath(os.path.join(root, x), d) for x in dirs + fs]
    return sorted(out)


# ---- a cache_dir that another user controls, or others may write --------
for what, uid, mode in (("owned by nobody", NOBODY, 0o700),
                        ("owned by nobody, 0755", NOBODY, 0o755),
                        ("group-writable", 0, 0o770),
                        ("world-writable", 0, 0o777)):
    d = t.path("foreign-%d-%o" % (uid, mode))
    os.mkdir(d)
    os.chown(d, uid, uid)
    os.chmod(d, mode)
    text = serves(conf(t.path("f.conf"), d), what)
    check(tree(d) == [], "%s: the mount wrote %s into it" % (what, tree(d)))
    check("shard index" in text and "refus" in text,
          "%s: the log does not say the shard index was refused:\n%s"
          % (what, text[-2000:]))
    log("cache_dir %s: nothing written there, shards served" % what)

# ---- shard-index a symlink to another directory ----------------------------
trusted = t.path("trusted")
target = t.path("elsewhere")
os.mkdir(trusted, 0o700)
os.mkdir(target, 0o700)
os.symlink(target, os.path.join(trusted, "shard-index"))
text = serves(conf(t.path("s.conf"), trusted), "shard-index a symlink")
check(tree(target) == [], "the mount created %s at the symlink's target"
      % tree(target))
check(os.path.islink(os.path.join(trusted, "shard-index")),
      "the symlink was replaced")
check("shard-index" in text and "symbolic link" in text,
      "the log does not say shard-index is a symlink:\n%s" % text[-2000:])
log("shard-index a symlink: nothing created at its target, shards served")

# ---- cache_size = 0: nothing written under cache_dir ----------------------
off = t.path("off")
serves(conf(t.path("o.conf"), off, cache_size="0"), "cache_size = 0")
check(not os.path.exists(off), "cache_size = 0: %s was made (%s)"
      % (off, tree(off) if os.path.isdir(off) else "a file"))
log("cache_size = 0: cache_dir not made, shard index off")

# ---- feedfs-fill over the same cache_dirs ----------------------------------
MEMCACHED = "/usr/bin/memcached"
FILL = os.path.join(fflib.BUILDDIR, "feedfs-fill")
if os.access(MEMCACHED, os.X_OK):
    port = fflib.free_port()
    mc = subprocess.Popen([MEMCACHED, "-p", str(port), "-l", "127.0.0.1",
                           "-U", "0", "-m", "16", "-u", "root"],
                          stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    try:
        for _ in range(500):
            if fflib.accepts(port):
                break
            time.sleep(0.01)
        cl = "127.0.0.1:%d" % port
        fd = t.path("fill-foreign")
        os.mkdir(fd)
        os.chown(fd, NOBODY, NOBODY)
        os.chmod(fd, 0o700)
        ft, fx = t.path("fill-trusted"), t.path("fill-elsewhere")
        os.mkdir(ft, 0o700)
        os.mkdir(fx, 0o700)
        os.symlink(fx, os.path.join(ft, "shard-index"))
        for d, look in ((fd, fd), (ft, fx)):
            r = subprocess.run(["timeout", "60", FILL,
                                conf(t.path("fill.conf"), d, cluster=cl),
                                "val"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
            out = r.stdout.decode()
            check(r.returncode == 0, "feedfs-fill (%s): %s" % (d, out))
            check(tree(look) == [], "feedfs-fill wrote %s into %s"
                  % (tree(look), look))
            check("shard index" in out, "feedfs-fill does not say the "
                  "shard index is off:\n%s" % out)
        log("feedfs-fill: nothing written into a foreign cache_dir or at "
            "a symlinked shard-index's target")
    finally:
        mc.terminate()
        mc.wait()
else:
    log("no %s: feedfs-fill not checked" % MEMCACHED)

# ---- feedfs-cache and the mount with LOCK a FIFO, LOCK a symlink ----------
FC = os.path.join(fflib.BUILDDIR, "feedfs-cache")
store = t.path("store")
scfg = conf(t.path("store.conf"), store)
serves(scfg, "a store to break")
lock = os.path.join(store, "LOCK")
check(os.path.isfile(lock), "no LOCK in %s: %s" % (store, tree(store)))
decoy = t.path("decoy")
with open(decoy, "w"):
    pass
for kind in ("fifo", "symlink"):
    os.unlink(lock)
    if kind == "fifo":
        os.mkfifo(lock, 0o600)
    else:
        os.symlink(decoy, lock)
    for cmd in ("stats", "ls", "verify"):
        t0 = time.monotonic()
        r = subprocess.run(["timeout", "20", FC, "--cache-dir", store, cmd],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        err = r.stderr.decode()
        check(r.returncode != 124, "feedfs-cache %s with LOCK a %s: still "
              "blocked after 20 s" % (cmd, kind))
        check(r.returncode == 1 and "LOCK" in err,
              "feedfs-cache %s with LOCK a %s: exit %d, stderr %r"
              % (cmd, kind, r.returncode, err))
        log("feedfs-cache %s, LOCK a %s: exit 1 in %.1f s: %s"
            % (cmd, kind, time.monotonic() - t0, err.strip()))
    check(os.path.getsize(decoy) == 0 and
          stat.S_ISREG(os.lstat(decoy).st_mode), "the decoy was changed")
    text = serves(scfg, "LOCK a %s" % kind)
    check("serving without the cache" in text, "a mount over LOCK a %s "
          "did not refuse the cache:\n%s" % (kind, text[-2000:]))
    log("a mount with LOCK a %s: served without the cache" % kind)
shutil.rmtree(store)
log("ok")
