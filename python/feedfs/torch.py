"""feedfs.torch - a PyTorch loader over a feedfs job (needs torch).

    import feedfs, feedfs.torch
    loader = feedfs.torch.Loader("/mnt/feed/train", epochs=range(90),
                                 device="cuda")
    loader.load_state_dict(ckpt["loader"])        # resume: (epoch, batch)
    for images, labels in loader:                 # every batch of every epoch
        ...
        ckpt["loader"] = loader.state_dict()

No worker processes: the mount decodes.  One background thread reads
batches b+1 and b+2 into pinned host memory while the trainer runs on
batch b.
"""

import queue
import threading

import numpy as np
import torch

import feedfs

__all__ = ["Loader"]

# normalize(imagenet) of the mount (transforms/pipeline.c), on 0..1 values.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

_DONE = object()


class Loader:
    """Batches of a feedfs job as torch tensors, epoch after epoch.

    job        a feedfs.Job or a job directory
    epochs     an int (epochs 0..n-1) or an iterable of epoch numbers
    start      (epoch, batch) to begin at; default the first epoch's batch 0
    rank, world  the rank view (default: torch.distributed's when it is
               initialized, else RANK and WORLD_SIZE, else 0 of 1)
    pin_memory host buffers in pinned memory (default: when device is a
               CUDA device)
    device     where the tensors go (None: they stay on the host)
    non_blocking  the copy to device is asynchronous (from pinned memory)
    ids        yield (images, labels, ids)
    prefetch   batches read ahead of the one yielded last (default 2; the
               host buffers are prefetch + 2 batches: the one yielded,
               the one before, whose copy may still run, and those read
               ahead).  2 keeps the thread from waiting for the trainer
               to take a batch before it reads the next.
    normalize  for a uint8 job: convert on the device to float32 and
               normalize there, (x / 255 - mean) / std per channel, so 4x
               fewer bytes cross the bus.  True uses mean and std when
               given, else ImageNet's (what normalize(imagenet) does: a
               uint8 job's info.json has no mean or std, since the mount
               refuses normalize with dtype uint8); or a (mean, std) pair.

    Iterating yields (images, labels) for every batch from the current
    position to the last epoch's end.  Host tensors (device None) are
    views of the loader's buffers, valid until the batch after next is
    yielded; .clone() what must live longer.  state_dict() is the position
    of the next batch to yield; a Loader given it with load_state_dict()
    (or start=) yields exactly the batches an uninterrupted run would have.
    A new iteration starts where the last one stopped, or from the start
    once every batch was yielded.  len() is the number of batches one
    iteration from the start position yields; .epoch and .batch are those
    of the batch last yielded."""

    def __init__(self, job, epochs, start=None, rank=None, world=None,
                 pin_memory=None, device=None, non_blocking=True, ids=False,
                 normalize=False, mean=None, std=None, prefetch=2):
        self.job = job if isinstance(job, feedfs.Job) else feedfs.Job(job)
        self.epochs = list(range(epochs)) if isinstance(epochs, int) \
            else [int(e) for e in epochs]
        for e in self.epochs:
            self.job.epoch_dir(e)  # IndexError for an epoch it lacks
        self.rank, self.world = feedfs.rank_world(rank, world)
        self.batches_per_epoch = self.job.nbatches(self.world)
        self.device = torch.device(device) if device is not None else None
        cuda = self.device is not None and self.device.type == "cuda"
        self.pin_memory = cuda if pin_memory is None else bool(pin_memory)
        self.non_blocking = non_blocking
        self.ids = ids
        if int(prefetch) < 1:
            raise ValueError("prefetch %s: at least 1" % prefetch)
        self._nbuf = int(prefetch) + 2
        self._norm = None
        if normalize:
            if self.job.dtype != np.uint8:
                raise ValueError("normalize: job %s is %s, not uint8 (its "
                                 "batches are converted by the mount)"
                                 % (self.job.name, self.job.dtype))
            if normalize is not True:
                mean, std = normalize
            mean = IMAGENET_MEAN if mean is None else tuple(mean)
            std = IMAGENET_STD if std is None else tuple(std)
            c = self.job.shape[1 if self.job.layout == "CHW" else 3]
            if len(mean) != c or len(std) != c:
                raise ValueError("normalize: %d channels, mean %s, std %s"
                                 % (c, mean, std))
            view = (1, c, 1, 1) if self.job.layout == "CHW" else (1, 1, 1, c)
            dev = self.device or torch.device("cpu")
            # (x / 255 - m) / s = x * (1 / (255 s)) - m / s
            self._norm = (
                torch.tensor([1.0 / (255.0 * s) for s in std],
                             device=dev).view(view),
                torch.tensor([m / s for m, s in zip(mean, std)],
                             device=dev).view(view))
        self._start = (self.epochs[0], 0) if self.epochs else (0, 0)
        if start is not None:
            self._start = self._position(start)
        self._pos = self._start
        self._bufs = None
        self.epoch = self.batch = None  # of the batch last yielded

    # ---- position -----------------------------------------------------------

    def _position(self, pos):
        if isinstance(pos, dict):
            pos = (pos["epoch"], pos["batch"])
        e, b = int(pos[0]), int(pos[1])
        if e not in self.epochs and not (b == 0 and self._is_end(e)):
            raise ValueError("epoch %d is not among the loader's epochs" % e)
        if not 0 <= b <= self.batches_per_epoch:
            raise ValueError("batch %d: an epoch has %d"
                             % (b, self.batches_per_epoch))
        if b == self.batches_per_epoch:  # the end of e: the next epoch
            e, b = self._next_epoch(e), 0
        return e, b

    def _end(self):
        return (self.epochs[-1] + 1, 0) if self.epochs else (0, 0)

    def _is_end(self, e):
        return (e, 0) == self._end()

    def _next_epoch(self, e):
        i = self.epochs.index(e)
        return self.epochs[i + 1] if i + 1 < len(self.epochs) \
            else self._end()[0]

    def _todo(self, pos):
        """(epoch, batch) of every batch from pos to the end."""
        e, b = pos
        if self._is_end(e):
            return
        for ep in self.epochs[self.epochs.index(e):]:
            for k in range(b, self.batches_per_epoch):
                yield ep, k
            b = 0

    def state_dict(self):
        """{"epoch": e, "batch": b}: the next batch to yield."""
        return {"epoch": self._pos[0], "batch": self._pos[1]}

    def load_state_dict(self, state):
        """Continue from state (a state_dict(), or an (epoch, batch))."""
        self._pos = self._position(state)

    def __len__(self):
        return sum(1 for _ in self._todo(self._start))

    # ---- reading ------------------------------------------------------------

    def _buffers(self):
        if self._bufs is None:
            tdtype = torch.from_numpy(np.empty(0, self.job.dtype)).dtype
            self._bufs = []
            for _ in range(self._nbuf):
                t = torch.empty(self.job.shape, dtype=tdtype,
                                pin_memory=self.pin_memory)
                self._bufs.append((t, t.numpy()))
        return self._bufs

    def _reader(self, todo, out, gate, stop):
        """The background thread: read each batch of todo into the next
        buffer once gate allows it, and put it in out."""
        bufs = self._buffers()
        try:
            for i, (e, b) in enumerate(todo):
                with gate:
                    # Batch i goes into batch k = i - nbuf's buffer once k
                    # is past valid (k + 2 is yielded), and once any copy
                    # from it to the device has finished.
                    k = i - self._nbuf
                    while gate.given < k + 2 and not stop.is_set():
                        gate.wait()
                    if stop.is_set():
                        return
                    event = gate.events.pop(k, None)
                if event is not None:
                    event.synchronize()
                d = self.job.epoch_dir(e, self.rank, self.world)
                path = "%s/batch-%06d" % (d, b)
                t, arr = bufs[i % self._nbuf]
                x = feedfs.read_into(path + ".npy", arr)
                y = feedfs._load_small(path + ".labels.npy")
                z = feedfs._load_small(path + ".ids.npy") if self.ids \
                    else None
                out.put((e, b, t[:x.shape[0]], y, z))
            out.put(_DONE)
        except BaseException as ex:  # handed to the trainer's thread
            out.put(ex)

    def __iter__(self):
        if self._pos == self._end():
            self._pos = self._start
        todo = list(self._todo(self._pos))
        out = queue.Queue()
        gate = threading.Condition()
        gate.given, gate.events = 0, {}
        stop = threading.Event()
        th = threading.Thread(target=self._reader, name="feedfs-loader",
                              args=(todo, out, gate, stop), daemon=True)
        th.start()
        try:
            for i in range(len(todo)):
                item = out.get()
                if isinstance(item, BaseException):
                    raise item
                e, b, x, y, z = item
                y, z = torch.from_numpy(y), (None if z is None
                                             else torch.from_numpy(z))
                event = None
                if self.device is not None:
                    nb = self.non_blocking
                    x = x.to(self.device, non_blocking=nb)
                    y = y.to(self.device, non_blocking=nb)
                    z = None if z is None else z.to(self.device,
                                                    non_blocking=nb)
                    if self.device.type == "cuda":
                        event = torch.cuda.Event()
                        event.record()
                if self._norm is not None:
                    x = torch.addcmul(-self._norm[1], x.float(),
                                      self._norm[0])
                self.epoch, self.batch = e, b
                self._pos = (e, b + 1) if b + 1 < self.batches_per_epoch \
                    else (self._next_epoch(e), 0)
                with gate:
                    gate.given = i + 1
                    if event is not None:
                        gate.events[i] = event
                    gate.notify()
                yield (x, y, z) if self.ids else (x, y)
        finally:
            stop.set()
            with gate:
                gate.notify()
            th.join()
