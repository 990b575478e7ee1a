"""``ByteSource``: random access to the bytes of one file, and what a source may do beside.

Every source (a mapped local file, a remote one, a block cache's) is one; the readers use
only what is here, each optional capability through a method whose default a source
without it keeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import TruncatedRecordError

__all__ = ["ByteSource"]


class ByteSource:
    """Random access to the bytes of one file.

    Beside reads, a source may have capabilities, each a method with a default that a
    source without it keeps: a map of the whole file (:meth:`mapped_view`), reads told in
    advance (:meth:`schedule`, a bounded block cache), a range fetched again from the
    store past any local copy (:meth:`refetch`), a local copy mended in place
    (:meth:`repair`). The class attributes say which a source has.
    """

    url: str
    size: int
    mapped = False  # reads are zero-copy slices of a map of the whole file
    schedules = False  # schedule() orders what a bounded cache keeps
    mends = False  # a remote file's local copy: repair() writes the store's bytes over it

    def read(self, offset: int, length: int) -> bytes | memoryview:
        """``length`` bytes from ``offset`` (fewer at the end of the file)."""
        raise NotImplementedError

    def mapped_view(self) -> memoryview | None:
        """The whole file as far as it reaches now, where the source is a map; else None."""
        return None

    def schedule(self, when: Any, offsets: Any, lengths: Any) -> None:
        """The ranges the coming steps read (``when``: each one's step); ignored by default."""

    def refetch(self, offset: int, length: int, *, until: int | None = None) -> Any:
        """``length`` bytes from ``offset`` as the store has them now (never a cached copy).

        ``until``: a deadline for sources that retry (a block cache's clock); unused here.
        """
        return self.read(offset, length)

    def repair(self, offset: int, data: Any) -> None:
        """Write ``data`` over a local copy at ``offset`` (only where :attr:`mends`)."""
        raise NotImplementedError(f"{self.url} has no local copy to mend")

    def truncated(
        self, offset: int, now: int, record_index: int | None = None
    ) -> TruncatedRecordError:
        """The error for a range at ``offset`` that the file, now ``now`` bytes, lost."""
        return TruncatedRecordError(
            f"{self.url} was truncated while open: now {now} bytes, was {self.size}",
            path=self.url,
            offset=offset,
            record_index=record_index,
        )

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes | memoryview]:
        """Read several (offset, length) ranges; remote sources coalesce and fetch concurrently."""
        return [self.read(offset, length) for offset, length in ranges]

    def close(self) -> None:
        """Release the file; reads already returned stay valid."""
        pass

    def __enter__(self) -> ByteSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
