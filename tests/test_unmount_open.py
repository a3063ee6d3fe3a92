#!/usr/bin/python3
"""test_unmount_open.py - a mount ended while its files are still open.

A reader that still holds a batch file, a text file and the mixture
when the mount ends (SIGTERM; a lazy unmount, fusermount3 -u -z) gets
no release for them: the session ends first.  The daemon must still free
every handle (LeakSanitizer, in CI's ASan pass, fails the exit status
otherwise) and exit 0, and the reader's descriptors fail cleanly
afterwards."""

import os
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

t = fflib.Test()
data = t.gen(t.path("data"), n=24, classes=2, seed=7)
cfg = t.config(t.path("feedfs.conf"), data,
               {"train": dict(epochs=2, seed=1)}, threads=2)


def hold(m):
    """Open files of each kind, read a little of each; kept open."""
    fds = []
    for rel in (("train", "epoch-0000", "batch-000000.npy"),
                ("train", "epoch-0001", "batch-000001.labels.npy"),
                ("train", "info.json"), (".feedfs", "stats")):
        fd = os.open(m.p(*rel), os.O_RDONLY)
        check(len(os.read(fd, 64)) > 0, "nothing read from %s" % "/".join(rel))
        fds.append(fd)
    return fds


def after(fds, how):
    for fd in fds:
        for op in (lambda: os.read(fd, 64), lambda: os.close(fd)):
            try:
                op()
            except OSError:
                pass  # ENOTCONN or the like: the mount is gone
    log("%s with %d files open: the daemon exited 0" % (how, len(fds)))


# SIGTERM: the daemon unmounts and ends its session with the files open.
m = fflib.Mount(t, cfg, t.path("mnt1"))
m.__enter__()
fds = hold(m)
m.terminate()  # requires exit status 0
after(fds, "SIGTERM")

# A lazy unmount: the files stay usable until closed, then the session ends.
m = fflib.Mount(t, cfg, t.path("mnt2"))
m.__enter__()
fds = hold(m)
r = subprocess.run(["fusermount3", "-u", "-z", m.mnt], stderr=subprocess.PIPE)
check(r.returncode == 0, "fusermount3 -u -z: %s" % r.stderr.decode())
after(fds, "fusermount3 -u -z")
m._wait_exit("fusermount3 -u -z and the last close")
log("ok")
