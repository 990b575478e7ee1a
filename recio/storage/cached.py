"""``CachedSource``: a remote file read through a bounded ``BlockCache``.

Each range is served from the blocks it covers; the missing ones are fetched in one
coalesced, concurrent read of the remote source and stored within the cache's limit, in
the order the iterator's schedule gives (NOTE [block cache]).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from .base import ByteSource
from .blockcache import BlockCache, CacheStats, file_key
from .schedule import NEVER

__all__ = ["CachedSource"]


def _covered(first: np.ndarray, last: np.ndarray) -> list[int]:
    """The blocks ranges ``first[k]`` to ``last[k]`` (inclusive) cover, ascending, once each."""
    over = np.flatnonzero(last > first)  # a range over several blocks: few
    inner = [b for k in over.tolist() for b in range(int(first[k]) + 1, int(last[k]) + 1)]
    return np.unique(np.concatenate([first, np.asarray(inner, dtype=np.int64)])).tolist()


class CachedSource(ByteSource):
    """A remote file read through a :class:`BlockCache` (NOTE [block cache]).

    ``read_ranges`` serves each range from the blocks it covers, fetching the missing ones
    in one coalesced, concurrent read of ``source``. ``schedule`` tells it the reads of the
    coming steps (for Belady's rule); ``read_ranges(..., until=clock)`` says which step a
    read is for. ``stats`` counts this source's hits and fetches (and, with
    ``stats.trace = []``, keeps the block uses, for :func:`recio.storage.replay.replay`).

    Args:
        source: the remote file (an :class:`~recio.storage.remote.FsspecSource`).
        cache: the cache.
        block_size: bytes per block, at most (a limit under 8 blocks of it takes smaller
            ones: an eighth of the limit, in 4 KiB steps).
        version: what changes with the file's content (its ETag, mtime ...); None when
            the store reports none (then the cache cannot tell a rewritten file from the
            entries, and the key includes this process's id: entries are not shared).
    """

    schedules = True

    def __init__(self, source: Any, cache: BlockCache, block_size: int, version: str | None):
        if block_size < 1:
            raise ValueError(f"cache_block must be >= 1, not {block_size}")
        self.source = source
        self.url, self.size = source.url, int(source.size)
        self.cache = cache
        self.block_size = min(int(block_size), max(4096, cache.limit // 8 // 4096 * 4096))
        unshared = f"pid={os.getpid()},{id(self)}" if version is None else version
        self.key = file_key(source.url, self.size, f"{unshared}\nblock={self.block_size}")
        self.stats = CacheStats()
        self.closed = False
        self._uses: dict[int, np.ndarray] = {}  # block -> its use clocks, ascending
        self._sched_lock = threading.Lock()

    @property
    def fetch(self):
        """The remote source's :class:`~recio.storage.options.FetchOptions`."""
        return self.source.fetch

    def __getstate__(self) -> dict:
        return {"source": self.source, "cache": self.cache, "block_size": self.block_size,
                "key": self.key}  # fmt: skip

    def __setstate__(self, state: dict) -> None:
        self.source, self.cache = state["source"], state["cache"]
        self.url, self.size = self.source.url, int(self.source.size)
        self.block_size, self.key = state["block_size"], state["key"]
        self.stats = CacheStats()
        self.closed = False
        self._uses = {}
        self._sched_lock = threading.Lock()

    def _blocks(self, offset: int, length: int) -> range:
        if length <= 0:
            return range(0)
        return range(offset // self.block_size, (offset + length - 1) // self.block_size + 1)

    def _length(self, block: int) -> int:
        return min(self.block_size, self.size - block * self.block_size)

    def schedule(self, when: Any, offsets: Any, lengths: Any) -> None:
        """Set the reads coming: range k (``offsets[k]``, ``lengths[k]``) at ``when[k]``.

        ``when`` are clocks (:func:`clock`). Replaces the schedule given before; blocks
        not in it have no use ahead (Belady evicts them first).
        """
        when = np.asarray(when, dtype=np.int64)
        offsets = np.asarray(offsets, dtype=np.int64)
        lengths = np.asarray(lengths, dtype=np.int64)
        keep = lengths > 0
        when, offsets, lengths = when[keep], offsets[keep], lengths[keep]
        first = offsets // self.block_size
        count = (offsets + lengths - 1) // self.block_size - first + 1
        # every (block, clock) pair: a range over several blocks gives one pair for each
        within = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
        b = np.repeat(first, count) + within
        c = np.repeat(when, count)
        uses: dict[int, np.ndarray] = {}
        if len(b):
            order = np.lexsort((c, b))
            b, c = b[order], c[order]
            cuts = np.flatnonzero(np.diff(b)) + 1
            heads = b[np.concatenate([[0], cuts])].tolist()
            for block, clocks in zip(heads, np.split(c, cuts), strict=True):
                uses[block] = clocks
        with self._sched_lock:
            self._uses = uses

    def next_use(self, block: int, until: int | None) -> int | None:
        """The clock of ``block``'s first scheduled use after ``until``.

        NEVER when it has none; None without a schedule or without ``until``.
        """
        if until is None or not self._uses:
            return None
        clocks = self._uses.get(block)
        if clocks is None:
            return NEVER
        k = int(np.searchsorted(clocks, until, side="right"))
        return int(clocks[k]) if k < len(clocks) else NEVER

    def read(self, offset: int, length: int) -> bytes | memoryview:
        """``length`` bytes from ``offset`` (fewer at the end of the file)."""
        return self.read_ranges([(offset, length)])[0]

    def read_ranges(
        self, ranges: Sequence[tuple[int, int]] | np.ndarray, *, until: int | None = None
    ) -> list[bytes | memoryview]:
        """The bytes of each (offset, length) range, from cached blocks or fetched ones.

        Args:
            ranges: the ranges (pairs, or an n x 2 integer array), clipped to the file's size.
            until: the clock of the last step these reads are for (see :func:`clock`):
                what the blocks are needed for after it decides what is kept.

        Raises:
            RemoteReadError: a fetch still fails after its retries.
            ValueError: the source is closed.
        """
        if self.closed:
            raise ValueError(f"I/O on a closed file {self.url}")
        # NOTE [ranges as arrays]: a job reads thousands of records, so the ranges' blocks
        # are worked out with array operations, and the loop per record only slices.
        asked = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
        offsets = asked[:, 0]
        lengths = np.maximum(0, np.minimum(offsets + asked[:, 1], self.size) - offsets)
        first = offsets // self.block_size
        last = (offsets + lengths - 1) // self.block_size  # below first where empty
        wanted = _covered(first[lengths > 0], last[lengths > 0])
        blocks = [(b, self._length(b), self.next_use(b, until)) for b in wanted]
        if self.stats.trace is not None:
            self.stats.trace.extend((b, -1 if until is None else until) for b in wanted)
        data = self.cache.get(self.key, blocks, self._fetch, self.stats, until)
        return self._slices(data, offsets, lengths, first, last)

    def _slices(self, data: dict[int, Any], offsets, lengths, first, last) -> list:
        """Each range's bytes: a view of its block, or (over several) the parts joined."""
        views = {b: memoryview(d) for b, d in data.items()}
        starts = (offsets - first * self.block_size).tolist()
        out: list[bytes | memoryview] = []
        for b, end_block, start, n in zip(
            first.tolist(), last.tolist(), starts, lengths.tolist(), strict=True
        ):
            if n <= 0:  # its block was not read (nothing of it is wanted)
                out.append(b"")
            elif b == end_block:
                out.append(views[b][start : start + n])
            else:
                out.append(self._joined(views, b, end_block, start, n))
        return out

    def _joined(self, views: dict[int, memoryview], first: int, last: int, start: int, n: int):
        """``n`` bytes from ``start`` of block ``first`` on, over the blocks to ``last``."""
        bs = self.block_size
        parts = [views[first][start:]]
        parts += [views[b] for b in range(first + 1, last)]
        parts.append(views[last][: start + n - (last - first) * bs])
        return b"".join(parts)

    def refetch(self, offset: int, length: int, *, until: int | None = None) -> Any:
        """The range fetched again from the remote file, not served from the cache.

        The entries of the blocks it covers are removed first (NOTE [block cache]: a record
        that fails its checksum), so the read fetches them from the store and stores what
        it gets in their place.
        """
        end = max(int(offset), min(int(offset) + int(length), self.size))
        dropped = self.cache.invalidate(self.key, self._blocks(int(offset), end - int(offset)))
        self.stats.add(invalidated=dropped)
        return self.read_ranges([(offset, length)], until=until)[0]

    def _fetch(self, blocks: list[tuple[int, int]]) -> list[Any]:
        return self.source.read_ranges([(b * self.block_size, n) for b, n in blocks], gap=0)

    def close(self) -> None:
        """Close the remote source; reads raise ``ValueError`` from now on."""
        self.closed = True
        self.source.close()
