#!/usr/bin/python3
"""test_dead_mount.py - a mount left dead by a crash (issue 36 §3, issue
40 §2).

After kill -9 (or the OOM killer), the mountpoint answers ENOTCONN, and a
new feedfs on it said "a feedfs is mounted there already".  Now:
  (a) a live feedfs on the mountpoint: a second one is refused (exit 1);
  (b) its daemon killed with -9 while another process still holds its
      FUSE connection (its /dev/fuse descriptor, taken with pidfd_getfd):
      not dead, refused, and promptly (the check does not wait on the
      mount, whose requests nobody answers);
  (c) that descriptor closed, the mount answers ENOTCONN: a new feedfs
      in the background detaches it and mounts, one line says so, and
      the new mount serves the bytes of a fresh one; one feedfs mount is
      left there;
  (d) SIGTERM with a reader's file open: the daemon unmounts, exits 0,
      and its log (-o log=FILE) says why it stopped and that a file was
      open.
"""

import ctypes
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

if not hasattr(os, "pidfd_open"):
    fflib.skip("os.pidfd_open is missing (Python < 3.9)")
t = fflib.Test()
if os.geteuid() != 0:
    fflib.skip("pidfd_getfd of another process's descriptor needs root")
data = t.gen(t.path("data"), n=12, classes=2, seed=40)
mnt = t.path("mnt")
os.makedirs(mnt)
OPTS = "cache_dir=%s,cache_size=0,threads=2,memory=256M" % (
    t.path("cache"))
SYS_pidfd_getfd = 438
libc = ctypes.CDLL(None, use_errno=True)


def feedfs_bg(*args, timeout=120):
    r = subprocess.run([fflib.FEEDFS] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    return r.returncode, r.stderr.decode(errors="replace")


def feedfs_mounts():
    with open("/proc/self/mountinfo") as f:
        return [x for x in f if " %s " % mnt in x and "fuse.feedfs" in x]


def daemon_pid():
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = [a for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"feedfs" and \
                argv[-1] == mnt.encode():
            return int(d)
    return None


def cleanup():
    """Whatever the test left: its daemons killed, its mounts detached."""
    pid = daemon_pid()
    if pid is not None:
        os.kill(pid, signal.SIGKILL)
    for _ in range(10):
        if not feedfs_mounts():
            break
        subprocess.call(["umount", "-l", mnt], stderr=subprocess.DEVNULL)


import atexit  # noqa: E402
atexit.register(cleanup)  # before the Test's own (atexit runs last first)


def fuse_fd(pid):
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)) == "/dev/fuse":
                return int(fd)
        except OSError:
            pass
    fflib.fail("feedfs %d holds no /dev/fuse" % pid)


# ---- (a) a live mount is refused -----------------------------------------------
rc, err = feedfs_bg("-o", OPTS, data, mnt)
check(rc == 0, "the first mount: exit %d: %s" % (rc, err))
pid = daemon_pid()
check(pid is not None, "no daemon serves %s" % mnt)
rc, err = feedfs_bg("-o", OPTS, data, mnt)
check(rc == 1 and "mounted there already" in err,
      "a second feedfs on a live mount: exit %d: %s" % (rc, err))
log("(a) live: " + err.strip().splitlines()[-1])

# ---- (b) the daemon gone, its connection held by another process -------------
pidfd = os.pidfd_open(pid)
held = libc.syscall(SYS_pidfd_getfd, pidfd, fuse_fd(pid), 0)
check(held >= 0, "pidfd_getfd: %s" % os.strerror(ctypes.get_errno()))
os.close(pidfd)
try:
    # the root's attributes in the kernel's cache (feedfs gives them an
    # hour): a stat of the dead mount is answered from it, so whether it
    # is dead must be asked by a request that always reaches the daemon
    os.stat(mnt)
    os.kill(pid, signal.SIGKILL)
    for _ in range(300):
        if not os.path.exists("/proc/%d" % pid):
            break
        time.sleep(0.1)
    rc, err = feedfs_bg("-o", OPTS, data, mnt, timeout=60)
    check(rc == 1 and "mounted there already" in err and
          str(os.getpid()) in err,
          "a dead daemon's connection still held: exit %d: %s" % (rc, err))
    log("(b) held: " + err.strip().splitlines()[-1])
finally:
    os.close(held)

# ---- (c) dead: detached and mounted again ----------------------------------------
try:
    os.statvfs(mnt)
    fflib.fail("the dead mount answers statfs")
except OSError as e:
    check(e.errno == errno.ENOTCONN, "the dead mount: %s" % e)
rc, err = feedfs_bg("-o", OPTS, data, mnt)
check(rc == 0, "a new feedfs on the dead mount: exit %d: %s" % (rc, err))
said = [x for x in err.splitlines() if "gone" in x]
check(len(said) == 1 and "detached" in said[0],
      "the start should say the dead mount was detached:\n" + err)
log("(c) " + said[0])
check(len(feedfs_mounts()) == 1, "feedfs mounts on %s: %s"
      % (mnt, feedfs_mounts()))
ref = t.ref(data, "train", 0, t.path("ref"))
for name in sorted(os.listdir(ref))[:3]:
    with open(os.path.join(ref, name), "rb") as f:
        check(fflib.read_file(os.path.join(mnt, "train", "epoch-0000",
                                           name)) == f.read(),
              "%s differs from feedfs-ref" % name)
pid = daemon_pid()
os.kill(pid, signal.SIGTERM)
for _ in range(300):
    if not os.path.exists("/proc/%d" % pid):
        break
    time.sleep(0.1)
check(not feedfs_mounts(), "still mounted after SIGTERM")

# ---- (d) SIGTERM with a reader's file open -----------------------------------
logfile = t.path("feedfs.log")
m = fflib.Mount(t, data, mnt, "-o", OPTS + ",log=" + logfile).__enter__()
fd = os.open(m.p("train", "epoch-0000", "batch-000000.npy"), os.O_RDONLY)
os.read(fd, 4096)
m.terminate()
try:
    os.close(fd)
except OSError:
    pass
with open(logfile) as f:
    text = f.read()
said = [x for x in text.splitlines() if "SIGTERM" in x]
check(len(said) == 1 and "1 file open" in said[0],
      "the log should say the daemon stopped on SIGTERM with a file "
      "open:\n" + text)
log("(d) " + said[0].split("] ", 1)[1])
log("ok")
