"""The encoding work of a packing run, in batches.

Batches of list entries are made into records by a pool of threads or processes and
handed back in list order; a batch's C-made records are written per output in one call.
"""

from __future__ import annotations

import functools
import signal
from collections import deque
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from ..records.format import ListEntry
from ..records.recordio import MXIndexedRecordIO
from .transcode import (
    EncodeOptions,
    RecordBatch,
    make_batch,
    make_records,
    native_available,
    native_batches,
)


def _ignore_sigint() -> None:
    # Ctrl-C is the parent's to handle: it cancels the work and aborts the writers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _make_pool(kind: str, workers: int):
    if kind == "thread":
        return ThreadPoolExecutor(workers, thread_name_prefix="im2rec")
    import multiprocessing  # only here: its import costs ~20 ms of every command's start-up
    from concurrent.futures import ProcessPoolExecutor

    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    return ProcessPoolExecutor(workers, mp_context=context, initializer=_ignore_sigint)


def default_pool(opts: EncodeOptions) -> str:
    """The worker kind for ``opts``: ``"thread"`` or ``"process"``.

    Threads where the work releases the GIL (pass-through, JPEG → JPEG in C); else
    processes, as Pillow's Python-level work would serialise threads.
    """
    if opts.pass_through or (opts.encoding == ".jpg" and native_available()):
        return "thread"
    return "process"


# Entries per batch: batches amortise the hand-off (and, for processes, the pickling); the
# C batches (NOTE [im2rec in C]) hold the GIL only to start and to hand their frames over,
# so the larger batch halves the hand-offs where the per-batch Python is most of what is left.
_BATCH = 8
_NATIVE_BATCH = 16
# NOTE [batch callers]: with the C batches, --num-thread N is N native threads, fed by 2N
# Python threads that each wait on one queued batch (N = 1 too: its thread works while the
# writer writes). A caller needs the GIL only between
# its batches (to hand the frames over, to make what C left to it), so the native threads
# wait for Python only when every caller does; with one caller per thread, one caller that
# waits for the GIL (held by the writer, or by a thread the OS has descheduled on a busy
# machine) leaves its thread with nothing queued.
_CALLERS_PER_THREAD = 2


def batch_stream(
    entries: Sequence[ListEntry],
    root: str,
    opts: EncodeOptions,
    num_thread: int,
    pool: str = "process",
    make=make_records,
) -> Iterable[tuple[Sequence[ListEntry], Any]]:
    """``(chunk, make(chunk, root, opts))`` per batch of ``entries``, in order.

    ``num_thread`` workers run them (``make_batch``'s: NOTE [batch callers]); at most four
    batches a worker are in flight or waiting to be written, so memory does not grow with
    the dataset.
    """
    batch, workers = _BATCH, num_thread
    if make is make_batch and native_batches(opts):
        batch = _NATIVE_BATCH
        # the threads queue their batches on one native pool (processes: one thread each)
        make = functools.partial(make_batch, threads=num_thread if pool == "thread" else 1)
        if pool == "thread":  # NOTE [batch callers]
            workers = _CALLERS_PER_THREAD * num_thread
    batches = (entries[i : i + batch] for i in range(0, len(entries), batch))
    if workers <= 1:
        for chunk in batches:
            yield chunk, make(chunk, root, opts)
        return
    window = max(4, 4 * workers)
    with _make_pool(pool, workers) as executor:
        pending: deque[tuple[Sequence[ListEntry], Future]] = deque()
        try:
            for chunk in batches:
                pending.append((chunk, executor.submit(make, chunk, root, opts)))
                if len(pending) >= window:
                    chunk, future = pending.popleft()
                    yield chunk, future.result()
            while pending:
                chunk, future = pending.popleft()
                yield chunk, future.result()
        finally:  # on error or Ctrl-C: drop queued work; running batches finish quickly
            for _, future in pending:
                future.cancel()


class FramedRuns:
    """A batch's C-made records, gathered per writer and written with one call each.

    A writer's run is written before any other record goes to it (:meth:`flush`), so
    every output keeps the list's order.
    """

    def __init__(self, batch: RecordBatch) -> None:
        self.batch = batch
        self.lengths = batch.lengths.tolist()
        ends = np.cumsum(batch.lengths).tolist()
        self.starts = [end - n for end, n in zip(ends, self.lengths, strict=True)]
        self.runs: dict[int, list[int]] = {}  # writer -> its entries (in the batch)
        self.keys: dict[int, list] = {}  # writer -> their keys

    def add(self, writer: int, j: int, key: int) -> None:
        """Entry ``j`` of the batch (in ``frames``) goes to ``writer`` under ``key``."""
        self.runs.setdefault(writer, []).append(j)
        self.keys.setdefault(writer, []).append(key)

    def flush(self, writers: Sequence[MXIndexedRecordIO], writer: int | None = None) -> None:
        """Write the runs gathered for ``writer`` (every writer: None)."""
        for k in list(self.runs) if writer is None else [writer]:
            run = self.runs.pop(k, None)
            if not run:
                continue
            frames = memoryview(self.batch.frames)
            first, last = run[0], run[-1]
            lengths = [self.lengths[j] for j in run]
            if last - first + 1 == len(run):  # one span of frames: no copy
                start = self.starts[first]
                data = frames[start : start + sum(lengths)]
                crcs = self.batch.crcs[first : last + 1]
            else:
                starts = self.starts
                data = b"".join(frames[starts[j] : starts[j] + self.lengths[j]] for j in run)
                crcs = self.batch.crcs[run]
            writers[k].write_framed(self.keys.pop(k), data, lengths, crcs)
