"""feedfs.torch - a PyTorch loader over a feedfs job (needs torch).

    import feedfs, feedfs.torch
    loader = feedfs.torch.Loader("/mnt/feed/train", device="cuda")
    loader.load_state_dict(ckpt["loader"])        # resume, even mid-epoch
    for epoch in range(ckpt["epoch"], 90):
        loader.set_epoch(epoch)                   # as DistributedSampler
        for images, labels in loader:             # one epoch
            ...
            ckpt["loader"] = loader.state_dict()

No worker processes: the mount decodes.  One background thread reads
batches b+1 and b+2 while the trainer runs on batch b.

Part of the Python package (python/feedfs/), over the rest of it: it
imports feedfs (Job, the reader, the rank views) and torch, and feedfs
imports it only on first use (import feedfs never imports torch).
"""

import logging
import queue
import sys
import threading

import numpy as np
import torch

import feedfs

__all__ = ["Loader"]

# normalize(imagenet) of the mount (transforms/pipeline.c), on 0..1 values.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

# What a state_dict() records of the job (info.json's keys): a checkpoint
# is refused by a Loader whose job differs in one of them.  LATER: keys a
# checkpoint of an older feedfs lacks; they are compared when it has them.
FINGERPRINT = ("samples", "batch_size", "seed", "shuffle", "drop_last",
               "order", "pipeline", "shuffle_seed")
LATER = ("shuffle_seed",)

_DONE = object()


def fingerprint(job):
    """The job's fingerprint: the info.json keys of FINGERPRINT, the
    sample count being the plan's (a mixture's epoch_samples)."""
    fp = {k: job.info.get(k) for k in FINGERPRINT}
    fp["samples"] = job.samples
    return fp


def _refs(slot):
    """References to slot[0], counted the same way for every slot."""
    return sys.getrefcount(slot[0])


class Loader:
    """Batches of a feedfs job as torch tensors, one epoch per iteration.

    job        a feedfs.Job or a job directory
    epochs     an int (epochs 0..n-1) or an iterable of epoch numbers, read
               in its order, one per iteration; default every epoch of the
               job
    start      (epoch, batch) to begin at (the epoch's first place in the
               list), or a state_dict(); default the first epoch's batch 0
    rank, world  the rank view: by default the whole epoch (0 of 1), even
               under torchrun; world="auto" takes torch.distributed's when
               it is initialized, else RANK and WORLD_SIZE (see
               feedfs.rank_world)
    pin_memory host buffers in pinned memory (default: when device is a
               CUDA device)
    device     where the tensors go (None: they stay on the host)
    non_blocking  the copy to device is asynchronous (from pinned memory)
    ids        yield (images, labels, ids); with captions (job.text),
               (images, labels, text, ids)
    views      for a job with views: images is the list of the batch's
               views, view 0 first (each its own shape); else view 0 only
    prefetch   batches read ahead of the one yielded last (default 2).
    reuse_buffers  host tensors (device None) are views of prefetch + 2
               buffers used in turn: batch b's stays valid only until
               batch b + 2 is yielded.  By default (False) every host
               batch stays valid as long as it is referenced: a buffer is
               read into again only once no tensor of it is left, and a
               new one is made when all are held.  Device tensors are new
               in either case.
    normalize  for a uint8 job: convert on the device to float32 and
               normalize there, (x / 255 - mean) / std per channel, so 4x
               fewer bytes cross the bus.  True uses mean and std when
               given, else ImageNet's (what normalize(imagenet) does: a
               uint8 job's info.json has no mean or std, since the mount
               refuses normalize with dtype uint8); or a (mean, std) pair.

    labels are int64 (B,) class indices, or for a job whose pipeline ends
    in a batch op (mixup, cutmix, mixup_cutmix: job.soft_labels) float32
    (B, num_classes) soft labels, which F.cross_entropy(logits, labels)
    takes as class probabilities; for a dataset whose labels are lists
    (job.multi_label) float32 (B, num_classes) multi-hot rows (mixed as
    soft labels by a batch op), for binary_cross_entropy_with_logits.

    A job with captions (job.text: a dataset's text =) yields (images,
    labels, text), text the batch's captions as a list of str in its
    order (read from its .text.jsonl); they follow their samples
    through resume, elastic resume and rank views as labels do.

    images has the shape of its epoch (Job.shape_of): a job with a
    resolution schedule changes it by epoch, and the host buffers are
    sized for the largest.

    Iterating yields (images, labels) for the batches of one epoch: the
    epoch of the current position, from its batch there to its end, then
    the position is the next epoch's batch 0 (once the list's last epoch
    is done, the next iteration starts over at its first).  An iteration
    stopped early continues there the next time.  set_epoch(e) picks the
    epoch the next iteration reads (kept when the position is already in
    e: a resumed epoch goes on from its batch).  len() is the number of
    batches of the iteration running, or else of the next one.

    state_dict() is the position of the next batch to yield, {"index": i,
    "epoch": epochs[i], "batch": b, "start": p, "world": W, "job": the
    job's fingerprint} (i an index into the epochs list; at the end i is
    the list's length and epoch None; p the samples of the epoch served
    before this world's batches began, 0 but after an elastic resume);
    a Loader given it with load_state_dict() (or start=) yields exactly
    the batches an uninterrupted run would have.  A state of another job
    (fingerprint) is refused, saying what differs.  A state of another
    world size resumes elastically: the samples of the epoch not served
    yet (the first b * batch_size * W of its order were) are dealt to the
    new ranks as DistributedSampler deals an epoch.  .epoch and .batch are
    those of the batch last yielded."""

    def __init__(self, job, epochs=None, start=None, rank=None, world=None,
                 pin_memory=None, device=None, non_blocking=True, ids=False,
                 normalize=False, mean=None, std=None, prefetch=2,
                 reuse_buffers=False, views=False):
        self.job = job if isinstance(job, feedfs.Job) else feedfs.Job(job)
        if epochs is None:
            epochs = self.job.epochs
        self.epochs = list(range(epochs)) if isinstance(epochs, int) \
            else [int(e) for e in epochs]
        for e in self.epochs:
            self.job.epoch_dir(e)  # IndexError for an epoch it lacks
        self.rank, self.world = feedfs.rank_world(rank, world)
        feedfs._say_view(self.job, self.rank, self.world, rank, world)
        self.batches_per_epoch = self.job.nbatches(self.world)
        self.device = torch.device(device) if device is not None else None
        cuda = self.device is not None and self.device.type == "cuda"
        self.pin_memory = cuda if pin_memory is None else bool(pin_memory)
        self.non_blocking = non_blocking
        self.ids = ids
        self.views = bool(views)
        nv = self.job.views if self.views else 1
        # A host buffer holds a batch of each view read, each as large as
        # the view's largest epoch (a resolution schedule's): offsets.
        self._vsize = [self.job.max_elems(v) for v in range(nv)]
        self._voff = [sum(self._vsize[:v]) for v in range(nv)]
        if int(prefetch) < 1:
            raise ValueError("prefetch %s: at least 1" % prefetch)
        self._prefetch = int(prefetch)
        self._nbuf = self._prefetch + 2
        self.reuse_buffers = bool(reuse_buffers)
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
        # The host buffers are handed out as they are (no copy to a device,
        # no normalize making a new tensor): unless reuse_buffers, each is
        # read into again only once nothing refers to it.
        host = self.device is None or self.device.type == "cpu"
        self._keep = host and self._norm is None and not self.reuse_buffers
        self._fp = fingerprint(self.job)
        # A position is (i, p, b): batch b of this world's deal of the
        # samples of self.epochs[i] from place p of its order on (p is 0
        # but after an elastic resume); (len, 0, 0) is the end.  An index,
        # not an epoch number: epochs may come in any order, or twice.
        self._pos = (0, 0, 0)
        if start is not None:
            self._pos = self._position(start)
        self._pos = self._step(*self._pos)
        self._from = None  # where the iteration running began
        self._bufs = None  # reuse: the ring of (tensor, array)
        # Batches yielded so far, all iterations together: the ring's
        # place goes on from one iteration (epoch) to the next, and so
        # do the CUDA events of copies that may still run (by that count).
        self._yielded = 0
        self._events = {}
        self._pool = []  # otherwise: [array] slots, reused when free
        self._free = _refs([np.empty(0)])  # _refs of a slot held by no one
        self.epoch = self.batch = None  # of the batch last yielded

    # ---- the deal of an epoch's samples -----------------------------------

    def _per(self, p):
        """Samples of each rank when the epoch's samples from place p of
        its order on are dealt to self.world ranks (the mount's plan when
        p is 0: padded by wrapping around, or cut with drop_last)."""
        m = self.job.samples - p
        if self.job.drop_last and self.world > 1:
            return m // self.world
        return -(-m // self.world)

    def _nb(self, p):
        """Batches of each rank in that deal."""
        per = self._per(p)
        B = self.job.batch_size
        return per // B if self.job.drop_last else -(-per // B)

    def _places(self, p, b):
        """The places in the epoch's order of the samples of batch b of
        this rank, in the deal from p: element k of the rank's list is
        place p + (rank + k * world) mod (samples - p), as
        DistributedSampler deals the rest of the epoch."""
        m = self.job.samples - p
        B = self.job.batch_size
        k1 = min((b + 1) * B, self._per(p))
        return [p + (self.rank + k * self.world) % m
                for k in range(b * B, k1)]

    # ---- position -----------------------------------------------------------

    def _end(self):
        return (len(self.epochs), 0, 0)

    def _step(self, i, p, b):
        """(i, p, b) made canonical: the end of an epoch is the next one's
        batch 0."""
        while i < len(self.epochs) and b >= self._nb(p):
            i, p, b = i + 1, 0, 0
        return (i, p, b) if i < len(self.epochs) else self._end()

    def _check_job(self, state, strict=True):
        fp = state.get("job")
        if fp is None:
            return
        diff = ["%s %r in the checkpoint, %r here" % (k, fp.get(k),
                                                      self._fp.get(k))
                for k in FINGERPRINT if fp.get(k) != self._fp.get(k) and
                (k in fp or k not in LATER)]
        if not diff:
            return
        what = "the checkpoint is of another job than %s: %s" % (
            self.job.name, "; ".join(diff))
        if strict:
            raise ValueError("load_state_dict: %s (strict=False takes the "
                             "position anyway)" % what)
        logging.getLogger("feedfs").warning("feedfs: %s", what)

    def _position(self, pos, strict=True):
        """(i, p, b) of pos: a state_dict(), or an (epoch, batch) pair whose
        epoch is taken at its first place in the list.  A state_dict()
        without "index" (those before it had one) is such a pair too."""
        n = len(self.epochs)
        p = 0
        if isinstance(pos, dict):
            self._check_job(pos, strict)
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
            p = int(pos.get("start") or 0)
            w = int(pos.get("world") or self.world)
            if not 0 <= p < max(1, self.job.samples) or \
                    not 1 <= w <= feedfs.MAX_WORLD:
                raise ValueError("state %s: start %d or world %d out of "
                                 "range" % (pos, p, w))
            if w != self.world and i < n:
                return self._elastic(i, p, b, w)
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
        if not 0 <= b <= self._nb(p):
            raise ValueError("batch %d: an epoch has %d" % (b, self._nb(p)))
        self._check_order(p)
        return self._step(i, p, b)

    def _elastic(self, i, p, b, w):
        """The position of a state (i, p, b) taken at world size w, at this
        loader's world: the first b * batch_size * w places of the deal
        from p were served (every rank of w at batch b), so the rest of
        the epoch is dealt from there to this world's ranks."""
        B = self.job.batch_size
        m = self.job.samples - p
        per = m // w if self.job.drop_last and w > 1 else -(-m // w)
        nb = per // B if self.job.drop_last else -(-per // B)
        if not 0 <= b <= nb:
            raise ValueError("batch %d: an epoch of world %d has %d"
                             % (b, w, nb))
        if b == nb:
            return self._step(i + 1, 0, 0)
        p += b * B * w
        self._check_order(p)
        return self._step(i, p, 0)

    def _check_order(self, p):
        if p and self.job.info.get("order") == "relaxed":
            raise ValueError(
                "job %s has order = relaxed: a batch's samples are chosen "
                "as it is read, so the rest of an epoch cannot be dealt to "
                "another world size; resume at the epoch's start, or use "
                "order = strict" % self.job.name)

    def state_dict(self):
        """{"index": i, "epoch": e, "batch": b, "start": p, "world": W,
        "job": {...}}: the next batch to yield is batch b of epochs[i],
        epoch e, in the deal to W ranks of its samples from place p on;
        at the end, i is the number of epochs and e None.  "job" is the
        job's fingerprint."""
        i, p, b = self._pos
        e = self.epochs[i] if i < len(self.epochs) else None
        return {"index": i, "epoch": e, "batch": b, "start": p,
                "world": self.world, "job": dict(self._fp)}

    def load_state_dict(self, state, strict=True):
        """Continue from state (a state_dict(), or an (epoch, batch)).  A
        state of another job (its fingerprint) raises ValueError, or with
        strict=False is taken with a warning (logger "feedfs")."""
        self._pos = self._position(state, strict)

    def set_epoch(self, epoch):
        """The next iteration reads epoch (its first place in the list),
        from batch 0; or, when the position already is in that epoch (a
        resumed one), from there."""
        e = int(epoch)
        if e not in self.epochs:
            raise ValueError("set_epoch(%d): not among the loader's epochs "
                             "(%d in all)" % (e, len(self.epochs)))
        i = self._pos[0]
        if i < len(self.epochs) and self.epochs[i] == e:
            return
        self._pos = self._step(self.epochs.index(e), 0, 0)

    def _next_from(self):
        """Where the next iteration begins."""
        if self._pos == self._end():
            return self._step(0, 0, 0)
        return self._pos

    def __len__(self):
        """The batches of the iteration running, or else of the next."""
        pos = self._from if self._from is not None else self._next_from()
        i, p, b = pos
        if i >= len(self.epochs):
            return 0
        return self._nb(p) - b

    # ---- reading ------------------------------------------------------------

    def _new_buffer(self):
        """A host buffer for one batch of every view read, flat: (tensor,
        its numpy array); _shaped cuts it to an epoch's shapes."""
        tdtype = torch.from_numpy(np.empty(0, self.job.dtype)).dtype
        n = sum(self._vsize)
        if self.pin_memory:
            t = torch.empty(n, dtype=tdtype, pin_memory=True)
            return t, t.numpy()
        a = np.empty(n, dtype=self.job.dtype)
        return torch.from_numpy(a), a

    def _shaped(self, e, t, a):
        """The flat buffer (t, a) as one batch of epoch e per view read:
        ([tensor or None], [array]), views of it."""
        ts, xs = [], []
        for v, off in enumerate(self._voff):
            shape = self.job.shape_of(e, v)
            n = int(np.prod(shape))
            xs.append(a[off:off + n].reshape(shape))
            ts.append(None if t is None else t[off:off + n].view(shape))
        return ts, xs

    def _buffers(self):
        """The host buffers as (tensor, array) pairs: the ring used in turn
        (reuse), or the pool's first prefetch + 2 (kept batches)."""
        if not self._keep:
            if self._bufs is None:
                self._bufs = [self._new_buffer()
                              for _ in range(self._nbuf)]
            return self._bufs
        while len(self._pool) < self._nbuf:
            self._pool.append([self._new_buffer()[1]])
        return [(torch.from_numpy(s[0]), s[0]) for s in self._pool]

    def _take(self):
        """A pool buffer no tensor refers to any more, or a new one (kept
        in the pool while it has fewer than prefetch + 2)."""
        for slot in self._pool:
            if _refs(slot) <= self._free:
                return slot[0]
        a = self._new_buffer()[1]
        if len(self._pool) < self._nbuf:
            self._pool.append([a])
        return a

    def _read(self, e, p, b, xs, cache):
        """Batch b of this rank in the deal of epoch e from place p, read
        into xs (one array per view read): ([images], labels, ids or
        None)."""
        if p == 0:  # the mount's rank view itself
            d = self.job.epoch_dir(e, self.rank, self.world)
            path = "%s/batch-%06d" % (d, b)
            out = [feedfs.read_into(path + self.job.view_suffix(v), x)
                   for v, x in enumerate(xs)]
            y = feedfs._load_small(path + ".labels.npy")
            z = feedfs._load_small(path + ".ids.npy") if self.ids \
                else None
            t = feedfs.read_text(path + ".text.jsonl") if self.job.text \
                else None
            return out, y, z, t
        if len(xs) > 1:
            raise ValueError("job %s: an elastic resume (a state of another "
                             "world size) reads the views of a batch from "
                             "several batches: not supported with views"
                             % self.job.name)
        x = xs[0]
        # After an elastic resume: each sample from the batch that holds
        # it in this world's view (or the whole epoch's, for a place the
        # view cuts), a batch file read once for its rows.
        places = self._places(p, b)
        rows = {}
        for s, q in enumerate(places):
            rows.setdefault(self._locate(q), []).append((s, q))
        ys, zs = [None] * len(places), [None] * len(places)
        ts = [None] * len(places)
        for (r, w, vb), got in rows.items():
            vx, vy, vz, _, vt = self._view_batch(e, r, w, vb, cache)
            B = self.job.batch_size
            for s, q in got:
                row = (q // w) % B
                x[s] = vx[row]
                ys[s], zs[s] = vy[row], vz[row]
                if vt is not None:
                    ts[s] = vt[row]
        y = np.stack(ys)
        return [x[:len(places)]], y, (np.stack(zs) if self.ids else None), \
            (ts if self.job.text else None)

    def _locate(self, q):
        """(rank, world, batch) of the view batch that holds place q of the
        epoch's order: this world's view, or the whole epoch's."""
        B = self.job.batch_size
        for w in (self.world, 1):
            k = q // w
            if k // B < self.job.nbatches(w) and \
                    k % B < self.job.batch_len(k // B, w):
                return (q % w, w, k // B)
        raise ValueError("place %d of job %s's order is in no view"
                         % (q, self.job.name))

    def _view_batch(self, e, r, w, vb, cache):
        """Batch vb of rank r of w, epoch e: (images, labels, ids, its
        buffer, captions or None), the last two batches read kept in
        cache."""
        key = (e, r, w, vb)
        if key in cache:
            return cache[key]
        spare = None
        if len(cache) >= 2:
            spare = cache.pop(next(iter(cache)))[3]
        if spare is None or spare.shape != self.job.shape_of(e):
            spare = np.empty(self.job.shape_of(e), dtype=self.job.dtype)
        path = "%s/batch-%06d" % (self.job.epoch_dir(e, r, w), vb)
        vx = feedfs.read_into(path + ".npy", spare)
        vy = feedfs._load_small(path + ".labels.npy")
        vz = feedfs._load_small(path + ".ids.npy")
        vt = feedfs.read_text(path + ".text.jsonl") if self.job.text \
            else None
        cache[key] = (vx, vy, vz, spare, vt)
        return cache[key]

    def _reader(self, todo, base, out, gate, stop):
        """The background thread: read each batch of todo, at most prefetch
        ahead of the last one yielded, into the next buffer and put it in
        out.  base: the batches yielded before this iteration."""
        try:
            ring = None if self._keep else self._buffers()
            cache = {}
            for n, (i, e, p, b) in enumerate(todo):
                g = base + n  # its place in the ring
                with gate:
                    # Batch n once batch n - prefetch is yielded; in the
                    # ring, that is batch g - nbuf's buffer (of this
                    # iteration or the last), past valid (its batch after
                    # next is yielded: gate.given counts the batches this
                    # iteration yielded), once any copy from it to the
                    # device has finished.
                    while gate.given < n - self._prefetch + 1 and \
                            not stop.is_set():
                        gate.wait()
                    if stop.is_set():
                        return
                    event = self._events.pop(g - self._nbuf, None)
                if event is not None:
                    event.synchronize()
                if ring is None:
                    t, a = None, self._take()
                else:
                    t, a = ring[g % self._nbuf]
                ts, xs = self._shaped(e, t, a)
                xs, y, z, tx = self._read(e, p, b, xs, cache)
                ts = None if t is None else [
                    tv[:len(x)] for tv, x in zip(ts, xs)]
                out.put((i, e, p, b, ts, xs, y, z, tx))
                xs = ts = a = None  # a pool buffer is free once the
            out.put(_DONE)
        except BaseException as ex:  # handed to the trainer's thread
            out.put(ex)

    def __iter__(self):
        self._pos = self._from = self._next_from()
        i, p, b0 = self._pos
        todo = []
        if i < len(self.epochs):
            todo = [(i, self.epochs[i], p, b) for b in range(b0, self._nb(p))]
        out = queue.Queue()
        gate = threading.Condition()
        gate.given = 0
        base = self._yielded
        stop = threading.Event()
        th = threading.Thread(target=self._reader, name="feedfs-loader",
                              args=(todo, base, out, gate, stop),
                              daemon=True)
        th.start()
        try:
            for n in range(len(todo)):
                item = out.get()
                if isinstance(item, BaseException):
                    raise item
                k, e, p, b, xs, a, y, z, tx = item
                item = None
                if xs is None:  # a pool buffer: its tensors keep it
                    xs = [torch.from_numpy(v) for v in a]
                a = None
                y, z = torch.from_numpy(y), (None if z is None
                                             else torch.from_numpy(z))
                event = None
                if self.device is not None:
                    nb = self.non_blocking
                    xs = [v.to(self.device, non_blocking=nb) for v in xs]
                    y = y.to(self.device, non_blocking=nb)
                    z = None if z is None else z.to(self.device,
                                                    non_blocking=nb)
                    if self.device.type == "cuda":
                        event = torch.cuda.Event()
                        event.record()
                if self._norm is not None:
                    xs = [torch.addcmul(-self._norm[1], v.float(),
                                        self._norm[0]) for v in xs]
                x = xs if self.views else xs[0]
                xs = None
                self.epoch, self.batch = e, b
                self._pos = self._step(k, p, b + 1)
                with gate:
                    gate.given = n + 1
                    self._yielded = base + n + 1
                    if event is not None:
                        self._events[base + n] = event
                    gate.notify()
                got = (x, y) if tx is None else (x, y, tx)
                yield got + (z,) if self.ids else got
                got = x = y = z = tx = None
        finally:
            self._from = None
            stop.set()
            with gate:
                gate.notify()
            th.join()
