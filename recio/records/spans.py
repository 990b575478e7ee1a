"""``Spans``: byte ranges of one buffer, the encoded images of a batch without an object each.

The reader finds where each image of a local batch starts and ends in the file's map (numpy
over the whole batch) and the decode pool reads them from there: one buffer view for the
batch instead of a memoryview per image, made, checked and released under the GIL. Items
are still there as memoryviews for the code that wants them one at a time (the Pillow
path, the DALI stage).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import numpy as np

__all__ = ["Spans"]


class Spans(Sequence):
    """``len(starts)`` byte ranges of ``base``: item ``i`` is ``base[starts[i]:][:lengths[i]]``.

    Args:
        base: any C-contiguous bytes-like object (a memoryview of an mmap'd file); the
            spans keep a memoryview of it, so it stays valid, and mapped, while they live.
        starts: where each item starts in ``base`` (integers, converted to int64).
        lengths: each item's length in bytes (0: an empty item).

    Raises:
        ValueError: the arrays are not 1-D of one length, or a span is outside ``base``.
    """

    __slots__ = ("base", "lengths", "starts")

    def __init__(self, base: Any, starts: Any, lengths: Any) -> None:
        view = memoryview(base)  # a view of our own: the owner's release() leaves it valid
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        self.base = view
        self.starts = np.ascontiguousarray(starts, dtype=np.int64)
        self.lengths = np.ascontiguousarray(lengths, dtype=np.int64)
        if self.starts.ndim != 1 or self.starts.shape != self.lengths.shape:
            raise ValueError(
                f"starts and lengths must be 1-D of one length, got shapes "
                f"{self.starts.shape} and {self.lengths.shape}"
            )
        outside = (self.starts < 0) | (self.lengths < 0) | (self.starts > len(view) - self.lengths)
        if outside.any():
            i = int(np.argmax(outside))
            raise ValueError(
                f"span {i} (start {self.starts[i]}, length {self.lengths[i]}) is outside the "
                f"base buffer ({len(view)} bytes)"
            )

    @classmethod
    def inside(cls, base: memoryview, starts: np.ndarray, lengths: np.ndarray) -> Spans:
        """Spans known to be inside ``base`` (a 1-D byte memoryview), int64 arrays as they are.

        For a caller whose spans are inside by construction (the reader's): the checks of
        the constructor are left out (the native pool checks again, for memory safety;
        items are slices of a memoryview, which cannot reach outside it).
        """
        spans = cls.__new__(cls)
        spans.base, spans.starts, spans.lengths = memoryview(base), starts, lengths
        return spans

    def __len__(self) -> int:
        return len(self.starts)

    @overload
    def __getitem__(self, i: int) -> memoryview: ...

    @overload
    def __getitem__(self, i: slice) -> Spans: ...

    def __getitem__(self, i: int | slice) -> memoryview | Spans:
        """Item ``i`` as a zero-copy memoryview of the base; a slice gives Spans."""
        if isinstance(i, slice):
            return self.take(np.arange(len(self))[i])
        start = int(self.starts[i])  # IndexError past the end, as a list's
        return self.base[start : start + int(self.lengths[i])]

    def take(self, indices: Any) -> Spans:
        """The spans at ``indices`` (an integer array or sequence), over the same base."""
        indices = np.asarray(indices, dtype=np.intp)
        return Spans(self.base, self.starts[indices], self.lengths[indices])

    def __repr__(self) -> str:
        return f"Spans({len(self)} spans of a {len(self.base)}-byte buffer)"
