"""Which part of the data this process reads: rank and number of workers.

Looked up in order: an MXNet-style ``kv`` object (``.rank``, ``.num_workers``),
explicit ``part_index``/``num_parts``, an initialised torch.distributed process group
(what Lightning, Accelerate and torchrun set up), then the environment — torchrun
(``RANK``/``WORLD_SIZE``), MPI (``OMPI_COMM_WORLD_RANK``/``_SIZE``), SLURM
(``SLURM_PROCID``/``SLURM_NTASKS``). The process group comes before the environment
because it is what the gradients are averaged over: Lightning's own launcher sets
``WORLD_SIZE`` but not ``RANK``, and a SLURM job step may hold fewer tasks than the
processes a framework starts in it. The choice is logged once.
"""

from __future__ import annotations

import logging
import os
import sys
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
