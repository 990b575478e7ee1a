"""What hit rate a block cache would have had: a trace of block uses replayed under a policy.

Its user is the far-remote benchmark (``tools/bench_far_remote.py``), which compares the
cache's measured hit rate with the bound Belady's rule gives on the same trace.
"""

from __future__ import annotations

from collections.abc import Sequence

from .schedule import NEVER

__all__ = ["replay"]


def replay(
    trace: Sequence[tuple[int, int]], sizes: dict[int, int] | int, limit: int, policy: str
) -> float:
    """The hit rate a cache of ``limit`` bytes would have had on ``trace`` under ``policy``.

    ``trace`` is a :attr:`CacheStats.trace`: (block, until) in order; ``sizes`` each block's
    entry bytes (or one size for all). Belady here knows the trace's own future exactly, so
    it is the bound the scheduled cache approaches; "lru" is what it would have been
    without the schedule.
    """
    if policy not in ("belady", "lru"):
        raise ValueError(f"policy must be 'belady' or 'lru', not {policy!r}")
    size_of = (lambda b: sizes) if isinstance(sizes, int) else sizes.__getitem__
    blocks = [b for b, _ in trace]
    nxt = [NEVER] * len(blocks)
    seen: dict[int, int] = {}
    for i in range(len(blocks) - 1, -1, -1):
        nxt[i] = seen.get(blocks[i], NEVER)
        seen[blocks[i]] = i
    resident: dict[int, int] = {}  # block -> priority (next use, or last use for LRU)
    used = hits = 0
    for i, b in enumerate(blocks):
        priority = nxt[i] if policy == "belady" else i
        if b in resident:
            hits += 1
            resident[b] = priority
            continue
        need = size_of(b)
        if need > limit:
            continue
        while used + need > limit and resident:
            if policy == "belady":
                victim = max(resident, key=resident.__getitem__)
                if resident[victim] <= priority:
                    break
            else:
                victim = min(resident, key=resident.__getitem__)
            used -= size_of(victim)
            del resident[victim]
        if used + need <= limit:
            resident[b] = priority
            used += need
    return hits / len(blocks) if blocks else 0.0
