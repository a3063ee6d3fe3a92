"""feedfs - read a feedfs mount's batches from Python.

    import feedfs
    job = feedfs.Job("/mnt/feed/train")
    for images, labels in job.epoch(3):          # numpy arrays
        ...                                      # (images, labels, text)
                                                 # for a job with captions
    loader = feedfs.torch.Loader(job, epochs=range(90))   # torch, optional
    feedfs.Mixture("/mnt/feed/mix").set(web=0.5, curated=0.5)
    feedfs.stats("/mnt/feed")                    # .feedfs/stats as a dict
    python3 -m feedfs.top /mnt/feed              # live view

A batch is a path (JOB/[rank-R-of-W/]epoch-NNNN/batch-NNNNNN.npy): the
mount decodes and prepares it, and this package only reads it, each batch
in one read into memory it keeps.  numpy is required; feedfs.torch needs
torch and is imported on first use (import feedfs never imports torch).
See feedfs-python(7).

This file only gathers the package's names: one concern a module, each
saying what it imports (README beside them): npy (the .npy format),
errors (BatchError), reader (read_into, read_text), ranks (rank_world),
job (Job, Epoch), counters (stats), mixture (Mixture), and, imported on
first use, torch (Loader) and top (the live view).  Every documented name is here,
at the top: feedfs.Job, feedfs.read_into, feedfs.stats, ...
"""

import importlib

from .counters import parse_stats, stats  # noqa: F401
from .errors import BatchError
from .job import Epoch, Job
from .mixture import Mixture
from .ranks import MAX_WORLD, rank_world  # noqa: F401
from .reader import read_into, read_text
# Private, for feedfs.torch, the tests and bench/run, as before the split.
from .ranks import _say_view  # noqa: F401
from .reader import _load_small, _pread_parts  # noqa: F401

__all__ = ["Job", "Epoch", "Mixture", "stats", "read_into", "read_text",
           "rank_world", "BatchError"]
__version__ = "0.1.0"

# The classes by their documented names: a traceback says
# feedfs.BatchError, as before the split, and pickle finds them here.
for _c in (BatchError, Epoch, Job, Mixture):
    _c.__module__ = __name__
del _c


def __getattr__(name):
    # feedfs.torch and feedfs.top on first use: torch stays optional.
    if name in ("torch", "top"):
        return importlib.import_module("feedfs." + name)
    raise AttributeError("module 'feedfs' has no attribute %r" % name)
