"""The schedule's clock: epochs and steps in one increasing integer, NEVER after all."""

from __future__ import annotations

from recio.storage.schedule import NEVER, clock


def test_clock_orders_by_epoch_then_step():
    stamps = [clock(e, s) for e in range(3) for s in (0, 1, 2**31, 2**32 - 1)]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    assert clock(1, 0) == 1 << 32 and clock("2", 5.0) == (2 << 32) | 5
    assert clock(1 << 29, 2**32 - 1) < NEVER
