"""The resources one rank's pipeline takes by default: decode threads, batches in flight, bytes.

NOTE [resource plan]: a node runs one process per GPU (torchrun, SLURM, MPI), and each of them
sees the whole node's affinity mask, so "every core this process may run on" oversubscribes
the node by the number of local ranks. The default here is this rank's share:

- threads: the cores of ``os.sched_getaffinity(0)`` divided by the local ranks (rounded
  down); from a share of 3 cores on, one of them is left to the consumer (the training loop's
  Python thread, recio's own per-batch Python); never fewer than 1. The local ranks are, in
  order: ``LOCAL_WORLD_SIZE`` (torchrun), ``OMPI_COMM_WORLD_LOCAL_SIZE`` (Open MPI),
  ``SLURM_NTASKS_PER_NODE``, then an initialised torch.distributed group (its world size,
  at most the GPUs this host has when it has any: one process per GPU), else 1.
- memory: ``memory_budget`` bytes (default: a quarter of the memory available to the node,
  ``MemAvailable`` or the cgroup's limit if lower, divided among the local ranks). The
  batches in flight (``prefetch_buffer + 2`` output arrays) must fit in it, and so the
  prefetch depth is the default 4 or what the budget holds if that is less; a remote
  source's read-ahead is what is left, at most ``FetchOptions.read_ahead``'s default.
  The decoders' scratch memory is bounded on its own (``DecodePool.max_decode_bytes``).

An explicit ``preprocess_threads`` / ``prefetch_buffer`` / ``fetch`` is taken as given.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from ..dist import local_ranks, thread_share, usable_cores
from ..storage import FetchOptions

log = logging.getLogger("recio")

__all__ = [
    "ResourcePlan",
    "available_memory",
    "local_ranks",
    "make_plan",
    "thread_share",
    "usable_cores",
]

DEFAULT_PREFETCH = 4  # batches decoded ahead when the budget allows (what the iterator used)
MIN_PREFETCH = 3  # the pipeline's least: two decoding and one ready
BUDGET_FRACTION = 0.25  # of the node's available memory, shared by its local ranks
_MIN_AHEAD = 1 << 20  # a remote source fetches something ahead, however tight the budget
_logged: set = set()


@dataclass(frozen=True)
class ResourcePlan:
    """What one rank's iterator takes: threads, batches in flight, bytes, and why.

    ``threads`` is what the decode pool starts with; ``max_threads`` the most the
    auto-tuner uses on free cores (``tuned``: whether it runs; up to twice that while
    other jobs hold the cores, NOTE [thread tuner]). ``depth`` is the prefetch depth
    (``prefetch_buffer``), ``in_flight`` the output arrays that exist at once
    (``depth + 2``), ``bytes`` their size together plus ``read_ahead`` (remote sources).
    """

    threads: int
    max_threads: int
    tuned: bool
    depth: int
    in_flight: int
    batch_bytes: int
    read_ahead: int
    bytes: int
    budget: int
    cores: int
    local_ranks: int
    why: tuple[str, ...]

    def describe(self) -> str:
        """One line for the log: the figures and the reasons."""
        return (
            f"recio plan: {self.threads} decode thread(s)"
            f"{f' (auto, at most {self.max_threads})' if self.tuned else ''}, "
            f"prefetch {self.depth} ({self.in_flight} batches of {self.batch_bytes / 2**20:.1f} "
            f"MiB in flight), read-ahead {self.read_ahead / 2**20:.0f} MiB; "
            f"{self.bytes / 2**20:.0f} of {self.budget / 2**20:.0f} MiB: " + "; ".join(self.why)
        )


def available_memory() -> int:
    """Bytes the node can still give: ``MemAvailable``, or the cgroup's room if less."""
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    if avail is None:
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            avail = 8 << 30  # nothing to read: a modest machine
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        with open("/sys/fs/cgroup/memory.current") as f:
            used = int(f.read().strip())
        if limit != "max":
            avail = min(avail, max(0, int(limit) - used))
    except (OSError, ValueError):
        pass
    return avail


def make_plan(
    batch_bytes: int,
    *,
    threads: int | str | None = None,
    prefetch: int | None = None,
    memory_budget: int | None = None,
    fetch: FetchOptions | None = None,
    environ: Mapping[str, str] | None = None,
) -> ResourcePlan:
    """This rank's plan for batches of ``batch_bytes`` (NOTE [resource plan]).

    ``threads``: an int is taken as given; None or ``"auto"``: the rank's share, tuned
    while it runs. ``prefetch``: an int is taken as given. Raises ValueError when a given
    ``memory_budget`` cannot hold the least the pipeline needs in flight; the default
    budget then gives way to that least, with a warning (nobody asked for it).
    """
    why: list[str] = []
    cores = usable_cores()
    ranks, source = local_ranks(environ)
    share = thread_share(cores, ranks)
    if isinstance(threads, int):
        n, most, tuned = threads, threads, False
        why.append(f"{threads} thread(s) as given")
    else:
        n, most, tuned = share, share, True
        why.append(
            f"{cores} usable core(s) / {ranks} local rank(s) [{source}]"
            + (", one left to the consumer" if cores // ranks >= 3 else "")
        )
    given_budget = memory_budget is not None
    if memory_budget is None:
        memory_budget = int(available_memory() * BUDGET_FRACTION / ranks)
        why.append(f"budget {BUDGET_FRACTION:.0%} of available memory / {ranks} rank(s)")
    else:
        why.append("budget as given")
    batch_bytes = max(1, int(batch_bytes))
    if prefetch is not None:
        depth = prefetch
        why.append(f"prefetch {prefetch} as given")
    else:
        fits = memory_budget // batch_bytes - 2
        if fits < MIN_PREFETCH and not given_budget:
            log.warning(
                "recio: the default memory budget (%d bytes: %.0f%% of the available memory "
                "over %d local rank(s)) holds %d batches of %d bytes; running with the least "
                "the pipeline needs (%d in flight). Give memory_budget= or smaller batches.",
                memory_budget, 100 * BUDGET_FRACTION, ranks, memory_budget // batch_bytes,
                batch_bytes, MIN_PREFETCH + 2,
            )  # fmt: skip
            why.append("prefetch 3: the least, past the default budget")
            fits = MIN_PREFETCH
            memory_budget = (MIN_PREFETCH + 2) * batch_bytes
        if fits < MIN_PREFETCH:
            raise ValueError(
                f"memory_budget={memory_budget} bytes holds {memory_budget // batch_bytes} "
                f"batches of {batch_bytes} bytes; the pipeline keeps at least "
                f"{MIN_PREFETCH + 2} in flight: give at least {(MIN_PREFETCH + 2) * batch_bytes}"
                " bytes, or smaller batches"
            )
        depth = min(DEFAULT_PREFETCH, fits)
        if depth < DEFAULT_PREFETCH:
            why.append(f"prefetch {depth}: what the budget holds")
    in_flight = max(depth, MIN_PREFETCH) + 2
    arrays = in_flight * batch_bytes
    default_ahead = FetchOptions().read_ahead
    if fetch is not None:
        read_ahead = fetch.read_ahead
    else:
        read_ahead = max(_MIN_AHEAD, min(default_ahead, memory_budget - arrays))
        if read_ahead < default_ahead:
            why.append("read-ahead: the budget's rest")
    return ResourcePlan(
        threads=n, max_threads=most, tuned=tuned, depth=depth, in_flight=in_flight,
        batch_bytes=batch_bytes, read_ahead=read_ahead, bytes=arrays + read_ahead,
        budget=memory_budget, cores=cores, local_ranks=ranks, why=tuple(why),
    )  # fmt: skip


def log_once(plan: ResourcePlan) -> None:
    """Log ``plan`` at INFO, once per process for each distinct plan."""
    key = (plan.threads, plan.max_threads, plan.depth, plan.batch_bytes, plan.read_ahead)
    if key not in _logged:
        _logged.add(key)
        log.info(plan.describe())
