"""RecordFile: zero-copy reads, scans without an .idx, fsspec URLs, bad .idx offsets."""

import os
import pickle

import pytest

from recio import storage
from recio.errors import IndexMismatchError
from recio.format import encode_record
from recio.reader import RecordFile
from recio.recordio import MXIndexedRecordIO, MXRecordIO

from .storage_helpers import ids_of, write_rec
from .test_recordio import PAYLOADS, write_indexed


def test_record_file_zero_copy_and_scan_without_idx(tmp_path):
    rec, idx = write_indexed(tmp_path)
    with RecordFile(rec) as rf:
        assert rf.idx_url == idx
        assert isinstance(rf.read(0), memoryview)
        assert [bytes(rf.read(i)) for i in range(len(rf))] == PAYLOADS
        assert [bytes(p) for p in rf.read_many([4, 0])] == [PAYLOADS[4], PAYLOADS[0]]
    os.remove(idx)
    with RecordFile(rec) as rf:
        assert rf.idx_url is None and len(rf) == len(PAYLOADS)
        assert bytes(rf.read(2)) == PAYLOADS[2]


def test_record_file_over_fsspec_memory():
    import fsspec

    fs = fsspec.filesystem("memory")
    data = b"".join(encode_record(p) for p in PAYLOADS)
    fs.pipe("/bucket/m.rec", data)
    with RecordFile("memory://bucket/m.rec") as rf:
        assert [bytes(p) for p in rf.read_many(range(len(rf)))] == PAYLOADS
    r = MXRecordIO("memory://bucket/m.rec", "r")
    assert list(r) == PAYLOADS


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
    assert info.value.offset == 4 and "not a record start" in str(info.value)
    with MXIndexedRecordIO(idx, rec, "r") as r, pytest.raises(IndexMismatchError):
        r.read_idx(1)


def test_record_file_takes_fetch_options_and_cache_dir_and_pickles(memfs, tmp_path):
    write_rec("memory://r/d.rec", n=10, size=100)
    opts = storage.FetchOptions(gap=0, concurrency=2)
    rf = RecordFile("memory://r/d.rec", fetch=opts)
    assert rf.source.fetch == opts
    copy = pickle.loads(pickle.dumps(rf))
    assert copy.source.fetch == opts and ids_of(copy.read_many([3, 1])) == [3, 1]
    cached = RecordFile("memory://r/d.rec", cache_dir=str(tmp_path))
    assert isinstance(cached.source, storage.MappedSource)
    assert ids_of(cached.read_many([9, 0])) == [9, 0]


def test_idx_negative_offset_is_named(tmp_path):
    rec, idx = write_indexed(tmp_path)
    open(idx, "a").write("7\t-8\n")
    for reader in (lambda: RecordFile(rec), lambda: MXIndexedRecordIO(idx, rec, "r")):
        with pytest.raises(IndexMismatchError, match=r"key 7 offset -8, negative") as info:
            reader()
        assert info.value.path == idx
