"""Receive buffers for request bodies, used again once nothing references them.

NOTE [reused buffers]: a body of a few MB received into a fresh buffer is new memory to the
process: malloc maps it for the request and unmaps it once it is freed, so the kernel
faults in and zeroes each of its pages as the body arrives. In the far-S3 benchmark
(tools/bench_far_remote.py) that was 4.3 page faults an image on block shuffle, 2 through
a block cache. :class:`ReceiveBuffers` keeps the buffers instead and hands each one out
again once the last view of it is gone. A buffer is handed out as a numpy array whose base
is a :class:`Lease` (as the iterator's batch arrays are, ``BatchBuffers``): every view made
of it (a memoryview slice, a numpy view) keeps the lease alive through its base, and the
pool holds only a weak reference to the lease, so a buffer is free exactly when no view of
its last use is left. The buffers kept (in use or free) take at most ``limit`` bytes; a
body that finds no room gets a fresh buffer of its own.

The remote sources of a process share one pool (:func:`join`, :func:`leave`): a sharded
dataset opens a source per shard, and a pool each would keep up to the read-ahead per
shard. The shared pool's limit is the largest read-ahead of the sources open; when the last
one closes, its free buffers go.
"""

from __future__ import annotations

import os
import threading
import weakref

import numpy as np

__all__ = ["Lease", "ReceiveBuffers", "join", "leave"]

#: Bodies below this many bytes get a fresh buffer: malloc serves them from its own heap.
SMALLEST = 256 << 10


def size_class(n: int) -> int:
    """``n`` rounded up to the next of 4, 5, 6, 7 or 8 × a power of two (a quarter octave).

    Bodies of nearby sizes share buffers of one size, which wastes a quarter at most.
    """
    if n <= 8:
        return n
    step = 1 << (n.bit_length() - 3)  # n is 4 to 8 steps
    return -(-n // step) * step


class Lease:
    """The base object of one handed-out buffer: while it lives, the buffer is in use.

    numpy collapses a view's ``base`` chain down to the first object that owns the memory
    or is not an ndarray; this is such an object, so every array and memoryview made from
    ``np.asarray(lease)`` keeps it alive, and it keeps ``buffer`` alive. ``interface`` is
    the ``__array_interface__`` handed out: ``buffer``'s own, or one of a part of it. The
    iterator's batch arrays are handed out the same way (``BatchBuffers``).
    """

    __slots__ = ("__array_interface__", "__weakref__", "buffer")

    def __init__(self, buffer: np.ndarray, interface: dict) -> None:
        self.buffer = buffer
        self.__array_interface__ = interface


def _first(buffer: np.ndarray, n: int) -> Lease:
    """A lease on the first ``n`` bytes of ``buffer``."""
    interface = {"data": (buffer.ctypes.data, False), "shape": (n,), "typestr": "|u1",
                 "version": 3}  # fmt: skip
    return Lease(buffer, interface)


class ReceiveBuffers:
    """Byte buffers reused once every view of their last use is gone (NOTE [reused buffers]).

    Args:
        limit: the most bytes the buffers kept (in use or free) take.
    """

    def __init__(self, limit: int) -> None:
        self.limit = int(limit)
        self._slots: list[tuple[np.ndarray, weakref.ref]] = []  # a buffer, its last lease
        self._kept = 0
        self._lock = threading.Lock()
        self.reused = 0

    @property
    def kept(self) -> int:
        """Bytes of the buffers kept now (in use or free)."""
        return self._kept

    def take(self, n: int) -> memoryview:
        """A writable buffer of ``n`` bytes, its contents undefined (not zeroed)."""
        size = size_class(n)
        if n < SMALLEST or size > self.limit:  # (dropping free buffers would not make room)
            return memoryview(np.empty(n, dtype=np.uint8))
        with self._lock:
            for i, (buffer, last) in enumerate(self._slots):
                if len(buffer) == size and last() is None:
                    lease = _first(buffer, n)
                    self._slots[i] = (buffer, weakref.ref(lease))
                    self.reused += 1
                    return memoryview(np.asarray(lease))
            self._drop_free(self.limit - size)
            if self._kept + size > self.limit:  # no room: a buffer of its own, not kept
                return memoryview(np.empty(n, dtype=np.uint8))
            buffer = np.empty(size, dtype=np.uint8)
            lease = _first(buffer, n)
            self._slots.append((buffer, weakref.ref(lease)))
            self._kept += size
        return memoryview(np.asarray(lease))

    def _drop_free(self, budget: int) -> None:
        """Let go of free buffers (of other sizes), oldest first, until ``budget`` is kept."""
        i = 0
        while self._kept > budget and i < len(self._slots):
            buffer, last = self._slots[i]
            if last() is None:
                del self._slots[i]
                self._kept -= len(buffer)
            else:
                i += 1

    def drop_free(self) -> None:
        """Let go of every free buffer (those in use go with their last view)."""
        with self._lock:
            self._drop_free(0)


_shared: ReceiveBuffers | None = None
_limits: list[int] = []  # the read-aheads of the sources that joined and did not leave
_shared_lock = threading.Lock()


def join(limit: int) -> ReceiveBuffers:
    """The process's shared pool, for one more source reading ahead at most ``limit`` bytes."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = ReceiveBuffers(limit)
        _limits.append(int(limit))
        _shared.limit = max(_limits)
        return _shared


def leave(limit: int, pid: int | None = None) -> None:
    """A source that joined with ``limit`` (in process ``pid``, if given) is done.

    Its bound goes, and with the last source the free buffers. A source a forked child
    inherited joined its parent's pool, not the child's: ``pid`` tells them apart.
    """
    if pid is not None and pid != os.getpid():
        return
    with _shared_lock:
        if _shared is None or int(limit) not in _limits:
            return
        _limits.remove(int(limit))
        if _limits:
            _shared.limit = max(_limits)
        else:
            _shared.drop_free()


def _forked() -> None:
    # A child starts with no pool: the parent's buffers and lock are the parent's.
    global _shared, _shared_lock
    _shared, _shared_lock = None, threading.Lock()
    _limits.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
