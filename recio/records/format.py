"""RecordIO framing, IRHeader, and the .idx / .lst text files, byte-exact with MXNet 1.9.1.

The dmlc-core format: each record is one or more frames of

    magic (u32 LE 0xced7230a) | lrec (u32 LE: cflag << 29 | length) | payload | zero pad to 4

A payload that holds the magic at a 4-byte-aligned position is split there: the
writer drops the magic and starts a new frame (cflag 1 = first, 2 = middle,
3 = last); the reader puts the magic back. This module works on bytes-like
buffers and text; it knows nothing of files or storage.
"""

from __future__ import annotations

import io
import numbers
import struct
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import numpy as np

from .._text import decode_text, lf_line_ends
from ..errors import CorruptRecordError, RecordIOError, TruncatedRecordError

MAGIC = 0xCED7230A
MAGIC_BYTES = struct.pack("<I", MAGIC)
#: A frame header: magic, then the length word (continuation flag << 29 | length).
FRAME_HEADER = struct.Struct("<II")
FRAME_HEADER_SIZE = FRAME_HEADER.size
#: Payloads (and frames) are limited by the 29-bit length field.
MAX_PAYLOAD = (1 << 29) - 1
_LENGTH_MASK = (1 << 29) - 1

CFLAG_WHOLE, CFLAG_FIRST, CFLAG_MIDDLE, CFLAG_LAST = 0, 1, 2, 3
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _pad(length: int) -> int:
    return -length & 3


def encode_record(payload: bytes | bytearray | memoryview) -> bytes:
    """Frame one payload exactly as dmlc's RecordIOWriter::WriteRecord does."""
    data = bytes(payload)
    size = len(data)
    if size > MAX_PAYLOAD:
        raise RecordIOError(
            f"payload of {size} bytes is too large: RecordIO lengths are 29-bit "
            f"(at most {MAX_PAYLOAD} bytes)"
        )
    parts = []
    start = 0  # start of the current frame's data in `data`
    # Only magics at 4-byte-aligned positions split, and the scan stops before the last
    # partial word, as dmlc's loop over `lower_align` does: compare whole words (numpy
    # does it ~2.5x faster than bytes.find, which stops at every 0x0A byte).
    words = np.frombuffer(data, dtype="<u4", count=size >> 2)
    for pos in (np.flatnonzero(words == MAGIC) * 4).tolist():
        cflag = CFLAG_FIRST if start == 0 else CFLAG_MIDDLE
        parts.append(FRAME_HEADER.pack(MAGIC, cflag << 29 | (pos - start)))
        parts.append(data[start:pos])
        start = pos + 4
    cflag = CFLAG_LAST if start else CFLAG_WHOLE
    parts.append(FRAME_HEADER.pack(MAGIC, cflag << 29 | (size - start)))
    parts.append(data[start:])
    parts.append(b"\0" * _pad(size))
    return b"".join(parts)


def check_frame(
    buf: bytes | memoryview,
    pos: int,
    record_start: int,
    *,
    end: int | None = None,
    base: int = 0,
    path: str | None = None,
    record_index: int | None = None,
) -> tuple[int, int]:
    """The continuation flag and payload length of the frame whose header is at ``buf[pos]``.

    The frame rule, the one every reader of frames applies: the 8-byte header is all there;
    its magic is RecordIO's; its continuation flag is 0-3, and a record's first frame
    (``pos == record_start``) is whole (0) or a first (1) while each later one is a middle (2)
    or the last (3); its payload ends within the file (the zero padding after the last
    frame may be cut by the file's end). ``end``: where the file ends, in ``buf``'s positions
    (default: ``buf``'s end; more when ``buf`` holds the header only); ``base``: the file
    offset of ``buf[0]``, for the messages.

    Raises:
        CorruptRecordError: a bad magic, continuation flag or continuation sequence.
        TruncatedRecordError: the file ends inside the frame header or the payload.
    """
    size = len(buf) if end is None else end
    if pos + FRAME_HEADER_SIZE <= len(buf):
        magic, lrec = FRAME_HEADER.unpack_from(buf, pos)
        cflag, length = lrec >> 29, lrec & _LENGTH_MASK
        # the first frame whole or a first (0, 1), a later one a middle or the last (2, 3)
        if (
            magic == MAGIC
            and cflag <= CFLAG_LAST
            and (cflag < CFLAG_MIDDLE) == (pos == record_start)
            and pos + FRAME_HEADER_SIZE + length <= size
        ):
            return cflag, length
    raise _frame_error(buf, pos, record_start, size, base, path, record_index)


def _frame_error(
    buf: bytes | memoryview,
    pos: int,
    record_start: int,
    end: int,
    base: int,
    path: str | None,
    record_index: int | None,
) -> RecordIOError:
    """What is wrong with the frame at ``buf[pos]`` that :func:`check_frame` refused."""
    where = {"path": path, "offset": base + pos, "record_index": record_index}
    if pos + FRAME_HEADER_SIZE > len(buf):
        have = max(min(end, len(buf)) - pos, 0)
        what = "length word" if have >= 4 else "frame header"
        return TruncatedRecordError(f"file ends inside a {what} ({have} of 8 bytes)", **where)
    magic, lrec = FRAME_HEADER.unpack_from(buf, pos)
    cflag, length = lrec >> 29, lrec & _LENGTH_MASK
    if magic != MAGIC:
        why = f"bad magic 0x{magic:08x} (expected 0x{MAGIC:08x}): not a record start"
        return CorruptRecordError(why, **where)
    if cflag > CFLAG_LAST:
        why = f"invalid continuation flag {cflag} in length word 0x{lrec:08x}"
        return CorruptRecordError(why, **where)
    if pos == record_start and cflag in (CFLAG_MIDDLE, CFLAG_LAST):
        why = f"continuation frame (cflag {cflag}) where a record should start"
        return CorruptRecordError(why, **where)
    if pos != record_start and cflag not in (CFLAG_MIDDLE, CFLAG_LAST):
        why = (
            f"broken continuation: frame with cflag {cflag} inside a multi-part record "
            f"that started at byte {base + record_start}"
        )
        return CorruptRecordError(why, **where)
    data_start = pos + FRAME_HEADER_SIZE
    why = f"file ends inside a payload ({end - data_start} of {length} bytes present)"
    return TruncatedRecordError(why, **where)


def read_record(
    buf: memoryview,
    offset: int,
    *,
    path: str | None = None,
    record_index: int | None = None,
    base: int = 0,
) -> tuple[memoryview | bytes, int]:
    """Parse the record that starts at ``offset`` of ``buf``.

    Returns ``(payload, next_offset)``. A one-frame record comes back as a
    zero-copy memoryview slice of ``buf``; a multi-frame record as new bytes
    with the magics put back. Raises ``TruncatedRecordError`` when the buffer
    ends inside the record and ``CorruptRecordError`` for a bad magic, a bad
    continuation sequence, or an offset that is not a record start (the frame rule,
    :func:`check_frame`). ``base`` is the file offset of ``buf[0]``, for messages about a
    window of a file.
    """
    end = len(buf)
    pieces: list[memoryview] = []
    frame_offset = offset
    while True:
        cflag, length = check_frame(
            buf, frame_offset, offset, base=base, path=path, record_index=record_index
        )
        data_start = frame_offset + FRAME_HEADER_SIZE
        data_end = data_start + length
        frame_offset = data_end + _pad(length)
        if cflag == CFLAG_WHOLE:
            return buf[data_start:data_end], min(frame_offset, end)
        pieces.append(buf[data_start:data_end])
        if cflag == CFLAG_LAST:
            return MAGIC_BYTES.join(pieces), min(frame_offset, end)


class FrameWalk(NamedTuple):
    """What :func:`walk_frames` found in a buffer."""

    offsets: list[int]  # where each complete record starts
    end: int  # where the walk stopped: the buffer's end, or the start of the first bad record
    error: RecordIOError | None  # why it stopped early (``check_frame``'s error), else None


def walk_frames(buf: memoryview, start: int = 0, *, path: str | None = None) -> FrameWalk:
    """Walk the records of ``buf`` from ``start`` by their frame headers, up to the first problem.

    Checks each frame by the frame rule (:func:`check_frame`), without touching payloads. A
    problem is not raised: the walk returns the records before it, the byte where the bad
    record starts, and the error (the precise message and offset, as ``read_record``'s).
    """
    end = len(buf)
    offsets: list[int] = []
    offset = record_start = start
    while offset < end or offset != record_start:  # a record left open is checked too
        try:
            cflag, length = check_frame(
                buf, offset, record_start, path=path, record_index=len(offsets)
            )
        except RecordIOError as exc:
            return FrameWalk(offsets, record_start, exc)
        offset += FRAME_HEADER_SIZE + length + (-length & 3)
        if cflag in (CFLAG_WHOLE, CFLAG_LAST):
            offsets.append(record_start)
            record_start = offset
    return FrameWalk(offsets, end, None)


def iter_records(
    buf: memoryview, start: int = 0, *, path: str | None = None
) -> Iterator[tuple[int, memoryview | bytes]]:
    """Yield ``(offset, payload)`` for every record of ``buf`` from ``start`` on.

    Raises:
        RecordIOError: after the records before it, the first problem (as ``read_record``).
    """
    offset, end, index = start, len(buf), 0
    while offset < end:  # record by record, as the caller takes them
        payload, next_offset = read_record(buf, offset, path=path, record_index=index)
        yield offset, payload
        offset, index = next_offset, index + 1


def scan_offsets(buf: memoryview, *, path: str | None = None) -> list[int]:
    """Start offsets of every record, walking frame headers only (to rebuild an .idx).

    Raises:
        RecordIOError: the first problem, as ``read_record`` raises it (:func:`walk_frames`).
    """
    walk = walk_frames(buf, path=path)
    if walk.error is not None:
        raise walk.error
    return walk.offsets


# --- IRHeader: the image record header MXNet puts before the image bytes -------------

#: IRHeader's bytes, little-endian: flag (u32), label (f32), id (u64), id2 (u64).
IR_HEADER = struct.Struct("<IfQQ")
IR_HEADER_SIZE = IR_HEADER.size
#: Where the fields after ``flag`` start in an IRHeader (for readers of raw words).
IR_LABEL_OFFSET = struct.calcsize("<I")
IR_ID_OFFSET = struct.calcsize("<If")


class IRHeader(NamedTuple):
    """MXNet's image record header.

    ``flag`` > 0 means ``flag`` float32 labels follow the header (and ``label``
    is then unused on disk); ``id`` and ``id2`` are 64-bit record ids.
    """

    flag: int
    label: float | np.ndarray
    id: int
    id2: int


def pack(header: IRHeader | tuple, s: bytes | bytearray | memoryview) -> bytes:
    """Pack a header and payload bytes as MXNet's ``recordio.pack`` does (numpy-2 safe)."""
    header = IRHeader(*header)
    if isinstance(header.label, numbers.Number):
        header = header._replace(flag=0)
        prefix = b""
    else:
        label = np.asarray(header.label, dtype=np.float32)
        header = header._replace(flag=label.size, label=0)
        prefix = label.tobytes()
    return IR_HEADER.pack(*header) + prefix + bytes(s)


def _parse_header(s: bytes | bytearray | memoryview) -> tuple[int, float, int, int]:
    """The IRHeader of a packed record, checked: ``(flag, label, id, id2)``.

    The one parse: :func:`unpack` and :func:`header_fields` both read the header here.

    Raises:
        RecordIOError: the record is too short for its IRHeader, or for the ``flag`` labels
            the header announces. The caller adds the file and byte offset.
    """
    size = len(s)
    if size < IR_HEADER_SIZE:
        raise RecordIOError(
            f"record of {size} bytes has no image header: shorter than an IRHeader "
            f"({IR_HEADER_SIZE} bytes)"
        )
    flag, label, rid, rid2 = IR_HEADER.unpack_from(s, 0)
    if IR_HEADER_SIZE + 4 * flag > size:
        raise RecordIOError(f"IRHeader says {flag} labels, but the record has only {size} bytes")
    return flag, label, rid, rid2


def unpack(s: bytes | bytearray | memoryview) -> tuple[IRHeader, bytes | memoryview]:
    """Split a record payload into its IRHeader and the remaining bytes (e.g. an image).

    Multi-label headers (flag > 0) come back with ``label`` as a float32 array.
    The remainder keeps the input's type, so a memoryview stays zero-copy.

    Raises:
        RecordIOError: as :func:`_parse_header` (any id is taken, as MXNet's ``unpack``
            takes it).
    """
    header = IRHeader(*_parse_header(s))
    rest = s[IR_HEADER_SIZE:]
    if header.flag > 0:
        header = header._replace(label=np.frombuffer(rest, np.float32, header.flag).copy())
        rest = rest[header.flag * 4 :]
    return header, rest


_FIRST_LABEL = struct.Struct("<f")


def header_fields(s: bytes | memoryview) -> tuple[int, float, int, int]:
    """``(flag, first label, id, image offset)`` of a packed record's IRHeader.

    The first label is the header's own where ``flag`` is 0, else the first of the
    ``flag`` labels after it. Plain ``struct`` reads: no array is made.

    Raises:
        RecordIOError: as :func:`_parse_header`, or the id does not fit int64 (what
            readers keep ids in: a damaged header). The caller adds the file and byte
            offset.
    """
    flag, label, rid, _ = _parse_header(s)
    if rid > _INT64_MAX:
        raise RecordIOError(f"IRHeader id {rid} does not fit int64 (a damaged header)")
    if flag:
        label = _FIRST_LABEL.unpack_from(s, IR_HEADER_SIZE)[0]
    return flag, label, rid, IR_HEADER_SIZE + 4 * flag


def unpack_labels(s: bytes | memoryview, label_width: int = 1) -> tuple[np.ndarray, int, int]:
    """Labels (float32, ``label_width`` wide), id and image offset of a packed record.

    Raises:
        RecordIOError: as :func:`header_fields`.
    """
    flag, label, rid, image_start = header_fields(s)
    if flag == 0:
        labels = np.full(label_width, label, dtype=np.float32)
        return labels, rid, IR_HEADER_SIZE
    values = np.frombuffer(s, np.float32, flag, IR_HEADER_SIZE)
    labels = np.zeros(label_width, dtype=np.float32)
    labels[: min(flag, label_width)] = values[:label_width]
    return labels, rid, IR_HEADER_SIZE + 4 * flag


# --- .idx and .lst text files -----------------------------------------------------


def format_idx_line(key: object, offset: int) -> str:
    r"""One ``.idx`` line, ``key\toffset\n``, as MXNet's ``MXIndexedRecordIO`` writes it."""
    return f"{key}\t{offset}\n"


def parse_idx(
    text: str, *, path: str | None = None, key_type: type = int, int64_keys: bool = False
) -> list[tuple]:
    r"""Parse ``key\toffset`` lines into (key, offset) pairs, in file order.

    Offsets must fit in int64 (negative ones are left to the caller, which knows the
    file); with ``int64_keys``, the keys too. :func:`parse_idx_arrays` gives the entries
    of a large ``.idx`` as two arrays, in a fraction of the time and memory.

    Raises:
        RecordIOError: a malformed line, or a number out of range, naming the file
            and the line.
    """
    return _parse_idx_lines(text, path, key_type, int64_keys, 1)


def _parse_idx_lines(
    text: str, path: str | None, key_type: type, int64_keys: bool, first_line: int
) -> list[tuple]:
    """``parse_idx`` of ``text``, which starts at line ``first_line`` of the file."""
    entries = []
    for lineno, line in enumerate(io.StringIO(text), first_line):
        line = line.strip()
        if not line:
            continue
        fields = line.split("\t")
        try:
            key, offset = key_type(fields[0]), int(fields[1])
        except (ValueError, IndexError):
            raise _bad_idx_line(lineno, line, "expected key<TAB>offset", path) from None
        if not _INT64_MIN <= offset <= _INT64_MAX:
            raise _bad_idx_line(lineno, line, "offset out of the int64 range", path)
        if int64_keys and not _INT64_MIN <= key <= _INT64_MAX:
            raise _bad_idx_line(lineno, line, "key out of the int64 range", path)
        entries.append((key, offset))
    return entries


def _bad_idx_line(lineno: int, line: str, why: str, path: str | None) -> RecordIOError:
    return RecordIOError(f"bad .idx line {lineno}: {line[:80]!r} ({why})", path=path)


# parse_idx_arrays parses pieces of about this many bytes, each ending at a line end, so
# its temporaries stay this small (and in cache) whatever the size of the file.
_IDX_PIECE = 1 << 20
# The bytes of a plain .idx; a piece holding any other goes to the exact parser.
_IDX_BYTES = b"\t\n\r-0123456789"
_TAB, _NEWLINE, _MINUS, _ZERO = 9, 10, 45, 48


def parse_idx_arrays(
    data: bytes | str, *, path: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    r"""Parse a whole ``.idx`` into its keys and its offsets: two int64 arrays, in file order.

    The entries of ``parse_idx(text, path=path, int64_keys=True)``, or its error, where
    ``text`` is ``data`` (str) or :func:`decode_text` of it (bytes, as
    ``storage.read_text`` reads a file): the same result, in about 16 bytes per entry
    besides ``data``. Numpy parses the lines of the usual shape (``-?digits<TAB>-?digits``,
    blank lines, CRLF), a piece of ``data`` at a time; a piece with any other line in it
    (a malformed one, a ``+``, a space, a number at the edge of int64) goes line by line
    through :func:`parse_idx`, which decides.

    Raises:
        RecordIOError: as :func:`parse_idx` and :func:`decode_text` do, naming the file
            and the line.
    """
    newline = "\n" if isinstance(data, str) else b"\n"
    size = len(data)
    capacity = data.count(newline) + (size > 0 and data[-1:] != newline)
    keys = np.empty(capacity, dtype=np.int64)
    offsets = np.empty(capacity, dtype=np.int64)
    filled = 0
    lineno = 1  # of the piece's first line, in the text parse_idx would see
    start = 0
    while start < size:
        cut = data.find(newline, start + _IDX_PIECE - 1) if start + _IDX_PIECE < size else -1
        end = size if cut < 0 else cut + 1
        piece = data[start:end]
        parsed = _idx_numbers(piece)
        if parsed is not None:
            numbers, lines = parsed
            lineno += lines
        else:
            text = _idx_piece_text(piece, data, path)
            try:
                entries = _parse_idx_lines(text, path, int, True, lineno)
            except RecordIOError:
                if isinstance(data, bytes):
                    decode_text(data, path=path)  # a byte that is not UTF-8 comes first
                raise
            numbers = np.array(entries, dtype=np.int64).reshape(-1)
            lineno += text.count("\n")
        count = len(numbers) // 2
        if filled + count > capacity:  # lone CRs end lines too: room for the rest as well
            capacity = filled + count + (size - end) // 2 + 1
            keys, offsets = np.resize(keys, capacity), np.resize(offsets, capacity)
        keys[filled : filled + count] = numbers[0::2]
        offsets[filled : filled + count] = numbers[1::2]
        filled += count
        start = end
    if filled < capacity:  # blank lines
        keys, offsets = keys[:filled].copy(), offsets[:filled].copy()
    return keys, offsets


def _idx_piece_text(piece: bytes | str, data: bytes | str, path: str | None) -> str:
    if isinstance(piece, str):
        return piece
    try:
        return lf_line_ends(piece.decode("utf-8"))
    except UnicodeDecodeError:
        # The pieces before were text, so the file's first bad byte is in this one:
        # decode_text names it, and its line, as in the whole file.
        decode_text(data, path=path)
        raise AssertionError("decode_text accepted bytes that are not UTF-8") from None


def _idx_numbers(piece: bytes | str) -> tuple[np.ndarray, int] | None:
    """The numbers of a piece of an ``.idx`` (key, offset, key, ...) and its line ends, or None.

    None unless each line of the piece is blank or ``-?digits<TAB>-?digits`` (numpy then
    reads each number as ``int`` does) and no number is at the edge of int64 (numpy
    clamps one beyond it to the edge).
    """
    if isinstance(piece, str):
        try:
            piece = piece.encode("ascii")
        except UnicodeEncodeError:
            return None
    if piece.translate(None, _IDX_BYTES):
        return None
    if b"\r" in piece:
        piece = piece.replace(b"\r\n", b"\n")
        if b"\r" in piece:  # a lone CR (a line end in bytes, not in a str)
            return None
    chars = np.frombuffer(piece, dtype=np.uint8)
    # The piece is runs of digits between the bytes below '0': tabs, newlines, signs.
    where = np.flatnonzero(chars < _ZERO)
    kinds = chars[where]
    bounds = np.empty(len(where) + 2, dtype=np.int64)
    bounds[0], bounds[1:-1], bounds[-1] = -1, where, len(chars)
    runs = np.diff(bounds) - 1  # digits before each of them, and after the last
    minus = kinds == _MINUS
    if minus.any():
        # No digit before a sign, digits after it: it directly follows a tab, a newline
        # or the piece's start (not a sign, which would have no digits after it), and
        # the sign and its digits are one number.
        signs = np.flatnonzero(minus)
        if not ((runs[signs] == 0) & (runs[signs + 1] > 0)).all():
            return None
        separators = ~minus
        kinds, number_before = kinds[separators], runs[:-1][separators] > 0
    else:
        number_before = runs[:-1] > 0
    # A tab ends a line's first number; a newline ends a blank line or a line's second
    # number, and so does the end of the piece where it does not end with a newline.
    tab = kinds == _TAB
    tab_before = np.zeros(len(kinds) + 1, dtype=bool)
    tab_before[1:] = tab
    ok = np.where(tab, number_before & ~tab_before[:-1], number_before == tab_before[:-1])
    if not ok.all() or (runs[-1] > 0) != tab_before[-1]:
        return None
    tabs = int(np.count_nonzero(tab))
    if not tabs:  # (numpy reads blank lines alone as a 0)
        return np.empty(0, dtype=np.int64), len(kinds)
    try:
        numbers = np.fromstring(piece, dtype=np.int64, sep=" ")
    except ValueError:  # (it refuses what it cannot read to the end)
        return None
    if len(numbers) != 2 * tabs or numbers.max() == _INT64_MAX or numbers.min() == _INT64_MIN:
        return None
    return numbers, len(kinds) - tabs


class ListEntry(NamedTuple):
    r"""One line of an im2rec .lst file: ``index\tlabel[\tlabel...]\tpath``."""

    index: int
    labels: tuple[float, ...]
    path: str


def format_lst_line(entry: ListEntry) -> str:
    """Format as MXNet's im2rec ``write_list`` does (labels as ``%f``)."""
    labels = "".join(f"{label:f}\t" for label in entry.labels)
    return f"{entry.index}\t{labels}{entry.path}\n"


def parse_lst(
    lines: Iterable[str], *, path: str | None = None, start: int = 1
) -> Iterator[ListEntry]:
    """Parse .lst lines; malformed lines raise RecordIOError naming the line.

    ``start`` is the number of the first line, for the messages. A label that does not
    fit float32 (the IRHeader's type: ``1e40``) makes a line malformed; NaN and
    infinities fit, and are the caller's to warn about.
    """
    for lineno, line in enumerate(lines, start):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split("\t")]
        try:
            if len(fields) < 3:
                raise ValueError
            entry = ListEntry(int(fields[0]), tuple(float(x) for x in fields[1:-1]), fields[-1])
        except ValueError:
            raise RecordIOError(
                f"bad .lst line {lineno}: {line[:80]!r} (expected index<TAB>label...<TAB>path)",
                path=path,
            ) from None
        # float32's largest value, rounded up (what lies below it rounds to a float32)
        if entry.labels and max(map(abs, entry.labels)) > 3.4028235e38:
            for text, label in zip(fields[1:-1], entry.labels, strict=True):
                try:  # the exact test; NaN and ±inf pack as themselves
                    struct.pack("<f", label)
                except OverflowError:
                    raise RecordIOError(
                        f"bad .lst line {lineno}: label {text} does not fit float32 "
                        f"(at most ±3.4e38)",
                        path=path,
                    ) from None
        yield entry
