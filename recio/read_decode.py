"""Records at positions to decoded pixels, labels and ids: the batch path of every CPU reader.

    local file, native pool:  decode_records — one call: each decode thread parses its
                              records' headers, draws its windows and decodes (no per-image
                              Python)
    remote payloads, and the records that call leaves (multi-frame, misaligned, unreadable
    headers):                 read_batch (the exact parse) + decode_batch (the same draws)

:class:`~recio.iterator.ImageRecordIter`'s decode threads and
:class:`~recio.dataset.RecordDataset` both read through :func:`read_and_decode`; what to do
with the bad slots it reports (``on_error``) stays theirs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .augment import KeyedDraw
from .decode import DecodePool, Status
from .format import FRAME_HEADER_SIZE, IR_HEADER_SIZE
from .mixing import LabelMap
from .reader import RecordFile, check_label_width, read_batch
from .shards import ShardedRecords

__all__ = ["DecodedBatch", "read_and_decode"]

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
    decode_kwargs: dict[str, Any],
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
    copies of a record, :mod:`recio.mixing`). ``label_maps``: per shard of a union, how a
    mixture's source reads its labels (its own width, then its function); empty: none.

    Raises:
        RecordIOError: a framing problem (as ``read_batch``), or an unreadable header under
            ``raise_bad_headers``.
        ValueError: ``label_width`` > 1 for a record with a single label.
    """
    positions = np.asarray(positions, dtype=np.int64)
    keys = positions if keys is None else np.asarray(keys, dtype=np.int64)
    parts = _parts(records, positions, draw, epochs, label_maps)
    if len(parts) == 1:  # one file and one epoch's draws, the slots in order: straight into out
        (part,) = parts
        got = _one_file(
            part.records, part.positions, keys, pool, out, _width(part, label_width),
            part.draw, decode_kwargs, payloads, raise_bad_headers,
        )  # fmt: skip
        if part.labels is not None:
            got.labels = part.labels.apply(got.labels, label_width)
        return got
    n = len(positions)
    status = np.zeros(n, dtype=np.int32)
    labels = np.zeros((n, label_width), dtype=np.float32)
    ids = np.zeros(n, dtype=np.int64)
    reasons: list[str | None] = [None] * n
    for part in parts:
        slots = part.slots
        into = np.empty((len(slots), *out.shape[1:]), dtype=out.dtype)
        got = _one_file(
            part.records, part.positions, keys[slots], pool, into, _width(part, label_width),
            part.draw, decode_kwargs, None if payloads is None else [payloads[j] for j in slots],
            raise_bad_headers,
        )  # fmt: skip
        if part.labels is not None:
            got.labels = part.labels.apply(got.labels, label_width)
        out[slots], status[slots], labels[slots], ids[slots] = into, got.status, got.labels, got.ids
        for j, why in zip(slots.tolist(), got.reasons or (), strict=False):
            reasons[j] = why
    return DecodedBatch(status, labels, ids, reasons if status.any() else None)


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


def _one_file(
    records, positions, keys, pool, out, label_width, draw, decode_kwargs, payloads,
    raise_bad_headers,
) -> DecodedBatch:  # fmt: skip
    """:func:`read_and_decode` of one file; ``keys`` are the records' numbers for the draws."""
    n = len(positions)
    if payloads is None and records._is_local:
        records._check_open()
        view = records._local_view(positions)
        offsets = records.offsets[positions]
        got = pool.decode_records(
            view, offsets, out, label_width=label_width, draw=draw, records=keys,
            **decode_kwargs,
        )  # fmt: skip
        status, labels, ids = got.status, got.labels, got.ids
        reasons = pool.last_errors() if status.any() else None
        if records.checksums is not None:  # the exact path below checks the slots it reads
            reasons = _verify_decoded(
                records, view, positions, out, status, labels, ids, reasons, raise_bad_headers
            )
        if label_width > 1:  # a record of one label (flag 0) has its image right after the header
            single = got.images.starts - offsets == FRAME_HEADER_SIZE + IR_HEADER_SIZE
            check_label_width(records, positions, single & (status != _RECORD), label_width)
        slow = np.flatnonzero(status == _RECORD)
        if not len(slow):
            return DecodedBatch(status, labels, ids, reasons)
    else:
        status = np.zeros(n, dtype=np.int32)
        labels = np.zeros((n, label_width), dtype=np.float32)
        ids = np.zeros(n, dtype=np.int64)
        reasons = None
        slow = np.arange(n)
    exact = _decode_exact(
        records, positions, keys, slow, pool, out, label_width, draw, decode_kwargs, payloads,
        raise_bad_headers, (status, labels, ids),
    )  # fmt: skip
    if exact is not None:
        reasons = _merged_reasons(reasons, n, slow, exact)
    return DecodedBatch(status, labels, ids, reasons if status.any() else None)


def _verify_decoded(
    records, view, positions, out, status, labels, ids, reasons, raise_bad_headers
) -> list[str | None] | None:
    """Check the records one native call decoded against their checksums.

    A record that does not match is a bad slot (CORRUPT, its image zeroed, the error as
    its reason), or raised under ``raise_bad_headers``. Returns the batch's reasons.
    """
    done = np.flatnonzero(status != _RECORD)
    problems = records.verify_view(view, positions[done])
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


def _decode_exact(
    records, positions, keys, slots, pool, out, label_width, draw, decode_kwargs, payloads,
    raise_bad_headers, into,
) -> list[str | None] | None:  # fmt: skip
    """Read ``slots`` the exact way (``read_batch``), decode them, and write them ``into``.

    Returns the reasons of the bad ones among them (per slot of ``slots``), None if none.
    """
    status, labels, ids = into
    whole = len(slots) == len(positions)
    exact = read_batch(records, positions[slots], label_width, payloads)
    if exact.problems and raise_bad_headers:
        raise exact.problems[min(exact.problems)]
    target = out if whole else np.empty((len(slots), *out.shape[1:]), dtype=out.dtype)
    got = pool.decode_batch(exact.images, target, draw=draw, records=keys[slots], **decode_kwargs)
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
