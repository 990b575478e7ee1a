"""cache_dir: a remote file copied once, then mapped; a changed file copied again."""

from __future__ import annotations

import hashlib
import warnings

import pytest
from fsspec.implementations.memory import MemoryFileSystem

from recio import storage
from recio.storage.cache import file_version

from ..storage_helpers import write_rec


@pytest.fixture
def etags(monkeypatch):
    """memory:// with an ETag in its file info (the content's MD5, as S3 gives)."""
    plain = MemoryFileSystem.info

    def info(self, path, **kwargs):
        out = plain(self, path, **kwargs)
        if out["type"] == "file":
            out["ETag"] = hashlib.md5(self.cat_file(path)).hexdigest()
        return out

    monkeypatch.setattr(MemoryFileSystem, "info", info)


def test_cache_dir_copies_once_then_maps(memfs, tmp_path, etags):
    write_rec("memory://c/d.rec", n=20, size=500)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a versioned store: no warning
        src = storage.open_source("memory://c/d.rec", cache_dir=str(tmp_path))
    assert isinstance(src, storage.MappedSource) and src.url == "memory://c/d.rec"
    assert bytes(src.read(0, src.size)) == memfs.cat_file("/c/d.rec")
    (cached,) = list(tmp_path.iterdir())
    mtime = cached.stat().st_mtime_ns
    storage.open_source("memory://c/d.rec", cache_dir=str(tmp_path))
    assert cached.stat().st_mtime_ns == mtime
    # rewritten at the same size: a new ETag, so a new copy
    data = memfs.cat_file("/c/d.rec")
    memfs.pipe("/c/d.rec", data[:-4] + b"\1\2\3\4")
    again = storage.open_source("memory://c/d.rec", cache_dir=str(tmp_path))
    assert bytes(again.read(again.size - 4, 4)) == b"\1\2\3\4"


def test_cache_dir_without_versions_never_serves_a_stale_copy(memfs, tmp_path):
    """memory:// (like some HDFS and HTTP setups) gives no ETag or mtime: a file rewritten
    at the same size cannot be told from the copy, so the copy is made again each open."""
    memfs.pipe("/nv/blob", b"A" * 1000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = storage.open_source("memory://nv/blob", cache_dir=str(tmp_path))
        memfs.pipe("/nv/blob", b"B" * 1000)
        second = storage.open_source("memory://nv/blob", cache_dir=str(tmp_path))
    assert bytes(first.read(0, 4)) == b"AAAA"  # a map open before stays on its old copy
    assert bytes(second.read(0, 4)) == b"BBBB"
    (warning,) = [str(w.message) for w in caught]  # once per URL
    assert "memory://nv/blob has no version" in warning and "copied again" in warning


@pytest.mark.parametrize(
    ("info", "has_version"),
    [
        ({"ETag": '"abc"', "LastModified": "2024-01-01", "size": 1}, True),  # s3fs
        ({"modification_time": 1700000000123, "size": 1}, True),  # hdfs-native
        ({"modificationTime": 1700000000123, "length": 1}, True),  # WebHDFS
        ({"mtime": 1.5, "created": 1.0}, True),  # local, sftp
        ({"generation": "17", "etag": "CAE="}, True),  # gcsfs
        ({"name": "x", "size": 1, "type": "file", "created": 1.0}, False),  # memory
        ({"ETag": "", "size": 1}, False),
    ],
)
def test_file_version_from_store_info(info, has_version):
    assert (file_version(info) is not None) == has_version
