"""The frame rule (format.check_frame) and the IRHeader parse: one set of messages for all."""

import struct

import numpy as np
import pytest

from recio import storage
from recio.errors import CorruptRecordError, RecordIOError, TruncatedRecordError
from recio.records.checksum import frame_ends
from recio.records.format import (
    IR_HEADER,
    MAGIC,
    encode_record,
    header_fields,
    read_record,
    unpack,
    walk_frames,
)
from recio.records.scan import record_end

GOOD = encode_record(b"good")  # 12 bytes: record 0
SPLIT = encode_record(b"ab\0\0" + struct.pack("<I", MAGIC) + b"cd")  # two frames


def frame(cflag: int, data: bytes, magic: int = MAGIC) -> bytes:
    return struct.pack("<II", magic, cflag << 29 | len(data)) + data + b"\0" * (-len(data) & 3)


# the record after GOOD (at byte 12), its problem, and the byte the message names
DAMAGED = [
    (
        frame(0, b"x", magic=0xDEADBEEF),
        CorruptRecordError,
        "bad magic 0xdeadbeef (expected 0xced7230a): not a record start",
        12,
    ),
    (
        frame(4, b"x"),
        CorruptRecordError,
        "invalid continuation flag 4 in length word 0x80000001",
        12,
    ),
    (
        frame(1, b"ab") + frame(6, b"cd"),
        CorruptRecordError,
        "invalid continuation flag 6 in length word 0xc0000002",
        24,
    ),
    (
        frame(2, b"x"),
        CorruptRecordError,
        "continuation frame (cflag 2) where a record should start",
        12,
    ),
    (
        frame(1, b"ab") + frame(0, b"cd"),
        CorruptRecordError,
        "broken continuation: frame with cflag 0 inside a multi-part record that started at "
        "byte 12",
        24,
    ),
    (frame(1, b"ab"), TruncatedRecordError, "file ends inside a frame header (0 of 8 bytes)", 24),
    (
        struct.pack("<I", MAGIC),
        TruncatedRecordError,
        "file ends inside a length word (4 of 8 bytes)",
        12,
    ),
    (
        frame(0, b"abcdef")[:10],
        TruncatedRecordError,
        "file ends inside a payload (2 of 6 bytes present)",
        12,
    ),
]


def _read_record(data: bytes, path: str) -> None:
    read_record(memoryview(data), len(GOOD), path=path)


def _walk_frames(data: bytes, path: str) -> None:
    walk = walk_frames(memoryview(data), path=path)
    assert walk.offsets == [0] and walk.end == len(GOOD)
    raise walk.error


def _record_end(data: bytes, path: str) -> None:
    with storage.open_source(path) as source:
        record_end(source, len(GOOD))


def _checksum_walk(data: bytes, path: str) -> None:  # frame_ends' walk of a damaged record
    frame_ends(memoryview(data), np.array([len(GOOD)]), path)


@pytest.mark.parametrize("caller", [_read_record, _walk_frames, _record_end, _checksum_walk])
@pytest.mark.parametrize(("damage", "kind", "message", "at"), DAMAGED)
def test_each_reader_of_frames_gives_the_rule_s_message(
    tmp_path, caller, damage, kind, message, at
):
    path = tmp_path / "d.rec"
    data = GOOD + damage
    path.write_bytes(data)
    with pytest.raises(RecordIOError) as info:
        caller(data, str(path))
    assert type(info.value) is kind
    assert info.value.offset == at and info.value.path == str(path)
    assert message in str(info.value)


@pytest.mark.parametrize("record", [GOOD, SPLIT])
def test_a_whole_record_passes_the_rule_everywhere(tmp_path, record):
    path = tmp_path / "r.rec"
    data = GOOD + record
    path.write_bytes(data)
    payload, end = read_record(memoryview(data), len(GOOD))
    assert end == len(data)
    assert walk_frames(memoryview(data)).offsets == [0, len(GOOD)]
    with storage.open_source(str(path)) as source:
        assert record_end(source, len(GOOD)) == len(data)
    last_data = len(data) - (2 if record is SPLIT else 0)  # the checksum leaves out the pad
    assert frame_ends(memoryview(data), np.array([len(GOOD)]))[0] == last_data


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"tiny", "record of 4 bytes has no image header: shorter than an IRHeader (24 bytes)"),
        (
            struct.pack("<IfQQ", 3, 0.0, 1, 0) + b"abcd",
            "IRHeader says 3 labels, but the record has only 28 bytes",
        ),
    ],
)
def test_unpack_and_header_fields_parse_the_irheader_alike(payload, message):
    for parse in (unpack, header_fields):
        with pytest.raises(RecordIOError) as info:
            parse(payload)
        assert str(info.value) == message, parse


def test_only_readers_refuse_an_id_past_int64():
    """MXNet's unpack takes any id; the readers keep ids as int64 and refuse a larger one."""
    payload = IR_HEADER.pack(0, 1.0, 1 << 63, 0) + b"img"
    assert unpack(payload)[0].id == 1 << 63
    with pytest.raises(RecordIOError, match="does not fit int64"):
        header_fields(payload)
