"""python3 -m feedfs.top MOUNT - a live view of a feedfs mount.

    python3 -m feedfs.top [-n SECONDS] [--count N] MOUNT

Every SECONDS (default 1) it reads MOUNT/.feedfs/stats and shows, per job,
the images/s the workers deliver, the cache hit rate, the cluster tier's
hits, how busy the workers are and the share of the time readers waited
for batches (at least one of them: however many wait together, never more
than 100%); and for the mount, memory in use against its budget.  Readers
that wait about all the time are starved: the input is the bottleneck.
Ctrl-C quits (status 0); so does the mount going away (status 1, with a
message).  On a terminal it redraws in place; otherwise it prints one
frame after another.  See feedfs-python(7).

Part of the Python package (python/feedfs/), a program over it: it
imports feedfs (feedfs.stats), and nothing of the package imports it.
"""

import argparse
import os
import signal
import sys
import time

import feedfs

CLEAR = "\x1b[H\x1b[2J"
ALT_ON, ALT_OFF = "\x1b[?1049h\x1b[?25l", "\x1b[?25h\x1b[?1049l"


def _jobs(s):
    return sorted({dict(lab)["job"] for (name, lab) in s
                   if name == "feedfs_samples_total" and lab})


def _job(s, name, job, default=0.0):
    return s.get((name, (("job", job),)), default)


def _one(s, name, default=0.0):
    return s.get((name, ()), default)


def _bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return ("%.0f %s" if unit == "B" else "%.1f %s") % (n, unit)
        n /= 1024.0


def _pct(x):
    return "-" if x is None else "%.0f%%" % (100.0 * x)


def frame(mount, prev, cur, dt):
    """The text of one refresh: cur and prev are stats() dicts taken dt
    seconds apart (prev None on the first).  Where both carry the mount's
    own clock (feedfs_stats_clock_seconds), dt is its difference: the
    counters were taken at those times, not at the reader's."""
    clock = ("feedfs_stats_clock_seconds", ())
    if prev is not None and clock in prev and clock in cur:
        dt = cur[clock] - prev[clock]
    def delta(name, job=None):
        if prev is None or dt <= 0:
            return None
        key = (name, (("job", job),) if job is not None else ())
        if key not in cur:  # a mount without the counter
            return None
        if job is None:
            return _one(cur, name) - _one(prev, name)
        return _job(cur, name, job) - _job(prev, name, job)

    lines = ["feedfs.top  %s  %s" % (mount, time.strftime("%H:%M:%S"))]
    nworkers = _one(cur, "feedfs_workers")
    mem, limit = _one(cur, "feedfs_memory_bytes"), \
        _one(cur, "feedfs_memory_limit_bytes")
    busy_all = None
    if prev is not None and dt > 0:
        busy_all = sum(_job(cur, "feedfs_worker_busy_seconds_total", j) -
                       _job(prev, "feedfs_worker_busy_seconds_total", j)
                       for j in _jobs(cur)) / dt
    lines.append(
        "memory %s of %s (%s), peak %s   workers %s%d   queue %d" % (
            _bytes(mem), _bytes(limit), _pct(mem / limit if limit else None),
            _bytes(_one(cur, "feedfs_memory_peak_bytes")),
            "" if busy_all is None else "%.1f busy of " % busy_all,
            nworkers, _one(cur, "feedfs_queue_depth")))
    # The time at least one reader waited, not the waits summed over the
    # readers: a share of the time, whatever their number.
    wait = delta("feedfs_read_starved_seconds_total")
    lines.append("readers waited %s   cache %s   cluster %s" % (
        "-" if wait is None else "%.0f%% of the time" % (100 * wait / dt),
        "on" if _one(cur, "feedfs_cache_enabled") else "off",
        "on" if _one(cur, "feedfs_cluster_enabled") else "off"))
    lines.append("")
    hdr = "%-16s %10s %10s %8s %12s %9s %12s %11s" % (
        "JOB", "IMAGES/S", "SAMPLES", "HITS", "CLUSTER HITS", "BUSY",
        "READ WAIT", "BATCHES")
    lines.append(hdr)
    for j in _jobs(cur):
        hits, miss = delta("feedfs_cache_hits_total", j), \
            delta("feedfs_cache_misses_total", j)
        if hits is None or hits + miss == 0:  # the whole run so far
            hits = _job(cur, "feedfs_cache_hits_total", j)
            miss = _job(cur, "feedfs_cache_misses_total", j)
        rate = hits / (hits + miss) if hits + miss else None
        cl = _job(cur, "feedfs_cluster_hits_total", j)
        b = delta("feedfs_worker_busy_seconds_total", j)
        w = delta("feedfs_job_read_starved_seconds_total", j)
        lines.append("%-16s %10.1f %10d %8s %12d %9s %12s %11d" % (
            j[:16], _job(cur, "feedfs_images_per_second", j),
            _job(cur, "feedfs_samples_total", j), _pct(rate), cl,
            "-" if b is None else "%.2f" % (b / dt),
            "-" if w is None else "%.0f%%" % (100 * w / dt),
            _job(cur, "feedfs_batches_total", j)))
    lines.append("")
    lines.append("BUSY: workers busy on the job (of %d); READ WAIT: share "
                 "of the time a reader of the job (one at least) waited "
                 "for a batch (near 100%%: the input is the bottleneck)."
                 % nworkers)
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m feedfs.top",
                                 description="A live view of a feedfs mount.")
    ap.add_argument("mount")
    ap.add_argument("-n", "--interval", type=float, default=1.0,
                    help="seconds between refreshes (default 1)")
    ap.add_argument("--count", type=int, default=0,
                    help="stop after N refreshes (default: until Ctrl-C)")
    a = ap.parse_args(argv)
    mount = os.path.abspath(a.mount)
    try:
        cur = feedfs.stats(mount)
    except OSError as e:
        print("feedfs.top: %s: not a feedfs mount (%s)"
              % (mount, e.strerror), file=sys.stderr)
        return 1
    tty = sys.stdout.isatty()
    # SIGINT: a clean exit whatever is running (a read of the stats, a
    # sleep): KeyboardInterrupt is caught below.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if tty:
        sys.stdout.write(ALT_ON)
    prev, t_prev, n, status, why = None, time.monotonic(), 0, 0, None
    try:
        while True:
            now = time.monotonic()
            text = frame(mount, prev, cur, now - t_prev)
            n += 1
            if tty:
                sys.stdout.write(CLEAR + text.replace("\n", "\r\n") + "\r\n")
            else:
                sys.stdout.write(text + "\n\n")
            sys.stdout.flush()
            if a.count and n >= a.count:
                break
            time.sleep(a.interval)
            prev, t_prev = cur, now
            try:
                cur = feedfs.stats(mount)
            except OSError as e:
                status = 1
                why = "feedfs.top: %s went away (%s)" % (mount, e.strerror)
                break
    except KeyboardInterrupt:
        pass
    finally:
        if tty:
            sys.stdout.write(ALT_OFF)
            sys.stdout.flush()
    if why:
        print(why, file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
