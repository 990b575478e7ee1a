"""RecordIO framing and headers: MXNet 1.9.1's golden files, round trips, and bad input."""

import hashlib
import json
import struct
from unittest import mock

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from recio.errors import CorruptRecordError, RecordIOError, TruncatedRecordError
from recio.records import format as recio_format
from recio.records.format import (
    MAGIC_BYTES,
    IRHeader,
    ListEntry,
    decode_text,
    encode_record,
    format_idx_line,
    format_lst_line,
    header_fields,
    iter_records,
    pack,
    parse_idx,
    parse_idx_arrays,
    parse_lst,
    read_record,
    scan_offsets,
    unpack,
    unpack_labels,
)
from tests._paths import GOLDEN


def golden():
    return json.loads((GOLDEN / "golden.json").read_text())


def sha(data) -> str:
    return hashlib.sha256(bytes(data)).hexdigest()


RAW_FILES = ["bytes5", "magic_edges"]
ALL_FILES = ["bytes5", "magic_edges", "images3", "subset20", "multilabel"]


def idx_offsets(name: str) -> list[int]:
    return [o for _, o in parse_idx(golden()[name]["idx_text"])]


@pytest.mark.parametrize("name", ALL_FILES)
def test_golden_records_read_exactly(name):
    spec = golden()[name]
    data = (GOLDEN / spec["rec"]).read_bytes()
    if "rec_sha256" in spec:
        assert sha(data) == spec["rec_sha256"]
    records = list(iter_records(memoryview(data)))
    expected = spec["records"]
    assert [o for o, _ in records] == idx_offsets(name)
    assert len(records) == len(expected)
    for (_, payload), want in zip(records, expected, strict=True):
        if "sha256" in want or "record_sha256" in want:
            assert sha(payload) == (want.get("sha256") or want.get("record_sha256"))
        if want.get("payload_hex") is not None:
            assert bytes(payload).hex() == want["payload_hex"]
    assert scan_offsets(memoryview(data)) == idx_offsets(name)


@pytest.mark.parametrize("name", ALL_FILES)
def test_golden_idx_text(name):
    """The .idx on disk is what golden.json says, and parses to keys in file order."""
    spec = golden()[name]
    text = (GOLDEN / spec["idx"]).read_text()
    assert text == spec["idx_text"]
    assert [k for k, _ in parse_idx(text)] == [r["key"] for r in spec["records"]]
    assert "".join(format_idx_line(k, o) for k, o in parse_idx(text)) == text


@pytest.mark.parametrize("name", ALL_FILES)
def test_writer_reproduces_golden_bytes(name):
    """Re-framing the payloads MXNet wrote gives the identical .rec (and .idx) bytes."""
    data = (GOLDEN / f"{name}.rec").read_bytes()
    payloads = [bytes(p) for _, p in iter_records(memoryview(data))]
    assert b"".join(encode_record(p) for p in payloads) == data


@pytest.mark.parametrize("name", RAW_FILES)
def test_golden_frames(name):
    """Frame by frame: cflag, length and padding as dmlc-core wrote them."""
    spec = golden()[name]
    data = (GOLDEN / f"{name}.rec").read_bytes()
    for frame in spec["frames"]:
        magic, lrec = struct.unpack_from("<II", data, frame["offset"])
        assert magic == 0xCED7230A
        assert lrec >> 29 == frame["cflag"]
        assert lrec & ((1 << 29) - 1) == frame["length"]


def test_golden_headers_and_labels():
    for name in ("images3", "multilabel", "subset20"):
        spec = golden()[name]
        data = memoryview((GOLDEN / spec["rec"]).read_bytes())
        for (_, payload), want in zip(iter_records(data), spec["records"], strict=True):
            header, image = unpack(payload)
            raw = want.get("raw_header", want)
            assert header.flag == raw["flag"]
            assert header.id == raw["id"]
            assert header.id2 == raw["id2"]
            np.testing.assert_allclose(np.asarray(header.label, np.float32), want["label"])
            assert len(image) == want["image_bytes_length"]
            assert sha(image) == want["image_bytes_sha256"]
            if "header_hex" in want:
                assert bytes(payload[:24]).hex() == want["header_hex"]


def test_pack_reproduces_golden_headers():
    spec = golden()["images3"]
    data = memoryview((GOLDEN / "images3.rec").read_bytes())
    for (_, payload), want in zip(iter_records(data), spec["records"], strict=True):
        _, image = unpack(payload)
        h = want["input_header"]
        assert pack(IRHeader(h["flag"], h["label"], h["id"], h["id2"]), image) == bytes(payload)


# --- property-based round trips ----------------------------------------------------

aligned_magic_payloads = st.lists(
    st.one_of(st.binary(max_size=12), st.just(MAGIC_BYTES)), max_size=8
).map(b"".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=70), aligned_magic_payloads), max_size=12))
def test_round_trip(payloads):
    data = b"".join(encode_record(p) for p in payloads)
    assert len(data) % 4 == 0
    records = list(iter_records(memoryview(data)))
    assert [bytes(p) for _, p in records] == payloads
    assert scan_offsets(memoryview(data)) == [o for o, _ in records]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 40), st.integers(0, 9), st.binary(max_size=9))
def test_magic_at_every_offset(prefix_len, suffix_len, filler):
    """Split only at 4-byte-aligned magics; the reader restores every byte."""
    payload = bytes(prefix_len) + MAGIC_BYTES + bytes(suffix_len) + filler
    framed = encode_record(payload)
    n_frames = framed.count(MAGIC_BYTES) - payload.count(MAGIC_BYTES) + (prefix_len % 4 == 0)
    assert read_record(memoryview(framed), 0)[0] == payload
    assert n_frames >= 1
    if prefix_len % 4 == 0:
        # aligned: the payload's magic is dropped into a frame boundary
        assert struct.unpack_from("<I", framed, 4)[0] >> 29 == 1


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 5, 7, 8, 9])
def test_sizes_around_alignment(size):
    payload = bytes(range(size))
    framed = encode_record(payload)
    assert len(framed) == 8 + size + (-size % 4)
    assert framed[8 + size :] == b"\0" * (-size % 4)
    assert bytes(read_record(memoryview(framed), 0)[0]) == payload


def test_too_large_payload_is_refused():
    with pytest.raises(RecordIOError, match="29-bit"):
        encode_record(memoryview(bytearray(1 << 29)))


# --- bad input --------------------------------------------------------------------


def two_records() -> bytes:
    return encode_record(b"first record") + encode_record(b"abcd" + MAGIC_BYTES + b"efgh")


def test_bad_magic_names_file_offset_record():
    data = bytearray(two_records())
    data[20:24] = b"XXXX"  # magic of the second record
    with pytest.raises(CorruptRecordError) as info:
        list(iter_records(memoryview(data), path="x.rec"))
    err = info.value
    assert (err.path, err.offset, err.record_index) == ("x.rec", 20, 1)
    assert "x.rec" in str(err) and "20" in str(err) and "record 1" in str(err)
    with pytest.raises(CorruptRecordError):
        scan_offsets(memoryview(data), path="x.rec")


@pytest.mark.parametrize("cut", [1, 4, 7, 9, 19, 22, 30, 35])
def test_truncation_is_reported_never_returned(cut):
    data = two_records()
    truncated = memoryview(data[: len(data) - cut])
    with pytest.raises(TruncatedRecordError) as info:
        list(iter_records(truncated, path="t.rec"))
    assert info.value.path == "t.rec"
    with pytest.raises(TruncatedRecordError):
        scan_offsets(truncated)


def test_broken_continuation():
    first = encode_record(b"abcd" + MAGIC_BYTES + b"efgh")  # frames cflag 1, 3
    # cut off the last frame and append a whole record: cflag 1 then 0
    broken = first[:12] + encode_record(b"zz")
    with pytest.raises(CorruptRecordError, match="continuation"):
        read_record(memoryview(broken), 0)
    with pytest.raises(CorruptRecordError, match="continuation"):
        scan_offsets(memoryview(broken))
    # a record that starts with a continuation frame
    with pytest.raises(CorruptRecordError, match="record should start"):
        read_record(memoryview(first), 12)


def test_invalid_cflag():
    data = bytearray(encode_record(b"abcd"))
    data[7] |= 0x80  # cflag 4
    with pytest.raises(CorruptRecordError, match="continuation flag"):
        read_record(memoryview(data), 0)
    with pytest.raises(CorruptRecordError):
        scan_offsets(memoryview(data))


# --- headers, .idx, .lst ----------------------------------------------------------


def test_pack_unpack_scalar_and_multilabel():
    s = pack(IRHeader(0, 3.0, 7, 9), b"img")
    header, rest = unpack(s)
    assert header == IRHeader(0, 3.0, 7, 9) and rest == b"img"
    s = pack(IRHeader(0, [1, 2.5, -3], 2**40 + 5, 1), b"jpg")
    header, rest = unpack(s)
    assert header.flag == 3 and header.id == 2**40 + 5 and rest == b"jpg"
    np.testing.assert_array_equal(header.label, np.array([1, 2.5, -3], np.float32))
    labels, rid, image_offset = unpack_labels(s, 2)
    np.testing.assert_array_equal(labels, [1, 2.5])
    assert rid == 2**40 + 5 and s[image_offset:] == b"jpg"


def test_pack_numpy_labels_numpy2_safe():
    s = pack((0, np.arange(4, dtype=np.float64), 1, 0), memoryview(b"x"))
    assert unpack(s)[0].flag == 4


def test_unpack_short_record():
    with pytest.raises(RecordIOError, match="shorter than an IRHeader"):
        unpack(b"short")


def test_lst_round_trip_and_golden():
    text = (GOLDEN / "subset20.lst").read_text()
    entries = list(parse_lst(text.splitlines(True)))
    assert len(entries) == 20
    assert "".join(format_lst_line(e) for e in entries) == text
    multi = (GOLDEN / "multilabel.lst").read_text()
    entries = list(parse_lst(multi.splitlines(True)))
    assert all(len(e.labels) == 3 for e in entries)
    assert "".join(format_lst_line(e) for e in entries) == multi


def test_bad_lst_and_idx_lines():
    with pytest.raises(RecordIOError, match="line 2"):
        list(parse_lst(["0\t1.0\ta.jpg\n", "garbage\n"], path="l.lst"))
    with pytest.raises(RecordIOError, match="line 1"):
        parse_idx("zero\tten\n", path="x.idx")
    with pytest.raises(RecordIOError, match=r"line 2: .*offset out of the int64 range.* of x.idx"):
        parse_idx(f"0\t0\n1\t{1 << 63}\n", path="x.idx")
    with pytest.raises(RecordIOError, match=r"line 1: .*key out of the int64 range"):
        parse_idx(f"{-(1 << 63) - 1}\t0\n", int64_keys=True)
    assert parse_idx(f"{1 << 63}\t0\n") == [(1 << 63, 0)]  # any int key by default
    line = format_lst_line(ListEntry(3, (1.0, 2.0), "a/b.jpg"))
    assert line == "3\t1.000000\t2.000000\ta/b.jpg\n"


# --- parse_idx_arrays: numpy's parse of a large .idx, checked against parse_idx --------

_EDGE = 1 << 63
_SMALL = st.integers(-99, 50_000_000)
_NUMBERS = st.one_of(
    _SMALL,
    _SMALL,
    _SMALL,
    st.integers(-_EDGE, _EDGE - 1),
    st.sampled_from([0, -1, _EDGE - 1, -_EDGE, _EDGE - 2, -_EDGE + 1, 10**18, -(10**18)]),
)
_ODD_LINES = [
    "1 2",  # a space between the fields
    "+5\t3",
    "007\t-0",
    "1_0\t2",  # int() takes underscores
    "1\t2\t3",  # a third field, which parse_idx ignores
    "5",
    "\t1\t2",
    "1\t2 ",
    " ",
    "\x0c",
    "x\ty",
    f"{_EDGE}\t0",
    f"0\t{-_EDGE - 1}",
    f"1\t{10**30}",
    "\u0661\t2",  # an Arabic-Indic digit: int() takes it
    "1\t-",
    "-\t1",
    "--1\t2",
    "1-2\t3",
    "1\t2-",
    "-",
]


@st.composite
def idx_texts(draw) -> str:
    plain = st.tuples(_NUMBERS, _NUMBERS).map(lambda ko: f"{ko[0]}\t{ko[1]}")
    # mostly plain lines: runs of them make pieces that numpy parses
    lines = draw(
        st.lists(
            st.one_of(plain, plain, plain, plain, st.just(""), st.sampled_from(_ODD_LINES)),
            max_size=60,
        )
    )
    ends = draw(st.lists(st.sampled_from(["\n", "\n", "\r\n", "\r"]), min_size=len(lines)))
    text = "".join(line + end for line, end in zip(lines, ends, strict=False))
    return text[: -draw(st.integers(0, 2))] if draw(st.booleans()) and text else text


def _outcome(parse, data):
    try:
        keys, offsets = parse(data)
    except RecordIOError as exc:
        return "error", str(exc), exc.path, exc.offset
    assert keys.dtype == offsets.dtype == np.int64 and len(keys) == len(offsets)
    return "entries", keys.tolist(), offsets.tolist()


def _fast(data):
    return parse_idx_arrays(data, path="x.idx")


def _exact(data):
    text = decode_text(data, path="x.idx") if isinstance(data, bytes) else data
    entries = parse_idx(text, path="x.idx", int64_keys=True)
    return np.array([k for k, _ in entries], np.int64), np.array([o for _, o in entries], np.int64)


@settings(max_examples=400, deadline=None)
# lone CRs (line ends only in bytes) in one piece, then a piece of plain lines: more lines
# than newlines, found in the piece numpy parses
@example(text="\n0\t-9999999999836\r-40\t-1000000000000000000\r0\t9223372036854775807\n0\t0\n0\t0\n",
         as_bytes=True, bad_byte=None, piece=64)  # fmt: skip
@example(text="\n0\t0\r0\t-99999999999899\r0\t9223372036854775807\n0\t-1000000000000000000\n0\t0\n",
         as_bytes=True, bad_byte=None, piece=64)  # fmt: skip
@given(
    text=idx_texts(),
    as_bytes=st.booleans(),
    bad_byte=st.one_of(st.none(), st.integers(0, 10_000)),
    piece=st.sampled_from([1 << 20, 256, 64, 7]),
)
def test_parse_idx_arrays_is_parse_idx(text, as_bytes, bad_byte, piece):
    """The same entries or the same error (file, line, byte) as parse_idx, on text or on
    bytes (read as storage.read_text reads them), a piece of the file at a time."""
    data = text.encode() if as_bytes else text
    if as_bytes and bad_byte is not None:
        at = bad_byte % (len(data) + 1)
        data = data[:at] + b"\xff" + data[at:]
    with mock.patch.object(recio_format, "_IDX_PIECE", piece):
        fast = _outcome(_fast, data)
    assert fast == _outcome(_exact, data)


@pytest.mark.parametrize("odd", _ODD_LINES)
def test_parse_idx_arrays_on_each_odd_line(odd):
    """Each odd line first, amid plain lines and last (with each line end, or none), in
    one piece with plain lines and in pieces of a few lines."""
    plain = [f"{i}\t{1024 * i}" for i in range(6)]
    for at in (0, 3, 6):
        for end in ("\n", "\r\n", "\r", ""):
            text = "\n".join(plain[:at] + [odd] + plain[at:]) + end
            for data in (text, text.encode()):
                want = _outcome(_exact, data)
                for piece in (1 << 20, 24):
                    with mock.patch.object(recio_format, "_IDX_PIECE", piece):
                        assert _outcome(_fast, data) == want, (data, piece)


def test_parse_idx_arrays_parses_plain_lines_without_parse_idx():
    """Plain lines, blank ones, CRLF, signs and numbers up to 19 digits take numpy's path."""
    lines = [f"{k}\t{o}" for k, o in [(0, 0), (-5, 8), (_EDGE - 2, 4), (-_EDGE + 1, 12)]]
    text = "\r\n".join(lines) + "\n\n" + "\n".join(f"{i}\t{i * 1024}" for i in range(5000))
    for data in (text, text.encode(), (text + "\n").encode()):
        want = _outcome(_exact, data)
        assert want[0] == "entries" and len(want[1]) == 5004
        for piece in (1 << 20, 100):
            with (
                mock.patch.object(recio_format, "_parse_idx_lines", side_effect=AssertionError),
                mock.patch.object(recio_format, "_IDX_PIECE", piece),
            ):
                assert _outcome(_fast, data) == want
    with mock.patch.object(
        recio_format, "_parse_idx_lines", wraps=recio_format._parse_idx_lines
    ) as exact:
        keys, _ = parse_idx_arrays(text + "\n+7\t0\n")  # '+': int() takes it, numpy's path not
    assert exact.call_count == 1 and keys[-1] == 7


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("3\t", "expected key<TAB>offset"),
        ("3 4", "expected key<TAB>offset"),
        (f"3\t{_EDGE}", "offset out of the int64 range"),
        (f"{-_EDGE - 1}\t0", "key out of the int64 range"),
    ],
)
def test_parse_idx_arrays_names_the_line_of_a_bad_entry(line, why):
    """A bad line far into the file, after plain lines and lone-CR lines (one line each,
    as read_text reads them), is named by its number."""
    plain = "".join(f"{i}\t{4 * i}" + ("\r\n" if i % 3 else "\n") for i in range(400))
    head = plain + "".join(f"{i}\t{4 * i}\r" for i in range(400, 776))
    data = (head + line + "\n" + "1\t2\n" * 300).encode()
    with (
        mock.patch.object(recio_format, "_IDX_PIECE", 256),  # pieces of a few lines
        pytest.raises(RecordIOError) as info,
    ):
        parse_idx_arrays(data, path="x.idx")
    assert f"bad .idx line 777: {line.strip()!r} ({why}) of x.idx" == str(info.value)
    assert _outcome(_fast, data) == _outcome(_exact, data)


def test_parse_idx_arrays_not_utf8_comes_before_a_bad_line():
    """As read_text then parse_idx: a byte that is not UTF-8 anywhere is the error."""
    data = b"0\t0\nbad\n" + b"1\t4\n" * 1000 + b"2\t\xe9\n"
    with pytest.raises(RecordIOError, match=r"not UTF-8 text: byte 0xe9 on line 1003") as info:
        parse_idx_arrays(data, path="x.idx")
    assert info.value.offset == len(data) - 2 and info.value.path == "x.idx"


def test_lst_labels_must_fit_float32():
    # IRHeader labels are float32: 1e40 would overflow MXNet's pack (or become inf)
    with pytest.raises(RecordIOError, match=r"line 7: label -1e40 does not fit float32.*l\.lst"):
        list(parse_lst(["0\t1.0\t-1e40\ta.jpg\n"], path="l.lst", start=7))
    big = "3.4028235e38"  # float32's largest value, rounded: it fits
    entries = list(parse_lst([f"0\t{big}\ta.jpg", "1\tnan\tb.jpg", "2\t-inf\tc.jpg"]))
    assert [e.index for e in entries] == [0, 1, 2]


def test_unpack_labels_refuses_headers_the_record_cannot_hold():
    with pytest.raises(RecordIOError, match="record of 4 bytes has no image header"):
        unpack_labels(b"tiny")
    short = struct.pack("<IfQQ", 1000, 0.0, 5, 0) + b"abc"
    with pytest.raises(RecordIOError, match="IRHeader says 1000 labels"):
        unpack_labels(short)


def test_header_fields_are_unpack_labels_first_label_id_and_image_offset():
    one = pack(IRHeader(0, 7.5, 42, 0), b"img")
    many = pack(IRHeader(3, [1.25, 2.0, 3.0], 9, 0), b"img")
    for record in (one, many):
        flag, label, rid, start = header_fields(record)
        labels, want_id, want_start = unpack_labels(record, 1)
        assert (label, rid, start) == (float(labels[0]), want_id, want_start)
        assert record[start:] == b"img" and flag == (start - 24) // 4
    assert header_fields(many)[:2] == (3, 1.25)
    with pytest.raises(RecordIOError, match="no image header"):
        header_fields(one[:10])
    with pytest.raises(RecordIOError, match="says 3 labels"):
        header_fields(many[:30])


def test_iter_records_parses_a_record_only_when_asked():
    first = encode_record(pack(IRHeader(0, 1.0, 1, 0), b"a"))
    second = encode_record(pack(IRHeader(0, 2.0, 2, 0), b"b"))
    buf = bytearray(first + b"\x00" * len(second))
    records = iter_records(memoryview(buf), path="x.rec")
    assert next(records)[0] == 0
    buf[len(first) :] = second  # written after the first was taken: read as it is now
    assert next(records)[0] == len(first)
    buf = bytearray(first + b"\x00" * 16)
    with pytest.raises(RecordIOError, match="x.rec"):
        list(iter_records(memoryview(buf), path="x.rec"))
