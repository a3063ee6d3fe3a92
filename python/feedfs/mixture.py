"""feedfs.mixture - the weights of a mixture job: Mixture reads an epoch's
(or the next epoch's) weights and writes new ones, checked first as the
mount checks them (core/mix.c), so that a refusal says why.

Part of the Python package (python/feedfs/): it imports job.py and
counters.py (the mount's next epoch not opened yet).
"""

import errno
import math
import os
import re

import numpy as np

from .job import Job
from .counters import stats


_MIX_ONE = 1000000  # weights are kept in millionths (core/mix.h)


def _weight_text(w):
    """A weight as the mount's parser takes it: a decimal, at most six
    places, no sign and no exponent."""
    if isinstance(w, bool) or not isinstance(w, (int, float, np.integer,
                                                  np.floating, str)):
        raise ValueError("%r is not a weight" % (w,))
    if isinstance(w, str):
        return w
    w = float(w)
    if math.isnan(w) or math.isinf(w):
        return repr(w)
    if w < 0:
        return "-%s" % _weight_text(-w)
    return ("%.6f" % w).rstrip("0").rstrip(".") or "0"


_WEIGHT = re.compile(r"[0-9]*(\.[0-9]*)?\Z")


def _check_weights(pairs, names):
    """The mount's reason for refusing pairs (core/mix.c's words), or
    None when it would take them."""
    if not pairs:
        return "no NAME:WEIGHT pair"
    if len(pairs) > 64:
        return "more than 64 sources"
    seen, total = set(), 0
    for name, text in pairs:
        if not name or any(c.isspace() or c in ",:" for c in name):
            return "'%s:%s': expected NAME:WEIGHT" % (name, text)
        if len(name.encode()) > 128:
            return "a source name longer than 128 bytes"
        if text.startswith("-"):
            return "%s: a negative weight" % name
        bad = ("%s: '%s' is not a weight (a decimal from 0 to 1000000)"
               % (name, text))
        if not text.isascii() or not _WEIGHT.match(text) or \
                not any(c.isdigit() for c in text):
            return bad
        ip, _, frac = text.partition(".")
        v = int(ip or "0") * _MIX_ONE + int((frac + "000000")[:6])
        if len(frac) > 6 and frac[6] >= "5":
            v += 1
        if v > 1000000 * _MIX_ONE:
            return bad
        if name in seen:
            return "%s named twice" % name
        seen.add(name)
        if name not in names:
            return "unknown source '%s'" % name
        total += v
    if total == 0:
        return "the weights sum to 0"
    return None


def _parse_weights(text):
    out = {}
    for tok in text.replace(",", " ").split():
        name, _, w = tok.partition(":")
        out[name] = float(w)
    return out


class Mixture:
    """The weights of a mixture job (a job with `mixture =`).

    .sources are its sources' names, in order.  Epochs already opened keep
    their weights; a change applies from the first epoch not opened yet
    (feedfs.conf(5), MIXTURES)."""

    def __init__(self, job):
        self.job = job if isinstance(job, Job) else Job(job)
        if "sources" not in self.job.info:
            raise ValueError("job %s is not a mixture" % self.job.name)
        self.sources = [s["name"] for s in self.job.info["sources"]]

    def __repr__(self):
        return "feedfs.Mixture(%r)" % self.job.path

    def weights(self, e=None):
        """{source: weight} in force for epoch e, or, with e None, what
        the next epoch not opened yet gets.  Reading an epoch's weights
        opens that epoch as reading its batches does: a later set() applies
        after it."""
        if e is None:
            p = os.path.join(self.job.path, "mixture")
        else:
            p = os.path.join(self.job.epoch_dir(e), "mixture")
        with open(p) as f:
            return _parse_weights(f.read())

    def _next_epoch(self):
        v = stats(os.path.dirname(self.job.path)).get(
            ("feedfs_mixture_next_epoch", (("job", self.job.name),)))
        return None if v is None else int(v)

    def set(self, weights=None, **kw):
        """Write new weights, as a dict or as keywords (set(web=0.5,
        curated=0.5)); sources not named get 0.  Returns the first epoch
        they apply to.  Weights the mount would refuse raise ValueError
        with its reason (the mount itself answers EINVAL and gives its
        reason only in its log, so the same checks are made here first);
        PermissionError for a user other than root or the mount's
        owner."""
        w = dict(weights or {})
        w.update(kw)
        pairs = [(str(k), _weight_text(v)) for k, v in w.items()]
        why = _check_weights(pairs, self.sources)
        if why is not None:
            raise ValueError("job %s: mixture refused: %s"
                             % (self.job.name, why))
        line = " ".join("%s:%s" % p for p in pairs) + "\n"
        before = self._next_epoch()
        fd = os.open(os.path.join(self.job.path, "mixture"),
                     os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, line.encode())
        except OSError as e:
            if e.errno == errno.EINVAL:
                raise ValueError(
                    "job %s: mixture %r refused by the mount (its log says "
                    "why)" % (self.job.name, line.strip())) from None
            raise
        finally:
            os.close(fd)
        after = self._next_epoch()
        if before is None or after is None or before == after:
            return after
        # Epochs were opened meanwhile: the write applied from one of
        # before..after, all opened now, so reading their weights changes
        # nothing; the first with the new weights is the answer.
        new = _parse_weights(line)
        want = {s: new.get(s, 0.0) for s in self.sources}
        for e in range(before, min(after, self.job.epochs)):
            got = self.weights(e)
            if all(abs(got.get(s, 0.0) / max(sum(got.values()), 1e-12) -
                       want[s] / sum(want.values())) < 1e-6
                   for s in self.sources):
                return e
        return after
