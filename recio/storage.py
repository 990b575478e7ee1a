"""Where bytes come from and go to: local files (mmap'd) and any fsspec URL.

Readers get a ``ByteSource``: ``size``, ``read(offset, length)`` and
``read_ranges(ranges)``. A local file is mmap'd and its reads are zero-copy
memoryview slices; a remote one is read by byte ranges through fsspec.
Writers get an ``AtomicOutput``: what it writes appears under the final name
only on ``commit()``; ``abort()`` leaves nothing that looks whole.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import tempfile
from collections.abc import Sequence
from typing import Any, BinaryIO

import fsspec

# Optional backends named by the extra that installs them.
_EXTRA_FOR_PROTOCOL = {"s3": "s3", "s3a": "s3", "hdfs": "hdfs", "viewfs": "hdfs"}


def split_protocol(url: str) -> tuple[str, str]:
    """('file', '/x/y.rec') for plain paths and file:// URLs; ('s3', 'bucket/key') etc."""
    if "://" not in url:
        return "file", url
    protocol, rest = url.split("://", 1)
    return protocol, rest


def is_local(url: str) -> bool:
    return split_protocol(url)[0] in ("file", "local")


def local_path(url: str) -> str:
    return split_protocol(url)[1]


def filesystem(url: str, storage_options: dict[str, Any] | None = None):
    """The fsspec filesystem for ``url`` and the path within it.

    A missing optional backend is reported with the extra that installs it.
    """
    protocol, _ = split_protocol(url)
    try:
        fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    except ImportError as exc:
        extra = _EXTRA_FOR_PROTOCOL.get(protocol)
        hint = f"pip install 'recio[{extra}]'" if extra else f"install fsspec's {protocol} backend"
        raise ImportError(f"reading {protocol}:// URLs needs an extra package: {hint}") from exc
    return fs, path


class ByteSource:
    """Random access to the bytes of one file."""

    url: str
    size: int

    def read(self, offset: int, length: int) -> bytes | memoryview:
        raise NotImplementedError

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes | memoryview]:
        """Read several (offset, length) ranges; remote sources fetch them concurrently."""
        return [self.read(offset, length) for offset, length in ranges]

    def close(self) -> None:
        pass

    def __enter__(self) -> ByteSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MappedSource(ByteSource):
    """A local file, mmap'd read-only: reads are zero-copy slices of the page cache."""

    def __init__(self, path: str) -> None:
        self.url = path
        with open(path, "rb") as f:
            self.size = os.fstat(f.fileno()).st_size
            # mmap refuses empty files; an empty buffer behaves the same.
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if self.size else None
        self.buffer = memoryview(self._map) if self._map is not None else memoryview(b"")

    def read(self, offset: int, length: int) -> memoryview:
        return self.buffer[offset : offset + length]

    def close(self) -> None:
        # Views handed out keep the map alive; release ours and let GC unmap.
        self.buffer = memoryview(b"")
        self._map = None


class FsspecSource(ByteSource):
    """A file behind any fsspec URL, read by byte ranges."""

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None) -> None:
        self.url = url
        self.fs, self.path = filesystem(url, storage_options)
        self.size = int(self.fs.size(self.path))

    def read(self, offset: int, length: int) -> bytes:
        return self.fs.cat_file(self.path, start=offset, end=offset + length)

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        if not ranges:
            return []
        paths = [self.path] * len(ranges)
        starts = [offset for offset, _ in ranges]
        ends = [offset + length for offset, length in ranges]
        results = self.fs.cat_ranges(paths, starts, ends, on_error="return")
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return results


def open_source(url: str, storage_options: dict[str, Any] | None = None) -> ByteSource:
    """Open ``url`` for random-access reading."""
    if is_local(url):
        return MappedSource(local_path(url))
    return FsspecSource(url, storage_options)


def read_text(url: str, storage_options: dict[str, Any] | None = None) -> str:
    if is_local(url):
        with open(local_path(url), encoding="utf-8") as f:
            return f.read()
    fs, path = filesystem(url, storage_options)
    return fs.cat_file(path).decode("utf-8")


def exists(url: str, storage_options: dict[str, Any] | None = None) -> bool:
    if is_local(url):
        return os.path.exists(local_path(url))
    fs, path = filesystem(url, storage_options)
    return fs.exists(path)


class AtomicOutput:
    """A file written under a temporary name and renamed into place on ``commit()``."""

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None) -> None:
        self.url = url
        self.closed = False
        if is_local(url):
            path = local_path(url)
            directory = os.path.dirname(os.path.abspath(path))
            fd, self._tmp = tempfile.mkstemp(
                prefix=f".{os.path.basename(path)}.", suffix=".partial", dir=directory
            )
            self._file: BinaryIO = os.fdopen(fd, "wb", buffering=1 << 20)
            self._remote = False
        else:
            # Object stores publish an object only when its upload completes;
            # discard() aborts the (multipart) upload so nothing appears.
            fs, path = filesystem(url, storage_options)
            self._file = fs.open(path, "wb")
            self._remote = True

    def write(self, data: bytes | bytearray | memoryview) -> int:
        return self._file.write(data)

    def commit(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._file.close()
        if not self._remote:
            os.chmod(self._tmp, 0o666 & ~_umask())
            os.replace(self._tmp, local_path(self.url))

    def abort(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._remote:
            discard = getattr(self._file, "discard", None)
            if discard is not None:
                discard()
            else:
                self._file.close()
        else:
            self._file.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
