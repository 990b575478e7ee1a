"""Local files mmap'd: ``MappedSource``, and a remote file's whole local copy (``CopiedSource``).

Reads are zero-copy memoryview slices of the page cache.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import TruncatedRecordError
from .base import ByteSource

try:
    from .. import _native
except ImportError:  # built without the extension: no guard, a fault ends the process
    _native = None

__all__ = ["CopiedSource", "MappedSource"]

# NOTE [map guard]: a page of a file map that no longer has a page of the file behind it (the
# file was truncated while mapped, or the disk gave an I/O error) faults with SIGBUS, which
# kills the process, and the decode threads read records straight from the map, often batches
# queued ahead of the consumer. Each MappedSource registers its map with the extension's
# SIGBUS handler (native/mapguard.c): a faulting page of a registered map is replaced by a
# page of zeros and its offset kept, and the access goes on. No read is ever slower for it:
# the check costs nothing until a page faults. What read the zeros is found after the read:
# a source is readable only up to the lowest page that faulted (current_view), and the
# readers check the records they read against it once they are done with the map
# (RecordFile.lost), so each record read there becomes a TruncatedRecordError naming the
# file and byte offset, a bad record for on_error. A fault outside every registered map,
# or a SIGBUS sent by kill(), goes to the action the handler replaced, as if there were
# none. The handler is installed at the first map (importing recio installs nothing), and
# every read of a map (current_view, which every reader goes through) puts it back in front
# where another took SIGBUS since: faulthandler enabled after the map, or torch's handler in
# a DataLoader worker forked with the map, so a worker's read is guarded too. How it chains
# with those without a cycle: NOTE [handler chain] in native/mapguard.c.


class MappedSource(ByteSource):
    """A local file, mmap'd read-only: reads are zero-copy slices of the page cache.

    A map faults (SIGBUS) where a page past the file's end is touched, so a file truncated
    or rewritten in place while open is checked for: reads (and :meth:`current_view`)
    compare the range with what is readable now (the file's size, an fstat of the map's
    descriptor, and any page that faulted) and raise ``TruncatedRecordError`` for a range
    that is gone. A page that faults all the same (under a view already handed out, or
    while the decode threads read) reads as zeros instead of killing the process, and is
    reported by the readers after the read (NOTE [map guard]).
    """

    mapped = True

    def __init__(self, path: str, url: str | None = None) -> None:
        self.url = url or path
        self.closed = False
        with open(path, "rb") as f:
            self.size = os.fstat(f.fileno()).st_size
            # mmap refuses empty files; an empty buffer behaves the same. The map keeps a
            # descriptor of its own (mmap.size() is an fstat of it): the file is closed here.
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if self.size else None
        self.buffer = memoryview(self._map) if self._map is not None else memoryview(b"")
        self._guard = -1
        if self._map is not None and _native is not None:
            self._guard = _native.guard_map(self._map)
            # Dropped once the map is unmapped (close, or the last view gone), not before.
            weakref.finalize(self._map, _native.unguard_map, self._guard)

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"I/O on a closed file {self.url}")

    def current_size(self) -> int:
        """The file's size now (it was ``size`` when opened)."""
        self._check_open()
        return self._map.size() if self._map is not None else self.size

    def fault_offset(self) -> int:
        """Where the lowest page of the map that faulted starts (NOTE [map guard]), or -1."""
        return _native.map_fault(self._guard) if self._guard >= 0 else -1

    def readable(self) -> int:
        """How far the map holds the file's bytes now: its size, short of any page that faulted."""
        now = self.current_size()
        fault = self.fault_offset()
        return now if fault < 0 else min(now, fault)

    def current_view(self) -> memoryview:
        """The map as far as it holds the file's bytes (:meth:`readable`).

        ``buffer`` itself unless the file has shrunk (or a page faulted) since it was opened.
        """
        if self._guard >= 0:  # in front of any SIGBUS handler installed since (a worker's)
            _native.keep_guard()
        now = self.readable()
        return self.buffer if now >= self.size else self.buffer[:now]

    def truncated(
        self, offset: int, now: int, record_index: int | None = None
    ) -> TruncatedRecordError:
        """The error for a range at ``offset`` that the map, readable to ``now``, lost."""
        fault = self.fault_offset()
        if 0 <= fault < self.current_size():  # a page faulted, inside the file's size
            return TruncatedRecordError(
                f"{self.url} could not be read past byte {now} (a page of its map faulted: the "
                "file changed while open, or the disk gave an I/O error)",
                path=self.url,
                offset=offset,
                record_index=record_index,
            )
        return super().truncated(offset, now, record_index)

    def mapped_view(self) -> memoryview:
        """:meth:`current_view`: a map's view is the whole file."""
        return self.current_view()

    def read(self, offset: int, length: int) -> memoryview:
        """A zero-copy slice of the map (fewer bytes at the end of the file).

        Raises:
            TruncatedRecordError: the file was truncated while open and no longer holds
                the range.
            ValueError: the source is closed.
        """
        return self.read_ranges([(offset, length)])[0]

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        """Zero-copy slices of the map, the file's size checked once for all of them."""
        view = self.current_view()
        if len(view) < self.size:
            for offset, length in ranges:
                if min(offset + length, self.size) > len(view):
                    raise self.truncated(offset, len(view))
        return [view[offset : offset + length] for offset, length in ranges]

    def close(self) -> None:
        """Unmap the file, or, while views handed out still use the map, leave it to them.

        The last view to go unmaps it and closes its descriptor; reads raise
        ``ValueError`` from now on.
        """
        if self.closed:
            return
        self.closed = True
        buffer, self.buffer = self.buffer, memoryview(b"")
        with contextlib.suppress(BufferError):  # a buffer taken from it directly
            buffer.release()  # slices keep the map through a buffer of their own
        mapped, self._map = self._map, None
        if mapped is not None:
            with contextlib.suppress(BufferError):  # views still exist: theirs to unmap
                mapped.close()


class CopiedSource(MappedSource):
    """A remote file's whole local copy (``cache_dir`` without ``cache_limit``), mmap'd.

    Reads are the map's. A record the checksum sidecar finds damaged in the copy (the
    disk, not the store) is fetched again from the remote file (:meth:`refetch`) and
    written over the copy's bytes (:meth:`repair`): the map is shared with the file, so
    the repaired bytes are what every later read sees, in this process and in the others
    that map the same copy.

    Args:
        path: the copy.
        url: the remote file's URL (for messages, and to fetch ranges again).
        reopen: opens the remote file again, when the first range is fetched again.
    """

    def __init__(self, path: str, url: str, reopen: Callable[[], ByteSource]) -> None:
        super().__init__(path, url=url)
        self.path = path
        self._reopen = reopen
        self._origin: ByteSource | None = None
        self._lock = threading.Lock()  # decode threads verify batches concurrently

    mends = True

    def refetch(self, offset: int, length: int, *, until: int | None = None) -> Any:
        """``length`` bytes from ``offset`` of the remote file, not of the copy."""
        with self._lock:
            if self._origin is None:
                self._origin = self._reopen()
            origin = self._origin
        return origin.read(offset, length)

    def repair(self, offset: int, data: Any) -> None:
        """Write ``data`` (the store's bytes, checked) over the copy at ``offset``.

        Raises:
            OSError: the copy cannot be written (a read-only cache folder).
        """
        view = memoryview(data).cast("B")
        fd = os.open(self.path, os.O_WRONLY)
        try:
            done = 0
            while done < len(view):
                done += os.pwrite(fd, view[done:], offset + done)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Unmap the copy, and close the remote file if a range was fetched again."""
        with self._lock:
            origin, self._origin = self._origin, None
        if origin is not None:
            origin.close()
        super().close()
