"""Writers publish whole files only: on close, never on an abort (local and fsspec)."""

from __future__ import annotations

import pytest

from recio import storage
from recio.reader import RecordFile
from recio.recordio import MXIndexedRecordIO

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
    assert sorted(memfs.ls("/w", detail=False)) == ["/w/a.idx", "/w/a.rec"]
    # overwriting replaces the old file whole
    write_rec("memory://w/a.rec", n=3, size=10)
    assert len(RecordFile("memory://w/a.rec")) == 3


def test_local_writer_leaves_nothing_on_abort(tmp_path):
    out = storage.AtomicOutput(str(tmp_path / "x.rec"))
    out.write(b"abc")
    out.abort()
    assert list(tmp_path.iterdir()) == []
