"""The ``.idx`` of a ``.rec``: where it is, and whether its offsets fit the file.

An ``.idx`` is checked when a reader opens it: every offset a byte of the ``.rec`` and
4-byte aligned (:func:`check_offsets`), and, from one record's frame headers, that the
pair was written together (:func:`check_pair`). An offset found later not to start a
record is named as the ``.idx``'s fault (:func:`not_a_record_start`).
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
    "not_a_record_start",
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


def _warn(message: str) -> None:
    warnings.warn(message, IndexWarning, stacklevel=4)


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
