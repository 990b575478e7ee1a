"""Reading and writing RecordIO files: MXNet's classes, modernised, on any storage.

``MXRecordIO`` / ``MXIndexedRecordIO`` keep MXNet's names and behaviour
(``read()`` returns ``None`` at the end, ``read_idx``, ``write_idx``, ``keys``),
and add context managers, iteration, and pickling that reopens the file in
the new process without closing it in the old one. ``RecordFile`` is the
random-access reader the iterator uses: offsets from the ``.idx`` (or a
scan), zero-copy reads from local files, ranged reads from remote ones.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from . import storage
from .errors import CorruptRecordError, IndexMismatchError, RecordIOError, TruncatedRecordError
from .format import (
    IRHeader,
    encode_record,
    format_idx_line,
    pack,
    parse_idx,
    read_record,
    scan_offsets,
    unpack,
)

__all__ = [
    "IRHeader",
    "MXIndexedRecordIO",
    "MXRecordIO",
    "RecordFile",
    "pack",
    "pack_img",
    "unpack",
    "unpack_img",
]

# Remote sequential reads fetch this much at a time.
_WINDOW = 8 << 20


class _RecordCursor:
    """Parses records at arbitrary offsets of a ByteSource.

    Local sources are parsed in place (zero-copy). Remote ones through a
    window of the file that grows or moves as records need.
    """

    def __init__(self, source: storage.ByteSource) -> None:
        self.source = source
        self._buffer = getattr(source, "buffer", None)
        self._window = memoryview(b"")
        self._window_start = 0

    def read_at(
        self, offset: int, record_index: int | None = None
    ) -> tuple[memoryview | bytes, int]:
        if self._buffer is not None:
            return read_record(
                self._buffer, offset, path=self.source.url, record_index=record_index
            )
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


class MXRecordIO:
    """Sequential RecordIO reader (``flag="r"``) or writer (``flag="w"``), as in MXNet.

    ``uri`` may be a local path or any fsspec URL; ``storage_options`` go to fsspec.
    A writer's output appears under its name only when it is closed; leaving a
    ``with`` block on an exception discards it.
    """

    def __init__(self, uri: str, flag: str, *, storage_options: dict[str, Any] | None = None):
        if flag not in ("r", "w"):
            raise ValueError(f"flag must be 'r' or 'w', not {flag!r}")
        self.uri = str(uri)
        self.flag = flag
        self.storage_options = storage_options
        self.is_open = False
        self.open()

    @property
    def writable(self) -> bool:
        return self.flag == "w"

    def open(self) -> None:
        if self.writable:
            self._out = storage.AtomicOutput(self.uri, self.storage_options)
            self._pos = 0
        else:
            self._source = storage.open_source(self.uri, self.storage_options)
            self._cursor = _RecordCursor(self._source)
            self._pos = 0
            self._count = 0
        self.is_open = True

    def close(self) -> None:
        """Close; a writer's file is flushed and moved into place."""
        if not self.is_open:
            return
        self.is_open = False
        if self.writable:
            self._out.commit()
        else:
            self._source.close()

    def abort(self) -> None:
        """Close a writer without publishing its file (a reader just closes)."""
        if self.is_open and self.writable:
            self.is_open = False
            self._out.abort()
        self.close()

    def reset(self) -> None:
        """Back to the start (reader); a writer is closed and truncated, as in MXNet."""
        self.close()
        self.open()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None and self.writable:
            self.abort()
        else:
            self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def __getstate__(self) -> dict:
        if self.writable and self.is_open:
            raise TypeError(f"cannot pickle an open RecordIO writer ({self.uri})")
        state = {k: v for k, v in self.__dict__.items() if not k.startswith("_")}
        state["_pos"] = getattr(self, "_pos", 0)
        return state

    def __setstate__(self, state: dict) -> None:
        pos = state.pop("_pos", 0)
        self.__dict__.update(state)
        if self.is_open:
            self.open()
            self._pos = pos
            self._count = None

    def _check_reader(self) -> None:
        if not self.is_open:
            raise ValueError(f"I/O operation on closed RecordIO file {self.uri}")
        if self.writable:
            raise ValueError(f"{self.uri} is open for writing, not reading")

    def write(self, buf: bytes | bytearray | memoryview) -> None:
        """Append one record."""
        if not self.is_open or not self.writable:
            raise ValueError(f"{self.uri} is not open for writing")
        frame = encode_record(buf)
        self._out.write(frame)
        self._pos += len(frame)

    def read(self) -> bytes | None:
        """The next record's payload, or None at the end of the file."""
        payload = self.read_view()
        return None if payload is None else bytes(payload)

    def read_view(self) -> memoryview | bytes | None:
        """Like ``read()``, but zero-copy where the file is local."""
        self._check_reader()
        if self._pos >= self._source.size:
            return None
        payload, self._pos = self._cursor.read_at(self._pos, self._count)
        if self._count is not None:
            self._count += 1
        return payload

    def tell(self) -> int:
        """Byte offset of the next record to read or write."""
        return self._pos

    def __iter__(self) -> Iterator[bytes]:
        while (payload := self.read()) is not None:
            yield payload


class MXIndexedRecordIO(MXRecordIO):
    """RecordIO with a ``.idx`` file of ``key\\toffset`` lines, for random access."""

    def __init__(
        self,
        idx_path: str,
        uri: str,
        flag: str,
        key_type: type = int,
        *,
        storage_options: dict[str, Any] | None = None,
    ):
        self.idx_path = str(idx_path)
        self.key_type = key_type
        self.idx: dict = {}
        self.keys: list = []
        super().__init__(uri, flag, storage_options=storage_options)

    def open(self) -> None:
        super().open()
        self.idx = {}
        self.keys = []
        if self.writable:
            self._idx_out = storage.AtomicOutput(self.idx_path, self.storage_options)
            return
        text = storage.read_text(self.idx_path, self.storage_options)
        for key, offset in parse_idx(text, path=self.idx_path, key_type=self.key_type):
            if key not in self.idx:
                self.keys.append(key)
            self.idx[key] = offset
        _check_offsets(self.idx_path, self.keys, [self.idx[k] for k in self.keys], self._source)

    def close(self) -> None:
        was_open = self.is_open
        super().close()
        if was_open and self.writable:
            self._idx_out.commit()

    def abort(self) -> None:
        if self.is_open and self.writable:
            self._idx_out.abort()
        super().abort()

    def seek(self, idx) -> None:
        """Position the reader at the record with key ``idx``."""
        self._check_reader()
        self._pos = self.idx[idx]
        self._count = None  # record numbers are unknown after a seek

    def read_idx(self, idx) -> bytes:
        """The payload of the record with key ``idx``."""
        self.seek(idx)
        offset = self._pos
        try:
            return self.read()
        except CorruptRecordError as exc:
            raise _not_a_record_start(self.idx_path, idx, offset, exc) from exc

    def write_idx(self, idx, buf: bytes | bytearray | memoryview) -> None:
        """Append a record and index it under key ``idx``."""
        key = self.key_type(idx)
        pos = self.tell()
        self.write(buf)
        self._idx_out.write(format_idx_line(key, pos).encode())
        self.idx[key] = pos
        self.keys.append(key)


def _check_offsets(
    idx_path: str, keys: Sequence, offsets: Sequence[int], source: storage.ByteSource
) -> None:
    for i, offset in enumerate(offsets):
        if offset < 0 or offset >= source.size or offset % 4:
            why = "past the end" if offset >= source.size else "not 4-byte aligned"
            raise IndexMismatchError(
                f"{idx_path} gives key {keys[i]} offset {offset}, {why} of {source.url} "
                f"({source.size} bytes)",
                path=idx_path,
                offset=offset,
                record_index=i,
            )


def _not_a_record_start(idx_path: str, key, offset: int, exc: RecordIOError) -> RecordIOError:
    if exc.offset != offset:
        return exc
    return IndexMismatchError(
        f"{idx_path} gives key {key} offset {offset}, which is not a record start ({exc})",
        path=idx_path,
        offset=offset,
        record_index=exc.record_index,
    )


class RecordFile:
    """Random access to every record of a ``.rec``, by position in its index.

    Offsets come from ``idx_url`` (default: the ``.rec`` name with ``.idx``) or,
    when there is no ``.idx``, from a scan of the file. ``read(i)`` returns the
    payload of the i-th record in index order: a zero-copy memoryview for local
    files. ``read_many`` fetches several records, concurrently for remote files.
    """

    def __init__(
        self,
        url: str,
        idx_url: str | None = None,
        *,
        storage_options: dict[str, Any] | None = None,
        fetch: storage.FetchOptions | None = None,
        cache_dir: str | None = None,
    ) -> None:
        self.url = str(url)
        self.storage_options = storage_options
        self.fetch, self.cache_dir = fetch, cache_dir
        self.source = storage.open_source(
            self.url, storage_options, fetch=fetch, cache_dir=cache_dir
        )
        self._cursor = _RecordCursor(self.source)
        if idx_url is None:
            candidate = default_idx_path(self.url)
            idx_url = candidate if storage.exists(candidate, storage_options) else None
        self.idx_url = idx_url
        if idx_url is not None:
            entries = parse_idx(storage.read_text(idx_url, storage_options), path=idx_url)
            self.keys = np.array([k for k, _ in entries], dtype=np.int64)
            self.offsets = np.array([o for _, o in entries], dtype=np.int64)
            _check_offsets(idx_url, self.keys, self.offsets, self.source)
        else:
            self.offsets = np.array(scan_source(self.source), dtype=np.int64)
            self.keys = np.arange(len(self.offsets), dtype=np.int64)
        # Each record's byte extent: up to the next record start in file order.
        order = np.argsort(self.offsets, kind="stable")
        ends = np.empty_like(self.offsets)
        sorted_offsets = self.offsets[order]
        ends[order] = np.append(sorted_offsets[1:], self.source.size)
        self.lengths = ends - self.offsets

    def __len__(self) -> int:
        return len(self.offsets)

    def read(self, i: int) -> memoryview | bytes:
        offset = int(self.offsets[i])
        try:
            payload, _ = self._cursor.read_at(offset, i) if self._is_local else self._read_remote(i)
        except CorruptRecordError as exc:
            key = int(self.keys[i])
            raise _not_a_record_start(self.idx_url or self.url, key, offset, exc) from exc
        return payload

    @property
    def _is_local(self) -> bool:
        return isinstance(self.source, storage.MappedSource)

    def _read_remote(self, i: int) -> tuple[memoryview | bytes, int]:
        offset, length = int(self.offsets[i]), int(self.lengths[i])
        return self._parse_extent(i, self.source.read(offset, length))

    def _parse_extent(self, i: int, data) -> tuple[memoryview | bytes, int]:
        offset = int(self.offsets[i])
        return read_record(memoryview(data), 0, path=self.url, record_index=i, base=offset)

    def read_many(self, indices: Sequence[int]) -> list[memoryview | bytes]:
        """Payloads of several records (remote: one concurrent ranged fetch)."""
        if self._is_local:
            return [self.read(int(i)) for i in indices]
        ranges = [(int(self.offsets[i]), int(self.lengths[i])) for i in indices]
        datas = self.source.read_ranges(ranges)
        out = []
        for i, data in zip(indices, datas, strict=False):
            try:
                out.append(self._parse_extent(int(i), data)[0])
            except CorruptRecordError as exc:
                key, offset = int(self.keys[i]), int(self.offsets[i])
                raise _not_a_record_start(self.idx_url or self.url, key, offset, exc) from exc
        return out

    def close(self) -> None:
        self.source.close()

    def __enter__(self) -> RecordFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict:
        return {
            "url": self.url,
            "idx_url": self.idx_url,
            "storage_options": self.storage_options,
            "fetch": self.fetch,
            "cache_dir": self.cache_dir,
        }

    def __setstate__(self, state: dict) -> None:
        self.__init__(
            state["url"],
            state["idx_url"],
            storage_options=state["storage_options"],
            fetch=state.get("fetch"),
            cache_dir=state.get("cache_dir"),
        )


def default_idx_path(rec_url: str) -> str:
    base = rec_url[:-4] if rec_url.endswith(".rec") else rec_url
    return base + ".idx"


def scan_source(source: storage.ByteSource) -> list[int]:
    """Record start offsets of a whole file, by walking its frame headers."""
    buffer = getattr(source, "buffer", None)
    if buffer is not None:
        return scan_offsets(buffer, path=source.url)
    cursor = _RecordCursor(source)
    offsets = []
    offset = 0
    while offset < source.size:
        offsets.append(offset)
        _, offset = cursor.read_at(offset, len(offsets) - 1)
    return offsets


# --- images in records --------------------------------------------------------------


def pack_img(
    header: IRHeader | tuple,
    img: np.ndarray,
    quality: int = 95,
    img_fmt: str = ".jpg",
    *,
    channel_order: str = "BGR",
) -> bytes:
    """Encode ``img`` (H×W or H×W×3 uint8) and pack it with ``header``.

    As MXNet's ``pack_img`` (which used OpenCV), colour images are taken as BGR
    unless ``channel_order="RGB"``. ``quality`` is the JPEG quality, or for PNG
    the zlib compression level (clamped to 0..9).
    """
    from PIL import Image

    arr = np.ascontiguousarray(img)
    if arr.ndim == 3 and arr.shape[2] == 3 and channel_order.upper() == "BGR":
        arr = arr[:, :, ::-1]
    elif arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    image = Image.fromarray(np.ascontiguousarray(arr))
    out = io.BytesIO()
    fmt = img_fmt.lower().lstrip(".")
    if fmt in ("jpg", "jpeg"):
        image.save(out, format="JPEG", quality=int(quality))
    elif fmt == "png":
        image.save(out, format="PNG", compress_level=max(0, min(int(quality), 9)))
    else:
        image.save(out, format=fmt.upper())
    return pack(header, out.getvalue())


def unpack_img(
    s: bytes | memoryview, iscolor: int = -1, *, channel_order: str = "BGR"
) -> tuple[IRHeader, np.ndarray]:
    """Unpack a record into its header and decoded image, as MXNet's ``unpack_img``.

    ``iscolor``: -1 keeps the stored channels, 0 gives grayscale, 1 gives colour
    (BGR unless ``channel_order="RGB"``, as OpenCV returned it).
    """
    from PIL import Image

    header, img_bytes = unpack(s)
    image = Image.open(io.BytesIO(bytes(img_bytes)))
    if iscolor == 0:
        image = image.convert("L")
    elif iscolor == 1 or image.mode not in ("L", "RGB"):
        image = image.convert("RGB")
    arr = np.asarray(image)
    if arr.ndim == 3 and channel_order.upper() == "BGR":
        arr = np.ascontiguousarray(arr[:, :, ::-1])
    return header, arr
