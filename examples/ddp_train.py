#!/usr/bin/python3
"""Data-parallel training from a feedfs mount: one process per device,
DistributedDataParallel, started by torchrun.

  torchrun --nproc_per_node=2 examples/ddp_train.py MOUNT [--job train]
           [--epochs 1] [--steps N] [--checkpoint FILE]

Each process's feedfs.torch.Loader reads its own rank view,
MOUNT/JOB/rank-R-of-W/ (the process group's rank and world, passed
explicitly: a Loader given none reads the whole epoch): the views cover
each epoch as DistributedSampler does and every rank has the same number
of batches, so no rank waits in an allreduce for a rank that ran out.  An
iteration of the Loader is one epoch; set_epoch() picks it, as
DistributedSampler's does.  No worker process.  gloo on CPUs, nccl with
one GPU per process.  --checkpoint: rank 0 saves the model, the optimizer
and the Loader's position (the same on every rank); a restart resumes at
the next batch on every rank, with as many processes or another number
(elastic: the rest of the epoch is dealt to the new ranks).

Debian 12's torchrun (torch 1.13 under Python 3.11) stops at once with
"AttributeError: 'NoneType' object has no attribute 'get'" when its
--redirects and --tee are left at 0; give both a stream, which keeps
stdout and stderr on the terminal:

  torchrun --redirects 1 --tee 1 --nproc_per_node=2 examples/ddp_train.py ...
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_train import SmallNet, feedfs, loader_for  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mount")
    ap.add_argument("--job", default="train")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0,
                    help="stop after N steps (0: whole epochs)")
    ap.add_argument("--checkpoint", help="save and resume here")
    a = ap.parse_args()

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if cuda:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")

    job = feedfs.Job(os.path.join(a.mount, a.job))
    model = SmallNet(job.shape[1], len(job.classes)).to(device)
    model = DDP(model, device_ids=[device.index] if cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.05 * world, momentum=0.9)
    loader = loader_for(job, a.epochs, device, rank, world)  # rank-R-of-W/
    first = 0
    if a.checkpoint and os.path.exists(a.checkpoint):
        ck = torch.load(a.checkpoint, map_location=device)
        model.module.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        loader.load_state_dict(ck["loader"])  # saved at any world size
        first = loader.state_dict()["epoch"] or 0

    def save():
        if a.checkpoint and rank == 0:
            torch.save({"model": model.module.state_dict(),
                        "opt": opt.state_dict(),
                        "loader": loader.state_dict()}, a.checkpoint)

    step = total = 0
    for epoch in range(first, a.epochs):
        loader.set_epoch(epoch)
        total += len(loader)
        for x, y in loader:  # y: indices, or a mixup job's soft labels
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()  # the gradients' allreduce: every rank alike
            opt.step()
            step += 1
            if rank == 0:
                print("epoch %d batch %d loss %.4f"
                      % (loader.epoch, loader.batch, loss.item()),
                      flush=True)
            if step % 50 == 0:
                save()
            if a.steps and step >= a.steps:
                break
        if a.steps and step >= a.steps:
            break
    save()
    print("rank %d of %d: %d steps of %d batches (rank-%d-of-%d)"
          % (rank, world, step, total, rank, world), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
