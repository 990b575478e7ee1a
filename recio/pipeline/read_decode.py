"""Records at positions to decoded pixels, labels and ids: the batch path of every CPU reader.

    local file, native pool:  decode_records — one call: each decode thread parses its
                              records' headers, draws its windows and decodes (no per-image
                              Python)
    remote payloads, and the records that call leaves (multi-frame, misaligned, unreadable
    headers):                 read_batch (the exact parse) + decode_batch (the same draws)

:class:`~recio.pipeline.iterator.ImageRecordIter`'s decode threads and
:class:`~recio.frameworks.dataset.RecordDataset` both read through :func:`read_and_decode`;
what to do with the bad slots it reports (``on_error``) stays theirs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..augment import KeyedDraw
from ..decode import DecodeOptions, DecodePool, Status
from ..records.batch import check_label_width, read_batch
from ..records.file import RecordFile
from ..records.format import FRAME_HEADER_SIZE, IR_HEADER_SIZE
from ..records.shards import ShardedRecords
from ..sampling.mixing import LabelMap

__all__ = [
    "BatchReader",
    "DecodedBatch",
    "FileRead",
    "LocalPending",
    "PendingBatch",
    "read_and_decode",
    "submit_read_and_decode",
]

_RECORD = int(Status.RECORD)
_CORRUPT = int(Status.CORRUPT)


@dataclass
class DecodedBatch:
    """A batch decoded into its output array: per slot a status, the labels and the id."""

    status: np.ndarray  # int32 (n,), 0 where decoded
    labels: np.ndarray  # float32 (n, label_width)
    ids: np.ndarray  # int64 (n,): the header's id; the .idx key where it is unreadable
    reasons: list[str | None] | None  # per slot, where the status is not 0; None: all are 0


def read_and_decode(
    records: RecordFile | ShardedRecords,
    positions: np.ndarray,
    pool: DecodePool,
    out: np.ndarray,
    *,
    label_width: int,
    draw: KeyedDraw,
    options: DecodeOptions,
    payloads: Sequence[Any] | None = None,
    raise_bad_headers: bool = False,
    epochs: np.ndarray | None = None,
    keys: np.ndarray | None = None,
    label_maps: Sequence[LabelMap | None] = (),
) -> DecodedBatch:
    """Read the records at ``positions`` and decode their images into ``out``.

    Each image's window and flip are ``draw``'s for its record (its position; over shards,
    its number in the union). ``payloads``: the records' bytes, fetched ahead (remote
    files). A record whose header cannot be read is a bad slot (status CORRUPT, the error
    as its reason), or, with ``raise_bad_headers``, raised (a ``RecordIOError`` naming the
    file and byte offset). ``epochs``: per slot, the epoch whose draws it takes when a batch
    reaches into another epoch's order (``last_batch="rollover"``); else ``draw``'s.
    ``keys``: per slot, the key of its draws where it is not its position (a mixture's
    copies of a record, :mod:`recio.sampling.mixing`). ``label_maps``: per shard of a union, how a
    mixture's source reads its labels (its own width, then its function); empty: none.

    Raises:
        RecordIOError: a framing problem (as ``read_batch``), or an unreadable header under
            ``raise_bad_headers``.
        ValueError: ``label_width`` > 1 for a record with a single label.
    """
    return submit_read_and_decode(
        records,
        positions,
        pool,
        out,
        label_width=label_width,
        draw=draw,
        options=options,
        payloads=payloads,
        raise_bad_headers=raise_bad_headers,
        epochs=epochs,
        keys=keys,
        label_maps=label_maps,
    ).result()


def submit_read_and_decode(
    records: RecordFile | ShardedRecords,
    positions: np.ndarray,
    pool: DecodePool,
    out: np.ndarray,
    *,
    label_width: int,
    draw: KeyedDraw,
    options: DecodeOptions,
    payloads: Sequence[Any] | None = None,
    raise_bad_headers: bool = False,
    epochs: np.ndarray | None = None,
    keys: np.ndarray | None = None,
    label_maps: Sequence[LabelMap | None] = (),
) -> PendingBatch:
    """:func:`read_and_decode`, its native calls queued on the pool (local files).

    Returns at once with the local files' records queued (one native job per file and
    epoch, :meth:`~recio.decode.DecodePool.submit_records`); :meth:`PendingBatch.result`
    waits for them and does the rest (the exact parse, remote payloads, labels), raising
    what :func:`read_and_decode` raises. ``out`` is written until then.
    """
    positions = np.asarray(positions, dtype=np.int64)
    keys = positions if keys is None else np.asarray(keys, dtype=np.int64)
    parts = _parts(records, positions, draw, epochs, label_maps)
    if len(parts) == 1:  # one file and one epoch's draws, the slots in order: straight into out
        (part,) = parts
        one = _submit_file(
            FileRead(
                part.records,
                part.positions,
                keys,
                pool,
                out,
                _width(part, label_width),
                part.draw,
                options,
                payloads,
                raise_bad_headers,
            )
        )
        return PendingBatch([(part, None, one)], len(positions), out, label_width)
    calls = []
    for part in parts:
        slots = part.slots
        into = np.empty((len(slots), *out.shape[1:]), dtype=out.dtype)
        one = _submit_file(
            FileRead(
                part.records,
                part.positions,
                keys[slots],
                pool,
                into,
                _width(part, label_width),
                part.draw,
                options,
                None if payloads is None else [payloads[j] for j in slots],
                raise_bad_headers,
            )
        )
        calls.append((part, into, one))
    return PendingBatch(calls, len(positions), out, label_width)


class BatchReader:
    """:func:`submit_read_and_decode` for the batches of one pipeline, its constants made once.

    A batch of one local file, drawn from one epoch, with no mapped labels (the common
    case: one ``.rec``, no rollover into the next epoch) is queued through a
    :meth:`~recio.decode.DecodePool.records_job` made here: the options checked and the
    draw's parameters made once, not per batch. Any other batch takes
    :func:`submit_read_and_decode`'s path; both give the same result.
    """

    def __init__(
        self,
        records: RecordFile | ShardedRecords,
        pool: DecodePool,
        out_shape: tuple[int, ...],
        dtype: Any,
        *,
        label_width: int,
        draw: KeyedDraw,
        options: DecodeOptions,
        raise_bad_headers: bool = False,
        label_maps: Sequence[LabelMap | None] = (),
    ) -> None:
        self.records, self.pool, self.draw = records, pool, draw
        self.label_width, self.options = label_width, options
        self.raise_bad_headers, self.label_maps = raise_bad_headers, label_maps
        # the common case's RecordsJob (None: every batch takes submit_read_and_decode's path)
        self.job = None
        if isinstance(records, RecordFile) and records.is_local and not label_maps:
            self.job = pool.records_job(
                out_shape, dtype, label_width=label_width, draw=draw, options=options
            )
        self.local = self.job is not None and self.job.native

    def rows(self, n: int) -> tuple[np.ndarray | None, ...]:
        """Arrays for :meth:`submit_local`'s ``rows``: one set per batch in flight.

        Status, starts, lengths, crops, flips and, where the file has a checksum sidecar,
        the records' frame CRCs the decode threads take (else None).
        """
        return (
            np.empty(n, np.int32),
            np.empty(n, np.int64),
            np.empty(n, np.int64),
            np.empty((n, 4), np.int32),
            np.empty(n, np.uint8),
            self._crcs(n),
        )

    def _crcs(self, n: int) -> np.ndarray | None:
        """Where a batch's decode threads write its records' frame CRCs, if they are checked.

        A local file with a sidecar: checked against their CRCs as the decode threads took
        them, in the pass that gives each JPEG's whole-stream key (NOTE [one pass per
        record] in native/bind_pool.c), not in a pass of the consumer's own.
        """
        checked = self.job is not None and self.records.checksums is not None
        return np.empty(n, np.uint32) if checked else None

    def submit_local(self, positions: np.ndarray, out: np.ndarray, rows: tuple) -> LocalPending:
        """:meth:`submit` of a batch of this reader's common case (``local``), at less cost.

        ``positions`` int64 and C-contiguous, ``out`` one of the pipeline's batch arrays
        (the shape and dtype the reader was made for), ``rows`` from :meth:`rows`, not used
        by another batch until this one's result is taken. The draws are the reader's
        (its epoch), keyed by the positions. Gives what :meth:`submit` gives.
        """
        view, offsets = self.records.mapped_batch(positions)  # lost: bad slots (_FilePending)
        handle, labels, ids = self.job.queue(view, offsets, out, positions, rows, rows[5])
        return LocalPending(self, positions, offsets, view, out, rows, handle, labels, ids)

    def submit(
        self,
        positions: np.ndarray,
        out: np.ndarray,
        *,
        payloads: Sequence[Any] | None = None,
        epochs: np.ndarray | None = None,
        keys: np.ndarray | None = None,
    ) -> PendingBatch | _FilePending:
        """:func:`submit_read_and_decode` of ``positions`` into ``out``, as this reader's."""
        records = self.records
        if (
            self.job is None
            or payloads is not None
            or keys is not None
            or (epochs is not None and not (epochs == self.draw.epoch).all())
        ):
            return submit_read_and_decode(
                records,
                positions,
                self.pool,
                out,
                label_width=self.label_width,
                draw=self.draw,
                options=self.options,
                payloads=payloads,
                raise_bad_headers=self.raise_bad_headers,
                epochs=epochs,
                keys=keys,
                label_maps=self.label_maps,
            )
        positions = np.asarray(positions, dtype=np.int64)
        view, offsets = records.mapped_batch(positions)  # lost records: bad slots (_FilePending)
        crcs = self._crcs(len(positions))
        pending = self.job.submit(view, offsets, out, positions, crcs)
        return _FilePending(self.file_read(positions, out), offsets, pending, view, crcs)

    def file_read(self, positions: np.ndarray, out: np.ndarray) -> FileRead:
        """A batch of this reader's common case as a :class:`FileRead` (draws by position)."""
        return FileRead(
            self.records,
            positions,
            positions,
            self.pool,
            out,
            self.label_width,
            self.draw,
            self.options,
            None,
            self.raise_bad_headers,
        )


class LocalPending:
    """A batch of :meth:`BatchReader.submit_local`: its native job, and the arrays it fills.

    :meth:`decoded` is the common case's result, with no object per batch beyond the
    batch's own arrays; :meth:`result` the general one (checksums, the exact parse, the
    failed slots), made from the same job only when a batch needs it.
    """

    __slots__ = ("handle", "ids", "labels", "offsets", "out", "positions", "reader", "rows", "view")

    def __init__(self, reader, positions, offsets, view, out, rows, handle, labels, ids) -> None:
        self.reader, self.positions, self.offsets, self.view = reader, positions, offsets, view
        self.out, self.rows, self.handle, self.labels, self.ids = out, rows, handle, labels, ids

    def wait(self, timeout: float | None = None) -> bool:
        """Wait (GIL released) until the pool is done with the batch, at most ``timeout`` s."""
        return self.handle.wait(timeout)

    def decoded(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(labels, ids)`` if the native call decoded every image and nothing is left to do.

        Nothing left: every record matches its checksum (where the file has a sidecar) and
        holds one label. Else None, and :meth:`result` gives the batch. Raises what
        :meth:`result` raises.
        """
        reader = self.reader
        records = reader.records
        failed = self.handle.result() is not None  # its error texts: some slot failed
        status, starts, lengths = self.rows[:3]  # NOTE [index gaps]: where each record ends
        crcs = self.rows[5]  # NOTE [one pass per record]: the frames' CRCs, with a sidecar
        records.check_record_ends(self.positions, starts + lengths, status != _RECORD)
        if (
            failed
            or reader.label_width > 1
            or records.lost(self.positions)  # the file changed under the map
            or (records.checksums is not None and not records.crcs_match(self.positions, crcs))
        ):
            return None
        reader.pool.remember_errors(None, len(self.ids))  # as PendingRecords.result does
        return self.labels, self.ids

    def result(self) -> DecodedBatch:
        """The decoded batch, as :meth:`PendingBatch.result` gives it."""
        reader = self.reader
        pending = reader.job.pending(
            self.view, self.out, self.positions, self.rows, self.handle, self.labels, self.ids
        )
        read = reader.file_read(self.positions, self.out)
        return _FilePending(read, self.offsets, pending, self.view, self.rows[5]).result()


class PendingBatch:
    """A batch of :func:`submit_read_and_decode`: its native jobs queued, the rest to do."""

    def __init__(self, calls: list, n: int, out: np.ndarray, label_width: int) -> None:
        self._calls, self._n, self._out, self._width = calls, n, out, label_width

    def wait(self, timeout: float | None = None) -> bool:
        """Wait (GIL released) until the pool is done with every queued job of the batch.

        ``timeout``: at most that many seconds per job. Returns whether they are done.
        """
        return all(one.wait(timeout) for _, _, one in self._calls)

    def result(self) -> DecodedBatch:
        """The decoded batch: waits for the pool, then finishes what its calls leave."""
        if len(self._calls) == 1 and self._calls[0][1] is None:
            part, _, one = self._calls[0]
            got = one.result()
            if part.labels is not None:
                got.labels = part.labels.apply(got.labels, self._width)
            return got
        n, out = self._n, self._out
        status = np.zeros(n, dtype=np.int32)
        labels = np.zeros((n, self._width), dtype=np.float32)
        ids = np.zeros(n, dtype=np.int64)
        reasons: list[str | None] = [None] * n
        for part, into, one in self._calls:
            slots = part.slots
            got = one.result()
            if part.labels is not None:
                got.labels = part.labels.apply(got.labels, self._width)
            out[slots], status[slots], labels[slots] = into, got.status, got.labels
            ids[slots] = got.ids
            for j, why in zip(slots.tolist(), got.reasons or (), strict=False):
                reasons[j] = why
        return DecodedBatch(status, labels, ids, reasons if status.any() else None)


@dataclass(frozen=True, slots=True)
class FileRead:
    """One file's part of a batch: what its read and decode take, by name.

    ``keys``: the draws' keys (per record; its position unless a mixture's copy);
    ``payloads``: the records' bytes fetched ahead (None: read from the file).
    """

    records: RecordFile
    positions: np.ndarray
    keys: np.ndarray
    pool: DecodePool
    out: np.ndarray
    label_width: int
    draw: KeyedDraw
    options: DecodeOptions
    payloads: Sequence[Any] | None
    raise_bad_headers: bool


class _Part(NamedTuple):
    """Slots of a batch read by one native call: one file's records, one epoch's draws."""

    records: RecordFile
    positions: np.ndarray  # the records' positions in that file
    slots: np.ndarray  # where they are in the batch (ascending)
    draw: KeyedDraw
    labels: LabelMap | None = None  # a mixture's source with its own label width


def _width(part: _Part, label_width: int) -> int:
    return label_width if part.labels is None else part.labels.width


def _parts(records, positions: np.ndarray, draw: KeyedDraw, epochs, label_maps) -> list[_Part]:
    """A batch as the calls that read it: per shard it touches and per epoch it draws from.

    The draws stay keyed by the records' numbers in the union (``positions``).
    """
    if isinstance(records, ShardedRecords):
        files = [
            (g.records, g.positions, g.slots, label_maps[g.shard] if label_maps else None)
            for g in records.split(positions)
        ]
    else:
        files = [(records, positions, np.arange(len(positions)), None)]
    if epochs is None or (epochs == draw.epoch).all():
        return [_Part(f, p, s, draw, m) for f, p, s, m in files]
    parts = []
    for f, p, s, m in files:
        for epoch in np.unique(epochs[s]).tolist():
            mine = epochs[s] == epoch
            parts.append(_Part(f, p[mine], s[mine], dataclasses.replace(draw, epoch=epoch), m))
    return parts


def _submit_file(read: FileRead) -> _FilePending:
    """One file's part of a batch, its native call queued (a local file's records)."""
    if read.payloads is None and read.records.is_local:
        view, offsets = read.records.mapped_batch(read.positions)  # lost: bad slots, below
        # NOTE [one pass per record]: with a sidecar, the decode threads take the frames' CRCs
        crcs = None if read.records.checksums is None else np.empty(len(offsets), np.uint32)
        pending = read.pool.submit_records(
            view,
            offsets,
            read.out,
            label_width=read.label_width,
            draw=read.draw,
            records=read.keys,
            options=read.options,
            crcs=crcs,
        )
        return _FilePending(read, offsets, pending, view, crcs)
    return _FilePending(read, None, None)


class _FilePending:
    """One file's part of a batch: the queued native call, then the exact parse it leaves."""

    __slots__ = ("crcs", "offsets", "pending", "read", "view")

    def __init__(
        self,
        read: FileRead,
        offsets: np.ndarray | None,
        pending: Any,
        view: Any = None,
        crcs: np.ndarray | None = None,
    ) -> None:
        self.read, self.offsets, self.pending, self.view = read, offsets, pending, view
        self.crcs = crcs  # the records' frame CRCs, as the decode threads took them

    def wait(self, timeout: float | None = None) -> bool:
        return self.pending is None or self.pending.wait(timeout)

    def result(self) -> DecodedBatch:
        return self._checked(self._result())

    def _result(self) -> DecodedBatch:
        read = self.read
        records, positions, out, label_width = (
            read.records,
            read.positions,
            read.out,
            read.label_width,
        )
        n = len(positions)
        if self.pending is not None:
            got = self.pending.result()
            offsets = self.offsets
            status, labels, ids = got.status, got.labels, got.ids
            ends = got.images.starts + got.images.lengths  # NOTE [index gaps]
            records.check_record_ends(positions, ends, status != _RECORD)
            failed = self.pending.failed
            reasons = read.pool.last_errors() if failed or failed is None and status.any() else None
            if records.checksums is not None:  # the exact path below checks the slots it reads
                reasons = _verify_decoded(
                    records,
                    self.view,
                    self.crcs,
                    positions,
                    out,
                    status,
                    labels,
                    ids,
                    reasons,
                    read.raise_bad_headers,
                )
                failed = failed or bool(status.any())
            if label_width > 1:  # one label (flag 0): the image right after the header
                single = got.images.starts - offsets == FRAME_HEADER_SIZE + IR_HEADER_SIZE
                check_label_width(records, positions, single & (status != _RECORD), label_width)
            if failed is False:  # every image decoded: none for the exact parse
                return DecodedBatch(status, labels, ids, None)
            slow = np.flatnonzero(status == _RECORD)
            if not len(slow):
                return DecodedBatch(status, labels, ids, reasons)
        else:
            status = np.zeros(n, dtype=np.int32)
            labels = np.zeros((n, label_width), dtype=np.float32)
            ids = np.zeros(n, dtype=np.int64)
            reasons = None
            slow = np.arange(n)
        exact = _decode_exact(read, slow, (status, labels, ids))
        if exact is not None:
            reasons = _merged_reasons(reasons, n, slow, exact)
        return DecodedBatch(status, labels, ids, reasons if status.any() else None)

    def _checked(self, got: DecodedBatch) -> DecodedBatch:
        """``got``, its records checked against the map once no thread reads it any more.

        A record the map no longer holds (NOTE [map guard] in :mod:`recio.storage.mapped`)
        is a bad slot (its TruncatedRecordError as the reason), or raised under
        ``raise_bad_headers``: whatever it was decoded from, it is not the record's bytes.
        """
        records, positions, out = self.read.records, self.read.positions, self.read.out
        lost = records.lost(positions) if self.offsets is not None else {}
        if not lost:
            return got
        if self.read.raise_bad_headers:
            raise lost[min(lost)]
        reasons = list(got.reasons) if got.reasons is not None else [None] * len(positions)
        for j, error in lost.items():
            got.status[j], reasons[j] = _CORRUPT, str(error)
            out[j], got.labels[j], got.ids[j] = 0, 0, int(records.keys[positions[j]])
        return DecodedBatch(got.status, got.labels, got.ids, reasons)


def _verify_decoded(
    records, view, crcs, positions, out, status, labels, ids, reasons, raise_bad_headers
) -> list[str | None] | None:
    """Check the records one native call decoded against their checksums.

    ``crcs``: their frames' CRCs as the decode threads took them (NOTE [one pass per
    record] in native/bind_pool.c), or None: taken here from the map ``view``. A record
    that does not match is a bad slot (CORRUPT, its image zeroed, the error as its
    reason), or raised under ``raise_bad_headers``. Returns the batch's reasons.
    """
    done = np.flatnonzero(status != _RECORD)
    if crcs is None:
        problems = records.view_problems(view, positions[done])
    else:
        problems = records.crcs_problems(positions[done], crcs[done])
    if not problems:
        return reasons
    if raise_bad_headers:
        raise problems[min(problems)]
    reasons = list(reasons) if reasons is not None else [None] * len(status)
    for k, error in problems.items():
        j = int(done[k])
        status[j], reasons[j] = _CORRUPT, str(error)
        out[j], labels[j], ids[j] = 0, 0, int(records.keys[positions[j]])
    return reasons


def _decode_exact(read: FileRead, slots: np.ndarray, into: tuple) -> list[str | None] | None:
    """Read ``slots`` of ``read`` the exact way (``read_batch``), decode them, write them ``into``.

    Returns the reasons of the bad ones among them (per slot of ``slots``), None if none.
    """
    status, labels, ids = into
    out, pool = read.out, read.pool
    whole = len(slots) == len(read.positions)
    exact = read_batch(read.records, read.positions[slots], read.label_width, read.payloads)
    if exact.problems and read.raise_bad_headers:
        raise exact.problems[min(exact.problems)]
    target = out if whole else np.empty((len(slots), *out.shape[1:]), dtype=out.dtype)
    got = pool.decode_batch(
        exact.images, target, draw=read.draw, records=read.keys[slots], options=read.options
    )
    if exact.problems:
        got[list(exact.problems)] = Status.CORRUPT
    if not whole:
        out[slots] = target
    status[slots], labels[slots], ids[slots] = got, exact.labels, exact.ids
    if not got.any():
        return None
    errors = pool.last_errors()
    for j, problem in exact.problems.items():
        errors[j] = str(problem)
    return errors


def _merged_reasons(
    reasons: list[str | None] | None, n: int, slots: np.ndarray, exact: list[str | None]
) -> list[str | None]:
    """Per-slot reasons: those of the one-call decode, with the exact slots' put in."""
    merged = list(reasons) if reasons is not None else [None] * n
    for j, why in zip(slots.tolist(), exact, strict=True):
        merged[j] = why
    return merged
