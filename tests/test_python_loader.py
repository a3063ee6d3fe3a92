#!/usr/bin/python3
"""test_python_loader.py - feedfs.torch.Loader behaves like a DataLoader
(issue 26), on a real mount, from the source tree:

- one iteration is one epoch: `for epoch in ...: for x, y in loader:`
  reads each epoch once, with or without set_epoch(); len() is that
  epoch's batch count; resumed mid-epoch by a new Loader, the same loop
  (set_epoch() of the resumed epoch keeps its batch) gives the rest of
  the run byte for byte;
- host batches stay valid: every batch kept in a list still holds its
  bytes, each in its own storage; reuse_buffers=True is the ring of
  prefetch + 2 buffers;
- state_dict() carries the job's fingerprint: a checkpoint of a job with
  another seed and batch size is refused, naming both (strict=False takes
  it with a warning); another world size is not;
- elastic resume: a checkpoint taken at world 4 resumes at 2, at 2 at 3,
  and 4 -> 2 -> 3 in turn, mid-epoch, with rank views in this process:
  every rank has the same batch count, the samples not served are dealt
  as DistributedSampler deals them (each exactly once when no padding is
  needed), each sample's bytes equal the whole epoch's, and a second run
  is the same; with drop_last the rest is cut to whole batches, none
  twice; order = relaxed refuses it;
- explicit sharding: with RANK and WORLD_SIZE set, Job.epoch() and Loader
  read the whole epoch (and log a warning saying so), world="auto" the
  rank's shard; the view read is logged once;
- the device (issue 36): by default CUDA where torch.cuda.is_available(),
  else the host (the same bytes); device="cuda" or pin_memory=True
  without CUDA is refused at construction, RuntimeError in feedfs's
  words.  Host tensors are asked for with device=None above.

The two-process torchrun side of elastic resume is in test_python_ddp.py.
"""

import json
import logging
import os
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

PYDIR = os.path.join(fflib.SRCDIR, "python")
sys.path.insert(0, PYDIR)
try:
    import numpy as np
    import torch
except ImportError as e:
    fflib.skip("numpy/torch not importable: %s" % e)
import feedfs  # noqa: E402
import feedfs.torch as ft  # noqa: E402

N, B, E = 45, 4, 3
t = fflib.Test()
data = t.gen(t.path("data"), n=N, classes=3, seed=4)
cfg = t.config(t.path("feedfs.conf"), data, {
    "train": dict(epochs=E, seed=77, batch_size=B),
    "other": dict(epochs=E, seed=78, batch_size=B + 1),
    "relaxed": dict(epochs=1, seed=77, batch_size=B, order="relaxed"),
    "dl": dict(epochs=1, seed=79, batch_size=B, drop_last="yes")},
    threads=2)

records = []


class Catch(logging.Handler):
    def emit(self, rec):
        records.append((rec.levelno, rec.getMessage()))


logging.getLogger("feedfs").addHandler(Catch())
logging.getLogger("feedfs").setLevel(logging.INFO)


def clone(batch):
    return tuple(v.clone() for v in batch)


def same(a, b):
    return all(torch.equal(u, v) for u, v in zip(a, b))


with fflib.Mount(t, cfg, t.path("mnt")) as m:
    job = feedfs.Job(m.p("train"))
    nb = job.nbatches()
    ref = {e: [tuple(torch.from_numpy(v) for v in bt)
               for bt in job.epoch(e, ids=True, copy=True)]
           for e in range(E)}

    # ---- one iteration is one epoch ----------------------------------------
    for use_set in (False, True):
        L = ft.Loader(job, epochs=E, ids=True, device=None)
        check(len(L) == nb, "len(Loader) %d, an epoch has %d" % (len(L), nb))
        for epoch in range(E):
            if use_set:
                L.set_epoch(epoch)
            got = [clone(bt) for bt in L]
            check(len(got) == nb and all(same(g, w) for g, w in
                                         zip(got, ref[epoch])),
                  "set_epoch %s: iteration %d is not epoch %d's %d batches "
                  "(%d)" % (use_set, epoch, epoch, nb, len(got)))
            check(L.epoch == epoch, "loader.epoch %s" % L.epoch)
    # set_epoch() picks any epoch, and again
    L = ft.Loader(job, ids=True, device=None)
    for e in (2, 0, 2):
        L.set_epoch(e)
        check(len(L) == nb and all(same(clone(g), w) for g, w in
                                   zip(L, ref[e])), "set_epoch(%d)" % e)
    try:
        L.set_epoch(E)
        fflib.fail("set_epoch of an epoch the job lacks")
    except ValueError:
        pass
    # Resumed mid-epoch in a new Loader: the same loop goes on exactly.
    L1 = ft.Loader(job, epochs=E, ids=True, device=None)
    head = []
    L1.set_epoch(0)
    head += [clone(bt) for bt in L1]
    L1.set_epoch(1)
    for bt in L1:
        head.append(clone(bt))
        if len(head) == nb + 2:
            break
    st = json.loads(json.dumps(L1.state_dict()))
    check((st["index"], st["epoch"], st["batch"], st["world"]) ==
          (1, 1, 2, 1), "state mid-epoch 1: %s" % st)
    for use_set in (False, True):
        L2 = ft.Loader(job, epochs=E, ids=True, device=None)
        L2.load_state_dict(st)
        check(len(L2) == nb - 2, "len after resuming at batch 2: %d"
              % len(L2))
        rest = []
        for epoch in range(st["epoch"], E):
            if use_set:
                L2.set_epoch(epoch)
            rest += [clone(bt) for bt in L2]
        whole = ref[0] + ref[1] + ref[2]
        check(len(head + rest) == len(whole) and all(
            same(g, w) for g, w in zip(head + rest, whole)),
            "resumed (set_epoch %s): not the uninterrupted run" % use_set)
    log("one iteration is one epoch (with and without set_epoch); len() is "
        "its batch count; resumed mid-epoch, the same loop goes on exactly")

    # ---- kept batches stay valid -------------------------------------------
    kept = [(x, e) for e in range(2)
            for x, _ in ft.Loader(job, epochs=[e], device=None)]
    check(len(kept) == 2 * nb, "%d kept" % len(kept))
    for k, (x, e) in enumerate(kept):
        check(torch.equal(x, ref[e][k % nb][0]),
              "kept batch %d (epoch %d) was overwritten" % (k % nb, e))
    ptrs = {x.data_ptr() for x, _ in kept}
    check(len(ptrs) == len(kept), "%d kept batches share %d storages"
          % (len(kept), len(ptrs)))
    # Dropped at once, batches reuse the buffers: no new memory per batch.
    L = ft.Loader(job, epochs=[0], device=None)
    seen = set()
    for x, y in L:
        seen.add(x.data_ptr())
    check(len(seen) <= L._nbuf and len(L._pool) <= L._nbuf,
          "batches dropped at once used %d buffers (pool %d)"
          % (len(seen), len(L._pool)))
    # A view of a batch (x[0]) keeps its buffer too.
    rows = [x[0] for x, _ in ft.Loader(job, epochs=[1], device=None)]
    check(all(torch.equal(r, ref[1][b][0][0]) for b, r in enumerate(rows)),
          "a kept row of a batch was overwritten")
    reuse = [x for x, _ in ft.Loader(job, epochs=[0], reuse_buffers=True,
                                     device=None)]
    ptrs = {x.data_ptr() for x in reuse}
    check(len(ptrs) <= 4, "reuse_buffers: %d storages" % len(ptrs))
    log("host batches stay valid when kept (%d batches, as many storages); "
        "dropped, at most %d buffers; reuse_buffers=True shares %d"
        % (len(kept), len(seen), len(ptrs)))

    # ---- a state_dict that knows its job -----------------------------------
    other = feedfs.Job(m.p("other"))
    try:
        ft.Loader(other, device=None).load_state_dict(st)
        fflib.fail("a checkpoint of another job was accepted")
    except ValueError as e:
        check("seed 77 in the checkpoint, 78 here" in str(e) and
              "batch_size 4 in the checkpoint, 5 here" in str(e) and
              "samples" not in str(e), "the refusal: %s" % e)
        log("another job's checkpoint: %s" % e)
    records.clear()
    L = ft.Loader(other, device=None)
    L.load_state_dict(st, strict=False)
    check(L.state_dict()["epoch"] == 1 and any(
        lv == logging.WARNING and "seed 77" in msg for lv, msg in records),
        "strict=False: %s, %s" % (L.state_dict(), records))
    check(st["job"]["samples"] == N and st["job"]["batch_size"] == B and
          st["job"]["seed"] == 77 and st["job"]["pipeline"] ==
          job.info["pipeline"], "fingerprint %s" % st["job"])

    # ---- elastic resume ----------------------------------------------------
    order = {e: torch.cat([ids for _, _, ids in ref[e]]).tolist()
             for e in range(E)}
    pixels = {e: {int(i): x[s] for x, _, ids in ref[e]
                  for s, i in enumerate(ids)} for e in range(E)}

    def ranks(W, state=None, stop=None):
        """Every rank of W from state, to the end of that epoch (or stop
        batches): ([batches of rank r], the state after, len() before)."""
        outs, states, lens = [], [], []
        for r in range(W):
            L = ft.Loader(job, epochs=E, rank=r, world=W, ids=True,
                          device=None)
            if state is not None:
                L.load_state_dict(json.loads(json.dumps(state)))
            lens.append(len(L))
            out = []
            for bt in L:
                out.append(clone(bt))
                if stop is not None and len(out) == stop:
                    break
            outs.append(out)
            states.append(L.state_dict())
        check(all(s == states[0] for s in states), "ranks' states differ: %s"
              % states)
        return outs, states[0], lens

    def check_deal(e, served, outs, W, lens, what):
        """outs (W ranks) deal order[e][served:] as DistributedSampler."""
        rest = order[e][served:]
        per = -(-len(rest) // W)
        padded = rest + rest[:per * W - len(rest)]
        counts = {len(o) for o in outs}
        check(len(counts) == 1 and set(lens) == counts, "%s: batch counts "
              "%s, len() %s" % (what, [len(o) for o in outs], lens))
        for r, out in enumerate(outs):
            ids = [int(i) for _, _, b in out for i in b]
            check(ids == padded[r::W], "%s: rank %d serves %s, not %s"
                  % (what, r, ids, padded[r::W]))
            for x, y, b in out:
                for s, i in enumerate(b.tolist()):
                    check(torch.equal(x[s], pixels[e][i]),
                          "%s: sample %d's pixels differ" % (what, i))
        return per * W - len(rest)

    for W0, W1, k in ((4, 2, 1), (2, 3, 3), (2, 3, 1), (3, 4, 2)):
        for e in (0, 1):
            st0 = {"index": e, "epoch": e, "batch": 0}
            head, st, _ = ranks(W0, st0, stop=k)
            served = k * B * W0
            check(st["batch"] == k and st["world"] == W0, "state %s" % st)
            done = [int(i) for o in head for _, _, b in o for i in b]
            check(sorted(done) == sorted(order[e][:served]),
                  "%d ranks' first %d batches are not the first %d places"
                  % (W0, k, served))
            tail, end, lens = ranks(W1, st)
            pad = check_deal(e, served, tail, W1, lens,
                             "%d -> %d after %d" % (W0, W1, k))
            allids = done + [int(i) for o in tail for _, _, b in o
                             for i in b]
            check(sorted(set(allids)) == list(range(N)) and
                  len(allids) == N + pad, "%d -> %d: every sample once "
                  "(%d padded): %d served" % (W0, W1, pad, len(allids)))
            check(end["index"] == e + 1 and end["batch"] == 0 and
                  end["start"] == 0, "the end of the elastic epoch: %s" % end)
            again, _, _ = ranks(W1, st)
            check(all(same(a, b) for o1, o2 in zip(tail, again)
                      for a, b in zip(o1, o2)), "%d -> %d: not reproducible"
                  % (W0, W1))
        log("elastic %d -> %d after %d batches: equal batch counts, the rest "
            "dealt as DistributedSampler (%d padded), pixels equal, "
            "reproducible" % (W0, W1, k, pad))
    # 4 -> 2 -> 3, and a mid-deal state resumed at the same world
    head, st4, _ = ranks(4, {"index": 1, "epoch": 1, "batch": 0}, stop=1)
    mid, st2, _ = ranks(2, st4, stop=1)
    check(st2["start"] == 16 and st2["batch"] == 1 and st2["world"] == 2,
          "state of the deal at 2: %s" % st2)
    same2, _, lens2 = ranks(2, st2)
    full2, _, _ = ranks(2, st4)
    check(all(len(f) == 1 + len(s) and all(same(a, b) for a, b in
                                           zip(f[1:], s))
              for f, s in zip(full2, same2)), "the deal at 2, resumed at 2, "
          "differs")
    tail, _, lens = ranks(3, st2)
    check_deal(1, 16 + B * 2, tail, 3, lens, "4 -> 2 -> 3")
    allids = [int(i) for part in (head, mid, tail) for o in part
              for _, _, b in o for i in b]
    check(sorted(allids) == list(range(N)), "4 -> 2 -> 3: %s" % allids)
    log("4 -> 2 -> 3: each sample exactly once; resumed at 2 mid-deal "
        "equals the deal's run")
    # drop_last: the rest is cut to whole batches of every rank, no sample
    # twice, each from a batch the mount serves.
    dl = feedfs.Job(m.p("dl"))
    dref = [(x, ids) for x, _, ids in dl.epoch(0, ids=True, copy=True)]
    dpix = {int(i): x[s] for x, ids in dref for s, i in enumerate(ids)}
    dorder = np.concatenate([ids for _, ids in dref]).tolist()
    Ls = [ft.Loader(dl, rank=r, world=2, ids=True, device=None)
          for r in range(2)]
    done = []
    for L in Ls:
        for k, (x, y, ids) in enumerate(L):
            done += ids.tolist()
            if k == 1:
                break
    st = Ls[0].state_dict()
    m3 = N - 2 * B * 2
    per = (m3 // 3) // B * B
    outs = []
    for r in range(3):
        L = ft.Loader(dl, rank=r, world=3, ids=True, device=None)
        L.load_state_dict(st)
        out = [(x.clone(), ids.clone()) for x, _, ids in L]
        check(all(len(i) == B for _, i in out) and len(out) == per // B,
              "drop_last 2 -> 3: rank %d has %s" % (r, [len(i) for _, i
                                                        in out]))
        ids = [int(i) for _, b in out for i in b]
        p0 = 2 * B * 2  # the first two batches of both ranks of 2
        want = [dorder[p0 + (r + 3 * k) % m3] for k in range(per)]
        check(ids == want, "drop_last 2 -> 3: rank %d serves %s, not %s"
              % (r, ids, want))
        for x, b in out:
            for s, i in enumerate(b.tolist()):
                check(np.array_equal(x[s].numpy(), dpix[i]),
                      "drop_last: sample %d's pixels" % i)
        outs.append(ids)
    allids = done + [i for o in outs for i in o]
    check(len(set(allids)) == len(allids), "drop_last 2 -> 3: a sample "
          "twice: %s" % sorted(allids))
    log("drop_last 2 -> 3: whole batches, %d of the %d left, none twice"
        % (3 * per, m3))
    rel = feedfs.Job(m.p("relaxed"))
    rst = ft.Loader(rel, rank=0, world=2, device=None).state_dict()
    rst["batch"] = 1
    try:
        ft.Loader(rel, rank=0, world=3, device=None).load_state_dict(rst)
        fflib.fail("elastic resume of a relaxed job")
    except ValueError as e:
        check("relaxed" in str(e), "relaxed: %s" % e)

    # ---- explicit sharding -------------------------------------------------
    os.environ.update(RANK="1", WORLD_SIZE="5")  # a view not read yet
    try:
        records.clear()
        ep = job.epoch(0)
        check(ep.world == 1 and ep.dir == m.p("train", "epoch-0000") and
              len(ep) == nb, "RANK/WORLD_SIZE set: Job.epoch reads %s"
              % ep.dir)
        check(any(lv == logging.WARNING and "whole epoch" in msg and
                  "rank 1 of 5" in msg for lv, msg in records),
              "no warning: %s" % records)
        L = ft.Loader(job, epochs=1, device=None)
        check((L.rank, L.world) == (0, 1) and len(L) == nb,
              "RANK/WORLD_SIZE set: Loader reads %d of %d" % (L.rank,
                                                              L.world))
        n_before = len(records)
        job.epoch(1)
        check(len(records) == n_before, "the view logged twice: %s"
              % records)
        ep = job.epoch(0, world="auto")
        check((ep.rank, ep.world) == (1, 5) and ep.dir == m.p(
            "train", "rank-1-of-5", "epoch-0000"), "world='auto': %s"
            % ep.dir)
        check(any(lv == logging.INFO and "rank-1-of-5" in msg
                  for lv, msg in records), "no log of the view: %s" % records)
        L = ft.Loader(job, epochs=1, rank="auto", world="auto", device=None)
        check((L.rank, L.world) == (1, 5), "Loader auto: %d %d"
              % (L.rank, L.world))
    finally:
        del os.environ["RANK"], os.environ["WORLD_SIZE"]
    for bad in (dict(rank=1), dict(world=2)):
        try:
            job.epoch(0, **bad)
            fflib.fail("%s accepted" % bad)
        except ValueError:
            pass
    log("RANK/WORLD_SIZE set: the whole epoch unless world='auto' (a "
        "warning says so); the view is logged once")

    # ---- the device (issue 36): CUDA where torch has it, else the host ---
    has_cuda = torch.cuda.is_available()
    L = ft.Loader(job, epochs=[1], ids=True)
    got = [clone(bt) for bt in L]
    if has_cuda:
        check(L.device.type == "cuda" and got[0][0].is_cuda,
              "the default with CUDA: %s" % L.device)
        got = [tuple(v.cpu() for v in bt) for bt in got]
    else:
        check(L.device is None and not L.pin_memory and
              got[0][0].device.type == "cpu",
              "the default without CUDA: %s" % L.device)
    check(len(got) == nb and all(same(g, w) for g, w in zip(got, ref[1])),
          "the default device's epoch is not epoch 1")
    saved = torch.cuda.is_available
    try:  # what "auto" chooses where torch says it has CUDA
        torch.cuda.is_available = lambda: True
        check(ft.Loader(job, epochs=1).device.type == "cuda",
              "the default with CUDA is not CUDA")
        torch.cuda.is_available = lambda: False
        check(ft.Loader(job, epochs=1).device is None,
              "the default without CUDA is not the host")
    finally:
        torch.cuda.is_available = saved
    L = ft.Loader(job, epochs=[1], device="cpu")
    check(all(same(clone(g), w) for g, w in zip(L, ref[1])), "device='cpu'")
    if not has_cuda:
        # Asked for explicitly: refused at once, in feedfs's words (it
        # used to build, then fail at the first batch with torch's
        # "Pinned memory requires CUDA").
        for bad in (dict(device="cuda"), dict(device="cuda:0"),
                    dict(pin_memory=True)):
            try:
                ft.Loader(job, epochs=1, **bad)
                fflib.fail("Loader(%s) built without CUDA" % bad)
            except RuntimeError as ex:
                check("feedfs.torch.Loader" in str(ex) and "needs CUDA" in
                      str(ex) and "torch.cuda.is_available() is False" in
                      str(ex), "Loader(%s): %s" % (bad, ex))
                if bad == dict(device="cuda"):
                    log("device='cuda' without CUDA: %s" % ex)
    log("device: CUDA where torch has it (%s here), else the host; "
        "cuda asked for without it refused at construction" % has_cuda)
sys.exit(0)
