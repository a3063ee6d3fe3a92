"""feedfs.torch - a PyTorch loader over a feedfs job (needs torch).

    import feedfs, feedfs.torch
    loader = feedfs.torch.Loader("/mnt/feed/train", epochs=range(90),
                                 device="cuda")
    loader.load_state_dict(ckpt["loader"])        # resume: index, batch
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
    epochs     an int (epochs 0..n-1) or an iterable of epoch numbers, read
               in its order
    start      (epoch, batch) to begin at (the epoch's first place in the
               list), or a state_dict(); default the first epoch's batch 0
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
    position to the end of the last epoch of the list, the epochs in the
    list's order.  Host tensors (device None) are views of the loader's
    buffers: batch b's stays valid until batch b + 2 is yielded; .clone()
    what must live longer.  state_dict() is the position of the next batch
    to yield, {"index": i, "epoch": epochs[i], "batch": b} (i an index
    into the epochs list, so an epoch may come anywhere in it, or twice;
    at the end i is the list's length and epoch None); a Loader given it
    with load_state_dict() (or start=) yields exactly the batches an
    uninterrupted run would have.  A state without "index" (an older
    checkpoint) is read as (epoch, batch), the epoch's first place in the
    list.  A new iteration starts where the last one stopped, or from the
    start once every batch was yielded.  len() is the number of batches
    of the iteration running, or else of the next one (from the position
    load_state_dict() gave, say); .epoch and .batch are those of the batch
    last yielded."""

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
        # A position is (i, b): batch b of self.epochs[i]; (len, 0) is the
        # end.  An index, not an epoch number: epochs may come in any
        # order, or twice.
        self._start = (0, 0)
        if start is not None:
            self._start = self._position(start)
        self._pos = self._start
        self._from = None  # where the iteration running began
        self._bufs = None
        self.epoch = self.batch = None  # of the batch last yielded

    # ---- position -----------------------------------------------------------

    def _end(self):
        return (len(self.epochs), 0)

    def _step(self, i, b):
        """(i, b) made canonical: the end of an epoch is the next one's
        batch 0."""
        while i < len(self.epochs) and b >= self.batches_per_epoch:
            i, b = i + 1, 0
        return (i, b) if i < len(self.epochs) else self._end()

    def _position(self, pos):
        """(i, b) of pos: a state_dict(), or an (epoch, batch) pair whose
        epoch is taken at its first place in the list.  A state_dict()
        without "index" (those before it had one) is such a pair too."""
        n = len(self.epochs)
        if isinstance(pos, dict) and pos.get("index") is not None:
            i, b = int(pos["index"]), int(pos["batch"])
            if not 0 <= i <= n:
                raise ValueError("index %d: the loader has %d epochs"
                                 % (i, n))
            e = pos.get("epoch")
            if i < n and e is not None and int(e) != self.epochs[i]:
                raise ValueError(
                    "state %s: the loader's epoch at index %d is %d (a "
                    "checkpoint of a loader with other epochs?)"
                    % (pos, i, self.epochs[i]))
            if i == n and b != 0:
                raise ValueError("state %s: batch %d past the end"
                                 % (pos, b))
        else:
            if isinstance(pos, dict):
                pos = (pos["epoch"], pos["batch"])
            e, b = int(pos[0]), int(pos[1])
            if e in self.epochs:
                i = self.epochs.index(e)
            elif b == 0 and self.epochs and e == self.epochs[-1] + 1:
                i = n  # the end as it used to be written
            else:
                raise ValueError("epoch %d is not among the loader's "
                                 "epochs" % e)
        if not 0 <= b <= self.batches_per_epoch:
            raise ValueError("batch %d: an epoch has %d"
                             % (b, self.batches_per_epoch))
        return self._step(i, b)

    def _todo(self, pos):
        """(index, epoch, batch) of every batch from pos to the end."""
        i, b = pos
        for k in range(i, len(self.epochs)):
            for j in range(b, self.batches_per_epoch):
                yield k, self.epochs[k], j
            b = 0

    def state_dict(self):
        """{"index": i, "epoch": e, "batch": b}: the next batch to yield is
        batch b of epochs[i], epoch e; at the end, i is the number of
        epochs and e None."""
        i, b = self._pos
        e = self.epochs[i] if i < len(self.epochs) else None
        return {"index": i, "epoch": e, "batch": b}

    def load_state_dict(self, state):
        """Continue from state (a state_dict(), or an (epoch, batch))."""
        self._pos = self._position(state)

    def _next_from(self):
        """Where the next iteration begins."""
        return self._start if self._pos == self._end() else self._pos

    def __len__(self):
        """The batches of the iteration running, or else of the next."""
        pos = self._from if self._from is not None else self._next_from()
        i, b = pos
        if i >= len(self.epochs):
            return 0
        return (len(self.epochs) - i) * self.batches_per_epoch - b

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
            for i, (k0, e, b) in enumerate(todo):
                with gate:
                    # Batch i goes into batch k = i - nbuf's buffer once k
                    # is past valid (k + 2 is yielded: gate.given counts
                    # the batches yielded), and once any copy from it to
                    # the device has finished.
                    k = i - self._nbuf
                    while gate.given < k + 3 and not stop.is_set():
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
                out.put((k0, e, b, t[:x.shape[0]], y, z))
            out.put(_DONE)
        except BaseException as ex:  # handed to the trainer's thread
            out.put(ex)

    def __iter__(self):
        self._pos = self._from = self._next_from()
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
                k, e, b, x, y, z = item
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
                self._pos = self._step(k, b + 1)
                with gate:
                    gate.given = i + 1
                    if event is not None:
                        gate.events[i] = event
                    gate.notify()
                yield (x, y, z) if self.ids else (x, y)
        finally:
            self._from = None
            stop.set()
            with gate:
                gate.notify()
            th.join()
