"""The ``.idx`` of a ``.rec``: where it is, and whether its offsets fit the file.

An ``.idx`` is checked when a reader opens it: every offset a byte of the ``.rec`` and
4-byte aligned (:func:`check_offsets`), and, from one record's frame headers, that the
pair was written together (:func:`check_pair`). An offset found later not to start a
record is named as the ``.idx``'s fault (:func:`not_a_record_start`).

NOTE [index gaps]: an ``.idx`` that leaves out records the ``.rec`` holds is not seen at
open (that would read every record's frame header: the whole file, on remote storage a
request per record). It is seen as records are read, for free: a record's extent runs to
the next offset the ``.idx`` lists, and its frame header says where it ends. A record
that ends before the next listed one starts has bytes after it that no entry covers; the
first such gap is walked (a frame header per record in it) and an :class:`IndexWarning`
says how many records it holds, once per file; ``recio verify`` counts them all and
``recio index`` rebuilds the ``.idx``. Bytes before the first listed record are seen at
open (:func:`check_pair`), as are those after the last.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from .. import storage
from ..errors import IndexMismatchError, IndexWarning, RecordIOError
from .scan import record_end

__all__ = [
    "IndexWarning",
    "check_offsets",
    "check_pair",
    "default_idx_path",
    "first_gap",
    "not_a_record_start",
    "warn_gap",
]


def default_idx_path(rec_url: str) -> str:
    """The ``.idx`` beside a ``.rec``: ``.rec`` replaced by ``.idx`` (appended to other names)."""
    base = rec_url[:-4] if rec_url.endswith(".rec") else rec_url
    return base + ".idx"


def check_offsets(
    idx_path: str, keys: Sequence, offsets: Sequence[int], source: storage.ByteSource
) -> None:
    """Check the offsets of an ``.idx`` against its ``.rec`` (at open).

    Every offset must be a byte of the file and 4-byte aligned. Then, cheaply (one frame
    header read, a request on remote storage), the pair: the record at the largest
    offset must be a record that ends where the file ends, else an :class:`IndexWarning`
    (see :func:`check_pair`).

    Raises:
        IndexMismatchError: an offset that is negative, past the end or not aligned.
    """
    array = np.asarray(offsets, dtype=np.int64)
    # A slice at a time: each mask of 40M offsets would take 40 MB.
    for lo in range(0, len(array), _CHECK_SLICE):
        part = array[lo : lo + _CHECK_SLICE]
        bad = np.flatnonzero((part < 0) | (part >= source.size) | (part & 3 != 0))
        if bad.size:
            raise _bad_offset(idx_path, keys, array, lo + int(bad[0]), source)
    check_pair(idx_path, keys, array, source)


_CHECK_SLICE = 1 << 20


def _bad_offset(
    idx_path: str, keys: Sequence, offsets: np.ndarray, i: int, source: storage.ByteSource
) -> IndexMismatchError:
    offset = int(offsets[i])
    if offset < 0:
        why = "negative"
    elif offset >= source.size:
        why = f"past the end of {source.url} ({source.size} bytes)"
    else:
        why = f"not 4-byte aligned (records of {source.url} start at multiples of 4)"
    # The .idx is the file at fault; the offset is a byte of the .rec, named in the text.
    error = IndexMismatchError(f"{idx_path} gives key {keys[i]} offset {offset}, {why}")
    error.path, error.record_index = idx_path, i
    return error


def check_pair(
    idx_path: str, keys: Sequence, offsets: np.ndarray, source: storage.ByteSource
) -> None:
    """Warn (:class:`IndexWarning`) if the ``.idx`` does not index the ``.rec`` to its end.

    An index written with its ``.rec`` (by MXNet, im2rec or recio) has a record at
    its largest offset that ends exactly where the file ends. A ``.rec`` and ``.idx``
    from different writes almost never do: the offset falls inside a record, past the
    new end, or (a longer new file) before its end. Reads only that record's frame
    headers. Offsets are assumed checked (in the file, aligned).
    """
    url = source.url
    if len(offsets) == 0:
        if source.size:
            _warn(f"{idx_path} is empty, but {url} holds {source.size} bytes: {_PAIR_HINT}")
        return
    first = int(offsets.min())
    if first > 0:  # records start at byte 0: the .idx leaves out those before its first
        _warn(_gap_message(idx_path, url, 0, first, source, None))
    j = int(np.argmax(offsets))
    last = int(offsets[j])
    try:
        end = record_end(source, last, j)
    except RecordIOError as exc:
        _warn(
            f"{idx_path}'s last record (key {keys[j]}, at byte {last}) is not a whole record "
            f"of {url} ({exc}): {_PAIR_HINT}"
        )
        return
    if end != source.size:
        _warn(
            f"{idx_path} does not index {url} to its end: its last record (key {keys[j]}, "
            f"at byte {last}) ends at byte {end}, the file at {source.size}: {_PAIR_HINT}"
        )


_PAIR_HINT = (
    "records missing from the .idx, a truncated .rec, or a .rec and .idx from different "
    "writes (a publish interrupted between the two); `recio index` rebuilds the .idx"
)


def _warn(message: str, stacklevel: int = 4) -> None:
    warnings.warn(message, IndexWarning, stacklevel=stacklevel)


def first_gap(offsets: np.ndarray, extents: np.ndarray, ends: np.ndarray, size: int) -> int | None:
    """The first slot whose record ends before the next listed record starts, or None.

    ``offsets`` and ``extents`` (to the next listed start) of the records read, ``ends``
    where each one's frames end (unpadded; aligned records pad to 4 bytes). The record
    that ends the file is :func:`check_pair`'s (NOTE [index gaps]).
    """
    stops = offsets + extents
    gap = ((ends + 3) & ~3) < stops
    gap &= stops != size
    found = np.flatnonzero(gap)
    return int(found[0]) if found.size else None


def warn_gap(idx_path: str, source: storage.ByteSource, start: int, stop: int, key: int) -> None:
    """Warn that bytes ``start..stop`` of the ``.rec``, after key ``key``, are in no entry."""
    _warn(_gap_message(idx_path, source.url, start, stop, source, key), stacklevel=5)


# Records counted in one gap at most: a frame header read each (remote: a request each).
_GAP_WALK, _GAP_WALK_REMOTE = 1000, 16


def _gap_message(
    idx_path: str, url: str, start: int, stop: int, source: storage.ByteSource, key: int | None
) -> str:
    count, at, problem = 0, start, None
    limit = _GAP_WALK if source.mapped else _GAP_WALK_REMOTE
    while at < stop and count < limit:
        try:
            at = record_end(source, at)
        except RecordIOError as exc:
            problem = exc
            break
        count += 1
    where = f"after key {key}" if key is not None else "before its first record"
    if count:
        more = "at least " if at < stop else ""
        what = f"{more}{count} record{'s' if count != 1 else ''} it does not list"
    else:
        what = f"bytes that are no record ({problem})"
    return (
        f"{idx_path} skips records of {url}: bytes {start}..{stop} ({where}) hold {what}; "
        f"readers do not see them. `recio verify {url}` counts every record the .idx leaves "
        f"out; `recio index {url}` rebuilds it"
    )


def not_a_record_start(idx_path: str, key, offset: int, exc: RecordIOError) -> RecordIOError:
    """``exc`` (a record that does not parse) as the ``.idx``'s fault, if it is at ``offset``.

    An error at the very offset the ``.idx`` gives means no record starts there: an
    :class:`~recio.errors.IndexMismatchError` naming the ``.idx``, the key and the byte.
    An error further on (a frame of the record) is the ``.rec``'s, and returned as it is.
    """
    if exc.offset != offset:
        return exc
    error = IndexMismatchError(  # exc names the .rec and the byte
        f"{idx_path} gives key {key} offset {offset}, which is not a record start: {exc}"
    )
    error.path, error.record_index = idx_path, exc.record_index
    return error
