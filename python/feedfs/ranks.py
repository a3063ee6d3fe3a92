"""feedfs.ranks - which rank view of an epoch a process reads: rank_world
(the arguments, or torch.distributed's or torchrun's environment with
"auto") and the log line that says, once per job and view, which one.

Part of the Python package (python/feedfs/): it imports nothing of the
package (torch.distributed only when the caller imported it); job.py and
feedfs.torch use it.
"""

import logging
import os
import sys

MAX_WORLD = 1024  # the rank views the mount serves: 1 <= W <= 1024


def _dist_world():
    """(rank, world) of the environment: torch.distributed's when torch is
    imported and its process group is initialized, else RANK and
    WORLD_SIZE (torchrun sets them), else None."""
    td = sys.modules.get("torch.distributed")
    if td is not None and td.is_available() and td.is_initialized():
        return td.get_rank(), td.get_world_size()
    if "WORLD_SIZE" in os.environ:
        return int(os.environ.get("RANK", "0")), int(os.environ["WORLD_SIZE"])
    return None


def rank_world(rank=None, world=None):
    """(rank, world) of a rank view.  The arguments where given; nothing
    given is the whole epoch, (0, 1), whatever the environment says (a
    rank-0-only evaluation under torchrun reads every sample).  "auto"
    for either takes torch.distributed's when torch is imported and its
    process group is initialized, else the RANK and WORLD_SIZE environment
    variables (torchrun sets them), else (0, 1).  A rank without a world
    (or a world over 1 without a rank) is refused."""
    if rank == "auto" or world == "auto":
        env = _dist_world() or (0, 1)
        rank = env[0] if rank in (None, "auto") else rank
        world = env[1] if world in (None, "auto") else world
    if world is None:
        if rank not in (None, 0):
            raise ValueError("rank %s without a world (pass world=, or "
                             "world='auto')" % rank)
        world = 1
    if rank is None:
        if int(world) != 1:
            raise ValueError("world %s without a rank (pass rank=, or "
                             "rank='auto')" % world)
        rank = 0
    rank, world = int(rank), int(world)
    if not 1 <= world <= MAX_WORLD or not 0 <= rank < world:
        raise ValueError("rank %d of world %d: want 0 <= rank < world <= %d"
                         % (rank, world, MAX_WORLD))
    return rank, world


_views_said = set()  # (job path, rank, world, warned) already logged


def _say_view(job, rank, world, asked_rank, asked_world):
    """Log, once per job and view, which rank view is read: at INFO, or
    as a warning when the whole epoch is read by default while torchrun
    or torch.distributed say there are several processes."""
    env = _dist_world()
    warn = asked_rank is None and asked_world is None and env is not None \
        and env[1] > 1
    key = (job.path, rank, world, warn)
    if key in _views_said:
        return
    _views_said.add(key)
    log = logging.getLogger("feedfs")
    where = "rank-%d-of-%d/" % (rank, world) if world > 1 else "the whole " \
        "epoch (%d samples)" % job.samples
    if warn:
        log.warning("feedfs: job %s reads %s, not rank %d of %d's shard: "
                    "rank and world are only used when given (rank=, "
                    "world=, or world='auto')", job.name, where, env[0],
                    env[1])
    else:
        log.info("feedfs: job %s reads %s", job.name, where)
