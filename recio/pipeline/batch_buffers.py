"""Batch arrays the decoder writes into, used again once nothing outside holds them."""

from __future__ import annotations

import threading
import weakref

import numpy as np

from ..storage import Lease


class BatchBuffers:
    """Batch arrays the decoder writes into, reused once the consumer has let go of them.

    Each batch is handed out as an array made from a fresh
    :class:`~recio.storage.buffers.Lease` on a long-lived buffer, and the pool keeps only a
    weak reference to the lease. Every array derived from
    the batch (a slice, a reshape, ``np.asarray``, a torch tensor made with
    ``torch.from_numpy``) references the lease through its ``base`` chain, so while the
    consumer keeps any of them the buffer is never written again. Reuse saves the page
    faults of a fresh allocation (a 128×3×224×224 float32 batch is 77 MB).

    At most ``limit`` buffers are tracked; beyond that, the oldest one still held is
    left to the consumer and forgotten. :meth:`take` may be called from several threads
    (the decode threads of the running pipeline).
    """

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, limit: int) -> None:
        self.shape, self.dtype, self.limit = shape, np.dtype(dtype), limit
        self._slots: list[tuple[np.ndarray, dict, weakref.ref]] = []  # buffer, interface, lease
        self._lock = threading.Lock()
        self.allocated = 0
        self.reused = 0

    def take(self) -> np.ndarray:
        """A writable batch array that nothing outside the pipeline references."""
        with self._lock:
            return self._take()

    def _take(self) -> np.ndarray:
        for i, (buffer, interface, lease) in enumerate(self._slots):
            if lease() is None:
                del self._slots[i]
                self.reused += 1
                return self._hand_out(buffer, interface)
        if len(self._slots) >= self.limit:
            del self._slots[0]  # still held by the consumer: theirs now
        self.allocated += 1
        buffer = np.empty(self.shape, dtype=self.dtype)
        return self._hand_out(buffer, buffer.__array_interface__)

    def _hand_out(self, buffer: np.ndarray, interface: dict) -> np.ndarray:
        # the buffer's __array_interface__ is made once (a dict, its typestr formatted: 11 k
        # instructions, on small images 5 % of a batch's serial work), and shared by its
        # leases: numpy only reads it
        lease = Lease(buffer, interface)
        self._slots.append((buffer, interface, weakref.ref(lease)))
        return np.asarray(lease)
