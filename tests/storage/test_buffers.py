"""Receive buffers used again once every view of them is gone (NOTE [reused buffers])."""

from __future__ import annotations

import os
import threading
import time

import numpy as np

from recio.storage import buffers
from recio.storage.buffers import SMALLEST, ReceiveBuffers, size_class

MB = 1 << 20


def address(view: memoryview) -> int:
    return np.frombuffer(view, dtype=np.uint8).ctypes.data


def test_size_classes_are_quarter_octaves_that_hold_the_size():
    for n in [9, 17, 1000, SMALLEST, SMALLEST + 1, MB - 1, MB, 3 * MB + 5, 100 * MB]:
        size = size_class(n)
        assert n <= size < 1.25 * n + 1
        step = 1 << (size.bit_length() - 3)
        assert size % step == 0 and 4 <= size // step <= 8
    assert size_class(MB) == MB and size_class(MB + 1) == 5 * MB // 4


def test_a_buffer_comes_again_only_once_no_view_of_it_is_left():
    pool = ReceiveBuffers(16 * MB)
    first = pool.take(MB)
    at = address(first)
    first[:4] = b"abcd"
    held = [first[1:3], np.frombuffer(first, dtype=np.uint8)[2:]]  # views of its last use
    del first
    other = pool.take(MB)
    assert address(other) != at and pool.reused == 0  # still viewed: a second buffer
    held.pop()
    assert address(pool.take(MB)) != at  # one view is left
    held.clear()
    again = pool.take(MB - 100)  # the same size class
    assert address(again) == at and len(again) == MB - 100 and pool.reused == 1
    assert pool.kept == 3 * MB


def test_the_buffers_kept_stay_within_the_limit():
    pool = ReceiveBuffers(4 * MB)
    held = [pool.take(MB) for _ in range(4)]
    assert pool.kept == 4 * MB
    kept = {address(h) for h in held}
    extra = pool.take(MB)  # every one in use, no room: a fresh buffer, not kept
    assert pool.kept == 4 * MB and len(extra) == MB and address(extra) not in kept
    held.pop()  # one free buffer of 1 MiB: dropped to make room for 2 MiB, which still
    big = pool.take(2 * MB)  # does not fit beside the three in use: a fresh one
    assert pool.kept == 3 * MB and address(big) not in kept
    held.clear()
    big = pool.take(2 * MB)  # free ones dropped until it fits
    assert pool.kept == 4 * MB and len(big) == 2 * MB
    assert address(pool.take(MB)) in kept  # one of the two 1 MiB ones left, free


def test_small_bodies_get_fresh_buffers():
    pool = ReceiveBuffers(16 * MB)
    small = pool.take(SMALLEST - 1)
    assert len(small) == SMALLEST - 1 and not small.readonly and pool.kept == 0


def test_threads_never_share_a_buffer_in_use():
    """Eight threads take, fill, hold and let go of buffers at once: none finds its bytes
    overwritten while it holds them (a buffer in use is never handed out again)."""
    pool = ReceiveBuffers(6 * MB)  # less than the threads hold at once: some fresh ones
    errors = []

    def work(k: int) -> None:
        for round_ in range(40):
            view = pool.take(MB - k)
            mark = (k * 41 + round_) % 256
            view[:] = bytes([mark]) * len(view)
            time.sleep(0.0005)
            if view[0] != mark or view[-1] != mark or view.tobytes().count(mark) != len(view):
                errors.append((k, round_))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and pool.reused > 0 and pool.kept <= 6 * MB


def test_sources_share_one_pool_that_lets_go_when_the_last_leaves(monkeypatch):
    """A process's remote sources share one pool: its limit is the largest read-ahead of
    those open, and the free buffers go when the last one leaves (in this process)."""
    monkeypatch.setattr(buffers, "_shared", None)
    monkeypatch.setattr(buffers, "_limits", [])
    pool = buffers.join(4 * MB)
    assert buffers.join(8 * MB) is pool and pool.limit == 8 * MB
    held, free = pool.take(MB), pool.take(2 * MB)
    del free
    buffers.leave(8 * MB)
    assert pool.limit == 4 * MB and pool.kept == 3 * MB  # one source still open
    buffers.leave(4 * MB, pid=os.getpid() + 1)  # a source inherited from a parent: not ours
    assert pool.limit == 4 * MB and pool.kept == 3 * MB
    buffers.leave(4 * MB, pid=os.getpid())
    assert pool.kept == MB and len(held) == MB  # the free one went, the one in use stays
    del held
    assert buffers.join(4 * MB) is pool and len(pool.take(MB)) == MB


def test_a_body_larger_than_the_limit_leaves_the_free_buffers_kept():
    pool = ReceiveBuffers(4 * MB)
    free = pool.take(MB)
    at = address(free)
    del free
    big = pool.take(4 * MB + 1)  # its size class is above the limit: fresh, nothing dropped
    assert len(big) == 4 * MB + 1 and pool.kept == MB
    assert address(pool.take(MB)) == at
