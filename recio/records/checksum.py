"""End-to-end integrity: one CRC32C per record, in a sidecar file beside the ``.idx``.

NOTE [checksum sidecar]: ``STEM.crc`` sits beside ``STEM.idx`` (``sidecar_path``). MXNet
and DALI open only the ``.rec`` and ``.idx``, so the sidecar changes nothing for them. Layout, all
little-endian::

    0   8s  magic b"RECIOCRC"
    8   u32 version (1)
    12  u32 what the checksums cover (1: a record's frames as stored, see below)
    16  u64 count: records, one per line of the .idx, in its order
    24  u64 the .rec's size in bytes when the checksums were taken
    32  u32 CRC32C of the table
    36  u32 CRC32C of bytes 0..35
    40  count x u32: the records' CRC32C, in .idx order

A record's checksum covers its frames as stored in the ``.rec``: from its first frame
header (the byte its ``.idx`` offset names) to the end of its last frame's data, the frame
headers (magic and length word) and the padding between frames included, the padding
after the last frame not. So a flipped bit anywhere in a record, its length word or the
pieces of a multi-frame record, is caught. A ``.rec`` read without an ``.idx`` (a scan)
takes the sidecar beside the ``.rec`` in file order. A sidecar whose count is not the
index's, or whose size is not the ``.rec``'s, belongs to another write: an
:class:`~recio.errors.IndexMismatchError` naming it.

Written by :class:`~recio.records.recordio.MXIndexedRecordIO` (and so by ``recio im2rec``), by
``recio checksum`` for datasets without one; checked by ``recio verify`` and, with
``verify_checksums``, on every read of :class:`~.file.RecordFile` and the readers
above it (remote reads: a mismatch is fetched again once).

NOTE [checksums by default]: ``verify_checksums="auto"`` (the default everywhere) checks
every read against the sidecar wherever one exists, local files included; without one
reads are not checked, and ``verify_checksums=False`` turns the check off. A local file's
batch decoded in one native call is checked against the frames' CRC32C its decode threads
took, in the pass that gives each JPEG's whole-stream key (NOTE [one pass per record] in
native/bind_pool.c), so the check costs no pass of its own; the records that call leaves
to the exact parse, and the readers without a decode, take one native CRC32C pass per
batch over the map (BENCHMARKS.md, "Checksums by default").
"""

from __future__ import annotations

import array
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import storage
from .._crc32c import crc32c
from ..errors import (
    ChecksumError,
    IndexMismatchError,
    RecordIOError,
)
from .format import (
    CFLAG_FIRST,
    CFLAG_MIDDLE,
    CFLAG_WHOLE,
    FRAME_HEADER_SIZE,
    MAGIC,
    MAX_PAYLOAD,
    check_frame,
)

if TYPE_CHECKING:
    from .file import RecordFile

try:
    from .. import _native
except ImportError:  # built without the extension: the crc32c package, a call per record
    _native = None

__all__ = [
    "Checksums",
    "MismatchedPayload",
    "SidecarWriter",
    "crc32c",
    "extent_crcs",
    "frame_ends",
    "load_sidecar",
    "record_crcs",
    "resolve_verify",
    "sidecar_path",
    "write_sidecar",
]

SIDECAR_MAGIC = b"RECIOCRC"
SIDECAR_VERSION = 1
COVERS_FRAMES = 1
_HEAD = struct.Struct("<8sIIQQI")  # everything before the header's own CRC
HEADER_SIZE = _HEAD.size + 4
#: How a :class:`~recio.errors.ChecksumError`'s message starts (counted by IterStats).
CHECKSUM_MISMATCH = "checksum mismatch"


def sidecar_path(rec_url: str, idx_url: str | None = None) -> str:
    """The sidecar beside the ``.idx`` (``X.idx`` -> ``X.crc``), else beside the ``.rec``."""
    base = idx_url if idx_url is not None else str(rec_url)
    for ext in (".idx", ".rec"):
        if base.endswith(ext):
            return base[: -len(ext)] + ".crc"
    return base + ".crc"


def resolve_verify(verify_checksums: bool | str, url: str) -> bool | str:
    """What ``verify_checksums`` means for ``url``: False, True, or "if-present".

    True: a sidecar must be there. "auto" is "if-present", for local files as for remote
    data (NOTE [checksums by default]): a sidecar is there to be checked, and a local
    disk's rot or a byte written over is as wrong as a network's.

    Raises:
        ValueError: not True, False or "auto" (naming ``url``).
    """
    if verify_checksums is True or verify_checksums is False:
        return verify_checksums
    if verify_checksums != "auto":
        raise ValueError(
            f'verify_checksums must be True, False or "auto", not {verify_checksums!r} '
            f"(opening {url})"
        )
    return "if-present"


class Checksums:
    """A loaded sidecar: the records' CRC32C (``table``, uint32, index order) and its header.

    Attributes:
        path: the sidecar's URL, for messages.
        table: one CRC32C per record of the index.
        rec_size: the ``.rec``'s size when the checksums were taken.
    """

    def __init__(self, path: str, table: np.ndarray, rec_size: int) -> None:
        self.path = path
        self.table = table
        self.rec_size = rec_size

    def __len__(self) -> int:
        return len(self.table)

    def check_matches(self, count: int, rec_url: str, rec_size: int, idx_url: str | None) -> None:
        """Refuse a sidecar of another write: its count or ``.rec`` size differs.

        Raises:
            IndexMismatchError: naming the sidecar, what it says and what the files say.
        """
        index = idx_url or f"a scan of {rec_url}"
        if len(self.table) != count:
            raise _sidecar_error(
                self.path,
                f"holds {len(self.table)} checksums, but {index} lists {count} records: one "
                f"of them is from another write; `recio verify {rec_url}` says which (an .idx "
                f"that leaves out records: `recio index {rec_url}`; else `recio checksum "
                "--force` writes the sidecar anew)",
            )
        if self.rec_size != rec_size:
            raise _sidecar_error(
                self.path,
                f"was taken of a {self.rec_size}-byte .rec, but {rec_url} has {rec_size} "
                "bytes: it is from another write; `recio checksum --force` writes it anew",
            )

    def mismatch(
        self, records: RecordFile, position: int, got: int, *, refetched: bool = False
    ) -> ChecksumError:
        """The error for record ``position`` of ``records`` whose bytes give ``got``."""
        again = " (also when fetched again)" if refetched else ""
        return ChecksumError(
            f"{CHECKSUM_MISMATCH} (CRC32C 0x{got:08x} of the bytes{again}, "
            f"0x{int(self.table[position]):08x} in {self.path})",
            path=records.url,
            offset=int(records.offsets[position]),
            record_index=position,
        )


def _sidecar_error(path: str, why: str, offset: int | None = None) -> IndexMismatchError:
    error = IndexMismatchError(f"checksum sidecar {path} {why}")
    error.path, error.offset = path, offset
    return error


def parse_sidecar(data: bytes, path: str) -> Checksums:
    """A sidecar's bytes as :class:`Checksums`.

    Raises:
        RecordIOError: not a sidecar, a version this recio does not read, or damaged
            (its header or table does not match its CRC, or it is cut short), naming it.
    """

    def bad(why: str, offset: int | None = None) -> RecordIOError:
        error = RecordIOError(f"{path} is not a readable checksum sidecar: {why}")
        error.path, error.offset = path, offset
        return error

    if len(data) < HEADER_SIZE:
        raise bad(f"{len(data)} bytes, shorter than its {HEADER_SIZE}-byte header")
    head = data[: _HEAD.size]
    magic, version, covers, count, rec_size, table_crc = _HEAD.unpack(head)
    if magic != SIDECAR_MAGIC:
        raise bad(f"magic {magic!r}, not {SIDECAR_MAGIC!r}", 0)
    (header_crc,) = struct.unpack_from("<I", data, _HEAD.size)
    if crc32c(head) != header_crc:
        raise bad("its header does not match its CRC32C (damaged)", 0)
    if version != SIDECAR_VERSION or covers != COVERS_FRAMES:
        raise bad(f"version {version} (covering {covers}); this recio reads version 1", 8)
    if len(data) != HEADER_SIZE + 4 * count:
        raise bad(
            f"{len(data)} bytes, but its header announces {count} checksums "
            f"({HEADER_SIZE + 4 * count} bytes)",
            HEADER_SIZE,
        )
    table = np.frombuffer(data, dtype="<u4", offset=HEADER_SIZE)
    if crc32c(memoryview(data)[HEADER_SIZE:]) != table_crc:
        raise bad("its table does not match its CRC32C (damaged)", HEADER_SIZE)
    return Checksums(path, table.astype(np.uint32), int(rec_size))


def load_sidecar(path: str, storage_options: dict[str, Any] | None = None) -> Checksums | None:
    """The sidecar at ``path``, or None if there is none (see :func:`parse_sidecar`)."""
    if not storage.exists(path, storage_options):
        return None
    return parse_sidecar(bytes(storage.read_bytes(path, storage_options)), path)


def sidecar_bytes(crcs: Sequence[int] | np.ndarray, rec_size: int) -> bytes:
    """The bytes of a sidecar holding ``crcs`` for a ``.rec`` of ``rec_size`` bytes."""
    table = np.asarray(crcs, dtype="<u4").tobytes()
    head = _HEAD.pack(
        SIDECAR_MAGIC, SIDECAR_VERSION, COVERS_FRAMES, len(table) // 4, rec_size, crc32c(table)
    )
    return head + struct.pack("<I", crc32c(head)) + table


def write_sidecar(
    path: str, crcs: Sequence[int] | np.ndarray, rec_size: int, storage_options=None
) -> None:
    """Write a sidecar atomically (it appears under ``path`` only when whole)."""
    out = storage.AtomicOutput(path, storage_options)
    try:
        out.write(sidecar_bytes(crcs, rec_size))
    except BaseException:
        out.abort()
        raise
    out.commit()


class SidecarWriter:
    """The sidecar of a ``.rec`` being written: a checksum per indexed record, published last.

    ``add(frames)`` takes a record's frames as :func:`recio.records.format.encode_record` made
    them; ``prepare`` writes the sidecar out (not yet under its name), ``commit`` publishes
    it, ``abort`` drops it (see :class:`~recio.storage.AtomicOutput`).
    """

    def __init__(self, path: str, storage_options: dict[str, Any] | None = None) -> None:
        self.path = path
        self.storage_options = storage_options
        self._crcs = array.array("I")  # 4 bytes a record
        self._out: storage.AtomicOutput | None = None

    def add(self, frames: bytes) -> None:
        """Add the checksum of one record, given its encoded frames (padding included)."""
        end = _walk_end(memoryview(frames), 0)
        self._crcs.append(crc32c(memoryview(frames)[:end]))

    def add_crcs(self, crcs: Any) -> None:
        """Add the checksums of records framed elsewhere (uint32 values, in index order)."""
        self._crcs.frombytes(np.asarray(crcs, dtype=np.uint32).tobytes())

    def prepare(self, rec_size: int) -> None:
        """Write the sidecar out under a temporary name."""
        self._out = storage.AtomicOutput(self.path, self.storage_options)
        self._out.write(sidecar_bytes(np.frombuffer(self._crcs, dtype=np.uint32), rec_size))
        self._out.prepare()

    def commit(self) -> None:
        """Publish the sidecar (after ``prepare``)."""
        if self._out is not None:
            self._out.commit()

    def abort(self) -> None:
        """Drop the sidecar: nothing appears under its name."""
        if self._out is not None:
            self._out.abort()


class MismatchedPayload(bytes):
    """The payload of a bad record: empty, carrying the error.

    Its checksum did not match, its frames are damaged, or the map lost it.
    ``RecordFile.read_many(..., bad="mark")`` returns it in the record's place, so a
    batch reader turns it into a bad slot for ``on_error`` (skip, replace or raise).
    """

    error: RecordIOError

    def __new__(cls, error: RecordIOError) -> MismatchedPayload:  # noqa: D102
        self = super().__new__(cls, b"")
        self.error = error
        return self


# --- where a record's frames end ------------------------------------------------------


def _walk_end(buf: memoryview, offset: int, path: str | None = None, base: int = 0) -> int:
    """Where the frames of the record at ``offset`` of ``buf`` end (the last one's data).

    Raises:
        CorruptRecordError, TruncatedRecordError: the frames do not chain, naming the byte
            (:func:`~.format.check_frame`).
    """
    pos = offset
    while True:
        cflag, length = check_frame(buf, pos, offset, base=base, path=path)
        end = pos + FRAME_HEADER_SIZE + length
        if cflag not in (CFLAG_FIRST, CFLAG_MIDDLE):  # whole, or the last of several
            return end
        pos = end + (-length & 3)


def frame_ends(view: memoryview, offsets: np.ndarray, path: str | None = None) -> np.ndarray:
    """Where the frames of the records at ``offsets`` of ``view`` end (int64).

    One-frame records from one gather of their length words; the others frame by frame.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    n = len(offsets)
    ends = np.zeros(n, dtype=np.int64)
    if n == 0:
        return ends
    words = np.frombuffer(view, dtype="<u4", count=len(view) // 4)
    at = offsets >> 2
    inside = (offsets & 3 == 0) & (at + 1 < len(words))
    safe = np.where(inside, at, 0)
    magic, lrec = words[safe], words[np.minimum(safe + 1, max(len(words) - 1, 0))]
    ends[:] = offsets + FRAME_HEADER_SIZE + (lrec & MAX_PAYLOAD)
    plain = inside & (magic == MAGIC) & ((lrec >> 29) == CFLAG_WHOLE) & (ends <= len(view))
    for j in np.flatnonzero(~plain).tolist():
        ends[j] = _walk_end(view, int(offsets[j]), path)
    return ends


def crcs_of(view: memoryview, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The CRC32C of ``view[starts[j]:ends[j]]`` for each j (uint32), a call per record."""
    from crc32c import crc32c as _crc

    out = np.empty(len(starts), dtype=np.uint32)
    for j, (a, b) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        out[j] = _crc(view[a:b])
    return out


def frame_crcs(
    view: memoryview, offsets: np.ndarray, path: str | None = None, *, native: bool = True
) -> np.ndarray:
    """The CRC32C of the frames of each record at ``offsets`` of ``view`` (uint32).

    With the extension, one native call for the batch (the frames walked and summed in C,
    the GIL released); else :func:`frame_ends` and a ``crc32c`` call per record.

    Raises:
        RecordIOError: a record whose frames do not chain, naming the byte (and ``path``).
    """
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    if _native is None or not native:
        return crcs_of(view, offsets, frame_ends(view, offsets, path))
    crcs = np.empty(len(offsets), dtype=np.uint32)
    ends = np.empty(len(offsets), dtype=np.int64)
    _native.record_crcs(view, offsets, crcs, ends)
    for j in np.flatnonzero(ends < 0).tolist():
        _walk_end(view, int(offsets[j]), path)  # raises the framing error
        raise AssertionError("frames the native walk refused")  # pragma: no cover
    return crcs


def extent_crcs(datas: Sequence[Any], *, native: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The CRC32C of the record at the start of each buffer (remote extents as fetched).

    Returns ``(crcs, ends)``: uint32 checksums and where the frames end in each buffer
    (int64; -1, and checksum 0, where they do not chain: damaged). One native call for all
    of them with the extension; else a ``crc32c`` call per buffer.
    """
    n = len(datas)
    crcs = np.zeros(n, dtype=np.uint32)
    ends = np.full(n, -1, dtype=np.int64)
    if _native is not None and native:
        _native.extent_crcs(datas, crcs, ends)
        return crcs, ends
    for j, data in enumerate(datas):
        view = memoryview(data).cast("B")
        try:
            ends[j] = _walk_end(view, 0)
        except RecordIOError:
            continue
        crcs[j] = crc32c(view[: ends[j]])
    return crcs, ends


def record_crcs(records: RecordFile, positions: np.ndarray | None = None) -> np.ndarray:
    """The CRC32C of each record's frames (all of them, or those at ``positions``).

    Local files from the map; remote ones by their extents, a few MB of records at a time.

    Raises:
        RecordIOError: a record whose frames do not chain (naming the file and byte).
    """
    if positions is None:
        positions = np.arange(len(records), dtype=np.int64)
    positions = np.asarray(positions, dtype=np.int64)
    if records.is_local:
        view = records.local_view(positions)
        return frame_crcs(view, records.offsets[positions], records.url)
    out = np.empty(len(positions), dtype=np.uint32)
    step = 1024
    for lo in range(0, len(positions), step):
        part = positions[lo : lo + step]
        ranges = [(int(records.offsets[i]), int(records.lengths[i])) for i in part]
        datas = records.source.read_ranges(ranges)
        crcs, ends = extent_crcs(datas)
        for j in np.flatnonzero(ends < 0).tolist():  # raises the framing error
            _walk_end(memoryview(datas[j]).cast("B"), 0, records.url, ranges[j][0])
        out[lo : lo + len(part)] = crcs
    return out
