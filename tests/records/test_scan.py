"""recio.records.scan: the one walk of a .rec, local (frame headers in the map) or remote."""

import fsspec
import pytest

from recio import storage
from recio.errors import CorruptRecordError, RecordIOError, TruncatedRecordError
from recio.records.format import IRHeader, encode_record, pack, read_record, walk_frames
from recio.records.scan import record_end, record_header, scan_source, walk_records

from .test_recordio import PAYLOADS

HEADED = [pack(IRHeader(0, 1.5, 7, 0), b"img"), pack(IRHeader(0, [2.0, 3.0], 8, 0), b""), b"x"]


def _write(tmp_path, data: bytes) -> tuple[str, str]:
    """The bytes as a local file and as a memory:// one."""
    local = str(tmp_path / "w.rec")
    open(local, "wb").write(data)
    url = f"memory://scan/{tmp_path.name}.rec"
    with fsspec.open(url, "wb") as f:
        f.write(data)
    return local, url


@pytest.mark.parametrize("headers", [False, True])
def test_local_and_remote_walks_agree_on_a_whole_file(tmp_path, headers):
    data = b"".join(encode_record(p) for p in PAYLOADS + HEADED)
    for url in _write(tmp_path, data):
        with storage.open_source(url) as source:
            walk = walk_records(source, headers=headers)
            assert walk.error is None and walk.end == len(data)
            assert walk.offsets == scan_source(source) == walk_frames(memoryview(data)).offsets
            assert walk.intact(url) == f"the 8 complete records before byte {len(data)} of {url}"
            if headers:  # (flag, first label, id), None where there is no IRHeader
                assert walk.headers[5:] == [(0, 1.5, 7), (2, 2.0, 8), None]
                assert walk.headers[:5] == [record_header(p) for p in PAYLOADS]
            else:
                assert walk.headers == []


@pytest.mark.parametrize("cut", ["truncated", "corrupt"])
def test_a_damaged_file_is_its_intact_records_and_the_first_problem(tmp_path, cut):
    whole = b"".join(encode_record(p) for p in PAYLOADS)
    starts = walk_frames(memoryview(whole)).offsets
    if cut == "truncated":
        data = whole[: starts[3] + 20]  # inside record 3
    else:
        data = bytearray(whole)
        data[starts[3] : starts[3] + 4] = b"\0\0\0\0"  # record 3's magic
        data = bytes(data)
    with pytest.raises(RecordIOError) as exact:
        read_record(memoryview(data), starts[3], record_index=3)
    for url in _write(tmp_path, data):
        for headers in (False, True):
            with storage.open_source(url) as source:
                walk = walk_records(source, headers=headers)
                assert walk.offsets == starts[:3] and walk.end == starts[3]
                kind = TruncatedRecordError if cut == "truncated" else CorruptRecordError
                assert isinstance(walk.error, kind), walk.error
                assert walk.error.offset == exact.value.offset and walk.error.path == url
                assert walk.error.record_index == 3
                with pytest.raises(kind):
                    scan_source(source)


def test_record_end_follows_one_record_s_frames(tmp_path):
    data = b"".join(encode_record(p) for p in PAYLOADS)
    starts = walk_frames(memoryview(data)).offsets
    _, url = _write(tmp_path, data)
    with storage.open_source(url) as source:
        assert [record_end(source, s) for s in starts] == [*starts[1:], len(data)]
        with pytest.raises(CorruptRecordError, match="not a record start"):
            record_end(source, starts[2] + 8)


@pytest.mark.parametrize("inside", [True, False])
def test_a_file_that_shrinks_during_the_walk_is_truncated_not_bad_magic(
    tmp_path, monkeypatch, inside
):
    """Truncated while the frames are walked in the map: the pages past the new end read
    as zeros (NOTE [map guard]); the walk reports the truncation, with file and offset."""
    import os

    import recio.records.scan as scan

    data = b"".join(encode_record(b"%04d" % i + b"x" * 996) for i in range(64))
    starts = walk_frames(memoryview(data)).offsets
    path = str(tmp_path / "s.rec")
    open(path, "wb").write(data)
    cut = starts[40] + (500 if inside else 0)
    real = scan.walk_frames

    def shrink_first(view, *args, **kwargs):
        if len(view) == len(data):
            os.truncate(path, cut)
        return real(view, *args, **kwargs)

    monkeypatch.setattr(scan, "walk_frames", shrink_first)
    with storage.open_source(path) as source:
        walk = walk_records(source)
        assert isinstance(walk.error, TruncatedRecordError), walk.error
        assert walk.offsets == starts[:40] and walk.end == starts[40]
        assert walk.error.path == path and walk.error.offset == starts[40]
        assert f"now {cut} bytes, was {len(data)}" in str(walk.error)
        with pytest.raises(TruncatedRecordError, match="truncated while open"):
            scan_source(source)
