#!/usr/bin/python3
"""test_clip_example.py - examples/clip_train.py, a tiny CLIP, runs on a
mount (issue 39), briefly, as the other examples run in their tests.

The example's --make-shards writes 192 generated images with their
captions ("a red circle on a gray background") in WebDataset shards; a
mount serves them with text = txt; the example trains its two towers for
12 steps over two epochs, reading (images, labels, text) from
feedfs.torch.Loader, and each step's loss is finite.  Skipped without
torch or PIL.
"""

import math
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

for mod in ("torch", "PIL", "numpy"):
    try:
        __import__(mod)
    except ImportError:
        fflib.skip("%s is missing" % mod)

t = fflib.Test()
ex = os.path.join(fflib.SRCDIR, "examples", "clip_train.py")
env = dict(os.environ, PYTHONPATH=os.path.join(fflib.SRCDIR, "python"),
           PYTHONDONTWRITEBYTECODE="1")
r = subprocess.run([fflib.PY, ex, "--make-shards", t.path("toy"), "--n",
                    "192"], env=env, stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT)
check(r.returncode == 0, "--make-shards: %s" % r.stdout.decode())
cfg = t.path("clip.conf")
with open(cfg, "w") as f:
    f.write("\n".join([
        "[mount]", "cache_dir = %s" % t.path("cache"), "cache_size = 1G",
        "threads = 2", "memory = 128M", "",
        "[dataset toy]", "shards = %s/*.tar" % t.path("toy"),
        "label = none", "text = txt", "",
        "[job clip]", "dataset = toy", "batch_size = 32", "epochs = 2",
        "pipeline = decode resize(40) cache random_resized_crop(32, 0.6, "
        "1.0) normalize(imagenet)"]) + "\n")
with fflib.Mount(t, cfg, t.path("mnt")) as m:
    r = subprocess.run([fflib.PY, ex, m.mnt, "--job", "clip", "--epochs",
                        "2", "--steps", "12"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=600)
    out = r.stdout.decode()
    check(r.returncode == 0, "clip_train.py failed:\n%s" % out)
    losses = [float(x) for x in re.findall(r"step \d+ loss (\S+)", out)]
    check(len(losses) == 12 and all(math.isfinite(x) for x in losses),
          "clip_train.py: losses %s\n%s" % (losses, out))
    check("step 12 loss" in out and "(32 pairs" in out,
          "clip_train.py did not run 12 steps of 32 pairs:\n%s" % out)
    log("clip_train.py: 12 steps, loss %.3f then %.3f" % (losses[0],
                                                          losses[-1]))
