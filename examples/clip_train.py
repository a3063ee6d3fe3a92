#!/usr/bin/python3
"""Train a tiny CLIP (two towers, a contrastive loss) on captioned shards
from a feedfs mount: the images come decoded and cropped from the batch
files, the captions from each batch's .text.jsonl, and both in the same
order, so row i of the images goes with caption i.

  examples/clip_train.py --make-shards DIR [--n 256]
  examples/clip_train.py MOUNT [--job clip] [--steps N] [--epochs 1]

--make-shards writes a generated set to try it on (needs PIL): WebDataset
shards DIR/shard-NNNNNN.tar of KEY.jpg (a colored shape on a background)
and KEY.txt (its caption: "a red circle on a gray background", ...).  A
config that serves them:

  [dataset toy]
  shards = DIR/*.tar
  label = none
  text = txt                   # KEY.txt is each image's caption

  [job clip]
  dataset = toy
  batch_size = 32
  epochs = 4
  pipeline = decode resize(40) cache random_resized_crop(32, 0.6, 1.0) \
             normalize(imagenet)

For a job with captions, feedfs.torch.Loader yields (images, labels,
text): text is the batch's captions, a list of str.  The text tower
here is the simplest there is: words lowercased and hashed into a fixed
vocabulary (a trivial tokenizer; a real run would use CLIP's BPE), an
EmbeddingBag of them, a linear projection.  The image tower is a small
CNN.  The loss is CLIP's: cross-entropy of the scaled cosine
similarities of the batch's image and text embeddings, both ways, the
matching pairs on the diagonal.
"""
import argparse
import io
import os
import random
import re
import sys
import tarfile
import time
import zlib

COLORS = {"red": (220, 30, 30), "green": (30, 180, 40),
          "blue": (30, 60, 220), "yellow": (230, 210, 30)}
SHAPES = ("square", "circle")
BACKS = {"white": (250, 250, 250), "gray": (120, 120, 120)}


def make_shards(out, n, per_shard=64, seed=0):
    """n generated images with their captions in shards under out."""
    from PIL import Image, ImageDraw
    os.makedirs(out, exist_ok=True)
    rnd = random.Random(seed)
    tf = None
    for k in range(n):
        if k % per_shard == 0:
            if tf is not None:
                tf.close()
            tf = tarfile.open(os.path.join(
                out, "shard-%06d.tar" % (k // per_shard)), "w")
        color, shape, back = (rnd.choice(sorted(COLORS)),
                              rnd.choice(SHAPES), rnd.choice(sorted(BACKS)))
        im = Image.new("RGB", (48, 48), BACKS[back])
        d = ImageDraw.Draw(im)
        x, y, r = rnd.randint(14, 34), rnd.randint(14, 34), rnd.randint(8, 13)
        box = (x - r, y - r, x + r, y + r)
        (d.rectangle if shape == "square" else d.ellipse)(box,
                                                          fill=COLORS[color])
        jpg = io.BytesIO()
        im.save(jpg, "JPEG", quality=90)
        caption = "a %s %s on a %s background" % (color, shape, back)
        for ext, data in (("jpg", jpg.getvalue()), ("txt", caption.encode())):
            ti = tarfile.TarInfo("%06d.%s" % (k, ext))
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    if tf is not None:
        tf.close()


VOCAB = 4096


def tokenize(captions):
    """A trivial tokenizer: lowercase words hashed into VOCAB buckets;
    (flat token ids, offsets) for nn.EmbeddingBag."""
    ids, offsets = [], []
    for c in captions:
        offsets.append(len(ids))
        words = re.findall(r"\w+", c.lower()) or [""]
        ids += [zlib.crc32(w.encode()) % VOCAB for w in words]
    return ids, offsets


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mount", nargs="?")
    ap.add_argument("--make-shards", metavar="DIR")
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--job", default="clip")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0,
                    help="stop after N steps (0: whole epochs)")
    a = ap.parse_args()
    if a.make_shards:
        make_shards(a.make_shards, a.n)
        print("wrote %d captioned images to %s" % (a.n, a.make_shards))
        return
    if not a.mount:
        ap.error("a mount (or --make-shards DIR)")

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

    class ImageTower(nn.Module):
        def __init__(self, channels, dim):
            super().__init__()
            self.c1 = nn.Conv2d(channels, 32, 3, stride=2, padding=1)
            self.c2 = nn.Conv2d(32, 64, 3, stride=2, padding=1)
            self.fc = nn.Linear(64, dim)

        def forward(self, x):
            x = F.relu(self.c2(F.relu(self.c1(x))))
            return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))

    class TextTower(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.emb = nn.EmbeddingBag(VOCAB, 64, mode="mean")
            self.fc = nn.Linear(64, dim)

        def forward(self, ids, offsets):
            return self.fc(self.emb(ids, offsets))

    torch.manual_seed(0)
    job = feedfs.Job(os.path.join(a.mount, a.job))
    if not job.text:
        raise SystemExit("job %s has no captions (its dataset needs "
                         "text = txt or text = json:KEY)" % job.name)
    if job.layout != "CHW":
        raise SystemExit("this example wants a CHW job")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    img, txt = ImageTower(job.shape[1], 32).to(device), \
        TextTower(32).to(device)
    scale = nn.Parameter(torch.tensor(2.659, device=device))  # log(1/0.07)
    opt = torch.optim.Adam(list(img.parameters()) + list(txt.parameters()) +
                           [scale], lr=3e-3)
    loader = feedfs.torch.Loader(job, epochs=a.epochs, device=device,
                                 normalize=job.dtype == "uint8")
    step, t0 = 0, time.perf_counter()
    for epoch in range(a.epochs):
        loader.set_epoch(epoch)
        for x, _, captions in loader:  # row i of x goes with captions[i]
            ids, offsets = tokenize(captions)
            zi = F.normalize(img(x), dim=1)
            zt = F.normalize(txt(torch.tensor(ids, device=device),
                                 torch.tensor(offsets, device=device)),
                             dim=1)
            logits = scale.exp().clamp(max=100) * zi @ zt.t()
            target = torch.arange(len(captions), device=device)
            loss = (F.cross_entropy(logits, target) +
                    F.cross_entropy(logits.t(), target)) / 2
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            print("epoch %d batch %d step %d loss %.4f (%d pairs, %.0f/s)"
                  % (loader.epoch, loader.batch, step, loss.item(),
                     len(captions), step * len(captions) /
                     (time.perf_counter() - t0)), flush=True)
            if a.steps and step >= a.steps:
                return


if __name__ == "__main__":
    main()
