#!/usr/bin/python3
"""test_batchmix.py - the batch ops mixup, cutmix and mixup_cutmix (issue
28), mounted, against a NumPy reference written here from torchvision
v2's documented algorithm (Debian's torchvision 0.14 has no v2):

- the reference draws each batch's lambda (Beta(a, a) as X / (X + Y) of
  two Marsaglia-Tsang Gamma draws) and CutMix's box from the counter-based
  generator (transforms/rng.h's SplitMix64, in Python integers), keyed by
  (seed, epoch, world, rank, batch) in the BTCHMIX1 domain; it mixes the
  batch with itself rolled by one (batch.roll(1, 0)) as v2 does;
- for each batch op, dtype (float32 CHW, float16 HWC, uint8 HWC with
  cutmix) and epoch, every batch of the mixed job equals the reference
  applied to the same batch of a job without the batch op (same seed: the
  batch op changes no per-sample draw).  Float rounding: float32 exactly
  (the same two products and one sum in float32, no fused multiply-add);
  float16 exactly as the float32 mix of the halves rounded once to half
  (torch rounding after each of its steps would be within 1 ulp of
  float16); cutmix copies, so exactly in every dtype.  Labels equal the
  reference's soft labels (float32 (B, num_classes)), ids the plain job's;
- each file's size at stat time (before any read) is its size, and the
  .npy headers say float32 (B, num_classes) for labels; info.json gives
  labels_dtype, labels_shape and num_classes; a plain job keeps int64;
- a rank view (rank 1 of 3) is mixed within its own batches (its key);
- a mixture (two datasets, 6 classes in their union) with mixup: its
  batches are the plain mixture's (ids, so the shares), mixed, with soft
  labels over the union's classes;
- order = relaxed: a batch's content is fixed when chosen; its images are
  the reference mix of the per-sample images of its ids (taken from the
  plain job's epoch), its labels the soft labels of its ids;
- on_error = substitute: the batch as delivered is mixed (a broken JPEG
  replaced by the next good sample, its id and label with it), equal to
  the reference mix of the plain substitute job's batch;
- the same bytes on every read, with threads = 1 and threads = 4, after a
  remount, and as feedfs-ref computes them in-process;
- feedfs.Job and feedfs.torch.Loader hand the soft labels over as
  float32 arrays and tensors; examples/numpy_loop.py and pytorch_train.py
  train on them (cross-entropy with probabilities);
- the lambdas of 4000 batches follow Beta(0.2, 0.2): a two-sample
  Kolmogorov-Smirnov test against numpy's Beta sampler (alpha 0.001).
"""

import json
import math
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fflib  # noqa: E402
from fflib import check, log  # noqa: E402

try:
    import numpy as np
except ImportError:
    fflib.skip("numpy is missing")

# ---- the reference -------------------------------------------------------

M64 = (1 << 64) - 1
DOMAIN_BATCHMIX = 0x425443484d495831  # "BTCHMIX1"


def rng_mix(x):
    x = (x + 0x9e3779b97f4a7c15) & M64
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M64
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M64
    return x ^ (x >> 31)


def rng_key(domain, seed, epoch, ident):
    return rng_mix(rng_mix(rng_mix(rng_mix(domain) ^ seed) ^ epoch) ^ ident)


def rng_u64(key, counter):
    return rng_mix(key ^ rng_mix(counter & M64))


def rng_uniform(key, counter):
    return (rng_u64(key, counter) >> 11) * 2.0 ** -53


def rng_below(key, counter, n):
    i = 0
    while True:
        m = rng_u64(key, counter + (i << 48)) * n
        lo = m & M64
        if lo >= n or lo >= ((-n) & M64) % n:
            return m >> 64
        i += 1


def gamma_log(key, stream, alpha):
    """log of a Gamma(alpha) draw: Marsaglia and Tsang."""
    a = alpha + 1 if alpha < 1 else alpha
    d = a - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    lg = math.log(d)
    for i in range(64):
        base = (stream << 32) + 3 * i
        u1 = rng_uniform(key, base)
        u2 = rng_uniform(key, base + 1)
        u = rng_uniform(key, base + 2)
        x = math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi
                                                            * u2)
        v = 1.0 + c * x
        if v <= 0:
            continue
        v = v * v * v
        if u == 0 or math.log(u) < 0.5 * x * x + d - d * v + d * math.log(v):
            lg = math.log(d) + math.log(v)
            break
    if alpha < 1:
        lg += math.log(1.0 - rng_uniform(key, (stream << 32) + (1 << 31))) \
            / alpha
    return lg


def beta(key, alpha):
    lx, ly = gamma_log(key, 1, alpha), gamma_log(key, 2, alpha)
    try:
        e = math.exp(ly - lx)
    except OverflowError:
        e = math.inf
    return float(np.float32(1.0 / (1.0 + e)))


def draw(op, seed, epoch, rank, world, b, w, h):
    """(cut, lam, box) of batch b: v2's MixUp / CutMix parameters."""
    key = rng_key(DOMAIN_BATCHMIX, seed, epoch,
                  b | (rank << 32) | (world << 48))
    kind, args = op
    if kind == "mixup":
        cut, alpha = False, args[0]
    elif kind == "cutmix":
        cut, alpha = True, args[0]
    else:
        cut = rng_uniform(key, 0) < args[2]
        alpha = args[1] if cut else args[0]
    lam = beta(key, alpha)
    if not cut:
        return False, lam, None
    rx, ry = rng_below(key, 3 << 32, w), rng_below(key, (3 << 32) + 1, h)
    r = 0.5 * math.sqrt(1.0 - lam)
    rw, rh = int(r * w), int(r * h)
    x0, y0 = max(rx - rw, 0), max(ry - rh, 0)
    x1, y1 = min(rx + rw, w), min(ry + rh, h)
    return True, 1.0 - (x1 - x0) * (y1 - y0) / (w * h), (x0, y0, x1, y1)


def mix_images(x, cut, lam, box, layout):
    """v2: the batch rolled by one, mixed in (a copy of) x."""
    rolled = np.roll(x, 1, axis=0)
    if cut:
        x0, y0, x1, y1 = box
        out = x.copy()
        if layout == "CHW":
            out[:, :, y0:y1, x0:x1] = rolled[:, :, y0:y1, x0:x1]
        else:
            out[:, y0:y1, x0:x1, :] = rolled[:, y0:y1, x0:x1, :]
        return out
    a, c = np.float32(1.0 - lam), np.float32(lam)
    if x.dtype == np.float16:
        return (rolled.astype(np.float32) * a
                + x.astype(np.float32) * c).astype(np.float16)
    return rolled * a + x * c


def soft_labels(labels, lam, nclasses):
    onehot = np.zeros((len(labels), nclasses), np.float32)
    onehot[np.arange(len(labels)), labels] = 1
    return np.roll(onehot, 1, axis=0) * np.float32(1.0 - lam) \
        + onehot * np.float32(lam)


# ---- the mount -----------------------------------------------------------

N, CLASSES, B, SEED, EPOCHS = 44, 5, 8, 7, 2
SIZE = 32
BASE = "decode resize(40) cache random_resized_crop(%d) flip(0.5)" % SIZE
NORM = BASE + " normalize(imagenet)"
OPS = {"mixup": ("mixup", (0.2,)), "cutmix": ("cutmix", (1.0,)),
       "both": ("mixup_cutmix", (0.2, 1.0, 0.5))}


def optext(op):
    return "%s(%s)" % (op[0], ", ".join(str(a) for a in op[1]))


# (job, its plain twin, op, dtype, layout)
MIXED = [
    ("mixup", "plain", OPS["mixup"], "float32", "CHW"),
    ("cutmix", "plain", OPS["cutmix"], "float32", "CHW"),
    ("both", "plain", OPS["both"], "float32", "CHW"),
    ("mixup16", "plain16", ("mixup", (0.4,)), "float16", "HWC"),
    ("cut8", "plain8", OPS["cutmix"], "uint8", "HWC"),
    ("sub", "plain", OPS["both"], "float32", "CHW"),
]

t = fflib.Test()
data = t.gen(t.path("data"), n=N, classes=CLASSES, seed=5)
jobs = {
    "plain": dict(pipeline=NORM),
    "plain16": dict(pipeline=NORM, dtype="float16", layout="HWC"),
    "plain8": dict(pipeline=BASE, dtype="uint8", layout="HWC"),
    "rel": dict(pipeline=NORM + " " + optext(OPS["both"]), order="relaxed"),
}
for name, plain, op, dtype, layout in MIXED:
    jobs[name] = dict(jobs[plain], pipeline=jobs[plain]["pipeline"] + " "
                      + optext(op))
jobs["sub"]["on_error"] = "substitute"
for j in jobs.values():
    j.update(batch_size=B, epochs=EPOCHS, seed=SEED)
cfg = t.config(t.path("feed.conf"), data, jobs)
# A mixture (data and data2, whose class007 is new: 6 classes in all), with
# and without a batch op: the batch keeps its sources' shares (its ids).
NMIX, CMIX = N + 20, CLASSES + 1
data2 = t.gen(t.path("data2"), n=20, classes=2, seed=6)
os.rename(os.path.join(data2, "class001"), os.path.join(data2, "class007"))
with open(cfg, "a") as f:
    f.write("\n[dataset data2]\nroot = %s\n" % data2)
    for jname, tail in (("mixplain", ""), ("mixmix", " mixup(0.3)")):
        f.write("\n[job %s]\nmixture = data:0.6 data2:0.4\nbatch_size = %d"
                "\nepochs = %d\nseed = %d\npipeline = %s%s\n"
                % (jname, B, EPOCHS, SEED, NORM, tail))
# on_error = substitute with a broken JPEG: the batch as delivered (the
# next good sample stands in, its label and id with it) is mixed.
NBAD = 20
bad = t.gen(t.path("bad"), n=NBAD, classes=CLASSES, seed=8)
badfile = sorted(os.path.join(r, n) for r, _, ns in os.walk(bad)
                 for n in ns)[3]
with open(badfile, "wb") as f:
    f.write(b"\xff\xd8 not a jpeg")
with open(cfg, "a") as f:
    f.write("\n[dataset bad]\nroot = %s\n" % bad)
    for jname, tail in (("plainbad", ""), ("subbad", " cutmix(1.0)")):
        f.write("\n[job %s]\ndataset = bad\non_error = substitute\n"
                "batch_size = %d\nepochs = %d\nseed = %d\npipeline = %s%s"
                "\n" % (jname, B, EPOCHS, SEED, NORM, tail))
mnt = t.path("mnt")
nb = -(-N // B)


def read_npy(path):
    """(array, size at stat time, bytes)."""
    size = os.stat(path).st_size
    with open(path, "rb") as f:
        raw = f.read()
    check(len(raw) == size, "%s: stat says %d bytes, read %d"
          % (path, size, len(raw)))
    with open(path, "rb") as f:
        return np.load(f), size, raw


def nbatches(world, job=None):
    n = {"mixmix": NMIX, "mixplain": NMIX, "subbad": NBAD,
         "plainbad": NBAD}.get(job, N)
    return -(-(-(-n // world)) // B)


def epoch_files(m, job, e, view="", world=1):
    """{(batch, suffix): (array, size, bytes)} of an epoch of a view."""
    d = m.p(job, view, "epoch-%04d" % e)
    out = {}
    for b in range(nbatches(world, job)):
        for sfx in (".npy", ".labels.npy", ".ids.npy"):
            out[(b, sfx)] = read_npy(os.path.join(d, "batch-%06d%s"
                                                  % (b, sfx)))
    return out


kinds = set()  # (job, cut) seen: mixup_cutmix must have shown both


def check_job(m, name, plain, op, layout, e, view="", rank=0, world=1,
              classes=CLASSES):
    got = epoch_files(m, name, e, view, world)
    ref = epoch_files(m, plain, e, view, world)
    for (b, sfx), (arr, size, raw) in got.items():
        if sfx != ".npy":
            continue
        x, y, ids = arr, got[(b, ".labels.npy")][0], got[(b, ".ids.npy")][0]
        px, py, pids = ref[(b, ".npy")][0], ref[(b, ".labels.npy")][0], \
            ref[(b, ".ids.npy")][0]
        where = "%s %s epoch %d batch %d" % (name, view, e, b)
        check(np.array_equal(ids, pids), "%s: ids %s, not the plain job's "
              "%s" % (where, ids, pids))
        check(y.dtype == np.float32 and y.shape == (len(ids), classes),
              "%s: labels %s %s" % (where, y.dtype, y.shape))
        cut, lam, box = draw(op, SEED, e, rank, world, b, SIZE, SIZE)
        kinds.add((name, cut))
        want = mix_images(px, cut, lam, box, layout)
        check(x.dtype == want.dtype and x.shape == want.shape,
              "%s: %s %s" % (where, x.dtype, x.shape))
        if not np.array_equal(x, want):
            d = np.abs(x.astype(np.float64) - want.astype(np.float64))
            fflib.fail("%s: %s lam %r box %s: %d elements differ, max %g"
                       % (where, "cutmix" if cut else "mixup", lam, box,
                          int((d > 0).sum()), d.max()))
        check(np.array_equal(y, soft_labels(py, lam, classes)),
              "%s: soft labels %s, expected %s (lam %r)"
              % (where, y, soft_labels(py, lam, classes), lam))
    return got


def check_relaxed(m, e):
    """rel's batches: the reference mix of the per-sample images of its
    ids (a sample's image depends on (seed, epoch, id) alone)."""
    plain = epoch_files(m, "plain", e)
    img, lab = {}, {}
    for b in range(nb):
        for i, sid in enumerate(plain[(b, ".ids.npy")][0]):
            img[int(sid)] = plain[(b, ".npy")][0][i]
            lab[int(sid)] = plain[(b, ".labels.npy")][0][i]
    got = epoch_files(m, "rel", e)
    seen = []
    for b in range(nb):
        ids = got[(b, ".ids.npy")][0]
        seen += [int(i) for i in ids]
        px = np.stack([img[int(i)] for i in ids])
        py = np.array([lab[int(i)] for i in ids])
        cut, lam, box = draw(OPS["both"], SEED, e, 0, 1, b, SIZE, SIZE)
        check(np.array_equal(got[(b, ".npy")][0],
                             mix_images(px, cut, lam, box, "CHW")),
              "rel epoch %d batch %d: not the mix of its samples" % (e, b))
        check(np.array_equal(got[(b, ".labels.npy")][0],
                             soft_labels(py, lam, CLASSES)),
              "rel epoch %d batch %d: soft labels" % (e, b))
    check(sorted(seen) == list(range(N)), "rel epoch %d: samples %s"
          % (e, sorted(seen)))
    return got


def digest(m):
    """Every batch file of the mixed jobs: bytes by path."""
    out = {}
    for name in [x[0] for x in MIXED] + ["rel"]:
        for e in range(EPOCHS):
            for k, v in epoch_files(m, name, e).items():
                out[(name, e) + k] = v[2]
        for k, v in epoch_files(m, name, 0, "rank-1-of-3", 3).items():
            out[(name, "r1of3") + k] = v[2]
    return out


# Sizes at stat time, before anything is read.
with fflib.Mount(t, cfg, mnt, "-o", "threads=1") as m:
    for name, plain, op, dtype, layout in MIXED:
        info = json.load(open(m.p(name, "info.json")))
        check(info["num_classes"] == CLASSES and
              info["labels_dtype"] == "float32" and
              info["labels_shape"] == [B, CLASSES],
              "%s: info.json %s" % (name, info))
        # The labels' size at stat time, before any read of the batch.
        st = os.stat(m.p(name, "epoch-0001", "batch-%06d.labels.npy"
                         % (nb - 1)))
        check(st.st_size > (N - (nb - 1) * B) * CLASSES * 4 and
              (st.st_size - (N - (nb - 1) * B) * CLASSES * 4) % 64 == 0,
              "%s: labels of the last batch: %d bytes at stat time"
              % (name, st.st_size))
    with open(m.p("README")) as f:
        readme = f.read()
    check("labels: float32 soft labels, shape (B, %d)" % CLASSES in readme,
          "README does not say the soft labels' shape")
    info = json.load(open(m.p("plain", "info.json")))
    check(info["labels_dtype"] == "int64" and info["labels_shape"] == [B],
          "plain: info.json %s" % info)

    for name, plain, op, dtype, layout in MIXED:
        for e in range(EPOCHS):
            check_job(m, name, plain, op, layout, e)
        check_job(m, name, plain, op, layout, 0, "rank-1-of-3", 1, 3)
        log("%s (%s %s %s): equals the reference" % (name, optext(op),
                                                       dtype, layout))
    for e in range(EPOCHS):
        check_job(m, "mixmix", "mixplain", ("mixup", (0.3,)), "CHW", e,
                  classes=CMIX)
    log("mixmix (a mixture, mixup(0.3)): equals the reference over %d "
        "classes" % CMIX)
    for e in range(EPOCHS):
        got = check_job(m, "subbad", "plainbad", OPS["cutmix"], "CHW", e)
        ids = np.concatenate([got[(b, ".ids.npy")][0]
                              for b in range(nbatches(1, "subbad"))])
        check(len(ids) == NBAD and len(set(ids.tolist())) == NBAD - 1,
              "subbad epoch %d: ids %s (one substituted)" % (e, ids))
    log("subbad (on_error = substitute, a broken JPEG, cutmix): the "
        "substituted batch, mixed, equals the reference")
    check(("both", True) in kinds and ("both", False) in kinds,
          "mixup_cutmix chose only one of them in %d batches"
          % (2 * nb + nbatches(3)))
    for e in range(EPOCHS):
        check_relaxed(m, e)
    log("rel: equals the reference mix of its chosen samples")
    first = digest(m)
    check(digest(m) == first, "a second read differs")

    # The Python package hands the soft labels over; the examples train.
    sys.path.insert(0, os.path.join(fflib.SRCDIR, "python"))
    import feedfs  # noqa: E402
    job = feedfs.Job(m.p("both"))
    check(job.soft_labels and job.num_classes == CLASSES and
          job.labels_dtype == np.float32, "Job: soft_labels %s %s %s"
          % (job.soft_labels, job.num_classes, job.labels_dtype))
    check(not feedfs.Job(m.p("plain")).soft_labels, "plain: soft labels")
    ys = [y for x, y in job.epoch(1)]
    for b, y in enumerate(ys):
        check(y.dtype == np.float32 and np.array_equal(y, np.load(m.p(
            "both", "epoch-0001", "batch-%06d.labels.npy" % b))),
              "Job.epoch: batch %d's labels" % b)
    env = dict(os.environ, PYTHONPATH=os.path.join(fflib.SRCDIR, "python"))
    ex = os.path.join(fflib.SRCDIR, "examples")
    r = subprocess.run([fflib.PY, os.path.join(ex, "numpy_loop.py"), m.mnt,
                        "--job", "both", "--epochs", "1"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    check(r.returncode == 0 and b"epoch 0: %d batches" % nb in r.stdout,
          "numpy_loop.py on soft labels: %s" % r.stdout.decode())
    try:
        import torch
    except ImportError:
        torch = None
        log("SKIP: torch is missing: Loader and pytorch_train.py untried")
    if torch is not None:
        import feedfs.torch  # noqa: E402
        n = 0
        for b, (x, y) in enumerate(feedfs.torch.Loader(job, epochs=[1],
                                                       device=None)):
            check(y.dtype == torch.float32 and np.array_equal(
                y.numpy(), ys[b]), "Loader: batch %d's labels %s %s"
                  % (b, y.dtype, tuple(y.shape)))
            n += 1
        check(n == nb, "Loader: %d batches" % n)
        r = subprocess.run([fflib.PY, os.path.join(ex, "pytorch_train.py"),
                            m.mnt, "--job", "both", "--epochs", "1"],
                           env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        check(r.returncode == 0 and b"epoch 0 batch %d step %d loss"
              % (nb - 1, nb) in r.stdout,
              "pytorch_train.py on soft labels: %s" % r.stdout.decode())
    log("feedfs.Job and feedfs.torch.Loader hand over float32 soft labels; "
        "numpy_loop.py and pytorch_train.py train on them")

# In-process: feedfs-ref's bytes.
for name in [x[0] for x in MIXED]:
    for e in range(EPOCHS):
        out = t.ref(cfg, name, e, t.path("ref", name, str(e)))
        for b in range(nb):
            for sfx in (".npy", ".labels.npy", ".ids.npy"):
                with open(os.path.join(out, "batch-%06d%s" % (b, sfx)),
                          "rb") as f:
                    check(f.read() == first[(name, e, b, sfx)],
                          "%s epoch %d batch %d%s: not feedfs-ref's"
                          % (name, e, b, sfx))
    out = t.ref(cfg, name, 0, t.path("ref", name, "r"), rank=1, world=3)
    with open(os.path.join(out, "batch-000000.npy"), "rb") as f:
        check(f.read() == first[(name, "r1of3", 0, ".npy")],
              "%s rank 1 of 3: not feedfs-ref's" % name)
log("the mount's bytes are feedfs-ref's")

# A remount with threads = 4 and a cold cache: the same bytes.
with fflib.Mount(t, cfg, mnt, "-o", "threads=4,cache_size=0") as m:
    again = digest(m)
for k in first:
    if k[0] == "rel":  # relaxed: each batch valid, content may differ
        continue
    check(again[k] == first[k], "threads=4 remount: %s differs" % (k,))
log("threads=4 remount: the same bytes")

# The lambda distribution: 4000 batches' draws against numpy's Beta.
n = 4000
lams = np.array([beta(rng_key(DOMAIN_BATCHMIX, 1, e, b | (1 << 48)), 0.2)
                 for e in range(4) for b in range(n // 4)])
ref = np.random.default_rng(1).beta(0.2, 0.2, 20000)
grid = np.sort(np.concatenate([lams, ref]))
ks = np.max(np.abs(np.searchsorted(np.sort(lams), grid, side="right") / n
                   - np.searchsorted(np.sort(ref), grid, side="right")
                   / len(ref)))
crit = 1.949 * math.sqrt((n + len(ref)) / (n * len(ref)))  # alpha 0.001
check(ks < crit, "lambda: KS statistic %.4f >= %.4f vs Beta(0.2, 0.2)"
      % (ks, crit))
log("lambda ~ Beta(0.2, 0.2): KS %.4f < %.4f" % (ks, crit))
log("ok")
