#!/usr/bin/python3
"""test_python.py - the Python package (python/feedfs, issue 19) on a real
mount, from the source tree (PYTHONPATH=python):

- import feedfs does not import torch; feedfs.torch and feedfs.top load
  on first use;
- Job: .info and its shortcuts equal info.json; every batch of an epoch,
  float32 CHW, uint8 HWC and drop_last, in views of 1, 2 and 3 ranks,
  equals numpy.load of the same files (images, labels, ids: dtype, shape,
  bytes); len() is the number of batch files; the ranks have equal batch
  counts and cover the epoch as DistributedSampler does; start=k is the
  tail from k; an array stays valid until the batch after next is read;
  copy=True keeps it; RANK/WORLD_SIZE pick the rank view with
  world="auto" (only then); a buffer of the wrong dtype is refused;
- torch.Loader: two epochs, one per iteration, equal Job.epoch's batches
  as torch tensors; len() is an epoch's; with reuse_buffers=True a tensor
  stays valid until the batch after next; resuming from
  state_dict() at every position (mid-epoch, epoch end, the start), in a
  new Loader, by start= and by iterating the same Loader again, gives
  exactly the rest of an uninterrupted run; epochs in any order ([1, 0],
  [0, 2, 1], [2, 2]) are read in it and resume by their index in the list
  (issue 25); len() follows load_state_dict(); a host tensor is still
  valid, however long the trainer holds the next batch; an old
  {"epoch", "batch"} checkpoint resumes; uint8 with normalize gives
  (x / 255 - mean) / std;
- Mixture: .sources, .weights(), set() returns the first epoch not opened
  and the weights apply from there; bad weights raise ValueError with the
  mount's reason and change nothing; a refusal only the mount sees is a
  ValueError too; a job without mixture is refused;
- stats(): the counters of .feedfs/stats keyed by (name, labels); label
  values with escaped backslashes, quotes and newlines un-escaped in one
  pass, left to right (a cache_dir
  holding them comes back as it is from feedfs_cache_error's label).

The two-process DDP run is test_python_ddp.py; feedfs.top is
test_python_top.py.
"""

import json
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

PYDIR = os.path.join(fflib.SRCDIR, "python")
sys.path.insert(0, PYDIR)
try:
    import numpy as np
except ImportError:
    fflib.skip("numpy is missing (Debian: python3-numpy)")
import feedfs  # noqa: E402

N, B = 45, 8
NWEB, NCUR = 20, 12
t = fflib.Test()
data = t.gen(t.path("data"), n=N, classes=3, seed=5)
web = t.gen(t.path("web"), n=NWEB, classes=2, seed=1)
cur = t.gen(t.path("curated"), n=NCUR, classes=2, seed=2)

U8 = "decode resize(72) center_crop(64) cache flip(0.5)"
JOBS = {
    "train": dict(epochs=3, seed=1234),
    "u8": dict(epochs=2, seed=9, pipeline=U8, dtype="uint8", layout="HWC"),
    "dl": dict(epochs=1, seed=3, drop_last="yes"),
    "mix": dict(epochs=4, seed=11, mixture="web:0.7 curated:0.3"),
}
lines = ["[mount]", "cache_dir = %s" % t.path("cache"), "cache_size = 1G",
         "threads = 2", "memory = 128M", "readahead = 2"]
for name, root in (("data", data), ("web", web), ("curated", cur)):
    lines += ["", "[dataset %s]" % name, "root = %s" % root]
for name, keys in JOBS.items():
    keys = fflib.job(**keys)
    if "mixture" in keys:
        del keys["dataset"]
    lines += ["", "[job %s]" % name] + ["%s = %s" % kv for kv in keys.items()]
cfg = t.path("feedfs.conf")
with open(cfg, "w") as f:
    f.write("\n".join(lines) + "\n")


def files_of(ep):
    """The batch files of an Epoch, from the directory itself."""
    n = 0
    while os.path.exists(ep.path(n)):
        n += 1
    return n


def equal(a, path, what):
    """a (an array or tensor) equals numpy.load(path): dtype, shape, bytes."""
    want = np.load(path)
    if hasattr(a, "numpy"):
        a = a.numpy()
    check(a.dtype == want.dtype and a.shape == want.shape,
          "%s: %s %s, numpy.load gives %s %s" % (what, a.dtype, a.shape,
                                                 want.dtype, want.shape))
    check(np.ascontiguousarray(a).tobytes() == want.tobytes(),
          "%s: bytes differ from numpy.load(%s)" % (what, path))


# ---- import -----------------------------------------------------------------
env = dict(os.environ, PYTHONPATH=PYDIR)
r = subprocess.run([fflib.PY, "-c", "import sys, feedfs; "
                    "assert 'torch' not in sys.modules, 'torch imported'; "
                    "assert 'numpy' in sys.modules; print(feedfs.__file__)"],
                   env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
check(r.returncode == 0, "import feedfs: %s" % r.stderr.decode())
check(os.path.realpath(r.stdout.decode().strip()) == os.path.realpath(
    os.path.join(PYDIR, "feedfs", "__init__.py")),
      "feedfs came from %s" % r.stdout.decode())
# Without torch at all: feedfs works, feedfs.torch says what is missing.
r = subprocess.run([fflib.PY, "-c", "import sys; sys.modules['torch'] = None"
                    "\nimport feedfs\ntry:\n    import feedfs.torch\n"
                    "except ImportError as e:\n    print('no torch:', e)"],
                   env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
check(r.returncode == 0 and b"no torch:" in r.stdout,
      "without torch: %s %s" % (r.stdout, r.stderr))
log("import feedfs works without importing torch, and without torch")
try:
    import torch
except ImportError:
    torch = None

with fflib.Mount(t, cfg, t.path("mnt")) as m:
    # ---- Job: info ----------------------------------------------------------
    for name in JOBS:
        job = feedfs.Job(m.p(name))
        with open(m.p(name, "info.json")) as f:
            info = json.load(f)
        check(job.info == info, "%s: .info is not info.json" % name)
        check(job.classes == info["classes"] and job.batch_size == B and
              job.batches_per_epoch == info["batches_per_epoch"] and
              job.epochs == info["epochs"] and
              job.dtype == np.dtype(info["dtype"]),
              "%s: the shortcuts disagree with info.json" % name)
    try:
        feedfs.Job(t.path("data"))
        fflib.fail("Job() of a directory without info.json succeeded")
    except FileNotFoundError:
        pass

    # ---- Job: every batch equals numpy.load ---------------------------------
    for name, epochs in (("train", (0, 1)), ("u8", (0,)), ("dl", (0,))):
        job = feedfs.Job(m.p(name))
        for e in epochs:
            for world in (1, 2, 3):
                views = []
                counts = set()
                for rank in range(world):
                    ep = job.epoch(e, rank=rank, world=world, ids=True)
                    nb = files_of(ep)
                    check(len(ep) == nb == job.nbatches(world),
                          "%s e%d %d/%d: len %d, %d files, nbatches %d"
                          % (name, e, rank, world, len(ep), nb,
                             job.nbatches(world)))
                    counts.add(nb)
                    got = []
                    prev = None
                    for b, (x, y, ids) in enumerate(ep):
                        what = "%s e%d rank %d/%d batch %d" % (name, e, rank,
                                                               world, b)
                        check(x.dtype == job.dtype, what + ": dtype")
                        equal(x, ep.path(b), what)
                        equal(y, ep.path(b, ".labels.npy"), what + " labels")
                        equal(ids, ep.path(b, ".ids.npy"), what + " ids")
                        if prev is not None:
                            # the batch before is still valid
                            equal(prev[0], ep.path(b - 1), what + ": batch "
                                  "b-1 after b was read")
                        prev = (x, b)
                        got.append(ids)
                    check(len(got) == nb, "%s: %d batches iterated, %d files"
                          % (name, len(got), nb))
                    views.append(np.concatenate(got) if got else
                                 np.zeros(0, np.int64))
                check(len(counts) == 1, "%s e%d world %d: batch counts %s"
                      % (name, e, world, counts))
                order = views[0] if world == 1 else None
                if world > 1 and job.drop_last:
                    # cut to floor(N/W) per rank, then whole batches only
                    allids = np.concatenate(views)
                    check(len(set(allids.tolist())) == len(allids) and
                          all(len(v) == job.nbatches(world) * B
                              for v in views),
                          "%s e%d: drop_last ranks of %d overlap or are "
                          "short" % (name, e, world))
                elif world > 1:
                    full = np.concatenate([y for _, _, y in job.epoch(
                        e, rank=0, world=1, ids=True)])
                    per = -(-N // world)
                    padded = np.concatenate([full, full[:per * world - N]])
                    for r in range(world):
                        check(np.array_equal(views[r], padded[r::world]),
                              "%s e%d: rank %d of %d is not positions R, "
                              "R+W, ... of the epoch" % (name, e, r, world))
                elif not job.drop_last:
                    check(sorted(order.tolist()) == list(range(N)),
                          "%s e%d: ids are not a permutation" % (name, e))
        log("%s epoch %s: every batch equals numpy.load, in views of 1, "
            "2, 3 ranks with equal batch counts" % (name, epochs))

    job = feedfs.Job(m.p("train"))
    full = list(job.epoch(1, copy=True, ids=True))
    for k in (0, 1, 3, len(full) - 1, len(full)):
        tail = list(job.epoch(1, start=k, ids=True, copy=True))
        check(len(tail) == len(full) - k and len(job.epoch(1, start=k))
              == len(full) - k, "start=%d: %d batches" % (k, len(tail)))
        for (a, la, ia), (b, lb, ib) in zip(full[k:], tail):
            check(np.array_equal(a, b) and np.array_equal(la, lb) and
                  np.array_equal(ia, ib), "start=%d differs" % k)
    # Without copy the arrays are views of two buffers, used in turn;
    # copy=True's (full, above) are the batches still.
    kept = {x.__array_interface__["data"][0] for x, _ in job.epoch(1)}
    check(len(kept) == 2, "%d buffers for one epoch, not 2" % len(kept))
    for b, (x, _, _) in enumerate(full):
        equal(x, job.epoch(1).path(b), "copy=True batch %d" % b)
    log("start=k is the tail from k; copy=True keeps the batches")

    os.environ.update(RANK="1", WORLD_SIZE="3")
    try:
        # Only asked for (issue 26): by default the whole epoch.
        ep = job.epoch(0, world="auto")
        check(ep.rank == 1 and ep.world == 3 and
              ep.dir == m.p("train", "rank-1-of-3", "epoch-0000"),
              "RANK/WORLD_SIZE: %s" % ep.dir)
        check(job.epoch(0).dir == m.p("train", "epoch-0000"),
              "RANK/WORLD_SIZE used unasked")
        check(job.epoch(0, rank=0, world=1).dir ==
              m.p("train", "epoch-0000"), "explicit rank/world lost")
    finally:
        del os.environ["RANK"], os.environ["WORLD_SIZE"]
    for bad in ((2, 2), (0, 0), (0, 1025), (-1, 2)):
        try:
            job.epoch(0, rank=bad[0], world=bad[1])
            fflib.fail("rank %d of %d accepted" % bad)
        except ValueError:
            pass
    try:
        feedfs.read_into(job.epoch(0).path(0),
                         np.empty(job.shape, dtype=np.float16))
        fflib.fail("read_into took a float16 buffer for float32 data")
    except ValueError:
        pass
    log("RANK/WORLD_SIZE pick the view with world='auto'; bad ranks and "
        "buffers are refused")

    # ---- torch.Loader -------------------------------------------------------
    if torch is None:
        log("torch is missing (python3-torch): the Loader is not tested")
    else:
        import feedfs.torch as ft
        check(feedfs.torch is ft, "feedfs.torch is not the module")
        want = []
        for e in (0, 1):
            for x, y, ids in job.epoch(e, ids=True, copy=True):
                want.append((e, x, y, ids))

        def run(loader, n=None):
            """Up to n batches of loader (cloned), an iteration (an epoch)
            after the other to the end of its epochs, and the state
            after."""
            out = []
            while loader.state_dict()["epoch"] is not None:
                for x, y, ids in loader:
                    check(isinstance(x, torch.Tensor) and
                          isinstance(y, torch.Tensor), "not tensors")
                    out.append((x.clone(), y.clone(), ids.clone()))
                    if n is not None and len(out) == n:
                        return out, loader.state_dict()
            return out, loader.state_dict()

        def pos(st):
            return {k: st[k] for k in ("index", "epoch", "batch")}

        def same(got, ref, what):
            check(len(got) == len(ref), "%s: %d batches, want %d"
                  % (what, len(got), len(ref)))
            for i, ((x, y, ids), (_, wx, wy, wids)) in enumerate(
                    zip(got, ref)):
                check(x.numpy().tobytes() == wx.tobytes() and
                      tuple(x.shape) == wx.shape and
                      np.array_equal(y.numpy(), wy) and
                      np.array_equal(ids.numpy(), wids),
                      "%s: batch %d differs" % (what, i))

        nb = job.batches_per_epoch
        L = ft.Loader(job, epochs=2, ids=True, device=None)
        check(len(L) == nb, "len(Loader) %d, want %d (an epoch)"
              % (len(L), nb))
        got, st = run(L)
        same(got, want, "uninterrupted run")
        check(pos(st) == {"index": 2, "epoch": None, "batch": 0},
              "state at the end: %s" % st)
        check(len(L) == nb, "len(Loader) after a whole run: %d" % len(L))
        # reuse_buffers=True: a host tensor is valid until the batch after
        # next is yielded: batch i - 1 still holds its bytes while the
        # trainer has batch i, however long the trainer takes (the pause
        # lets the thread read ahead as far as it may).
        last = None
        L = ft.Loader(job, epochs=[0, 1], reuse_buffers=True, device=None)
        for i, (x, y) in enumerate(bt for _ in range(2) for bt in L):
            if 1 <= i <= 4:
                time.sleep(0.5)
            if last is not None:
                check(last.numpy().tobytes() == want[i - 1][1].tobytes(),
                      "Loader: batch %d changed once %d was yielded"
                      % (i - 1, i))
            last = x
        for k in (0, 1, nb - 1, nb, nb + 2, len(want) - 1):
            L1 = ft.Loader(job, epochs=range(2), ids=True, device=None)
            head, st = run(L1, k) if k else ([], L1.state_dict())
            check(pos(st) == {"index": k // nb, "epoch": k // nb,
                              "batch": k % nb},
                  "state after %d batches: %s" % (k, st))
            L2 = ft.Loader(job, epochs=range(2), ids=True, device=None)
            L2.load_state_dict(st)
            check(len(L2) == nb - k % nb, "len after load_state_dict at "
                  "%d: %d, want %d" % (k, len(L2), nb - k % nb))
            rest, _ = run(L2)
            same(head + rest, want, "resumed at %d (load_state_dict)" % k)
            L3 = ft.Loader(job, epochs=range(2), ids=True,
                           start=(st["epoch"], st["batch"]), device=None)
            check(len(L3) == nb - k % nb, "len with start: %d" % len(L3))
            same(head + run(L3)[0], want, "resumed at %d (start=)" % k)
            same(head + run(L1)[0], want, "resumed at %d (same Loader)" % k)
        log("Loader: batches equal Job.epoch's; resume at every kind of "
            "position equals the uninterrupted run")
        # start=(1, 0): the second epoch's batches only
        L = ft.Loader(job, epochs=range(2), start=(1, 0), ids=True,
                      device=None)
        same(run(L)[0], want[nb:], "start=(1, 0)")
        # A checkpoint of the old form, {"epoch": e, "batch": b}, resumes.
        L = ft.Loader(job, epochs=range(2), ids=True, device=None)
        L.load_state_dict({"epoch": 1, "batch": 2})
        check(len(L) == nb - 2, "len from an old checkpoint: %d" % len(L))
        same(run(L)[0], want[nb + 2:], "old checkpoint (1, 2)")
        L.load_state_dict({"epoch": 2, "batch": 0})  # the old form's end
        check(L.state_dict()["index"] == 2, "the old end: %s"
              % L.state_dict())

        # Epochs in any order: the position is an index into the list, so
        # [1, 0] is epoch 1 then epoch 0, and in [0, 2, 1] the state after
        # epoch 0 is epoch 2's batch 0, not the end.
        ref = {}
        for e in range(3):
            ref[e] = [(e, x, y, i) for x, y, i in
                      job.epoch(e, ids=True, copy=True)]
        for order in ([1, 0], [0, 2, 1], [2, 2]):
            whole = [w for e in order for w in ref[e]]
            L = ft.Loader(job, epochs=order, ids=True, device=None)
            check(len(L) == nb, "epochs=%s: len %d, want %d"
                  % (order, len(L), nb))
            got, st = run(L)
            same(got, whole, "epochs=%s" % order)
            check(st["index"] == len(order), "epochs=%s: end %s"
                  % (order, st))
            for k in (nb - 1, nb, 2 * nb - 1):
                L1 = ft.Loader(job, epochs=order, ids=True, device=None)
                head, st = run(L1, k)
                check(st["index"] == k // nb and
                      st["epoch"] == order[k // nb] and st["batch"] == k % nb,
                      "epochs=%s: state after %d batches: %s"
                      % (order, k, st))
                L2 = ft.Loader(job, epochs=order, ids=True, device=None)
                L2.load_state_dict(json.loads(json.dumps(st)))
                check(len(L2) == nb - k % nb, "epochs=%s: len after "
                      "resuming at %d: %d" % (order, k, len(L2)))
                same(head + run(L2)[0], whole, "epochs=%s resumed at %d"
                     % (order, k))
                same(head + run(L1)[0], whole, "epochs=%s: the same Loader "
                     "continued at %d" % (order, k))
        try:
            ft.Loader(job, epochs=[0, 2, 1], device=None).load_state_dict(
                {"index": 1, "epoch": 1, "batch": 0})
            fflib.fail("a state whose epoch is not the list's at its index "
                       "was accepted")
        except ValueError:
            pass
        log("Loader: epochs [1, 0], [0, 2, 1], [2, 2] in their order; "
            "resuming mid-list continues the list; len() follows "
            "load_state_dict")
        try:
            ft.Loader(job, epochs=range(2), start=(5, 0), device=None)
            fflib.fail("a start outside the epochs was accepted")
        except ValueError:
            pass

        # uint8 normalized by the Loader (on the CPU here: no GPU needed)
        u8 = feedfs.Job(m.p("u8"))
        mean, std = ft.IMAGENET_MEAN, ft.IMAGENET_STD
        L = ft.Loader(u8, epochs=[1], normalize=True, device="cpu")
        for b, (x, y) in enumerate(L):
            raw = np.load(u8.epoch(1).path(b)).astype(np.float32)
            ref = (raw / 255.0 - np.array(mean, np.float32)) / \
                np.array(std, np.float32)
            check(x.dtype == torch.float32 and tuple(x.shape) == raw.shape,
                  "normalize: %s %s" % (x.dtype, tuple(x.shape)))
            check(np.allclose(x.numpy(), ref, atol=1e-5),
                  "normalize: batch %d, max error %g" % (
                      b, np.abs(x.numpy() - ref).max()))
        try:
            ft.Loader(job, epochs=1, normalize=True, device=None)
            fflib.fail("normalize accepted for a float32 job")
        except ValueError:
            pass
        log("Loader: uint8 normalized gives (x/255 - mean)/std")

    # ---- Mixture ------------------------------------------------------------
    mix = feedfs.Mixture(m.p("mix"))
    check(mix.sources == ["web", "curated"], "sources %s" % mix.sources)
    check(mix.weights() == {"web": 0.7, "curated": 0.3},
          "weights() %s" % mix.weights())
    check(mix.set(web=0.5, curated=0.5) == 0, "nothing opened: not epoch 0")
    check(mix.weights(0) == {"web": 0.5, "curated": 0.5},
          "epoch 0: %s" % mix.weights(0))
    # epoch 1 opened by a read of a batch: the next set starts at 2
    fflib.read_file(m.p("mix", "epoch-0001", "batch-000000.npy"))
    check(mix.set({"web": 1}) == 2, "after epoch 1 opened: not 2")
    check(mix.weights(1) == {"web": 0.5, "curated": 0.5} and
          mix.weights(2) == {"web": 1.0, "curated": 0.0},
          "epochs 1, 2: %s %s" % (mix.weights(1), mix.weights(2)))
    ids = np.concatenate([i for _, _, i in feedfs.Job(m.p("mix")).epoch(
        2, ids=True)])
    check((ids < NWEB).all(), "epoch 2 (web:1) has curated samples")
    for kw, why in ((dict(web=-0.5, curated=1), "web: a negative weight"),
                    (dict(other=1), "unknown source 'other'"),
                    (dict(web=0, curated=0), "the weights sum to 0"),
                    (dict(web="x"), "web: 'x' is not a weight"),
                    (dict(web=float("nan")), "is not a weight"),
                    (dict(web=2e6), "is not a weight"),
                    ({}, "no NAME:WEIGHT pair")):
        try:
            mix.set(**kw)
            fflib.fail("set(%s) succeeded" % kw)
        except ValueError as e:
            check(why in str(e), "set(%s): %r lacks %r" % (kw, str(e), why))
        check(mix.weights() == {"web": 1.0, "curated": 0.0},
              "set(%s) changed the weights" % kw)
    # What only the mount sees: a source it lacks slips past the check here
    mix.sources.append("ghost")
    try:
        mix.set(ghost=1)
        fflib.fail("the mount took a source it lacks")
    except ValueError as e:
        check("refused by the mount" in str(e), "EINVAL: %s" % e)
    check("refused: unknown source 'ghost'" in m.log(),
          "the mount's log lacks the reason")
    try:
        feedfs.Mixture(m.p("train"))
        fflib.fail("Mixture of a job without mixture")
    except ValueError:
        pass
    log("Mixture: set() returns the first unopened epoch; bad weights raise "
        "ValueError with the mount's reason")

    # ---- the examples ----
    ex = os.path.join(fflib.SRCDIR, "examples")
    r = subprocess.run([fflib.PY, os.path.join(ex, "numpy_loop.py"), m.mnt,
                        "--epochs", "2", "--start", "1:2"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    check(r.returncode == 0 and b"epoch 1: %d batches" % (
        job.batches_per_epoch - 2) in r.stdout,
        "numpy_loop.py: %s" % r.stdout.decode())
    if torch is not None:
        ck = t.path("ck.pt")
        for epochs, want in (("1", b"epoch 0 batch 5 step 6"),
                             ("2", b"resuming at epoch 1 batch 0")):
            r = subprocess.run([fflib.PY, os.path.join(ex, "pytorch_train.py"),
                                m.mnt, "--epochs", epochs, "--checkpoint",
                                ck], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
            check(r.returncode == 0 and want in r.stdout,
                  "pytorch_train.py --epochs %s: %s"
                  % (epochs, r.stdout.decode()))
        check(b"epoch 1 batch 5 step 6" in r.stdout,
              "pytorch_train.py resumed: %s" % r.stdout.decode())
    log("examples: numpy_loop.py from 1:2; pytorch_train.py resumes from "
        "its checkpoint")

    # ---- stats --------------------------------------------------------------
    s = feedfs.stats(m.mnt)
    check(s[("feedfs_workers", ())] == 2, "feedfs_workers %s"
          % s.get(("feedfs_workers", ())))
    jobs = {dict(k[1])["job"] for k in s if k[0] == "feedfs_samples_total"}
    check(jobs == set(JOBS), "jobs in stats: %s" % jobs)
    check(s[("feedfs_source_samples_total", (("job", "mix"),
                                              ("source", "web")))] > 0,
          "two labels")
    after = m.stats()
    check(after["feedfs_samples_total"] >= sum(
        v for k, v in s.items() if k[0] == "feedfs_samples_total"),
        "samples went backwards")
    check(feedfs.stats(job)[("feedfs_workers", ())] == 2,
          "stats of a Job")
    log("stats(): counters keyed by name and labels")

# ---- stats: label values un-escaped as Prometheus escapes them --------------
# Each value escaped (\\ -> \\\\, " -> \\", newline -> \\n), then parsed back.
for v in ("a\\nb", "\\\"", "x\\", "\\\\n", "q\n\\", 'say "\\n"\n'):
    esc = v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    got = feedfs.parse_stats('m{a="%s",b="%s"} 1\n' % (esc, esc))
    check(got == {("m", (("a", v), ("b", v))): 1.0},
          "label %r (escaped %r) parsed as %r" % (v, esc, got))
try:
    feedfs.parse_stats('m{a="open\\"} 1\n')
    fflib.fail("an unterminated label value was parsed")
except ValueError:
    pass
# A mount whose cache is off, with a reason that names a cache_dir holding
# a backslash before an n, a quote and two backslashes: the label is the
# path as it is.
weird = t.path('cache\\n"x\\\\y')
open(weird, "w").close()  # a file: the cache cannot open it
cfg2 = t.config(t.path("weird.conf"), data, {"train": dict(epochs=1)},
                cache_dir=weird)
with fflib.Mount(t, cfg2, t.path("mnt2")) as m:
    errs = [dict(k[1])["error"] for k in feedfs.stats(m.mnt)
            if k[0] == "feedfs_cache_error"]
    check(len(errs) == 1 and weird in errs[0],
          "feedfs_cache_error's label %r does not name %r" % (errs, weird))
log("stats(): label values with \\\\, \\\" and \\n un-escaped in one pass")
sys.exit(0)
