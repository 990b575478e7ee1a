"""cache_dir: a remote file copied once, then mapped."""

from __future__ import annotations

from recio import storage

from ..storage_helpers import write_rec


def test_cache_dir_copies_once_then_maps(memfs, tmp_path):
    write_rec("memory://c/d.rec", n=20, size=500)
    src = storage.open_source("memory://c/d.rec", cache_dir=str(tmp_path))
    assert isinstance(src, storage.MappedSource) and src.url == "memory://c/d.rec"
    assert bytes(src.read(0, src.size)) == memfs.cat_file("/c/d.rec")
    (cached,) = list(tmp_path.iterdir())
    mtime = cached.stat().st_mtime_ns
    storage.open_source("memory://c/d.rec", cache_dir=str(tmp_path))
    assert cached.stat().st_mtime_ns == mtime
