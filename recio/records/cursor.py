"""Records parsed at arbitrary offsets of a ``ByteSource``, local or remote."""

from __future__ import annotations

from .. import storage
from ..errors import TruncatedRecordError
from .format import read_record

__all__ = ["RecordCursor"]

# Remote sequential reads fetch this much at a time.
_WINDOW = 8 << 20


class RecordCursor:
    """Parses records at arbitrary offsets of a ByteSource.

    Local sources are parsed in place (zero-copy). Remote ones through a
    window of the file that grows or moves as records need.
    """

    def __init__(self, source: storage.ByteSource) -> None:
        self.source = source
        self._mapped = source.mapped
        self._window = memoryview(b"")
        self._window_start = 0

    def read_at(
        self, offset: int, record_index: int | None = None
    ) -> tuple[memoryview | bytes, int]:
        """Parse the record at byte ``offset``: ``(payload, next_offset)``, as ``read_record``.

        ``record_index`` only names the record in error messages.

        Raises:
            TruncatedRecordError: the record is cut short, also by a truncation of a
                local file while open (the file's size is checked on every call).
            CorruptRecordError: no record starts at ``offset``.
        """
        if self._mapped:
            view = self.source.current_view()
            try:
                return read_record(view, offset, path=self.source.url, record_index=record_index)
            except TruncatedRecordError as exc:
                if len(view) < self.source.size:
                    raise self.source.truncated(offset, len(view), record_index) from exc
                raise
        while True:
            start = self._window_start
            inside = start <= offset <= start + len(self._window)
            window_at_eof = start + len(self._window) >= self.source.size
            if inside:
                try:
                    payload, next_offset = read_record(
                        self._window,
                        offset - start,
                        path=self.source.url,
                        record_index=record_index,
                        base=start,
                    )
                    return payload, start + next_offset
                except TruncatedRecordError:
                    if window_at_eof:
                        raise
                    grow = max(_WINDOW, 2 * len(self._window))
                else:
                    grow = _WINDOW
            else:
                grow = _WINDOW
            length = min(grow, self.source.size - offset)
            self._window = memoryview(self.source.read(offset, length))
            self._window_start = offset
