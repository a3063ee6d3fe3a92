#!/usr/bin/python3
"""Train a small ResNet from a feedfs mount: a plain PyTorch loop whose input
is the batch files, with no DataLoader workers and no decoding in Python.

  examples/pytorch_train.py MOUNT [--job train] [--epochs 1] [--steps N]
                           [--rank R --world W]

The job's info.json gives the shape and class count.  Each step reads
epoch-NNNN/batch-NNNNNN.npy (already decoded, cropped, flipped, normalized,
float32 CHW) and its .labels.npy.  While the model trains on batch b, feedfs
prepares b+1.. b+readahead in the background.  With --world W (one process
per GPU, as with DistributedDataParallel) rank R reads rank-R-of-W/.
"""
import argparse, json, os, time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_into(path, buf):
    """The batch at path, read into the front of tensor buf: one read into
    memory we keep, no new array (and no fresh page faults) per batch."""
    with open(path, "rb", buffering=0) as f:
        np.lib.format.read_magic(f)
        shape, _, _ = np.lib.format.read_array_header_1_0(f)
        out = buf[: shape[0]]
        mv = memoryview(out.numpy().reshape(-1).view(np.uint8))
        got = 0
        while got < len(mv):
            n = f.readinto(mv[got:])
            if not n:
                raise EOFError(path)
            got += n
    return out


def batches(mount, job, epoch, rank, world, bufs):
    """(images, labels) of each batch of the epoch; images are views of
    bufs, used in turn, valid until the batch after next is read."""
    base = os.path.join(mount, job)
    if world > 1:
        base = os.path.join(base, "rank-%d-of-%d" % (rank, world))
    d = os.path.join(base, "epoch-%04d" % epoch)
    b = 0
    while os.path.exists(os.path.join(d, "batch-%06d.npy" % b)):
        x = read_into(os.path.join(d, "batch-%06d.npy" % b), bufs[b % 2])
        y = torch.from_numpy(np.load(os.path.join(d, "batch-%06d.labels.npy" % b)))
        yield x, y
        b += 1


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mount")
    ap.add_argument("--job", default="train")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0, help="stop after N steps (0: whole epochs)")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world", type=int, default=1)
    a = ap.parse_args()

    info = json.load(open(os.path.join(a.mount, a.job, "info.json")))
    if info["dtype"] != "float32" or info["layout"] != "CHW":
        raise SystemExit("this example wants a float32 CHW job; %s is %s %s"
                         % (a.job, info["dtype"], info["layout"]))
    model = SmallNet(info["sample_shape"][0], info["num_classes"])
    # Two batch buffers, pinned where there is a GPU, reused all along.
    bufs = [torch.empty(info["shape"], dtype=torch.float32) for _ in range(2)]
    if torch.cuda.is_available():
        bufs = [b.pin_memory() for b in bufs]
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    step, t0, seen = 0, time.perf_counter(), 0
    for epoch in range(a.epochs):
        for x, y in batches(a.mount, a.job, epoch, a.rank, a.world, bufs):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            seen += x.shape[0]
            print("epoch %d step %d loss %.4f (%.0f images/s)"
                  % (epoch, step, loss.item(), seen / (time.perf_counter() - t0)))
            if a.steps and step >= a.steps:
                return


if __name__ == "__main__":
    main()
