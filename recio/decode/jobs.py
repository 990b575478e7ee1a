"""Decode jobs that run while the caller does something else.

:meth:`DecodePool.submit_records <recio.decode.DecodePool.submit_records>` queues a batch
of records on the native pool and returns a :class:`PendingRecords` at once (NOTE [pending
jobs] in native/bind_pending.c); :class:`RecordsJob` makes what many such batches share once,
for a pipeline's batches. :class:`DecodedRecords` is what a batch gives.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..records.spans import Spans
from .batch import DecodeJob
from .options import DecodeOptions
from .status import UNSUPPORTED_CODE

if TYPE_CHECKING:
    from .pool import DecodePool


class DecodedRecords(NamedTuple):
    """What :meth:`DecodePool.decode_records` gives: per record its status, header and image."""

    status: np.ndarray  # int32 (N,), 0 decoded; Status.RECORD: left to the exact parse
    labels: np.ndarray  # float32 (N, label_width); flag 0 gives its label in every column
    ids: np.ndarray  # int64 (N,) from the IRHeaders, -1 where unparsed
    images: Spans | ExtentImages  # where each image is (empty where unparsed)


def _images(base: Any, starts: np.ndarray, lengths: np.ndarray) -> Spans | ExtentImages:
    """Each record's image: spans of ``base``, or (a list of extents) inside its own."""
    if isinstance(base, list | tuple):
        return ExtentImages(base, starts, lengths)
    return Spans.inside(memoryview(base).cast("B"), starts, lengths)


class ExtentImages(Sequence):
    """Item ``i`` is ``extents[i][starts[i]:][:lengths[i]]`` (sliced when asked for)."""

    __slots__ = ("extents", "lengths", "starts")

    def __init__(self, extents: Sequence[Any], starts: np.ndarray, lengths: np.ndarray) -> None:
        self.extents, self.starts, self.lengths = extents, starts, lengths

    def __len__(self) -> int:
        return len(self.extents)

    def __getitem__(self, i: int) -> memoryview:  # type: ignore[override]
        start = int(self.starts[i])
        return memoryview(self.extents[i]).cast("B")[start : start + int(self.lengths[i])]


class PendingRecords:
    """A :meth:`DecodePool.submit_records` batch: wait for it, then take its result once."""

    __slots__ = ("_base", "_handle", "_job", "_pool", "_result", "_rows", "failed")

    def __init__(self, pool, job, base, status, labels, ids, starts, lengths, handle) -> None:
        # job: the batch's DecodeJob, or (RecordsJob, out, crops, flips, records) to make it from
        # where an image needs it (Pillow, the failed slots)
        self._pool, self._job, self._base, self._handle = pool, job, base, handle
        self._rows = (status, labels, ids, starts, lengths)
        self._result: DecodedRecords | None = None
        self.failed: bool | None = None  # after result(): whether any status is not 0

    def wait(self, timeout: float | None = None) -> bool:
        """Wait (GIL released) until the native pool is done, at most ``timeout`` seconds.

        Returns whether it is done; :meth:`result` then returns without waiting for it.
        """
        return True if self._handle is None else self._handle.wait(timeout)

    def result(self) -> DecodedRecords:
        """What :meth:`DecodePool.decode_records` returns; waits for the pool first.

        Its errors are this thread's :meth:`DecodePool.last_errors`.

        Raises:
            ValueError: the pool was closed before every image was decoded.
        """
        if self._result is not None:
            return self._result
        status, labels, ids, starts, lengths = self._rows
        n = len(status)
        errors: list[str | None] | None = None
        todo: list[int] = []
        if self._handle is not None:
            errors = self._handle.result()
            self._handle = None  # its buffer views are released
            todo = np.flatnonzero(status == UNSUPPORTED_CODE).tolist() if errors is not None else []
        elif n:
            errors = [None] * n
        images = _images(self._base, starts, lengths)
        pool = self._pool
        if errors is None:  # every image decoded: nothing to finish
            pool.remember_errors(None, n)
        else:
            job = self._job
            if not isinstance(job, DecodeJob):
                job = job[0].job_for(*job[1:])
            pool.finish_batch(job, images, status, errors, todo)
        self.failed = errors is not None and bool(status.any())
        self._result = DecodedRecords(status, labels, ids, images)
        return self._result


class RecordsJob:
    """:meth:`DecodePool.records_job`: the shared arguments of many ``submit_records``."""

    __slots__ = (
        "_drawn",
        "_dtype",
        "_job",
        "_native_options",
        "_options",
        "_pool",
        "_shape",
        "_width",
    )

    def __init__(
        self,
        pool: DecodePool,
        job: DecodeJob,
        label_width: int,
        options: DecodeOptions,
        shape: tuple,
        dtype: Any,
    ) -> None:
        self._pool, self._job, self._options = pool, job, options
        self._width, self._shape, self._dtype = label_width, shape, dtype
        self._drawn = job.draw is not None
        # the native JobOptions every batch shares (None: the Python backend)
        self._native_options = pool.job_options(job) if pool.backend == "native" else None

    def submit(
        self,
        base: Any,
        offsets: np.ndarray,
        out: np.ndarray,
        records: np.ndarray | None = None,
        crcs: np.ndarray | None = None,
    ) -> PendingRecords:
        """:meth:`DecodePool.submit_records` of ``offsets`` (int64) into ``out``.

        ``records``: the keys of the draws (int64, one per offset), with a draw. ``crcs``:
        as :meth:`DecodePool.submit_records` takes it.
        """
        pool = self._pool
        native = pool.native_pool()  # checked open (in a forked child: its own pool)
        n = len(offsets)
        if (
            type(out) is not np.ndarray
            or out.shape[1:] != self._shape
            or out.dtype != self._dtype
            or out.shape[0] < n
            or not out.flags.c_contiguous
            or not out.flags.writeable
        ):
            raise ValueError(
                f"out must be a writeable C-contiguous {self._dtype} array of at least {n}"
                f" images of shape {self._shape}, got {getattr(out, 'shape', type(out))}"
            )
        if self._native_options is None or not n or offsets.dtype != np.int64:
            return pool.submit_records(
                base,
                offsets,
                out,
                label_width=self._width,
                draw=self._job.draw,
                records=records,
                options=self._options,
                crcs=crcs,
            )
        if out.shape[0] != n:
            out = out[:n]
        labels = np.zeros((n, self._width), dtype=np.float32)
        ids, starts, lengths = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
        status = np.empty(n, dtype=np.int32)  # every slot's is written (parse or decode)
        crops = flips = keys = None
        if self._drawn:
            if records is None or len(records) != n or records.dtype != np.int64:
                raise ValueError(f"records must be int64 of shape ({n},) to draw")
            crops, flips = np.zeros((n, 4), dtype=np.int32), np.zeros(n, dtype=np.uint8)
            keys = records
        handle = native.submit_records(
            base,
            offsets,
            labels,
            ids,
            starts,
            lengths,
            out,
            status,
            self._native_options,
            crops,
            flips,
            keys,
            crcs_array(crcs, n),
        )
        job = (self, out, crops, flips, records)
        return PendingRecords(pool, job, base, status, labels, ids, starts, lengths, handle)

    @property
    def native(self) -> bool:
        """Whether :meth:`queue` may be used (the native backend)."""
        return self._native_options is not None

    def queue(
        self,
        base: Any,
        offsets: np.ndarray,
        out: np.ndarray,
        records: np.ndarray | None,
        rows,
        crcs: np.ndarray | None = None,
    ) -> tuple[Any, np.ndarray, np.ndarray]:
        """:meth:`submit`'s native call alone, into the caller's arrays (native backend).

        For a caller that made ``out`` as :meth:`submit` checks it (the native call checks
        the sizes again, for memory safety), ``offsets`` int64 and, with a draw, ``records``
        int64, one per offset. ``rows``: ``(status, starts, lengths, crops, flips)`` for
        ``n = len(offsets)`` images (int32 n, int64 n, int64 n, int32 n×4, uint8 n), the
        caller's to reuse once the batch is finished: every slot's status, start and length
        is written, and with a draw its crop and flip before they are read. Returns the
        native handle and the batch's fresh labels and ids; :meth:`pending` makes the
        :class:`PendingRecords` of it. ``crcs``: as :meth:`DecodePool.submit_records` takes
        it (uint32, n), the caller's too.
        """
        native = self._pool.native_pool()  # checked open (in a forked child: its own pool)
        n = len(offsets)
        labels = np.zeros((n, self._width), dtype=np.float32)
        ids = np.empty(n, np.int64)
        status, starts, lengths, crops, flips = rows[:5]
        if not self._drawn:
            crops = flips = records = None
        handle = native.submit_records(
            base,
            offsets,
            labels,
            ids,
            starts,
            lengths,
            out,
            status,
            self._native_options,
            crops,
            flips,
            records,
            crcs_array(crcs, n),
        )
        return handle, labels, ids

    def pending(self, base, out, records, rows, handle, labels, ids) -> PendingRecords:
        """The :class:`PendingRecords` of a :meth:`queue` call (its arguments and result)."""
        status, starts, lengths, crops, flips = rows[:5]
        if not self._drawn:  # none drawn: the images are whole
            crops = flips = None
        job = (self, out, crops, flips, records)
        return PendingRecords(self._pool, job, base, status, labels, ids, starts, lengths, handle)

    def job_for(self, out: np.ndarray, crops, flips, records) -> DecodeJob:
        """The DecodeJob of one batch (for the images the native pool leaves to Pillow)."""
        job = copy.copy(self._job)
        job.out, job.crops, job.flips, job.records = out, crops, flips, records
        return job


def crcs_array(crcs: np.ndarray | None, n: int) -> np.ndarray | None:
    """``crcs`` checked for the native call: None, or a writeable uint32 array of ``n``."""
    if crcs is not None and (
        type(crcs) is not np.ndarray
        or crcs.dtype != np.uint32
        or crcs.shape != (n,)
        or not crcs.flags.c_contiguous
        or not crcs.flags.writeable
    ):
        raise ValueError(f"crcs must be a writeable uint32 array of {n}, got {crcs!r:.80}")
    return crcs
