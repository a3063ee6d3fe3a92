#!/usr/bin/python3
"""test_python_ddp.py - feedfs.torch.Loader under torchrun (issue 19): two
processes (gloo, on the CPU) with a DistributedDataParallel model,
through the package in the source tree:

- each process's Loader takes its rank and world from the process group
  (world="auto": only when asked, issue 26);
  the two have the same batch count (an allreduce of the counts, and the
  DDP backward of every step, which would fail on a rank that ran out);
- together they cover each epoch exactly once (N is even: no padding),
  and each rank's batches equal Job.epoch(rank, world)'s, byte for byte;
- a run stopped after k steps and resumed from the Loader's state_dict()
  in new processes gives each rank exactly the rest of its batches;
- elastic resume (issue 26): a checkpoint of four ranks (rank views in
  this process) mid-epoch resumes in the two processes, and one of the two
  processes in three rank views here: every sample of the epoch exactly
  once across the change, equal batch counts, the same batches as the
  same resume in this process;
- examples/ddp_train.py runs to its end under torchrun.
"""

import json
import os
import subprocess
import sys
import uuid

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, free_port, log  # noqa: E402

PYDIR = os.path.join(fflib.SRCDIR, "python")
sys.path.insert(0, PYDIR)
try:
    import numpy  # noqa: F401 (feedfs needs it)
    import torch.distributed as dist
except ImportError as e:
    fflib.skip("numpy/torch not importable: %s" % e)
if not dist.is_available() or not dist.is_gloo_available():
    fflib.skip("torch.distributed with gloo is not available")
import feedfs  # noqa: E402

N, B, W = 46, 8, 2  # 23 per rank: batches of 8, 8, 7
WORKER = r'''
import datetime, json, os, sys
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
import feedfs, feedfs.torch

job_dir, out, resume = sys.argv[1], sys.argv[2], sys.argv[3]
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
job = feedfs.Job(job_dir)
torch.manual_seed(0)
model = DDP(torch.nn.Linear(3 * 64 * 64, len(job.classes)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def run(loader, stop=0, epochs=None):
    """Train on loader's batches (up to stop), an epoch per iteration to
    the end of its epochs (or epochs iterations); what each was, the batch
    counts of every rank, the state after."""
    assert (loader.rank, loader.world) == (rank, world), (loader.rank, rank)
    seen = []
    n = 0
    while loader.state_dict()["epoch"] is not None and not (
            stop and len(seen) == stop) and (epochs is None or n < epochs):
        n += 1
        for x, y, ids in loader:
            loss = torch.nn.functional.cross_entropy(model(x.flatten(1)), y)
            opt.zero_grad()
            loss.backward()  # an allreduce: both ranks must take this step
            opt.step()
            seen.append([loader.epoch, loader.batch, ids.tolist(),
                         x.numpy().tobytes().hex()[:64], float(x.sum())])
            if stop and len(seen) == stop:
                break
    allc = [torch.zeros(1, dtype=torch.long) for _ in range(world)]
    dist.all_gather(allc, torch.tensor([len(seen)]))
    return {"seen": seen, "counts": [int(c) for c in allc],
            "len": len(loader), "state": loader.state_dict()}


def loader():
    return feedfs.torch.Loader(job, epochs=range(2), ids=True, world="auto",
                               device=None)


res = {"rank": rank, "world": world}
if resume == "-":
    # uninterrupted, then a run stopped after 4 steps
    res["full"] = run(loader())
    res["head"] = run(loader(), 4)
elif resume.endswith("elastic.json"):
    # a checkpoint of another world size: the rest of its epoch
    with open(resume) as f:
        state = json.load(f)
    L = loader()
    L.load_state_dict(state)
    res["tail"] = run(L, epochs=1)
else:
    # new processes: resumed from the state the stopped run saved
    with open(resume) as f:
        state = json.load(f)["rank%d" % rank]["head"]["state"]
    L = loader()
    L.load_state_dict(state)
    res["tail"] = run(L)
with open(out % rank, "w") as f:
    json.dump(res, f)
dist.destroy_process_group()
'''

t = fflib.Test()
data = t.gen(t.path("data"), n=N, classes=3, seed=8)
cfg = t.config(t.path("feedfs.conf"), data, {
    "train": dict(epochs=2, seed=21)}, threads=2)
worker = t.path("worker.py")
with open(worker, "w") as f:
    f.write(WORKER)
env = dict(os.environ, PYTHONPATH=PYDIR, OMP_NUM_THREADS="1")
for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
    env.pop(k, None)


runs = [0]


def torchrun(script, *args):
    """torchrun's output.  Debian's torch 1.13 under Python 3.11 fails with
    its default --redirects 0 --tee 0 (Std.from_str("0") is None there:
    IntFlag no longer iterates its zero member), so stdout is tee'd: both
    streams still come here.  Its logs go in the test's directory.  The
    rendezvous is on a port picked here: --standalone's is always 29400,
    which another torchrun on the machine may hold (then the agent fails
    with "The connection to the C10d store has failed")."""
    runs[0] += 1
    logs = t.path("torchrun-%d" % runs[0])
    cmd = [fflib.PY, "-m", "torch.distributed.run", "--rdzv_backend=c10d",
           "--rdzv_endpoint=127.0.0.1:%d" % free_port(),
           "--rdzv_id=%s" % uuid.uuid4(),
           "--nnodes=1", "--nproc_per_node=%d" % W, "--redirects", "1",
           "--tee", "1", "--log_dir", logs, script] + list(args)
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=240)
    out = r.stdout.decode(errors="replace")
    if r.returncode != 0:
        print(out)
        for root, _, files in os.walk(logs):
            for name in files:
                with open(os.path.join(root, name), errors="replace") as f:
                    print("---- %s\n%s" % (os.path.join(root, name), f.read()))
        fflib.fail("%s exited with %d" % (" ".join(cmd), r.returncode))
    return out


def pos(st):
    return {k: st[k] for k in ("index", "epoch", "batch")}


def results(tag):
    res = []
    for r in range(W):
        with open(t.path("%s-%d.json" % (tag, r))) as f:
            res.append(json.load(f))
    return res


with fflib.Mount(t, cfg, t.path("mnt")) as m:
    job = feedfs.Job(m.p("train"))
    nb = job.nbatches(W)
    check(nb == 3, "nbatches(2) = %d" % nb)
    # The reference: each rank's view through Job.epoch in this process.
    want = {}
    for r in range(W):
        want[r] = []
        for e in range(2):
            for b, (x, y, ids) in enumerate(job.epoch(e, rank=r, world=W,
                                                      ids=True)):
                want[r].append([e, b, ids.tolist(),
                                x.tobytes().hex()[:64], float(x.sum())])

    torchrun(worker, m.p("train"), t.path("one-%d.json"), "-")
    one = results("one")
    for r, res in enumerate(one):
        check(res["rank"] == r and res["world"] == W, "rank %s" % res)
        full = res["full"]
        check(full["counts"] == [2 * nb] * W and full["len"] == nb,
              "rank %d: batch counts %s, len %d" % (r, full["counts"],
                                                     full["len"]))
        check(len(full["seen"]) == len(want[r]), "rank %d: %d batches"
              % (r, len(full["seen"])))
        for got, w in zip(full["seen"], want[r]):
            check(got[:4] == w[:4] and abs(got[4] - w[4]) <= 1e-3 *
                  max(1.0, abs(w[4])), "rank %d: epoch %d batch %d differs "
                  "from Job.epoch(rank=%d, world=%d)" % (r, w[0], w[1], r, W))
        check(pos(full["state"]) == {"index": 2, "epoch": None,
                                     "batch": 0},
              "state %s" % full["state"])
    for e in range(2):
        ids = sorted(i for res in one for s in res["full"]["seen"]
                     if s[0] == e for i in s[2])
        check(ids == list(range(N)), "epoch %d: the ranks do not cover the "
              "samples exactly once: %s" % (e, ids))
    log("two torchrun processes (gloo, DDP): equal batch counts (%d), "
        "each epoch covered exactly once, batches equal Job.epoch's" % nb)

    # Stopped after 4 steps (epoch 1, batch 1 next), resumed in new ones.
    states = {"rank%d" % r: one[r] for r in range(W)}
    check(all(pos(s["head"]["state"]) == {"index": 1, "epoch": 1,
                                          "batch": 1}
              for s in states.values()), "states after 4 steps: %s"
          % [s["head"]["state"] for s in states.values()])
    with open(t.path("state.json"), "w") as f:
        json.dump(states, f)
    torchrun(worker, m.p("train"), t.path("two-%d.json"),
             t.path("state.json"))
    two = results("two")
    for r in range(W):
        check(one[r]["head"]["seen"] + two[r]["tail"]["seen"] ==
              one[r]["full"]["seen"], "rank %d: stopped after 4 and "
              "resumed differs from the uninterrupted run" % r)
        check(two[r]["tail"]["counts"] == [2 * nb - 4] * W,
              "resumed counts %s" % two[r]["tail"]["counts"])
    log("stopped after 4 steps and resumed from state_dict() in new "
        "processes: the same batches as the uninterrupted run, per rank")

    # Elastic resume, 4 -> 2: four rank views here stop after one batch of
    # epoch 1 (batch 0 of each rank: places 0..31 of its order); the two
    # processes deal the other 14 samples, 7 each.
    import feedfs.torch as ft  # noqa: E402

    def ranks(world, state, stop=None, epochs=1):
        """Rank views of world here from state: ids of each batch, and
        the state after (every rank's the same)."""
        outs, st = [], None
        for r in range(world):
            L = ft.Loader(job, epochs=range(2), rank=r, world=world,
                          ids=True, device=None)
            L.load_state_dict(json.loads(json.dumps(state)))
            out = []
            for x, y, ids in L:
                out.append([L.epoch, L.batch, ids.tolist(),
                            x.numpy().tobytes().hex()[:64]])
                if stop and len(out) == stop:
                    break
            outs.append(out)
            check(st is None or st == L.state_dict(), "states differ")
            st = L.state_dict()
        return outs, st

    head4, st4 = ranks(4, {"index": 1, "epoch": 1, "batch": 0}, stop=1)
    check(st4["world"] == 4 and st4["batch"] == 1, "state at 4: %s" % st4)
    with open(t.path("elastic.json"), "w") as f:
        json.dump(st4, f)
    torchrun(worker, m.p("train"), t.path("el-%d.json"),
             t.path("elastic.json"))
    el = results("el")
    here, _ = ranks(W, st4)
    counts = [len(r["tail"]["seen"]) for r in el]
    check(counts[0] == 1 and all(r["tail"]["counts"] == [counts[0]] * W
                                 for r in el),
          "4 -> 2: batch counts %s" % [r["tail"]["counts"] for r in el])
    for r in range(W):
        got = [s[:4] for s in el[r]["tail"]["seen"]]
        check(got == here[r], "4 -> 2: rank %d under torchrun differs from "
              "the same resume here" % r)
    ids = sorted(i for o in head4 for s in o for i in s[2]) + sorted(
        i for r in el for s in r["tail"]["seen"] for i in s[2])
    check(sorted(ids) == list(range(N)), "4 -> 2: epoch 1 not served "
          "exactly once: %s" % sorted(ids))
    log("elastic 4 -> 2 (rank views here, then two torchrun processes): "
        "each sample of epoch 1 once, equal batch counts, the same batches "
        "as here")

    # 2 -> 3: the two processes' state after 4 steps (epoch 1, batch 1),
    # resumed by three rank views here.
    st2 = one[0]["head"]["state"]
    check(st2["world"] == 2, "state %s" % st2)
    tail3, end = ranks(3, st2)
    check(len({len(o) for o in tail3}) == 1, "2 -> 3: batch counts %s"
          % [len(o) for o in tail3])
    ids = [i for r in one for s in r["head"]["seen"] if s[0] == 1
           for i in s[2]] + [i for o in tail3 for s in o for i in s[2]]
    check(sorted(ids) == list(range(N)), "2 -> 3: epoch 1 not served "
          "exactly once: %s" % sorted(ids))
    check(pos(end) == {"index": 2, "epoch": None, "batch": 0},
          "2 -> 3: end %s" % end)
    log("elastic 2 -> 3 (two torchrun processes, then three rank views "
        "here): each sample of epoch 1 once, equal batch counts")

    out = torchrun(os.path.join(fflib.SRCDIR, "examples", "ddp_train.py"),
                   m.mnt, "--job", "train", "--epochs", "2")
    for r in range(W):
        check("rank %d of %d: %d steps of %d batches" % (r, W, 2 * nb,
                                                         2 * nb) in out,
              "examples/ddp_train.py: rank %d did not finish:\n%s" % (r, out))
    log("examples/ddp_train.py ran both epochs on both ranks")
sys.exit(0)
