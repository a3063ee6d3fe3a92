#!/usr/bin/python3
"""A training loop with feedfs.Job alone: NumPy arrays in, no torch.

  examples/numpy_loop.py MOUNT [--job train] [--epochs 1] [--start E:B]

Softmax regression on the flattened images, by plain gradient descent in
NumPy: the shape of a JAX (or any array library's) loop.  Each batch
arrives as (images, labels) numpy arrays; images is a view of one of two
buffers that the epoch reuses, valid until the batch after next is read,
so a JAX loop hands it to the device at once:

    images = jax.device_put(images)       # copies; the buffer may go on

and keeps nothing of it past the next step.  --start E:B resumes at epoch
E, batch B: a batch's bytes depend only on (job, epoch, batch), so the
rest of the run is what it would have been.  RANK and WORLD_SIZE in the
environment make it read a rank's shard (JOB/rank-R-of-W/): it asks for
them with world="auto" (Job.epoch reads the whole epoch by default).
A job with a batch op (mixup, cutmix) gives soft labels, float32
(B, classes) probabilities: the loss is the cross-entropy against them,
and class indices are their one-hot rows.
"""
import argparse
import os
import sys
import time

import numpy as np

try:
    import feedfs
except ImportError:  # run from the source tree, not installed
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "python"))
    import feedfs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mount")
    ap.add_argument("--job", default="train")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--start", default="0:0", help="E:B, where to begin")
    ap.add_argument("--lr", type=float, default=0.01)
    a = ap.parse_args()

    job = feedfs.Job(os.path.join(a.mount, a.job))
    dim = int(np.prod(job.shape[1:]))
    k = len(job.classes)
    rng = np.random.default_rng(0)
    W = (rng.standard_normal((dim, k)) * 0.01).astype(np.float32)
    bias = np.zeros(k, np.float32)
    e0, b0 = (int(v) for v in a.start.split(":"))
    t0, seen = time.perf_counter(), 0
    for epoch in range(e0, a.epochs):
        batches = job.epoch(epoch, start=b0 if epoch == e0 else 0,
                            world="auto")
        loss_sum = 0.0
        for images, labels in batches:
            x = images.reshape(len(images), -1)
            if x.dtype == np.uint8:
                x = x.astype(np.float32) / 255.0
            z = x @ W + bias
            z -= z.max(axis=1, keepdims=True)
            p = np.exp(z)
            p /= p.sum(axis=1, keepdims=True)
            n = len(labels)
            if labels.ndim == 1:  # class indices: one-hot targets
                target = np.zeros((n, k), np.float32)
                target[np.arange(n), labels] = 1.0
            else:  # a mixup/cutmix job's soft labels
                target = labels
            loss_sum += float(-(target * np.log(p + 1e-12)).sum(1).mean())
            p -= target  # d(loss)/dz, times n
            W -= a.lr * (x.T @ p) / n
            bias -= a.lr * p.mean(axis=0)
            seen += n
        print("epoch %d: %d batches, mean loss %.4f (%.0f images/s)"
              % (epoch, len(batches), loss_sum / max(1, len(batches)),
                 seen / (time.perf_counter() - t0)))


if __name__ == "__main__":
    main()
