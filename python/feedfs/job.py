"""feedfs.job - a job directory of a mount: Job (its info.json, its
batches' shapes and counts, its epochs' directories) and Epoch, the
iteration over one epoch's batches in one rank's view.

Part of the Python package (python/feedfs/): it imports reader.py and
ranks.py; counters.py, mixture.py and feedfs.torch take a Job.
"""

import errno
import json
import os

import numpy as np

from .ranks import _say_view, rank_world
from .reader import _load_small, read_into, read_text


class Job:
    """A job directory of a mount, such as /mnt/feed/train.

    .info is its info.json; .classes, .batch_size, .batches_per_epoch,
    .epochs, .dtype (numpy), .shape (a full batch's, of epoch 0) come from
    it, and the labels': .num_classes, .labels_dtype (int64, or float32
    for a job whose pipeline ends in a batch op: mixup, cutmix,
    mixup_cutmix) and .soft_labels (True then: labels are (B, num_classes)
    probabilities, which torch's cross_entropy takes as they are; their
    shape does not change with the epoch), .multi_label (True when the
    dataset's labels are lists: labels are multi-hot float32 (B,
    num_classes) rows, for binary_cross_entropy_with_logits; soft_labels
    is True too).  .text is True for a job with captions (a dataset's
    text =): epoch() then yields them.  A job with a resolution
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
        # Lists of labels: multi-hot float32 (B, num_classes) rows.
        self.multi_label = bool(i.get("multi_label", False))
        # Captions: each batch has a .text.jsonl, and epoch() yields them.
        self.text = bool(i.get("text", False))

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
        arrays, (images, labels, ids) with ids=True; for a job with
        captions (.text) the batch's list of str comes after the labels:
        (images, labels, text), (images, labels, text, ids); len() is its
        number of batches.  images has the epoch's shape (shape_of(e)).  With
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
        """The file of batch b: suffix ".npy", ".labels.npy", ".ids.npy",
        ".text.jsonl" or a view's ".viewV.npy"."""
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
            out = (x, y)
            if job.text:
                out += (read_text(self.path(b, ".text.jsonl")),)
            if self.ids:
                out += (_load_small(self.path(b, ".ids.npy")),)
            yield out
