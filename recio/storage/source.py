"""Random access to the bytes of one file: ``ByteSource``, mmap'd files, and ``open_source``.

``open_source`` picks the right source for a URL.

A local file is mmap'd and its reads are zero-copy memoryview slices; a remote one is an
:class:`recio.storage.remote.FsspecSource`, optionally copied whole into a local cache first.
"""

from __future__ import annotations

import errno
import mmap
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .retry import translate_error
from .urls import is_local, local_path

if TYPE_CHECKING:
    from .options import FetchOptions


class ByteSource:
    """Random access to the bytes of one file."""

    url: str
    size: int

    def read(self, offset: int, length: int) -> bytes | memoryview:
        """``length`` bytes from ``offset`` (fewer at the end of the file)."""
        raise NotImplementedError

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
    """A local file, mmap'd read-only: reads are zero-copy slices of the page cache."""

    def __init__(self, path: str, url: str | None = None) -> None:
        self.url = url or path
        with open(path, "rb") as f:
            self.size = os.fstat(f.fileno()).st_size
            # mmap refuses empty files; an empty buffer behaves the same.
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if self.size else None
        self.buffer = memoryview(self._map) if self._map is not None else memoryview(b"")

    def read(self, offset: int, length: int) -> memoryview:
        """A zero-copy slice of the map (fewer bytes at the end of the file)."""
        return self.buffer[offset : offset + length]

    def close(self) -> None:
        """Drop the map; views already handed out keep it alive until they go."""
        # Views handed out keep the map alive; release ours and let GC unmap.
        self.buffer = memoryview(b"")
        self._map = None


def open_source(
    url: str,
    storage_options: dict[str, Any] | None = None,
    *,
    fetch: FetchOptions | None = None,
    cache_dir: str | None = None,
) -> ByteSource:
    """Open ``url`` for random-access reading.

    Local paths and ``file://`` URLs are mmap'd. With ``cache_dir``, a remote file is
    first copied whole into ``cache_dir`` (with large concurrent reads) and mmap'd from
    there; later opens of the same unchanged file (same size and ETag/mtime) are
    local-speed.
    """
    if is_local(url):
        try:
            return MappedSource(local_path(url))
        except FileNotFoundError as exc:
            raise translate_error(exc, url) from exc
    # Imported here: local-only runs never load the remote machinery (or fsspec).
    from .cache import cached_copy
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
    return cached_copy(source, cache_dir)
