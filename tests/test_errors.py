#!/usr/bin/python3
"""test_errors.py - errors a user can see (issue 26), on a mount started
in the background as a user would, without a config, over a dataset with
one truncated JPEG, skipped files and an empty class:

  - the start says on the terminal, before feedfs returns, what it left
    out: the skipped files counted by extension (.tif, .bmp), the empty
    class folder, the mountpoint that is not empty, the cache_dir refused
    (a mode 0777 one: served without the cache), and where the log is
    when there is no syslog;
  - MOUNT/.feedfs/log holds the log's last lines (the start, and the
    truncated file with its reason once read);
  - with on_error = fail (the default), reading the batch raises
    feedfs.BatchError, an OSError with errno EIO, naming the batch, the
    sample, its file and the reason; the batch's .labels.npy and .ids.npy
    stay readable (strict order: they come from the plan); the other
    batches read; JOB/errors.tsv lists the sample, file and reason;
  - -o on_error=substitute,batch_size=8 (no config) serves every batch,
    and -o val.epochs=2 sets one job; with a config, -o on_error is
    refused (exit 2) and says where to set it;
  - a second feedfs on the same mountpoint is refused with a clear error
    (exit 1), and the first still serves;
  - SIGHUP does not unmount;
  - -o log=FILE keeps the log after the unmount."""

import errno
import os
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

sys.path.insert(0, os.path.join(fflib.SRCDIR, "python"))
import feedfs  # noqa: E402

t = fflib.Test()
# torchvision's layout, ROOT/train and ROOT/val; val is train here (a
# link), read without shuffle.
os.makedirs(t.path("root"))
data = t.gen(t.path("root", "train"), n=40, classes=2, seed=3)
os.symlink("train", t.path("root", "val"))
classes = sorted(os.listdir(data))
# The truncated JPEG: the 5th file of the first class (sorted: sample 4).
bad_rel = os.path.join(classes[0], sorted(os.listdir(
    os.path.join(data, classes[0])))[4])
bad = os.path.join(data, bad_rel)
with open(bad, "rb") as f:
    whole = f.read()
with open(bad, "wb") as f:
    f.write(whole[:len(whole) * 2 // 5])
for name in ("a.tif", "b.tif", "c.TIF"):
    open(os.path.join(data, classes[0], name), "wb").write(b"II*\0")
open(os.path.join(data, classes[1], "d.bmp"), "wb").write(b"BM")
os.mkdir(os.path.join(data, "zz_empty"))
mnt = t.path("mnt")
os.makedirs(mnt)
open(os.path.join(mnt, "left-here"), "w").close()
cache = t.path("cache777")
os.makedirs(cache)
os.chmod(cache, 0o777)


def mounted(p):
    return fflib._mounted(p)


def feedfs_bg(*args):
    """feedfs in the background mode; (exit status, stderr)."""
    r = subprocess.run([fflib.FEEDFS] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    return r.returncode, r.stderr.decode(errors="replace")


def unmount(p):
    for _ in range(50):
        if subprocess.call(["fusermount3", "-u", p],
                           stderr=subprocess.DEVNULL) == 0:
            return
        time.sleep(0.2)
    fflib.fail("cannot unmount %s" % p)


def daemon_pid(p):
    """The pid of the feedfs serving p (its last argument)."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        argv = [a for a in argv if a]
        if argv and os.path.basename(argv[0]) == b"feedfs" and \
                argv[-1] == p.encode():
            return int(d)
    return None


# ---- the start: loud where it matters --------------------------------------
logfile = t.path("feedfs.log")
opts = ("cache_dir=%s,threads=2,memory=256M,batch_size=8,log=%s"
        % (cache, logfile))
rc, err = feedfs_bg("-o", opts, t.path("root"), mnt)
import atexit  # noqa: E402
atexit.register(fflib._force_umount, mnt)
log("start said:\n" + err)
check(rc == 0, "feedfs %s %s: exit %d: %s" % (data, mnt, rc, err))
check(mounted(mnt), "feedfs returned 0 but %s is not mounted" % mnt)
for want in ("3 .tif", "1 .bmp", "zz_empty", "not empty",
             "serving without the cache", cache):
    check(want in err, "the start did not say %r on the terminal:\n%s"
          % (want, err))
if not os.path.exists("/dev/log"):
    check(os.path.join(mnt, ".feedfs", "log") in err,
          "no syslog here, and the start did not say where the log is")
check(err.count("\n") < 12, "too many lines at the start:\n" + err)
check(os.listdir(os.path.join(mnt, ".feedfs")) == ["stats", "log"]
      or sorted(os.listdir(os.path.join(mnt, ".feedfs"))) == ["log", "stats"],
      ".feedfs lists %s" % os.listdir(os.path.join(mnt, ".feedfs")))
with open(os.path.join(mnt, ".feedfs", "log")) as f:
    text = f.read()
check("serving" in text and "zz_empty" in text,
      ".feedfs/log lacks the start's lines:\n" + text)

# ---- a double mount is refused ---------------------------------------------
rc2, err2 = feedfs_bg("-o", "cache_dir=%s" % t.path("c2"), t.path("root"),
                      mnt)
check(rc2 == 1 and "already" in err2 and "fusermount3 -u" in err2,
      "a second feedfs on %s: exit %d, said %r" % (mnt, rc2, err2))
with open(os.path.join(mnt, "README")) as f:
    check("feedfs" in f.read(), "the first mount no longer serves")

# ---- on_error = fail: the exception names the batch, sample, file, why -----
job = feedfs.Job(os.path.join(mnt, "val"))
check(job.info["on_error"] == "fail", "val's on_error is not fail")
ids_all = {}
with open(os.path.join(mnt, "val", "samples.tsv")) as f:
    for line in f:
        i, p, _ = line.rstrip("\n").split("\t")
        ids_all[p] = int(i)
bad_id = ids_all[bad_rel]
bad_batch = bad_id // 8  # val: no shuffle
got = []
try:
    for x, y in job.epoch(0):
        got.append(len(y))
    fflib.fail("epoch 0 of val read although %s is truncated" % bad_rel)
except feedfs.BatchError as e:
    log("the error: %s" % e)
    check(isinstance(e, OSError) and e.errno == errno.EIO,
          "BatchError is not an OSError with EIO")
    check(e.batch == bad_batch and e.epoch == 0,
          "BatchError names batch %s epoch %s, not %d 0"
          % (e.batch, e.epoch, bad_batch))
    s = str(e)
    for want in ("batch %d" % bad_batch, "sample %d" % bad_id, bad_rel,
                 "val"):
        check(want in s, "the error does not name %r: %s" % (want, s))
    check(len(e.failed) == 1 and e.failed[0][0] == bad_id
          and e.failed[0][1] == bad_rel and e.failed[0][2],
          "BatchError.failed is %r" % (e.failed,))
    reason = e.failed[0][2]
    check(bad_rel not in reason and len(reason) > 5,
          "the reason %r should say why, not repeat the path" % reason)
check(len(got) == bad_batch, "%d batches before the bad one, not %d"
      % (len(got), bad_batch))
try:
    import torch  # noqa: F401
except ImportError:
    torch = None
if torch is not None:
    # The training loop's way: feedfs.torch.Loader raises it in the
    # trainer's thread.
    try:
        for x, y in feedfs.torch.Loader(job, epochs=[0]):
            pass
        fflib.fail("the Loader read epoch 0 of val")
    except feedfs.BatchError as e:
        check(bad_rel in str(e) and e.batch == bad_batch,
              "the Loader's error: %s" % e)
d = job.epoch_dir(0)
for suffix in (".labels.npy", ".ids.npy"):
    p = os.path.join(d, "batch-%06d%s" % (bad_batch, suffix))
    fflib.read_file(p)  # readable: strict order, from the plan
try:
    fflib.read_file(os.path.join(d, "batch-%06d.npy" % bad_batch))
    fflib.fail("the bad batch's .npy read")
except OSError as e:
    check(e.errno == errno.EIO, "the bad batch gave %s, not EIO" % e)
for b in range(bad_batch + 1, job.nbatches()):
    fflib.read_file(os.path.join(d, "batch-%06d.npy" % b))
with open(os.path.join(mnt, "val", "errors.tsv")) as f:
    lines = [ln for ln in f.read().splitlines() if not ln.startswith("#")]
check(len(lines) == 1 and lines[0].split("\t")[:2] == [str(bad_id), bad_rel],
      "val/errors.tsv: %r" % lines)
with open(os.path.join(mnt, ".feedfs", "log")) as f:
    text = f.read()
check(bad_rel in text and "error" in text,
      ".feedfs/log does not name the truncated file:\n" + text[-2000:])

# ---- SIGHUP does not unmount -----------------------------------------------
pid = daemon_pid(mnt)
check(pid is not None, "no feedfs process serves %s" % mnt)
os.kill(pid, signal.SIGHUP)
time.sleep(1)
check(mounted(mnt) and os.path.exists("/proc/%d" % pid),
      "SIGHUP unmounted %s" % mnt)
with open(os.path.join(mnt, "README")) as f:
    f.read()
unmount(mnt)
for _ in range(100):
    if not os.path.exists("/proc/%d" % pid):
        break
    time.sleep(0.1)
# -o log=FILE: the log outlives the mount, a line each, with the pid.
with open(logfile) as f:
    text = f.read()
check(("feedfs[%d] error: " % pid) in text and bad_rel in text
      and "zz_empty" in text, "-o log=FILE lacks the log's lines:\n" + text)
rc, err = feedfs_bg("-o", "log=%s" % t.path("no", "such", "dir"), data, mnt)
check(rc == 2 and "log=" in err, "a log file that cannot be opened: exit "
      "%d, %r" % (rc, err))

# ---- -o job keys without a config ------------------------------------------
os.remove(os.path.join(mnt, "left-here"))
m = fflib.Mount(t, t.path("root"), mnt, "-o",
                "cache_dir=%s,threads=2,memory=256M,on_error=substitute,"
                "batch_size=8,val.epochs=2" % t.path("cache"))
with m:
    j = feedfs.Job(m.p("val"))
    check(j.info["on_error"] == "substitute" and j.info["batch_size"] == 8
          and j.epochs == 2 and feedfs.Job(m.p("train")).epochs == 90,
          "-o job keys not applied: %r" % j.info)
    n = sum(len(y) for x, y in j.epoch(1))
    check(n == 40, "substitute: %d samples in epoch 1, not 40" % n)
    with open(m.p("val", "errors.tsv")) as f:
        check(bad_rel in f.read(), "errors.tsv lacks a substituted sample")
cfg = t.config(t.path("feedfs.conf"), data, {"a": {}})
rc, err = feedfs_bg("-o", "on_error=substitute", cfg, mnt)
check(rc == 2 and "[job" in err, "-o on_error with a config: exit %d, %r"
      % (rc, err))
check(not mounted(mnt), "mounted although -o was refused")
log("ok")
