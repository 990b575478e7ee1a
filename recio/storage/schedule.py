"""The schedule's clock: which step of which epoch a read is for, the same on every rank.

A block cache orders what it keeps by it (NOTE [block cache]); the prefetcher and the
iterator stamp their reads with it.
"""

from __future__ import annotations

__all__ = ["NEVER", "clock"]

#: The priority of a block with no use ahead (Belady's first victim).
NEVER = 1 << 62


def clock(epoch: int, step: int) -> int:
    """The schedule's clock of ``step`` of ``epoch``: increasing, the same on every rank."""
    return (int(epoch) << 32) | int(step)
