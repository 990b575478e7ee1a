"""MXNet's RecordIO classes (``from recio import recordio`` ports ``from mxnet import recordio``).

``MXRecordIO`` / ``MXIndexedRecordIO`` keep MXNet's names and behaviour (``read()`` returns
``None`` at the end, ``read_idx``, ``write_idx``, ``keys``), and add context managers,
iteration, any fsspec URL, and pickling that reopens the file in the new process without
closing it in the old one. ``IRHeader``, ``pack``, ``unpack``, ``pack_img`` and ``unpack_img``
are MXNet's record helpers. The engine's own random-access reader is
:class:`recio.records.file.RecordFile`.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import sys
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .. import storage
from ..errors import CorruptRecordError
from .checksum import SidecarWriter, sidecar_path
from .cursor import RecordCursor
from .format import IRHeader, encode_record, format_idx_line, pack, parse_idx, unpack
from .index import check_offsets, not_a_record_start

__all__ = [
    "IRHeader",
    "MXIndexedRecordIO",
    "MXRecordIO",
    "pack",
    "pack_img",
    "unpack",
    "unpack_img",
]


# Writers still open, for the exit hook that aborts them after an unhandled exception.
_open_writers: weakref.WeakSet | None = None


def _last_unhandled() -> BaseException | None:
    """The last exception that reached the top level (``sys.last_exc``; ``last_value`` < 3.12)."""
    return getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)


def _track_writer(writer: MXRecordIO) -> None:
    global _open_writers
    if _open_writers is None:
        _open_writers = weakref.WeakSet()
        atexit.register(_abort_after_unhandled_exception)
    _open_writers.add(writer)


def _abort_after_unhandled_exception() -> None:
    """At exit after an unhandled exception, abort the writers still open.

    Runs before the interpreter clears modules and tracebacks (which drops such writers
    and calls their ``__del__``), while ``sys.last_exc`` still says that the program
    died of an exception. A writer opened after that exception was raised (in an
    interactive interpreter, where ``sys.last_exc`` stays set) is aborted only if another
    unhandled one came after.
    """
    error = _last_unhandled()
    if error is None or _open_writers is None:
        return
    for writer in list(_open_writers):
        if writer.is_open and writer.writable and writer._unhandled_at_open is not error:
            with contextlib.suppress(Exception):
                writer.abort()


class MXRecordIO:
    """Sequential RecordIO reader (``flag="r"``) or writer (``flag="w"``), as in MXNet.

    ``uri`` may be a local path or any fsspec URL; ``storage_options`` go to fsspec.
    A writer's output appears under its name only when it is closed: by ``close()``,
    or, as in MXNet, when the writer is dropped (``del w``). A writer unwound by an
    exception is aborted instead, so a half-written file never appears: leaving a
    ``with`` block on an exception, a writer dropped while an exception is being
    handled (``sys.exc_info()``), and writers still open when the program ends with
    an unhandled exception. A writer dropped after its exception was caught and
    handled is closed as MXNet would (use ``with`` or ``abort()`` to be sure).
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
        """Whether this is a writer (``flag="w"``)."""
        return self.flag == "w"

    def open(self) -> None:
        """Open ``uri``: a reader at the first record, a writer on a new output.

        A writer's output replaces the file of that name only when it is closed.
        """
        if self.writable:
            self._out = storage.AtomicOutput(self.uri, self.storage_options)
            self._pos = 0
            # What an abandoned writer's __del__ and the exit hook compare against: the
            # exceptions already there when it was opened did not unwind it.
            self._handling_at_open = sys.exc_info()[1]
            self._unhandled_at_open = _last_unhandled()
            _track_writer(self)
        else:
            self._source = storage.open_source(self.uri, self.storage_options)
            self._cursor = RecordCursor(self._source)
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
        # A writer dropped while an exception (raised since it was opened) is being
        # handled was unwound by it: abort. Otherwise close, as MXNet does.
        if not getattr(self, "is_open", False):
            return
        with contextlib.suppress(Exception):
            handling = sys.exc_info()[1]
            if self.writable and handling is not None and handling is not self._handling_at_open:
                self.abort()
            else:
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
        self._write(buf)

    def _write(self, buf: bytes | bytearray | memoryview) -> bytes:
        """Append one record; its frames as written."""
        if not self.is_open or not self.writable:
            raise ValueError(f"{self.uri} is not open for writing")
        frame = encode_record(buf)
        self._out.write(frame)
        self._pos += len(frame)
        return frame

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
    r"""RecordIO with a ``.idx`` file of ``key\toffset`` lines, for random access.

    A writer also writes the records' checksums (one CRC32C per ``write_idx``, in the
    ``.idx``'s order) to the sidecar beside the ``.idx`` (``X.idx`` -> ``X.crc``, NOTE
    [checksum sidecar] in :mod:`recio.records.checksum`), published with the pair;
    ``checksums=False`` writes none. MXNet and DALI read only the ``.rec`` and ``.idx``.
    """

    def __init__(
        self,
        idx_path: str,
        uri: str,
        flag: str,
        key_type: type = int,
        *,
        storage_options: dict[str, Any] | None = None,
        checksums: bool = True,
    ):
        self.idx_path = str(idx_path)
        self.key_type = key_type
        self.checksums = bool(checksums)
        self.idx: dict = {}
        self.keys: list = []
        super().__init__(uri, flag, storage_options=storage_options)

    def open(self) -> None:
        """Open the ``.rec`` and its ``.idx``; a reader loads the keys and checks the offsets.

        Raises:
            RecordIOError: a malformed ``.idx`` line.
            IndexMismatchError: an offset past the end of the ``.rec`` or not 4-byte aligned.
        """
        super().open()
        self.idx = {}
        self.keys = []
        if self.writable:
            self._idx_out = storage.AtomicOutput(self.idx_path, self.storage_options)
            self._crc_out = (
                SidecarWriter(sidecar_path(self.uri, self.idx_path), self.storage_options)
                if self.checksums
                else None
            )
            return
        text = storage.read_text(self.idx_path, self.storage_options)
        for key, offset in parse_idx(text, path=self.idx_path, key_type=self.key_type):
            if key not in self.idx:
                self.keys.append(key)
            self.idx[key] = offset
        check_offsets(self.idx_path, self.keys, [self.idx[k] for k in self.keys], self._source)

    def close(self) -> None:
        """Close; a writer's ``.rec`` and ``.idx`` are flushed and moved into place.

        Both (and the checksum sidecar) are written out (fsync'd locally) before any is
        renamed, so a full disk or a failed upload leaves the old files as they were, and
        nothing else. Only a failure between the renames (or of a later upload, on object
        stores, which publish on close) leaves a new ``.rec`` beside the old ``.idx`` or
        sidecar: readers warn about such a pair (``recio.errors.IndexWarning``), and refuse
        a sidecar of another write (its size and count are the ``.rec``'s and ``.idx``'s).
        """
        if not (self.is_open and self.writable):
            super().close()
            return
        self.is_open = False
        outputs = [self._out, self._idx_out]
        if self._crc_out is not None:
            outputs.append(self._crc_out)
        try:
            for out in outputs[:2]:
                out.prepare()
            if self._crc_out is not None:
                self._crc_out.prepare(self._pos)
            for out in outputs:
                out.commit()
        except BaseException:
            for out in outputs:
                out.abort()  # a no-op for one already published
            raise

    def abort(self) -> None:
        """Close a writer without publishing its ``.rec`` or ``.idx`` (a reader just closes)."""
        if self.is_open and self.writable:
            self._idx_out.abort()
            if self._crc_out is not None:
                self._crc_out.abort()
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
            raise not_a_record_start(self.idx_path, idx, offset, exc) from exc

    def write_framed(
        self,
        keys: Sequence,
        frames: bytes | bytearray | memoryview,
        lengths: Sequence[int],
        crcs: Any,
    ) -> None:
        """Append records framed already, and index them: ``write_idx`` for many at once.

        Args:
            keys: each record's key.
            frames: the records one after another, each as
                :func:`recio.records.format.encode_record` frames it (padding included).
            lengths: each record's bytes in ``frames``.
            crcs: each record's checksum as the sidecar keeps it (uint32 values).

        Raises:
            ValueError: the lengths do not add up to ``frames``, or the counts differ.
        """
        if not self.is_open or not self.writable:
            raise ValueError(f"{self.uri} is not open for writing")
        if not len(keys) == len(lengths) == len(crcs) or sum(lengths) != len(frames):
            raise ValueError(
                f"{len(keys)} keys, {len(lengths)} lengths summing to {sum(lengths)} and "
                f"{len(crcs)} checksums for {len(frames)} bytes of frames"
            )
        pos = self._pos
        lines = []
        for idx, length in zip(keys, lengths, strict=True):
            key = self.key_type(idx)
            lines.append(format_idx_line(key, pos))
            self.idx[key] = pos
            self.keys.append(key)
            pos += length
        self._out.write(frames)
        self._pos = pos
        if self._crc_out is not None:
            self._crc_out.add_crcs(crcs)
        self._idx_out.write("".join(lines).encode())

    def write_idx(self, idx, buf: bytes | bytearray | memoryview) -> None:
        """Append a record and index it under key ``idx``."""
        key = self.key_type(idx)
        pos = self.tell()
        frames = self._write(buf)
        if self._crc_out is not None:
            self._crc_out.add(frames)
        self._idx_out.write(format_idx_line(key, pos).encode())
        self.idx[key] = pos
        self.keys.append(key)


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
