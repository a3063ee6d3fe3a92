#!/usr/bin/python3
"""Train a small CNN from a feedfs mount with feedfs.torch.Loader: a plain
PyTorch loop whose input is the batch files, with no DataLoader workers
and no decoding in Python.

  examples/pytorch_train.py MOUNT [--job train] [--epochs 1] [--steps N]
                           [--checkpoint FILE]

The job's info.json gives the shape and the class count.  The loop is
DataLoader's: an iteration of the Loader is one epoch (set_epoch() picks
it, as DistributedSampler's does).  The Loader reads
epoch-NNNN/batch-NNNNNN.npy (decoded, cropped, flipped, normalized by the
mount) and .labels.npy, batch b+1 in a background thread while the model
trains on batch b, into pinned memory when there is a GPU, and copies each
batch there asynchronously.  A uint8 job is normalized on the device.
With --checkpoint the model, the optimizer and the Loader's position are
saved every 50 steps and at the end; run it again and it resumes at the
batch after the last one saved, in the middle of an epoch if that is
where it was.  For several processes, see ddp_train.py.

A job whose pipeline ends in a batch op (mixup(0.2), cutmix(1.0),
mixup_cutmix(0.2, 1.0, 0.5): torchvision's recipe) gives soft labels,
float32 (B, classes) probabilities, instead of class indices:
F.cross_entropy takes either (with probabilities it is the cross-entropy
against them), so the loop is the same; job.soft_labels says which.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import feedfs
except ImportError:  # run from the source tree, not installed
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "python"))
    import feedfs
import feedfs.torch


class SmallNet(nn.Module):
    def __init__(self, channels, classes):
        super().__init__()
        self.c1 = nn.Conv2d(channels, 32, 3, stride=2, padding=1)
        self.c2 = nn.Conv2d(32, 64, 3, stride=2, padding=1)
        self.c3 = nn.Conv2d(64, 128, 3, stride=2, padding=1)
        self.fc = nn.Linear(128, classes)

    def forward(self, x):
        x = F.relu(self.c1(x))
        x = F.relu(self.c2(x))
        x = F.relu(self.c3(x))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def loader_for(job, epochs, device, rank=0, world=1):
    """The job's Loader (rank view rank of world); a CHW job is wanted (the
    net's layout), uint8 normalized on the device, anything else as the
    mount made it."""
    if job.layout != "CHW":
        raise SystemExit("this example wants a CHW job; %s is %s"
                         % (job.name, job.layout))
    return feedfs.torch.Loader(job, epochs=epochs, device=device,
                               rank=rank, world=world,
                               normalize=job.dtype == "uint8")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mount")
    ap.add_argument("--job", default="train")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0,
                    help="stop after N steps (0: whole epochs)")
    ap.add_argument("--checkpoint", help="save and resume here")
    a = ap.parse_args()

    job = feedfs.Job(os.path.join(a.mount, a.job))
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = SmallNet(job.shape[1], len(job.classes)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loader = loader_for(job, a.epochs, device)
    first = 0
    if a.checkpoint and os.path.exists(a.checkpoint):
        ck = torch.load(a.checkpoint)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        loader.load_state_dict(ck["loader"])  # exactly where it stopped
        st = loader.state_dict()  # in this run's epochs
        if st["epoch"] is None:
            print("the checkpoint is at the end of the epochs: starting over")
        else:
            print("resuming at epoch %(epoch)d batch %(batch)d" % st)
            first = st["epoch"]

    def save():
        if a.checkpoint:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                        "loader": loader.state_dict()}, a.checkpoint)

    step, t0, seen = 0, time.perf_counter(), 0
    for epoch in range(first, a.epochs):
        loader.set_epoch(epoch)  # a resumed epoch goes on where it was
        for x, y in loader:  # this epoch's batches: len(loader) of them
            # y: class indices (B,), or soft labels (B, classes) of a
            # mixup/cutmix job; cross_entropy takes both
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            seen += x.shape[0]
            print("epoch %d batch %d step %d loss %.4f (%.0f images/s)"
                  % (loader.epoch, loader.batch, step, loss.item(),
                     seen / (time.perf_counter() - t0)))
            if step % 50 == 0:
                save()
            if a.steps and step >= a.steps:
                break
        if a.steps and step >= a.steps:
            break
    save()


if __name__ == "__main__":
    main()
