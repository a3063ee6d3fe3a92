"""feedfs.errors - what a batch the mount could not make means: BatchError
(an OSError, errno EIO) naming the batch, its view and the samples that
failed, from JOB/errors.tsv, or the mount's last logged error.

Part of the Python package (python/feedfs/): it imports npy.py (to read a
batch's ids) and nothing else of the package; reader.py raises what it
makes.
"""

import errno
import os
import re

from .npy import _read_small


_BATCH_RE = re.compile(
    r"^batch-(\d{6})((\.labels|\.ids)?\.npy|\.text\.jsonl)$")


class BatchError(OSError):
    """A batch file the mount could not make (it answered EIO: with
    on_error = fail, a sample of the batch cannot be read or decoded).
    An OSError with errno EIO, saying which: .path (the file), .job (its
    directory), .epoch, .batch, .rank and .world (its view), and .failed,
    a list of (sample id, path, reason) from JOB/errors.tsv, the samples
    of this batch that failed (for order = relaxed, whose .ids.npy fails
    too, the job's latest failures)."""

    def __init__(self, path, job, epoch, batch, rank, world, failed, why):
        super().__init__(errno.EIO, why, path)
        self.job, self.epoch, self.batch = job, epoch, batch
        self.rank, self.world, self.failed = rank, world, failed

    def __str__(self):
        return self.strerror


def _read_errors(jobdir):
    """JOB/errors.tsv as [(id, path, reason)], the latest failure last,
    each sample once with its latest reason ([] if none)."""
    out = []
    try:
        with open(os.path.join(jobdir, "errors.tsv"), "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return out
    unesc = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}
    for line in text.split("\n"):  # not splitlines: \x1c is a name's
        if not line or line.startswith("#"):
            continue
        f = line.split("\t")
        if len(f) < 3 or not f[0].isdigit():
            continue
        path, why = (re.sub(r"\\(.)", lambda m: unesc.get(m.group(1),
                                                            m.group(0)), x)
                     for x in (f[1], "\t".join(f[2:])))
        out.append((int(f[0]), path, why))
    return out


def _last_log_error(mount):
    """The last error line of MOUNT/.feedfs/log, or None."""
    try:
        with open(os.path.join(mount, ".feedfs", "log"), "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if " error: " in line:
            return line.split(" error: ", 1)[1]
    return None


def _batch_error(path, exc):
    """exc (an OSError of a read of path) as a BatchError naming the batch
    and its failed samples, when path is a batch file and exc is EIO;
    else exc itself."""
    if not isinstance(exc, OSError) or exc.errno != errno.EIO \
            or isinstance(exc, BatchError):
        return exc
    m = _BATCH_RE.match(os.path.basename(path))
    edir = os.path.dirname(path)
    em = re.match(r"^epoch-(\d{4})$", os.path.basename(edir))
    if m is None or em is None:
        return exc
    up = os.path.dirname(edir)
    rank, world = 0, 1
    rm = re.match(r"^rank-(\d+)-of-(\d+)$", os.path.basename(up))
    if rm is not None:
        rank, world = int(rm.group(1)), int(rm.group(2))
        up = os.path.dirname(up)
    jobdir, b, e = up, int(m.group(1)), int(em.group(1))
    errs = _read_errors(jobdir)
    known = {i: (p, why) for i, p, why in errs}
    ids = None
    try:
        ids = _read_small(os.path.join(edir, "batch-%06d.ids.npy" % b))
    except (OSError, ValueError):
        pass  # order = relaxed: its ids fail with it
    if ids is not None:
        failed = [(int(i), known[int(i)][0], known[int(i)][1])
                  for i in ids if int(i) in known]
    else:
        failed = errs[-3:]
    head = ("%s: batch %d of epoch %d of job %s%s cannot be read "
            "([Errno 5] Input/output error)"
            % (path, b, e, os.path.basename(jobdir),
               "" if world == 1 else " (rank %d of %d)" % (rank, world)))
    mount = os.path.dirname(jobdir)
    if failed:
        what = "; ".join("sample %d (%s): %s" % f for f in failed[:3])
        if len(failed) > 3:
            what += "; and %d more" % (len(failed) - 3)
        if ids is None:
            what = "the job's latest failures: " + what
        why = "%s: %s (all: %s)" % (head, what,
                                     os.path.join(jobdir, "errors.tsv"))
    else:
        last = _last_log_error(mount)
        why = "%s: %s (the log: %s)" % (
            head, last or "no failed sample is listed",
            os.path.join(mount, ".feedfs", "log"))
    return BatchError(path, jobdir, e, b, rank, world, failed, why)
