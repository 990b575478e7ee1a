"""Writers publish whole files only: on close, never on an abort (local and fsspec)."""

from __future__ import annotations

import os
import sys

import pytest

from recio import storage
from recio.records.reader import RecordFile
from recio.records.recordio import MXIndexedRecordIO

from ..storage_helpers import write_rec


def test_remote_writer_publishes_only_on_close(memfs):
    with (
        pytest.raises(RuntimeError),
        MXIndexedRecordIO("memory://w/a.idx", "memory://w/a.rec", "w") as w,
    ):
        w.write_idx(0, b"x" * 100)
        assert not memfs.exists("/w/a.rec")
        raise RuntimeError("interrupted")
    assert not memfs.exists("/w") or memfs.ls("/w", detail=False) == []
    write_rec("memory://w/a.rec", n=5, size=10)
    assert sorted(memfs.ls("/w", detail=False)) == ["/w/a.crc", "/w/a.idx", "/w/a.rec"]
    # overwriting replaces the old file whole
    write_rec("memory://w/a.rec", n=3, size=10)
    assert len(RecordFile("memory://w/a.rec")) == 3


def test_local_writer_leaves_nothing_on_abort(tmp_path):
    out = storage.AtomicOutput(str(tmp_path / "x.rec"))
    out.write(b"abc")
    out.abort()
    assert list(tmp_path.iterdir()) == []


def test_local_writer_starts_writeback_as_it_goes(tmp_path, monkeypatch):
    """NOTE [early writeback]: every _WRITEBACK_BYTES written are flushed and queued for
    disk in order, each range once, so the final fsync has little left to wait for."""
    from recio.storage import atomic

    calls = []
    real = atomic.start_writeback

    def recording(fd, offset, length):
        calls.append((offset, length, os.fstat(fd).st_size))
        real(fd, offset, length)

    monkeypatch.setattr(atomic, "_WRITEBACK_BYTES", 1000)
    monkeypatch.setattr(atomic, "start_writeback", recording)
    target = tmp_path / "x.rec"
    out = storage.AtomicOutput(str(target))
    chunks = [bytes([i]) * 700 for i in range(10)]
    for chunk in chunks:
        out.write(chunk)
    assert calls == [(0, 1400, 1400), (1400, 1400, 2800), (2800, 1400, 4200), (4200, 1400, 5600),
                     (5600, 1400, 7000)]  # fmt: skip
    assert not target.exists()
    out.commit()
    assert target.read_bytes() == b"".join(chunks)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sync_file_range is Linux's")
def test_sync_file_range_is_found_and_accepts_a_range(tmp_path):
    from recio.storage import atomic

    with open(tmp_path / "f", "wb") as f:
        f.write(b"x" * 10000)
        f.flush()
        assert atomic._sync_file_range is not None
        assert atomic._sync_file_range(f.fileno(), 0, 10000, atomic._SYNC_FILE_RANGE_WRITE) == 0


def test_remote_pair_is_written_out_before_either_is_renamed(memfs, monkeypatch):
    """On a file system with a rename (memory, HDFS), the .idx upload failing leaves the
    old pair and no temporary: both uploads finish before either is renamed."""
    write_rec("memory://p/a.rec", n=3, size=10)
    before = {p: memfs.cat_file(p) for p in ("/p/a.rec", "/p/a.idx", "/p/a.crc")}

    def upload_failed():
        raise OSError(5, "upload failed")

    class FailingIdx(storage.AtomicOutput):
        def __init__(self, url, *args, **kwargs):
            super().__init__(url, *args, **kwargs)
            if url.endswith(".idx"):
                self._file.close = upload_failed

    monkeypatch.setattr(storage, "AtomicOutput", FailingIdx)
    with pytest.raises(OSError, match="upload failed"):
        write_rec("memory://p/a.rec", n=8, size=10)
    assert sorted(memfs.ls("/p", detail=False)) == ["/p/a.crc", "/p/a.idx", "/p/a.rec"]
    assert {p: memfs.cat_file(p) for p in ("/p/a.rec", "/p/a.idx", "/p/a.crc")} == before
