"""Which part of the data this process reads: rank and number of workers.

Looked up in order: an MXNet-style ``kv`` object (``.rank``, ``.num_workers``),
explicit ``part_index``/``num_parts``, an initialised torch.distributed process group
(what Lightning, Accelerate and torchrun set up), then the environment — torchrun
(``RANK``/``WORLD_SIZE``), MPI (``OMPI_COMM_WORLD_RANK``/``_SIZE``), SLURM
(``SLURM_PROCID``/``SLURM_NTASKS``). The process group comes before the environment
because it is what the gradients are averaged over: Lightning's own launcher sets
``WORLD_SIZE`` but not ``RANK``, and a SLURM job step may hold fewer tasks than the
processes a framework starts in it. The choice is logged once.

Also this rank's share of the node's cores (:func:`rank_threads`): the ranks on this node
(:func:`local_ranks`) share the cores of the affinity mask (NOTE [resource plan] in
recio/pipeline/plan.py).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import Any, NamedTuple

log = logging.getLogger("recio")

_ENV_PAIRS = (
    ("torchrun", "RANK", "WORLD_SIZE"),
    ("MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("SLURM", "SLURM_PROCID", "SLURM_NTASKS"),
)


class World(NamedTuple):
    """A process's ``rank`` of ``size``, and the ``source`` they came from (for messages)."""

    rank: int
    size: int
    source: str


def discover(
    kv: Any = None,
    part_index: int | None = None,
    num_parts: int | None = None,
    environ: dict[str, str] | None = None,
) -> World:
    """This process's (rank, world size), and where they came from."""
    environ = os.environ if environ is None else environ
    world = _discover(kv, part_index, num_parts, environ)
    if not 0 <= world.rank < world.size:
        raise ValueError(f"rank {world.rank} is outside 0..{world.size - 1} (from {world.source})")
    log.info("recio shard: part %d of %d (from %s)", world.rank, world.size, world.source)
    return world


def _discover(kv, part_index, num_parts, environ) -> World:
    if kv is not None:
        return World(int(kv.rank), int(kv.num_workers), "kv")
    if part_index is not None or num_parts is not None:
        return World(int(part_index or 0), int(num_parts or 1), "part_index/num_parts")
    dist = sys.modules.get("torch.distributed")  # only if the program already uses torch
    if dist is not None and dist.is_available() and dist.is_initialized():
        return World(dist.get_rank(), dist.get_world_size(), "torch.distributed")
    for name, rank_var, size_var in _ENV_PAIRS:
        if rank_var in environ and size_var in environ:
            return World(int(environ[rank_var]), int(environ[size_var]), f"{name} environment")
    return World(0, 1, "single process")


# --- this rank's share of the node (NOTE [resource plan] in recio/pipeline/plan.py) ----------

_LOCAL_ENV = (
    ("LOCAL_WORLD_SIZE", "torchrun"),
    ("OMPI_COMM_WORLD_LOCAL_SIZE", "Open MPI"),
    ("SLURM_NTASKS_PER_NODE", "SLURM"),
)


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def local_ranks(environ: Mapping[str, str] | None = None) -> tuple[int, str]:
    """How many ranks share this node, and where that came from (NOTE [resource plan])."""
    environ = os.environ if environ is None else environ
    for var, name in _LOCAL_ENV:
        value = environ.get(var, "").strip()
        if value.isdigit() and int(value) >= 1:
            return int(value), f"{var}={value} ({name})"
    dist = sys.modules.get("torch.distributed")  # only if the program already uses torch
    if dist is not None and dist.is_available() and dist.is_initialized():
        n = int(dist.get_world_size())
        gpus = _gpus_here()
        if gpus:
            n = min(n, gpus)
        return max(1, n), f"torch.distributed group of {dist.get_world_size()}" + (
            f", {gpus} GPU(s) here" if gpus else ""
        )
    return 1, "one process on this node"


def _gpus_here() -> int:
    torch = sys.modules.get("torch")
    try:
        return int(torch.cuda.device_count()) if torch is not None else 0
    except Exception:  # noqa: BLE001 - no CUDA build, no driver: no GPUs to count
        return 0


def thread_share(cores: int, ranks: int) -> int:
    """Decode threads for a rank with ``cores`` usable cores shared by ``ranks`` ranks."""
    share = cores // max(1, ranks)
    return max(1, share - 1 if share >= 3 else share)


def rank_threads() -> int:
    """The decode threads this rank takes by default: :func:`thread_share` of its cores."""
    return thread_share(usable_cores(), local_ranks()[0])
