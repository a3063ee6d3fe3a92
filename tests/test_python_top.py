#!/usr/bin/python3
"""test_python_top.py - python3 -m feedfs.top (issue 19) against a live
mount, from the source tree:

- under a pseudo-terminal, with a reader keeping the workers busy, it
  draws at least three frames (the first and two refreshes), each with the
  job's row and its images/s, the memory against the budget and the
  workers; the images/s are above 0 once the mount's own rate is;
- Ctrl-C typed at the terminal (a \\x03 through the pty, so the line
  discipline sends SIGINT) ends it with status 0, no traceback, and the
  terminal's screen restored;
- when the mount goes away (fusermount3 -u) it ends with status 1 and
  says so, no traceback;
- without a terminal, --count 2 prints two plain frames; a directory that
  is not a mount is an error;
- with four readers waiting at once (their summed waits outgrow the
  clock), "readers waited" and the job's READ WAIT stay within 100%, and
  feedfs_read_starved_seconds_total and its per-job twin grow no faster
  than the clock (issue 25).
"""

import os
import pty
import select
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

PYDIR = os.path.join(fflib.SRCDIR, "python")
sys.path.insert(0, PYDIR)
try:
    import numpy  # noqa: F401
except ImportError:
    fflib.skip("numpy is missing (Debian: python3-numpy)")
import feedfs  # noqa: E402
import feedfs.top  # noqa: E402

CLEAR, ALT_OFF = feedfs.top.CLEAR.encode(), feedfs.top.ALT_OFF.encode()
env = dict(os.environ, PYTHONPATH=PYDIR)
t = fflib.Test()
data = t.gen(t.path("data"), n=48, classes=3, seed=4)
cfg = t.config(t.path("feedfs.conf"), data, {"train": dict(epochs=50)},
               threads=2)


def spawn_top(mnt):
    """feedfs.top on a new pseudo-terminal: (pid, master fd)."""
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.execve(fflib.PY, [fflib.PY, "-m", "feedfs.top", mnt], env)
        finally:
            os._exit(127)
    return pid, fd


def read_until(fd, buf, pred, timeout=30):
    """Read the pty into buf until pred(buf) or its end; returns buf."""
    deadline = time.monotonic() + timeout
    while not pred(buf) and time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.5)
        if not r:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not chunk:
            break
        buf += chunk
    return buf


def wait_exit(pid, what):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        p, status = os.waitpid(pid, os.WNOHANG)
        if p:
            check(os.WIFEXITED(status), "%s: killed by signal %d"
                  % (what, os.WTERMSIG(status) if os.WIFSIGNALED(status)
                     else -1))
            return os.WEXITSTATUS(status)
        time.sleep(0.1)
    os.kill(pid, 9)
    fflib.fail("%s: still running 30 s later" % what)


def job_rate(frame):
    """The images/s of job train in a frame's text."""
    for line in frame.splitlines():
        f = line.split()
        if f and f[0] == "train":
            return float(f[1])
    fflib.fail("no row for job train in a frame:\n%s" % frame)


m = fflib.Mount(t, cfg, t.path("mnt")).__enter__()
job = feedfs.Job(m.p("train"))
stop = threading.Event()


def reader():
    """Keeps the workers busy: epoch after epoch."""
    for e in range(job.epochs):
        for _ in job.epoch(e):
            if stop.is_set():
                return


th = threading.Thread(target=reader, daemon=True)
th.start()
# The mount's rate (the last 10 s) is above 0 once the reader has been
# served: wait for that, so that top has a rate to show.
deadline = time.monotonic() + 30
key = ("feedfs_images_per_second", (("job", "train"),))
while feedfs.stats(m.mnt).get(key, 0) <= 0:
    check(time.monotonic() < deadline, "the mount shows no images/s")
    time.sleep(0.1)

# ---- two refreshes under a pty, then Ctrl-C ---------------------------------
pid, fd = spawn_top(m.mnt)
out = read_until(fd, b"", lambda b: b.count(CLEAR) >= 3 and
                 b.rsplit(CLEAR, 1)[1].count(b"\n") >= 6)
check(out.count(CLEAR) >= 3, "fewer than 3 frames in 30 s:\n%r" % out)
os.write(fd, b"\x03")  # Ctrl-C
out = read_until(fd, out, lambda b: False, timeout=15)
os.close(fd)
rc = wait_exit(pid, "feedfs.top after Ctrl-C")
text = out.decode(errors="replace")
check(rc == 0, "feedfs.top: status %d after Ctrl-C:\n%s" % (rc, text))
check("Traceback" not in text, "a traceback:\n%s" % text)
check(out.rstrip(b"\r\n").endswith(ALT_OFF) or ALT_OFF in out[-200:],
      "the screen was not restored:\n%r" % out[-200:])
frames = [f.decode(errors="replace").replace("\r", "")
          for f in out.split(CLEAR)[1:]]
for i, f in enumerate(frames[:3]):
    check("memory" in f and " of " in f and "workers" in f,
          "frame %d lacks memory or workers:\n%s" % (i, f))
    rate = job_rate(f)
    check(rate > 0, "frame %d: train at %.1f images/s while read:\n%s"
          % (i, rate, f))
check("READ WAIT" in frames[1] and "%" in frames[1].split("READ WAIT")[1],
      "no read wait share in a refresh:\n%s" % frames[1])
log("feedfs.top: %d frames under a pty with train's images/s (%.1f); "
    "Ctrl-C: status 0, screen restored" % (len(frames), job_rate(frames[2])))
stop.set()
th.join()

# ---- without a terminal -----------------------------------------------------
r = subprocess.run([fflib.PY, "-m", "feedfs.top", "--count", "2", "-n", "0.2",
                    m.mnt], env=env, stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, timeout=60)
plain = r.stdout.decode()
check(r.returncode == 0 and plain.count("feedfs.top  ") == 2 and
      "\x1b" not in plain, "--count 2 without a tty: %d\n%s%s"
      % (r.returncode, plain, r.stderr.decode()))
r = subprocess.run([fflib.PY, "-m", "feedfs.top", t.path("data")], env=env,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
check(r.returncode == 1 and b"not a feedfs mount" in r.stderr,
      "a plain directory: %d %s" % (r.returncode, r.stderr.decode()))
log("without a tty: two plain frames; a plain directory is refused")

# ---- several readers waiting at once ----------------------------------------
# Four readers of a mount with one worker and no cache: they wait for
# their batches at the same time, so the time they waited, summed, grows
# faster than the clock.  "readers waited" is a share of the time (at
# least one reader waiting), never past 100%; so is a job's READ WAIT.
cfg4 = t.config(t.path("four.conf"), data, {"train": dict(epochs=10000)},
                threads=1, cache_size=0)
m4 = fflib.Mount(t, cfg4, t.path("mnt4")).__enter__()
job4 = feedfs.Job(m4.p("train"))
NREADERS = 4


def reader4(r):
    e = r
    while not stop.is_set():
        for _ in job4.epoch(e):
            if stop.is_set():
                return
        e += NREADERS


stop.clear()
readers = [threading.Thread(target=reader4, args=(r,), daemon=True)
           for r in range(NREADERS)]
for th in readers:
    th.start()
WAIT = "feedfs_read_wait_seconds_total"
deadline = time.monotonic() + 120
while True:
    # Two samples a second apart, until the summed wait outgrew the
    # clock (readers waited together): on a loaded machine the first
    # spans may not show it.
    t0, s0 = time.monotonic(), feedfs.stats(m4.mnt)
    time.sleep(1.0)
    t1, s1 = time.monotonic(), feedfs.stats(m4.mnt)
    dt = t1 - t0
    summed = s1[(WAIT, ())] - s0[(WAIT, ())]
    if summed > 1.2 * dt:
        break
    check(time.monotonic() < deadline, "four readers never waited at once "
          "(summed wait %.2f s in %.2f s)" % (summed, dt))
text = feedfs.top.frame(m4.mnt, s0, s1, dt)
stop.set()
for th in readers:
    th.join(60)
line = [x for x in text.splitlines() if x.startswith("readers waited")][0]
pct = float(line.split()[2].rstrip("%"))
check(0 < pct <= 100, "readers waited %.0f%% of %.2f s (%.2f s summed over "
      "%d readers):\n%s" % (pct, dt, summed, NREADERS, text))
row = [x for x in text.splitlines() if x.split()[:1] == ["train"]][0]
jpct = float(row.split()[6].rstrip("%"))
check(0 < jpct <= 100, "train's READ WAIT %.0f%%:\n%s" % (jpct, text))
# The counters behind them: the time one reader at least waited, between
# two reads of the stats, is at most the time between them on the mount's
# clock (the reader's own t1 - t0 may be shorter by the reads' delays).
CLOCK = ("feedfs_stats_clock_seconds", ())
mdt = s1[CLOCK] - s0[CLOCK]
check(mdt > 0, "feedfs_stats_clock_seconds went from %.6f to %.6f"
      % (s0[CLOCK], s1[CLOCK]))
for key in (("feedfs_read_starved_seconds_total", ()),
            ("feedfs_job_read_starved_seconds_total", (("job", "train"),))):
    starved = s1[key] - s0[key]
    check(0 < starved <= mdt + 1e-5, "%s grew %.6f s in %.6f s"
          % (key[0], starved, mdt))
m4.umount()
log("four readers waiting at once (%.2f s summed in %.2f s): readers "
    "waited %.0f%%, train's READ WAIT %.0f%%" % (summed, dt, pct, jpct))

# ---- the mount goes away ----------------------------------------------------
pid, fd = spawn_top(m.mnt)
out = read_until(fd, b"", lambda b: b.count(CLEAR) >= 1 and b"train" in b)
check(b"train" in out, "no first frame:\n%r" % out)
m.umount()
out = read_until(fd, out, lambda b: False, timeout=30)
os.close(fd)
rc = wait_exit(pid, "feedfs.top after the unmount")
text = out.decode(errors="replace")
check(rc == 1 and "went away" in text and "Traceback" not in text,
      "after the unmount: status %d\n%s" % (rc, text[-2000:]))
log("feedfs.top: the mount went away: status 1, says so")
sys.exit(0)
