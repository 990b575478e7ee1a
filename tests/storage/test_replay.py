"""replay: the hit rate a block cache's policy would have had on a trace of block uses."""

from __future__ import annotations

import pytest

from recio.storage.replay import replay


def test_replay_belady_beats_lru_on_a_loop():
    """Three blocks in a loop, room for two: LRU always misses; Belady keeps two and lets
    the third pass (it is needed last), so after the first round two of three hit."""
    trace = [(b, k) for k, b in enumerate([0, 1, 2] * 5)]
    assert replay(trace, 10, 20, "lru") == 0.0
    assert replay(trace, 10, 20, "belady") == pytest.approx(8 / 15)
    assert replay(trace, 10, 30, "lru") == replay(trace, 10, 30, "belady") == 12 / 15


def test_replay_refuses_an_unknown_policy():
    with pytest.raises(ValueError, match="'fifo'"):
        replay([(0, 0)], 10, 20, "fifo")


def test_a_block_larger_than_the_limit_never_hits():
    assert replay([(0, 0), (0, 1)], {0: 50}, 20, "lru") == 0.0
    assert replay([], 10, 20, "belady") == 0.0
