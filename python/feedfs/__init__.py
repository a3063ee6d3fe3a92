"""feedfs - read a feedfs mount's batches from Python.

    import feedfs
    job = feedfs.Job("/mnt/feed/train")
    for images, labels in job.epoch(3):          # numpy arrays
        ...
    loader = feedfs.torch.Loader(job, epochs=range(90))   # torch, optional
    feedfs.Mixture("/mnt/feed/mix").set(web=0.5, curated=0.5)
    feedfs.stats("/mnt/feed")                    # .feedfs/stats as a dict
    python3 -m feedfs.top /mnt/feed              # live view

A batch is a path (JOB/[rank-R-of-W/]epoch-NNNN/batch-NNNNNN.npy): the
mount decodes and prepares it, and this package only reads it, each batch
in one read into memory it keeps.  numpy is required; feedfs.torch needs
torch and is imported on first use (import feedfs never imports torch).
See feedfs-python(7).
"""

import errno
import importlib
import io
import json
import logging
import math
import os
import re
import sys
import threading

import numpy as np

__all__ = ["Job", "Epoch", "Mixture", "stats", "read_into", "rank_world",
           "BatchError"]
__version__ = "0.1.0"

MAX_WORLD = 1024  # the rank views the mount serves: 1 <= W <= 1024


def __getattr__(name):
    # feedfs.torch and feedfs.top on first use: torch stays optional.
    if name in ("torch", "top"):
        return importlib.import_module("feedfs." + name)
    raise AttributeError("module 'feedfs' has no attribute %r" % name)


# ---- errors -------------------------------------------------------------------

_BATCH_RE = re.compile(r"^batch-(\d{6})(\.labels|\.ids)?\.npy$")


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
    """JOB/errors.tsv as [(id, path, reason)], oldest first ([] if none)."""
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
        ids = _load_small(os.path.join(edir, "batch-%06d.ids.npy" % b),
                          _wrap=False)
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


# ---- reading one .npy -------------------------------------------------------

def _parse_header(head):
    """(header length, shape, dtype) of a .npy file from its first bytes,
    or None when head is too short for the whole header."""
    if len(head) < 10 or head[:6] != b"\x93NUMPY":
        raise ValueError("not a .npy file")
    if head[6] == 1:
        hl = 10 + int.from_bytes(head[8:10], "little")
    elif head[6] in (2, 3):
        if len(head) < 12:
            return None
        hl = 12 + int.from_bytes(head[8:12], "little")
    else:
        raise ValueError(".npy version %d.%d" % (head[6], head[7]))
    if len(head) < hl:
        return None
    f = io.BytesIO(bytes(head[:hl]))
    if np.lib.format.read_magic(f) == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    if fortran and len(shape) > 1:
        raise ValueError(".npy in Fortran order")
    return hl, shape, dtype


def _preadv_all(fd, bufs, off):
    """preadv until every buffer is full; returns the bytes read (less at
    end of file)."""
    bufs = [memoryview(b).cast("B") for b in bufs]
    total = 0
    while bufs:
        n = os.preadv(fd, bufs, off)
        if n == 0:
            break
        total += n
        off += n
        while bufs and n >= len(bufs[0]):
            n -= len(bufs[0])
            bufs.pop(0)
        if bufs and n:
            bufs[0] = bufs[0][n:]
    return total


# A large read is split in parts read at once by threads, each at least
# _PART_MIN bytes, as many as the CPUs this process may run on (at most
# _PARTS_MAX).  The kernel serves one read of a direct I/O file (a batch)
# one request (1 MiB) after another: one read keeps one of the mount's
# threads copying while the other cores wait.  Parts let them all copy.
_PART_MIN = 8 << 20
_PARTS_MAX = 8


def _cpus():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _pread_parts(fd, head, data, off):
    """_preadv_all(fd, [head, data], off) (head may be None), with data's
    bytes read in parts by threads when it is large; returns the bytes
    read (up to the first short part)."""
    data = memoryview(data).cast("B")
    hn = len(head) if head is not None else 0
    k = min(_cpus(), _PARTS_MAX, len(data) // _PART_MIN)
    if k < 2:
        return _preadv_all(fd, [head, data] if head is not None else [data],
                           off)
    step = -(-len(data) // k)
    step = -(-step // 4096) * 4096
    spans = [(i, min(i + step, len(data))) for i in range(0, len(data), step)]
    got = [0] * len(spans)
    errors = []

    def part(i):
        a, b = spans[i]
        try:
            if i == 0 and head is not None:
                got[i] = _preadv_all(fd, [head, data[a:b]], off) - hn
            else:
                got[i] = _preadv_all(fd, [data[a:b]], off + hn + a)
        except BaseException as e:  # raised in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=part, args=(i,), daemon=True)
               for i in range(1, len(spans))]
    for t in threads:
        t.start()
    part(0)
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    if got[0] < 0:
        return got[0] + hn
    total = hn
    for (a, b), n in zip(spans, got):
        total += n
        if n < b - a:
            break
    return total


def read_into(path, out):
    """Read the .npy file at path into the front of out, a C-contiguous
    numpy array whose shape after the first axis and dtype are the file's;
    return out[:n], n the file's first dimension.

    One read in the usual case: the header's length is the file's size
    modulo one sample's bytes (the mount pads it to 64 bytes, far less than
    a sample), and the header and the data go into one preadv; the header
    is then checked, and a file that does not fit that guess is read in
    two.  Nothing new is allocated for the data.  A large file's data is
    read in parts by a few threads at once (one per CPU, parts of 8 MiB
    or more): the kernel answers one read of a batch one 1 MiB request at
    a time, so that a single read keeps only one core copying.

    A batch the mount cannot make raises BatchError (an OSError, errno
    EIO) that names the batch and its samples that failed, with their
    files and reasons."""
    try:
        return _read_into(path, out)
    except OSError as e:
        raise _batch_error(path, e) from None


def _read_into(path, out):
    if not out.flags.c_contiguous:
        raise ValueError("read_into: the buffer must be C-contiguous")
    sample = out[0].nbytes if out.ndim else out.nbytes
    flat = out.reshape(-1).view(np.uint8)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size = os.fstat(fd).st_size
        hl = size % sample if sample >= 4096 else 0
        head = bytearray(hl if hl >= 64 else 4096)
        if hl >= 64 and size - hl <= flat.nbytes:
            got = _pread_parts(fd, head, flat[:size - hl], 0)
            parsed = _parse_header(head) if got == size else None
            if parsed is not None and parsed[0] == hl:
                return _checked(path, out, parsed, size)
        # The general way: the header, then the data where it says.
        head = bytearray(4096)
        got = _preadv_all(fd, [head], 0)
        parsed = _parse_header(head[:got])
        if parsed is None:  # a header over 4 KiB
            head = bytearray(65536 + 12)
            parsed = _parse_header(head[:_preadv_all(fd, [head], 0)])
            if parsed is None:
                raise ValueError("%s: .npy header too long" % path)
        hl = parsed[0]
        n = size - hl
        if n > flat.nbytes:
            raise ValueError("%s: %d bytes of data, the buffer holds %d"
                             % (path, n, flat.nbytes))
        if _pread_parts(fd, None, flat[:n], hl) != n:
            raise EOFError("%s: short read" % path)
        return _checked(path, out, parsed, size)
    finally:
        os.close(fd)


def _checked(path, out, parsed, size):
    hl, shape, dtype = parsed
    if dtype != out.dtype or tuple(shape[1:]) != out.shape[1:] \
            or not shape or shape[0] > out.shape[0]:
        raise ValueError("%s: %s %s does not fit a buffer of %s %s"
                         % (path, dtype, tuple(shape), out.dtype, out.shape))
    if hl + shape[0] * (out[0].nbytes if out.ndim else 0) != size:
        raise ValueError("%s: size %d disagrees with its header"
                         % (path, size))
    return out[:shape[0]]


def _load_small(path, _wrap=True):
    """A small .npy (labels, ids) as a new writable array, in one read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            size = os.fstat(fd).st_size
            buf = bytearray(size)
            if _preadv_all(fd, [buf], 0) != size:
                raise EOFError("%s: short read" % path)
        finally:
            os.close(fd)
    except OSError as e:
        if not _wrap:
            raise
        raise _batch_error(path, e) from None
    hl, shape, dtype = _parse_header(buf)
    return np.frombuffer(buf, dtype=dtype, offset=hl,
                         count=int(np.prod(shape))).reshape(shape)


# ---- ranks ------------------------------------------------------------------

def _dist_world():
    """(rank, world) of the environment: torch.distributed's when torch is
    imported and its process group is initialized, else RANK and
    WORLD_SIZE (torchrun sets them), else None."""
    td = sys.modules.get("torch.distributed")
    if td is not None and td.is_available() and td.is_initialized():
        return td.get_rank(), td.get_world_size()
    if "WORLD_SIZE" in os.environ:
        return int(os.environ.get("RANK", "0")), int(os.environ["WORLD_SIZE"])
    return None


def rank_world(rank=None, world=None):
    """(rank, world) of a rank view.  The arguments where given; nothing
    given is the whole epoch, (0, 1), whatever the environment says (a
    rank-0-only evaluation under torchrun reads every sample).  "auto"
    for either takes torch.distributed's when torch is imported and its
    process group is initialized, else the RANK and WORLD_SIZE environment
    variables (torchrun sets them), else (0, 1).  A rank without a world
    (or a world over 1 without a rank) is refused."""
    if rank == "auto" or world == "auto":
        env = _dist_world() or (0, 1)
        rank = env[0] if rank in (None, "auto") else rank
        world = env[1] if world in (None, "auto") else world
    if world is None:
        if rank not in (None, 0):
            raise ValueError("rank %s without a world (pass world=, or "
                             "world='auto')" % rank)
        world = 1
    if rank is None:
        if int(world) != 1:
            raise ValueError("world %s without a rank (pass rank=, or "
                             "rank='auto')" % world)
        rank = 0
    rank, world = int(rank), int(world)
    if not 1 <= world <= MAX_WORLD or not 0 <= rank < world:
        raise ValueError("rank %d of world %d: want 0 <= rank < world <= %d"
                         % (rank, world, MAX_WORLD))
    return rank, world


_views_said = set()  # (job path, rank, world, warned) already logged


def _say_view(job, rank, world, asked_rank, asked_world):
    """Log, once per job and view, which rank view is read: at INFO, or
    as a warning when the whole epoch is read by default while torchrun
    or torch.distributed say there are several processes."""
    env = _dist_world()
    warn = asked_rank is None and asked_world is None and env is not None \
        and env[1] > 1
    key = (job.path, rank, world, warn)
    if key in _views_said:
        return
    _views_said.add(key)
    log = logging.getLogger("feedfs")
    where = "rank-%d-of-%d/" % (rank, world) if world > 1 else "the whole " \
        "epoch (%d samples)" % job.samples
    if warn:
        log.warning("feedfs: job %s reads %s, not rank %d of %d's shard: "
                    "rank and world are only used when given (rank=, "
                    "world=, or world='auto')", job.name, where, env[0],
                    env[1])
    else:
        log.info("feedfs: job %s reads %s", job.name, where)


# ---- a job ------------------------------------------------------------------

class Job:
    """A job directory of a mount, such as /mnt/feed/train.

    .info is its info.json; .classes, .batch_size, .batches_per_epoch,
    .epochs, .dtype (numpy), .shape (a full batch's, of epoch 0) come from
    it, and the labels': .num_classes, .labels_dtype (int64, or float32
    for a job whose pipeline ends in a batch op: mixup, cutmix,
    mixup_cutmix) and .soft_labels (True then: labels are (B, num_classes)
    probabilities, which torch's cross_entropy takes as they are; their
    shape does not change with the epoch).  A job with a resolution
    schedule changes its shape by epoch (.epoch_sizes, shape_of(e)); a job
    with views has .views > 1 image files per batch (batch-NNNNNN.npy is
    view 0, .viewV.npy view V), each with its own shape (shape_of(e, v))."""

    def __init__(self, path):
        if isinstance(path, Job):
            path = path.path
        self.path = os.path.abspath(os.fspath(path))
        try:
            with open(os.path.join(self.path, "info.json")) as f:
                self.info = json.load(f)
        except FileNotFoundError:
            raise FileNotFoundError(
                errno.ENOENT, "not a feedfs job directory (no info.json)",
                self.path) from None
        i = self.info
        self.name = i["job"]
        self.classes = list(i["classes"])
        self.batch_size = int(i["batch_size"])
        self.batches_per_epoch = int(i["batches_per_epoch"])
        self.epochs = int(i["epochs"])
        self.dtype = np.dtype(i["dtype"])
        self.shape = tuple(i["shape"])
        self.layout = i["layout"]
        # The output size of each epoch (a resolution schedule), or None.
        self.epoch_sizes = i.get("epoch_sizes")
        self.view_info = i.get("views") or [
            {"view": 0, "shape": i["shape"],
             "scheduled": self.epoch_sizes is not None}]
        self.views = len(self.view_info)
        # The plan's sample count: a mixture's epoch_samples, else samples.
        self.samples = int(i.get("epoch_samples", i["samples"]))
        self.drop_last = bool(i.get("drop_last", False))
        self.num_classes = int(i.get("num_classes", len(self.classes)))
        self.labels_dtype = np.dtype(i.get("labels_dtype", "int64"))
        self.soft_labels = self.labels_dtype.kind == "f"

    def __repr__(self):
        return "feedfs.Job(%r)" % self.path

    def shape_of(self, e, view=0):
        """A full batch's shape in epoch e of view (its size in that epoch
        when the job has a resolution schedule that sets the view's)."""
        v = self.view_info[view]
        s = list(v["shape"])
        if self.epoch_sizes is not None and v.get("scheduled"):
            r = int(self.epoch_sizes[e])
            if self.layout == "CHW":
                s[2] = s[3] = r
            else:
                s[1] = s[2] = r
        return tuple(s)

    def max_elems(self, view=None):
        """Elements of the largest full batch of any epoch, of view (or of
        any view): what a buffer that every epoch fits in needs."""
        views = range(self.views) if view is None else [view]
        epochs = range(self.epochs) if self.epoch_sizes is not None \
            else [0]
        return max(int(np.prod(self.shape_of(e, v)))
                   for e in epochs for v in views)

    @staticmethod
    def view_suffix(view):
        """The suffix of view's image files: ".npy" for view 0, else
        ".viewV.npy"."""
        return ".npy" if view == 0 else ".view%d.npy" % view

    def nbatches(self, world=1):
        """Batches per epoch of each rank of world (DistributedSampler's
        padding, or its cut with drop_last)."""
        if self.drop_last and world > 1:
            per = self.samples // world
        else:
            per = -(-self.samples // world)
        if self.drop_last:
            return per // self.batch_size
        return -(-per // self.batch_size)

    def batch_len(self, b, world=1):
        """Samples in batch b of a rank's view of world."""
        if self.drop_last and world > 1:
            per = self.samples // world
        else:
            per = -(-self.samples // world)
        if not 0 <= b < self.nbatches(world):
            return 0
        return min(self.batch_size, per - b * self.batch_size)

    def epoch_dir(self, e, rank=0, world=1):
        """The directory of epoch e in rank's view of world."""
        if not 0 <= e < self.epochs:
            raise IndexError("epoch %d of job %s (it has %d)"
                             % (e, self.name, self.epochs))
        d = self.path
        if world > 1:
            d = os.path.join(d, "rank-%d-of-%d" % (rank, world))
        return os.path.join(d, "epoch-%04d" % e)

    def epoch(self, e, rank=None, world=None, start=0, ids=False,
              copy=False, views=False):
        """The batches of epoch e: an iterable of (images, labels) numpy
        arrays, (images, labels, ids) with ids=True; len() is its number
        of batches.  images has the epoch's shape (shape_of(e)).  With
        views=True, images is the list of the batch's views (view 0
        first), each of its own shape.

        With world > 1 the batches are rank's shard (JOB/rank-R-of-W/);
        by default the whole epoch, even under torchrun: world="auto"
        takes torch.distributed's rank and world when it is initialized,
        else RANK and WORLD_SIZE (see rank_world).  The view read is
        logged (logging, "feedfs") once per job and view.  start skips to
        batch start.

        Each batch is read in one read into one of two buffers that the
        iteration reuses, so images is a view that stays valid until the
        batch after next is read: enough for a non_blocking copy of batch
        b to a GPU to run while b+1 is read.  Keep an array longer with
        copy=True (or images.copy()).  labels and ids are new arrays:
        labels int64 (B,), or with a batch op float32 (B, num_classes)
        soft labels (see soft_labels)."""
        r, w = rank_world(rank, world)
        ep = Epoch(self, e, r, w, start, ids, copy, views)
        _say_view(self, r, w, rank, world)
        return ep


class Epoch:
    """One epoch of a job in one rank's view; see Job.epoch."""

    def __init__(self, job, e, rank, world, start, ids, copy, views=False):
        self.job, self.epoch, self.rank, self.world = job, e, rank, world
        self.as_list = bool(views)
        self.views = job.views if views else 1
        self.dir = job.epoch_dir(e, rank, world)
        self.nbatches = job.nbatches(world)
        if not 0 <= start <= self.nbatches:
            raise IndexError("start %d: epoch %d has %d batches"
                             % (start, e, self.nbatches))
        self.start, self.ids, self.copy = start, ids, copy

    def __len__(self):
        return self.nbatches - self.start

    def path(self, b, suffix=".npy"):
        """The file of batch b: suffix ".npy", ".labels.npy", ".ids.npy"
        or a view's ".viewV.npy"."""
        return os.path.join(self.dir, "batch-%06d%s" % (b, suffix))

    def __iter__(self):
        job = self.job
        bufs = [None, None]
        shapes = [job.shape_of(self.epoch, v) for v in range(self.views)]
        for b in range(self.start, self.nbatches):
            k = b % 2
            if bufs[k] is None:
                bufs[k] = [np.empty(s, dtype=job.dtype) for s in shapes]
            xs = [read_into(self.path(b, job.view_suffix(v)), bufs[k][v])
                  for v in range(self.views)]
            if self.copy:
                xs = [x.copy() for x in xs]
            x = xs if self.as_list else xs[0]
            y = _load_small(self.path(b, ".labels.npy"))
            if self.ids:
                yield x, y, _load_small(self.path(b, ".ids.npy"))
            else:
                yield x, y


# ---- mixtures ---------------------------------------------------------------

_MIX_ONE = 1000000  # weights are kept in millionths (core/mix.h)


def _weight_text(w):
    """A weight as the mount's parser takes it: a decimal, at most six
    places, no sign and no exponent."""
    if isinstance(w, bool) or not isinstance(w, (int, float, np.integer,
                                                  np.floating, str)):
        raise ValueError("%r is not a weight" % (w,))
    if isinstance(w, str):
        return w
    w = float(w)
    if math.isnan(w) or math.isinf(w):
        return repr(w)
    if w < 0:
        return "-%s" % _weight_text(-w)
    return ("%.6f" % w).rstrip("0").rstrip(".") or "0"


_WEIGHT = re.compile(r"[0-9]*(\.[0-9]*)?\Z")


def _check_weights(pairs, names):
    """The mount's reason for refusing pairs (core/mix.c's words), or
    None when it would take them."""
    if not pairs:
        return "no NAME:WEIGHT pair"
    if len(pairs) > 64:
        return "more than 64 sources"
    seen, total = set(), 0
    for name, text in pairs:
        if not name or any(c.isspace() or c in ",:" for c in name):
            return "'%s:%s': expected NAME:WEIGHT" % (name, text)
        if len(name.encode()) > 128:
            return "a source name longer than 128 bytes"
        if text.startswith("-"):
            return "%s: a negative weight" % name
        bad = ("%s: '%s' is not a weight (a decimal from 0 to 1000000)"
               % (name, text))
        if not text.isascii() or not _WEIGHT.match(text) or \
                not any(c.isdigit() for c in text):
            return bad
        ip, _, frac = text.partition(".")
        v = int(ip or "0") * _MIX_ONE + int((frac + "000000")[:6])
        if len(frac) > 6 and frac[6] >= "5":
            v += 1
        if v > 1000000 * _MIX_ONE:
            return bad
        if name in seen:
            return "%s named twice" % name
        seen.add(name)
        if name not in names:
            return "unknown source '%s'" % name
        total += v
    if total == 0:
        return "the weights sum to 0"
    return None


def _parse_weights(text):
    out = {}
    for tok in text.replace(",", " ").split():
        name, _, w = tok.partition(":")
        out[name] = float(w)
    return out


class Mixture:
    """The weights of a mixture job (a job with `mixture =`).

    .sources are its sources' names, in order.  Epochs already opened keep
    their weights; a change applies from the first epoch not opened yet
    (feedfs.conf(5), MIXTURES)."""

    def __init__(self, job):
        self.job = job if isinstance(job, Job) else Job(job)
        if "sources" not in self.job.info:
            raise ValueError("job %s is not a mixture" % self.job.name)
        self.sources = [s["name"] for s in self.job.info["sources"]]

    def __repr__(self):
        return "feedfs.Mixture(%r)" % self.job.path

    def weights(self, e=None):
        """{source: weight} in force for epoch e, or, with e None, what
        the next epoch not opened yet gets.  Reading an epoch's weights
        opens that epoch as reading its batches does: a later set() applies
        after it."""
        if e is None:
            p = os.path.join(self.job.path, "mixture")
        else:
            p = os.path.join(self.job.epoch_dir(e), "mixture")
        with open(p) as f:
            return _parse_weights(f.read())

    def _next_epoch(self):
        v = stats(os.path.dirname(self.job.path)).get(
            ("feedfs_mixture_next_epoch", (("job", self.job.name),)))
        return None if v is None else int(v)

    def set(self, weights=None, **kw):
        """Write new weights, as a dict or as keywords (set(web=0.5,
        curated=0.5)); sources not named get 0.  Returns the first epoch
        they apply to.  Weights the mount would refuse raise ValueError
        with its reason (the mount itself answers EINVAL and gives its
        reason only in its log, so the same checks are made here first);
        PermissionError for a user other than root or the mount's
        owner."""
        w = dict(weights or {})
        w.update(kw)
        pairs = [(str(k), _weight_text(v)) for k, v in w.items()]
        why = _check_weights(pairs, self.sources)
        if why is not None:
            raise ValueError("job %s: mixture refused: %s"
                             % (self.job.name, why))
        line = " ".join("%s:%s" % p for p in pairs) + "\n"
        before = self._next_epoch()
        fd = os.open(os.path.join(self.job.path, "mixture"),
                     os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, line.encode())
        except OSError as e:
            if e.errno == errno.EINVAL:
                raise ValueError(
                    "job %s: mixture %r refused by the mount (its log says "
                    "why)" % (self.job.name, line.strip())) from None
            raise
        finally:
            os.close(fd)
        after = self._next_epoch()
        if before is None or after is None or before == after:
            return after
        # Epochs were opened meanwhile: the write applied from one of
        # before..after, all opened now, so reading their weights changes
        # nothing; the first with the new weights is the answer.
        new = _parse_weights(line)
        want = {s: new.get(s, 0.0) for s in self.sources}
        for e in range(before, min(after, self.job.epochs)):
            got = self.weights(e)
            if all(abs(got.get(s, 0.0) / max(sum(got.values()), 1e-12) -
                       want[s] / sum(want.values())) < 1e-6
                   for s in self.sources):
                return e
        return after


# ---- counters ---------------------------------------------------------------

_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


def _parse_labels(text):
    """'a="x",b="y"' -> (("a", "x"), ("b", "y")).  Values are un-escaped
    as Prometheus escapes them (\\\\, \\" and \\n), in one pass from the
    left, so that an escaped backslash is never the start of another
    escape; any other backslash is kept as it is."""
    out, i = [], 0
    while i < len(text):
        eq = text.index("=", i)
        name = text[i:eq].strip().lstrip(",").strip()
        j = eq + 2  # past ="
        v = []
        while j >= len(text) or text[j] != '"':
            if j >= len(text):
                raise ValueError("stats: an unterminated label value in "
                                 "{%s}" % text)
            if text[j] == "\\" and j + 1 < len(text):
                nxt = text[j + 1]
                v.append(_ESCAPES.get(nxt, "\\" + nxt))
                j += 2
            else:
                v.append(text[j])
                j += 1
        out.append((name, "".join(v)))
        i = j + 1
        while i < len(text) and text[i] in ", ":
            i += 1
    return tuple(out)


def parse_stats(text):
    """Prometheus text -> {(name, ((label, value), ...)): float}."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, val = line.rpartition(" ")
        if "{" in key:
            name, _, rest = key.partition("{")
            labels = _parse_labels(rest.rsplit("}", 1)[0])
        else:
            name, labels = key, ()
        out[(name, labels)] = float(val)
    return out


def stats(mount):
    """The counters of MOUNT/.feedfs/stats: a dict keyed by (name,
    labels), labels a tuple of (label, value) pairs in the mount's order:

        s = feedfs.stats("/mnt/feed")
        s["feedfs_images_per_second", (("job", "train"),)]
        s["feedfs_workers", ()]

    mount may also be a job directory or a feedfs.Job."""
    if isinstance(mount, Job):
        mount = os.path.dirname(mount.path)
    p = os.path.join(os.fspath(mount), ".feedfs", "stats")
    if not os.path.exists(p) and os.path.exists(
            os.path.join(os.fspath(mount), "info.json")):
        p = os.path.join(os.path.dirname(os.path.abspath(mount)), ".feedfs",
                         "stats")
    with open(p) as f:
        return parse_stats(f.read())
