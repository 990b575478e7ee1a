"""Random access to the bytes of one file: ``ByteSource``, mmap'd files, and ``open_source``.

``open_source`` picks the right source for a URL.

A local file is mmap'd and its reads are zero-copy memoryview slices; a remote one is an
:class:`recio.storage.remote.FsspecSource`, optionally copied whole into a local cache first.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import TruncatedRecordError
from .retry import translate_error
from .urls import is_local, local_path

if TYPE_CHECKING:
    from .options import FetchOptions


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


class MappedSource(ByteSource):
    """A local file, mmap'd read-only: reads are zero-copy slices of the page cache.

    A map faults (SIGBUS, which kills the process) where a page past the file's end is
    touched, so a file truncated or rewritten in place while open is checked for: reads
    (and :meth:`current_view`) compare the range with the file's size now, an fstat of
    the map's descriptor, and raise ``TruncatedRecordError`` for a range that is gone.
    A view already handed out can still fault if the file shrinks under it.
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

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"I/O on a closed file {self.url}")

    def current_size(self) -> int:
        """The file's size now (it was ``size`` when opened)."""
        self._check_open()
        return self._map.size() if self._map is not None else self.size

    def current_view(self) -> memoryview:
        """The map as far as the file still reaches: parsing it cannot fault.

        ``buffer`` itself unless the file has shrunk since it was opened.
        """
        now = self.current_size()
        return self.buffer if now >= self.size else self.buffer[:now]

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


def open_source(
    url: str,
    storage_options: dict[str, Any] | None = None,
    *,
    fetch: FetchOptions | None = None,
    cache_dir: str | None = None,
    cache_limit: int | None = None,
) -> ByteSource:
    """Open ``url`` for random-access reading.

    Local paths and ``file://`` URLs are mmap'd. With ``cache_dir`` and ``cache_limit``
    (bytes), a remote file is read through a bounded block cache in ``cache_dir``
    (:class:`~recio.storage.blockcache.CachedSource`, NOTE [block cache]): its blocks kept
    on local disk up to the limit, shared by the processes that use the folder. With
    ``cache_dir`` alone, it is first copied whole into ``cache_dir`` (with large
    concurrent reads) and mmap'd from there (a :class:`CopiedSource`); later opens of the
    same unchanged file (same size and ETag/mtime) are local-speed.

    Raises:
        ValueError: ``cache_limit`` without ``cache_dir``, or below 1.
    """
    if cache_limit is not None and cache_dir is None:
        raise ValueError(f"cache_limit={cache_limit} needs a cache_dir (opening {url})")
    if is_local(url):
        try:
            return MappedSource(local_path(url))
        except FileNotFoundError as exc:
            raise translate_error(exc, url) from exc
    # Imported here: local-only runs never load the remote machinery (or fsspec).
    from .cache import cached_copy, source_version
    from .remote import FsspecSource

    try:
        source = FsspecSource(url, storage_options, fetch=fetch)
    except (OSError, ValueError, ImportError):
        raise
    except Exception as exc:  # deep client errors (botocore) become builtin OSErrors
        new = translate_error(exc, url)
        if new is exc:
            raise OSError(errno.EIO, f"cannot open {url}: {type(exc).__name__}: {exc}") from exc
        raise new from exc
    if cache_dir is None:
        return source
    if cache_limit is None:
        return cached_copy(source, cache_dir)
    from .blockcache import BlockCache, CachedSource

    try:
        cache = BlockCache(cache_dir, cache_limit, policy=source.fetch.cache_policy)
        version = source_version(source)
    except BaseException:
        source.close()
        raise
    return CachedSource(source, cache, source.fetch.cache_block, version)
