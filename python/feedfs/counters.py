"""feedfs.counters - the counters of a mount: stats(), MOUNT/.feedfs/stats
(Prometheus text) as a dict keyed by (name, labels), and parse_stats, the
parser, for any such text.

Part of the Python package (python/feedfs/): it imports job.py (a Job is
one way to name the mount); mixture.py and feedfs.top use it.
"""

import os

from .job import Job


_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


def _parse_labels(text):
    """'a="x",b="y"' -> (("a", "x"), ("b", "y")).  Values are un-escaped
    as Prometheus escapes them (\\\\, \\" and \\n), in one pass from the
    left, so that an escaped backslash is never the start of another
    escape; any other backslash is kept as it is."""
    out, i = [], 0
    while i < len(text):
        eq = text.index("=", i)
        name = text[i:eq].strip().lstrip(",").strip()
        j = eq + 2  # past ="
        v = []
        while j >= len(text) or text[j] != '"':
            if j >= len(text):
                raise ValueError("stats: an unterminated label value in "
                                 "{%s}" % text)
            if text[j] == "\\" and j + 1 < len(text):
                nxt = text[j + 1]
                v.append(_ESCAPES.get(nxt, "\\" + nxt))
                j += 2
            else:
                v.append(text[j])
                j += 1
        out.append((name, "".join(v)))
        i = j + 1
        while i < len(text) and text[i] in ", ":
            i += 1
    return tuple(out)


def parse_stats(text):
    """Prometheus text -> {(name, ((label, value), ...)): float}."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, val = line.rpartition(" ")
        if "{" in key:
            name, _, rest = key.partition("{")
            labels = _parse_labels(rest.rsplit("}", 1)[0])
        else:
            name, labels = key, ()
        out[(name, labels)] = float(val)
    return out


def stats(mount):
    """The counters of MOUNT/.feedfs/stats: a dict keyed by (name,
    labels), labels a tuple of (label, value) pairs in the mount's order:

        s = feedfs.stats("/mnt/feed")
        s["feedfs_images_per_second", (("job", "train"),)]
        s["feedfs_workers", ()]

    mount may also be a job directory or a feedfs.Job."""
    if isinstance(mount, Job):
        mount = os.path.dirname(mount.path)
    p = os.path.join(os.fspath(mount), ".feedfs", "stats")
    if not os.path.exists(p) and os.path.exists(
            os.path.join(os.fspath(mount), "info.json")):
        p = os.path.join(os.path.dirname(os.path.abspath(mount)), ".feedfs",
                         "stats")
    with open(p) as f:
        return parse_stats(f.read())
