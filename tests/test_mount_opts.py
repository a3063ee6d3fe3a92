#!/usr/bin/python3
"""test_mount_opts.py - every -o key answered in feedfs's words (issue 36
§3).

-o batchsize=32 got libfuse's "fuse: unknown option(s)", while the same
key in a config gets "unknown key 'batchsize' ... (expected ...,
batch_size, ...)".  Now:
  - a mistake in -o, with a dataset directory, a config or --check, is
    exit 2 with "-o batchsize=32: unknown key 'batchsize' (expected ...)"
    listing the keys -o takes there (batch_size among them for a dataset
    directory), never FUSE's message, and nothing is mounted;
  - a [dataset] key: remote_timeout with a config says to set it in its
    [dataset NAME] section; with a local dataset directory it says it has
    no effect there and where it belongs; label works for the shards of a
    dataset directory (label=none: no labels);
  - FUSE's own options (default_permissions, noatime, ro) and the ones
    mount(8) adds (rw, defaults) still mount.
"""

import io
import json
import os
import subprocess
import sys
import tarfile

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

t = fflib.Test()
data = t.gen(t.path("data"), n=8, classes=2, seed=9)
cfg = t.config(t.path("f.conf"), data, {"j": {}})
mnt = t.path("mnt")
os.makedirs(mnt)
BASE = "cache_dir=%s,cache_size=0" % t.path("cache")


def feedfs(*args):
    r = subprocess.run([fflib.FEEDFS, "-f"] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120)
    return r.returncode, r.stderr.decode(errors="replace")


def refused(opt, src, *want, check_mode=False):
    args = (["--check"] if check_mode else []) + ["-o", BASE + "," + opt,
                                                   src]
    if not check_mode:
        args.append(mnt)
    r = subprocess.run([fflib.FEEDFS] + (["-f"] if not check_mode else [])
                       + args, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    err = r.stderr.decode(errors="replace")
    check(r.returncode == 2, "-o %s %s: exit %d, want 2: %s"
          % (opt, src, r.returncode, err))
    check("fuse:" not in err, "-o %s: FUSE's words: %s" % (opt, err))
    for w in want:
        check(w in err, "-o %s %s: %r not said: %s" % (opt, src, w, err))
    check(not fflib._mounted(mnt), "-o %s: mounted anyway" % opt)
    return err.strip()


# ---- mistakes ---------------------------------------------------------------
err = refused("batchsize=32", data, "feedfs: -o batchsize=32: unknown key "
              "'batchsize' (expected ", "batch_size", "cache_size",
              "a FUSE mount option")
log("dataset dir: " + err)
err = refused("batchsize=32", cfg, "unknown key 'batchsize'", "cache_size")
check("batch_size" not in err.split("expected", 1)[1].split("FUSE")[0]
      or "[job" in err, "a config's -o lists job keys: " + err)
log("config: " + err)
refused("batchsize=32", data, "unknown key 'batchsize'", check_mode=True)
refused("cache_sise=1G", cfg, "unknown key 'cache_sise'", "cache_size")
refused("allow_others", data, "unknown key 'allow_others'")
log("--check, cache_sise, allow_others: refused in feedfs's words")

# ---- [dataset] keys -----------------------------------------------------------
err = refused("remote_timeout=5", cfg, "[dataset", "f.conf")
log("remote_timeout with a config: " + err)
err = refused("remote_timeout=5", data, "[dataset", "remote")
log("remote_timeout with a local dataset dir: " + err)
shards = t.path("shards")
os.makedirs(shards)
with open(os.path.join(data, sorted(os.listdir(data))[0],
                       sorted(os.listdir(os.path.join(
                           data, sorted(os.listdir(data))[0])))[0]),
          "rb") as f:
    jpg = f.read()
with tarfile.open(os.path.join(shards, "s.tar"), "w") as tf:
    for k in range(3):
        for name, payload in (("k%d.jpg" % k, jpg), ("k%d.cls" % k, b"1")):
            ti = tarfile.TarInfo(name)
            ti.size = len(payload)
            tf.addfile(ti, io.BytesIO(payload))
with fflib.Mount(t, shards, mnt, "-o", BASE + ",label=none") as m:
    with open(m.p("train", "info.json")) as f:
        info = json.load(f)
    check(info["classes"] == [], "-o label=none: classes %s"
          % info["classes"])
log("label=none on a folder of shards: no classes")
err = refused("label=none", data, "label", "shards")
log("label on a class tree: " + err)

# ---- FUSE's options, mount(8)'s ----------------------------------------------
with fflib.Mount(t, data, mnt, "-o",
                 BASE + ",default_permissions,noatime,rw,defaults") as m:
    check(os.path.exists(m.p("train", "info.json")), "not served")
log("default_permissions, noatime, rw, defaults: mounted")
log("ok")
