"""Walking a ``.rec`` record by record: the one walk that indexing, ``info`` and ``verify`` share.

:func:`walk_records` walks a whole file up to its end or its first problem; a local file by
its frame headers in the map (:func:`~.format.walk_frames`), a remote one (or a walk that
wants each record's IRHeader) by parsing each record (:class:`~.cursor.RecordCursor`).
:func:`scan_source` is that walk for a reader that needs every record (a damaged file is
an error); :func:`record_end` follows the frames of one record only.
"""

from __future__ import annotations

from typing import NamedTuple

from .. import storage
from ..errors import RecordIOError, TruncatedRecordError
from .cursor import RecordCursor
from .format import (
    CFLAG_FIRST,
    CFLAG_MIDDLE,
    FRAME_HEADER_SIZE,
    check_frame,
    header_fields,
    walk_frames,
)

__all__ = ["Walk", "record_end", "record_header", "scan_source", "walk_records"]


class Walk(NamedTuple):
    """What a walk over a ``.rec`` found (see :func:`walk_records`)."""

    offsets: list[int]  # where each complete record starts
    headers: list[tuple[int, float, int] | None]  # (flag, first label, id) each, if asked
    end: int  # the file's size, or the byte where the damage starts
    error: RecordIOError | None  # the first problem, naming the .rec and the byte

    def intact(self, url: str) -> str:
        """'the N complete records before byte B of URL' (the part an index can cover)."""
        n = len(self.offsets)
        return f"the {n} complete record{'' if n == 1 else 's'} before byte {self.end} of {url}"


def record_header(payload) -> tuple[int, float, int] | None:
    """``(flag, first label, id)`` of a record's IRHeader; None if it cannot hold one."""
    try:
        flag, label, rid, _ = header_fields(payload)
    except RecordIOError:
        return None
    return flag, label, rid


def walk_records(source: storage.ByteSource, *, headers: bool = False) -> Walk:
    """Walk a ``.rec`` record by record up to its end or its first problem.

    A damaged file is not an error: the walk returns the complete records before the
    damage, the byte where it starts (``end``; the file's size when there is none) and the
    problem (a ``RecordIOError`` naming the ``.rec`` and the byte offset; for a local file
    truncated while open, the truncation). ``headers``: also each record's IRHeader
    (:func:`record_header`).
    """
    view = source.mapped_view() if not headers else None
    if view is not None:  # the frame headers in the map, no payload touched
        found = walk_frames(view, path=source.url)
        # A file that shrank during the walk reads as zeros past its new end (NOTE [map
        # guard] in recio.storage.mapped): walk again the part still readable, so the
        # problem is the truncation there, not the "bad magic" of the zeros.
        now = source.readable()
        if now < len(view):
            found = walk_frames(view[:now], path=source.url)
        now = min(now, len(view))
        error = found.error
        if now < source.size and (error is None or isinstance(error, TruncatedRecordError)):
            at = found.end if error is None else error.offset or 0
            shrunk = source.truncated(at, now, len(found.offsets))
            shrunk.__cause__, error = error, shrunk
        return Walk(found.offsets, [], found.end, error)
    cursor = RecordCursor(source)
    offsets: list[int] = []
    found_headers: list[tuple[int, float, int] | None] = []
    offset, size = 0, source.size
    while offset < size:
        try:
            payload, next_offset = cursor.read_at(offset, len(offsets))
        except RecordIOError as exc:
            if source.mapped and not isinstance(exc, TruncatedRecordError):
                now = source.readable()  # shrunk under the read: zeros, not damage
                if now < size:
                    shrunk = source.truncated(offset, now, len(offsets))
                    shrunk.__cause__, exc = exc, shrunk
            return Walk(offsets, found_headers, offset, exc)
        offsets.append(offset)
        if headers:
            found_headers.append(record_header(payload))
        offset = next_offset
    return Walk(offsets, found_headers, size, None)


def scan_source(source: storage.ByteSource) -> list[int]:
    """Record start offsets of a whole file (:func:`walk_records`).

    Raises:
        RecordIOError: the file's first problem.
    """
    walk = walk_records(source)
    if walk.error is not None:
        raise walk.error
    return walk.offsets


def record_end(source: storage.ByteSource, offset: int, record_index: int | None = None) -> int:
    """Where the record at ``offset`` ends (after its padding), from its frame headers only.

    Raises:
        CorruptRecordError: no record starts at ``offset``, or its frames do not chain.
        TruncatedRecordError: the file ends inside the record (:func:`~.format.check_frame`).
    """
    pos = offset
    while True:
        head = source.read(pos, FRAME_HEADER_SIZE)
        cflag, length = check_frame(
            head,
            0,
            offset - pos,
            end=source.size - pos,
            base=pos,
            path=source.url,
            record_index=record_index,
        )
        pos = min(pos + FRAME_HEADER_SIZE + length + (-length & 3), source.size)
        if cflag not in (CFLAG_FIRST, CFLAG_MIDDLE):
            return pos
