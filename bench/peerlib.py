"""What bench/peer-dali, bench/peer-ffcv and bench/peer-spdl share: the
epochs' timing and machine CPU (/proc/stat), the page cache dropped
before the first, and the one machine-readable line each prints:

  peer-result {"peer": ..., "variant": ..., "epochs": [...], ...}

bench/run --peers reads that line.  A runner that fails prints the same
line with "error": the exception as Python prints its last line, so that
the peer gets a row with the exact error."""
import json
import os
import sys
import time
import traceback

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def machine_busy():
    """Busy CPU seconds of the whole machine so far (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def drop_caches():
    """Drop the page cache (root): the first epoch reads from the disk."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError as e:
        print("peer: cannot drop caches (%s)" % e, file=sys.stderr)
        return False


def files_of(root):
    """ImageFolder's view of root: sorted (path, label) pairs."""
    classes = sorted(d for d in os.listdir(root)
                     if os.path.isdir(os.path.join(root, d)))
    out = []
    for k, c in enumerate(classes):
        d = os.path.join(root, c)
        out += [(os.path.join(d, x), k) for x in sorted(os.listdir(d))]
    return out


def run_epochs(epochs, n, epoch_iter, t_construct):
    """Time epochs: epoch_iter(e) yields each batch's image count, once
    the batch is in the trainer's hands.  t_construct: perf_counter() taken before the loader
    was made, for the time to the first batch.  Returns (first batch
    seconds, [{seconds, images, batches, cpu_ms_per_image}])."""
    first = None
    out = []
    for e in range(epochs):
        c0, t0 = machine_busy(), time.perf_counter()
        imgs = nb = 0
        for b in epoch_iter(e):
            if first is None:
                first = time.perf_counter() - t_construct
            imgs += b
            nb += 1
        dt, c1 = time.perf_counter() - t0, machine_busy()
        out.append(dict(seconds=dt, images=imgs, batches=nb,
                        images_per_s=imgs / dt if dt else 0.0,
                        cpu_ms_per_image=1e3 * (c1 - c0) / max(imgs, 1)))
        print("peer: epoch %d: %d images in %.2f s = %.0f images/s, "
              "%.2f ms machine CPU/image" % (e, imgs, dt, imgs / dt,
                                             out[-1]["cpu_ms_per_image"]),
              file=sys.stderr, flush=True)
    return first, out


def emit(res):
    print("peer-result " + json.dumps(res, sort_keys=True), flush=True)


def main_guard(peer, variant, fn):
    """Run fn() -> dict; print its peer-result, or one with the error."""
    try:
        res = fn()
    except BaseException as e:  # noqa: B902 - the row says what failed
        traceback.print_exc()
        emit(dict(peer=peer, variant=variant,
                  error="".join(traceback.format_exception_only(
                      type(e), e)).strip()))
        sys.exit(1)
    res.setdefault("peer", peer)
    res.setdefault("variant", variant)
    emit(res)
