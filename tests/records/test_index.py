"""The .idx checks at open: offsets past the end, negative, misaligned, not a record start."""

from unittest import mock

import pytest

from recio.errors import IndexMismatchError, RecordIOError
from recio.records import index as recio_index
from recio.records.file import RecordFile
from recio.records.recordio import MXIndexedRecordIO

from .test_recordio import PAYLOADS, write_indexed


def test_idx_offset_past_end(tmp_path):
    rec, idx = write_indexed(tmp_path)
    with open(idx, "a") as f:
        f.write("50\t100000\n")
    with pytest.raises(IndexMismatchError) as info:
        RecordFile(rec)
    assert "100000" in str(info.value) and "past the end" in str(info.value)
    assert info.value.record_index == 5
    with pytest.raises(IndexMismatchError):
        MXIndexedRecordIO(idx, rec, "r")


def test_idx_offset_not_a_record_start(tmp_path):
    rec, idx = write_indexed(tmp_path)
    lines = open(idx).read().splitlines(True)
    lines[1] = "1\t4\n"  # 4 is inside the first record's header
    open(idx, "w").write("".join(lines))
    with RecordFile(rec) as rf, pytest.raises(IndexMismatchError) as info:
        rf.read(1)
    message = str(info.value)
    assert "offset 4, which is not a record start" in message and f"byte 4 of {rec}" in message
    assert info.value.path == idx and f"of {idx}" not in message  # no byte of the .idx claimed
    with MXIndexedRecordIO(idx, rec, "r") as r, pytest.raises(IndexMismatchError):
        r.read_idx(1)


def test_idx_negative_offset_is_named(tmp_path):
    rec, idx = write_indexed(tmp_path)
    open(idx, "a").write("7\t-8\n")
    for reader in (lambda: RecordFile(rec), lambda: MXIndexedRecordIO(idx, rec, "r")):
        with pytest.raises(IndexMismatchError, match=r"key 7 offset -8, negative") as info:
            reader()
        assert info.value.path == idx


def test_idx_numbers_beyond_int64_are_named(tmp_path):
    rec, idx = write_indexed(tmp_path)
    good = open(idx).read()
    for line, what in [(f"{1 << 63}\t0", "key"), (f"8\t{1 << 64}", "offset")]:
        open(idx, "w").write(good + line + "\n")
        with pytest.raises(RecordIOError, match=f"line 6: .*{what} out of the int64 range") as info:
            RecordFile(rec)
        assert info.value.path == idx and idx in str(info.value)
    # MXIndexedRecordIO keys are Python ints (or key_type): any size is fine there
    open(idx, "w").write(good.replace("4\t", f"{1 << 70}\t"))
    with MXIndexedRecordIO(idx, rec, "r") as r:
        assert r.read_idx(1 << 70) == PAYLOADS[4]


def test_idx_not_utf8_is_named(tmp_path, memfs):
    rec, idx = write_indexed(tmp_path)
    data = open(idx, "rb").read()
    bad = data[:12] + b"\xff" + data[13:]
    open(idx, "wb").write(bad)
    memfs.pipe("/u/d.rec", open(rec, "rb").read())
    memfs.pipe("/u/d.idx", bad)
    line = bad.count(b"\n", 0, 12) + 1
    where = f"not UTF-8.*line {line}.*at byte 12 of"
    for url, idx_url in ((rec, idx), ("memory://u/d.rec", "memory://u/d.idx")):
        for reader in (RecordFile, lambda u: MXIndexedRecordIO(u[:-4] + ".idx", u, "r")):
            with pytest.raises(RecordIOError, match=where) as info:
                reader(url)
            assert info.value.path == idx_url and info.value.offset == 12


def test_idx_offset_past_the_end_names_the_rec_not_a_byte_of_the_idx(tmp_path):
    rec, idx = write_indexed(tmp_path)
    with open(idx, "a") as f:
        f.write("999\t105896\n")
    with pytest.raises(IndexMismatchError) as info:
        RecordFile(rec)
    message = str(info.value)
    assert "offset 105896, past the end of" in message and rec in message
    assert f"of {idx}" not in message and info.value.path == idx


def test_bad_offset_found_in_a_later_slice(tmp_path):
    """check_offsets looks at the offsets a slice at a time; the error names the first
    bad one, wherever it is."""
    rec, idx = write_indexed(tmp_path)
    good = open(idx).read()
    open(idx, "w").write(good + "7\t8\n8\t6\n9\t-4\n")
    with (
        mock.patch.object(recio_index, "_CHECK_SLICE", 2),
        pytest.raises(IndexMismatchError) as info,
    ):
        RecordFile(rec)
    assert info.value.record_index == 6 and "key 8 offset 6, not 4-byte aligned" in str(info.value)
