"""Fetching the raw bytes of upcoming batches ahead of the decoder, with bounded memory.

``Prefetcher(records, batches)`` yields ``(indices, payloads)`` for each batch in
order. Behind it, consecutive batches are grouped into one fetch job of about
``group_bytes`` (so the ranges of several batches coalesce into large requests),
or of exactly ``group_batches`` batches (a block-shuffle window: see
``Sampler.fetch_group``), and ``depth`` jobs are in flight; with ``read_ahead``, as many
as the measured rates need (NOTE [adaptive fetch]), within ``read_ahead`` bytes: the jobs
in flight and the one being used (a fetch holds its records' bytes and the small gaps it
kept, NOTE [dropped gaps] in :mod:`recio.storage.httprange`).
The iterator's reader thread owns one; ``close()`` stops it.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np

from .adaptive import jobs_ahead
from .schedule import clock

__all__ = ["Lookahead", "Prefetcher"]

_MAX_JOBS = 16  # fetch jobs in flight at most, whatever the read-ahead allows


class _Records(Protocol):
    lengths: np.ndarray

    def read_many(self, indices: Sequence[int]) -> list[Any]: ...


class Prefetcher:
    """Iterate ``(indices, payloads)`` of ``batches`` while later batches are fetched.

    Args:
        records: a ``RecordFile`` (anything with ``lengths`` and ``read_many``).
        batches: index arrays, one per batch, in the order they will be consumed.
        depth: fetch jobs in flight (each job runs its requests concurrently as well).
        group_bytes: batches are grouped until a job holds this many record bytes;
            0 makes every batch its own job.
        group_batches: group exactly this many batches instead (then group_bytes is
            not used). The first job then holds the first batch alone, so that the
            decoder starts after a small fetch rather than a whole window's, and the
            second the rest of that window.
        first_batch: the first batch's number in the epoch, so that groups follow the
            windows when an epoch is resumed mid-way (windows start at multiples of
            group_batches).
        epoch: the batches' epoch, for a block cache's schedule: each job's reads are
            for the clock of its last batch (:func:`recio.storage.schedule.clock`);
            None: no clock.
        read_ahead: adapt the jobs in flight to what is measured (Little's law: the
            consumer's bytes per second × a job's fetch time / a job's bytes, plus one;
            NOTE [adaptive fetch]), from ``depth`` up to this many bytes of jobs, the
            one being used among them (at least one in flight). None: always ``depth``.
        lead: with ``group_batches``, fetch the first batch alone first (above). A
            prefetcher started well ahead (the next epoch's) does without: the lead's
            records would be fetched twice, alone and again in the gaps of its window's
            coalesced requests.
    """

    def __init__(
        self,
        records: _Records,
        batches: Iterable[Sequence[int]],
        *,
        depth: int = 2,
        group_bytes: int = 32 << 20,
        group_batches: int | None = None,
        first_batch: int = 0,
        epoch: int | None = None,
        read_ahead: int | None = None,
        lead: bool = True,
    ) -> None:
        if depth < 1:
            raise ValueError(f"depth must be >= 1, not {depth}")
        if group_bytes < 0:
            raise ValueError(f"group_bytes must be >= 0, not {group_bytes}")
        self.records = records
        self.depth = depth
        if group_batches is not None and group_batches < 1:
            raise ValueError(f"group_batches must be >= 1, not {group_batches}")
        self.group_bytes = group_bytes
        self.group_batches = group_batches
        self._first = self._next = first_batch  # epoch batch numbers
        self.epoch = epoch
        self.read_ahead = read_ahead
        self.in_flight = depth  # jobs kept in flight now (read_ahead: adapted)
        # measured: seconds and bytes of the fetches; the consumer's seconds and bytes
        self._fetched = [0.0, 0]
        self._consumed = [0.0, 0]
        self._jobs_done = 0
        self.lead = lead and group_batches is not None
        self._lead_pending = self.lead  # the lead job not yet handed out
        self._rest = iter(batches)  # the batches not yet looked at
        self._batches: Iterator = self._rest  # those not yet grouped (one looked-at first)
        self._jobs: deque[tuple[list[np.ndarray], Future]] = deque()
        workers = (depth if read_ahead is None else _MAX_JOBS) + (group_batches is not None)
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="recio-prefetch")
        self._closed = False
        self._issued = False  # every job of the batches submitted
        self._on_issued: Callable[[], None] | None = None

    def when_issued(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` (once, in the iterating thread) when the last job has been submitted.

        Now if it already has been. The iterator starts the next epoch's first fetches
        from it, so that they run while this epoch's last jobs are used, not after.
        """
        if self._issued:
            fn()
        else:
            self._on_issued = fn

    def _next_group(self) -> list[np.ndarray]:
        if self.group_batches is not None:
            # the lead batch alone, then the rest of its window, then whole windows
            g = self.group_batches
            size = 1 if self._next == self._first and self.lead else g - self._next % g
            group = [np.asarray(b, dtype=np.int64) for b in itertools.islice(self._batches, size)]
            self._next += len(group)
            return group
        group: list[np.ndarray] = []
        nbytes = 0
        for batch in self._batches:
            indices = np.asarray(batch, dtype=np.int64)
            group.append(indices)
            nbytes += int(self.records.lengths[indices].sum())
            if nbytes >= self.group_bytes:
                break
        self._next += len(group)
        return group

    def _fetch(self, group: list[np.ndarray], last: int) -> list[Any]:
        indices = np.concatenate(group)
        t0 = time.perf_counter()
        if self.epoch is None:
            out = self.records.read_many(indices)
        else:
            out = self.records.read_many(indices, until=clock(self.epoch, last))
        self._fetched[0] += time.perf_counter() - t0
        self._fetched[1] += int(self.records.lengths[indices].sum())
        return out

    def _adapt(self) -> None:
        """Jobs in flight from what is measured (NOTE [adaptive fetch])."""
        if self.read_ahead is None or self._jobs_done < 2:
            return
        fetch_s, fetched = self._fetched
        spent, consumed = self._consumed
        jobs = self._jobs_done
        job_bytes = fetched / jobs
        # the job being used counts against the bound too
        high = max(1, min(_MAX_JOBS, int(self.read_ahead // max(job_bytes, 1)) - 1))
        rate = consumed / spent if spent > 0 else 0.0
        self.in_flight = jobs_ahead(rate, fetch_s / jobs, job_bytes, self.depth, high)

    def _fill(self) -> None:
        # The lead batch's small job does not count: the rest of its window starts with it.
        while len(self._jobs) < self.in_flight + self._lead_pending:
            group = self._next_group()
            if not group:
                if not self._issued:
                    self._mark_issued()
                return
            future = self._pool.submit(self._fetch, group, self._next - 1)
            self._jobs.append((group, future))
            if not self._issued:  # was that the last job? (one batch looked at ahead)
                ahead = next(self._rest, None)
                if ahead is None:
                    self._mark_issued()
                else:
                    self._batches = itertools.chain([ahead], self._rest)

    def _mark_issued(self) -> None:
        self._issued = True
        fn, self._on_issued = self._on_issued, None
        if fn is not None:
            fn()

    def start(self) -> None:
        """Begin fetching now, before iteration (the iterator's next-epoch lookahead)."""
        if not self._closed:
            self._fill()

    def __iter__(self) -> Iterator[tuple[np.ndarray, list[Any]]]:
        try:
            while True:
                if self._closed:
                    return
                self._fill()
                if not self._jobs:
                    return
                group, future = self._jobs.popleft()
                self._lead_pending = False
                payloads = future.result()  # re-raises the fetch error here, in the consumer
                self._jobs_done += 1
                self._adapt()
                self._fill()  # start the next job before handing this one out
                start = 0
                for indices in group:
                    t0 = time.perf_counter()
                    yield indices, payloads[start : start + len(indices)]
                    # the consumer's time with this batch: how fast it takes the bytes
                    self._consumed[0] += time.perf_counter() - t0
                    self._consumed[1] += int(self.records.lengths[indices].sum())
                    start += len(indices)
        finally:
            self.close()

    def close(self) -> None:
        """Stop fetching; jobs already running finish in the background and are dropped."""
        if self._closed:
            return
        self._closed = True
        running = [f for _, f in self._jobs if not f.cancel() and not f.done()]
        self._jobs.clear()
        # Idle (the usual end of an epoch): join the threads now. A fetch still running is
        # not waited for (it ends within the storage timeouts, its result dropped).
        self._pool.shutdown(wait=not running)

    def __enter__(self) -> Prefetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Lookahead:
    """One Prefetcher started ahead for a known ``(epoch, step)``.

    The next epoch's first fetches run while the decoder finishes this epoch, so an epoch
    does not start by waiting for its first window. A thread-safe box; a mismatched or
    unused one is closed.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: tuple[tuple[int, int], Prefetcher] | None = None

    def put(self, key: tuple[int, int], prefetcher: Prefetcher) -> None:
        """Hold ``prefetcher``, started for ``key``; the one held before is closed."""
        with self._lock:
            old, self._held = self._held, (key, prefetcher)
        if old is not None:
            old[1].close()

    def take(self, key: tuple[int, int]) -> Prefetcher | None:
        """The prefetcher started for ``key``, or None (one started for another is closed)."""
        with self._lock:
            held, self._held = self._held, None
        if held is None:
            return None
        if held[0] == key:
            return held[1]
        held[1].close()
        return None

    @property
    def key(self) -> tuple[int, int] | None:
        """The ``(epoch, step)`` of the prefetcher held, or None when none is."""
        held = self._held
        return None if held is None else held[0]

    def close(self) -> None:
        """Close the prefetcher held, if any."""
        with self._lock:
            held, self._held = self._held, None
        if held is not None:
            held[1].close()
