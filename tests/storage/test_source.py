"""open_source: the source for each kind of URL; missing files named."""

from __future__ import annotations

import warnings

import pytest

from recio import storage
from recio.storage.cached import CachedSource
from recio.storage.remote import FsspecSource


def test_local_and_file_url_are_mapped(tmp_path):
    p = tmp_path / "x.bin"
    p.write_bytes(b"abcdef")
    for url in (str(p), f"file://{p}"):
        src = storage.open_source(url)
        assert isinstance(src, storage.MappedSource)
        assert bytes(src.read_ranges([(1, 2), (4, 2)])[1]) == b"ef"


def test_missing_files_are_file_not_found(tmp_path, memfs):
    for url in (str(tmp_path / "none.rec"), "memory://nothing/here.rec"):
        with pytest.raises(FileNotFoundError, match="here.rec|none.rec"):
            storage.open_source(url)
        with pytest.raises(FileNotFoundError):
            storage.read_text(url)
        assert not storage.exists(url)


@pytest.mark.parametrize(
    ("where", "cache", "kind"),
    [
        ("path", {}, storage.MappedSource),
        ("file", {}, storage.MappedSource),
        ("memory", {}, FsspecSource),
        ("memory", {"cache_dir": True}, storage.CopiedSource),
        ("memory", {"cache_dir": True, "cache_limit": 1 << 20}, CachedSource),
    ],
)
def test_open_source_picks_the_source_for_each_kind_of_url(tmp_path, memfs, where, cache, kind):
    data = bytes(range(256)) * 40
    path = tmp_path / "x.bin"
    path.write_bytes(data)
    memfs.pipe("/b/x.bin", data)
    url = {"path": str(path), "file": f"file://{path}", "memory": "memory://b/x.bin"}[where]
    if cache.get("cache_dir"):
        cache = {**cache, "cache_dir": str(tmp_path / "cache")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # memory:// has no version: said once per URL
        src = storage.open_source(url, **cache)
    try:
        assert type(src) is kind and isinstance(src, storage.ByteSource)
        named = str(path) if where == "file" else url  # a local file by its path
        assert src.url == named and src.size == len(data)
        assert [bytes(b) for b in src.read_ranges([(3, 5), (9000, 500)])] == [
            data[3:8],
            data[9000:9500],
        ]
        assert src.mapped == (kind in (storage.MappedSource, storage.CopiedSource))
        assert src.schedules == (kind is CachedSource)
        assert src.mends == (kind is storage.CopiedSource)
    finally:
        src.close()


def test_a_cache_limit_needs_a_cache_dir(memfs):
    memfs.pipe("/b/y.bin", b"abc")
    with pytest.raises(ValueError, match="cache_limit=10 needs a cache_dir"):
        storage.open_source("memory://b/y.bin", cache_limit=10)


def test_old_import_paths_of_the_sources_still_work():
    from recio.storage import base, mapped, source

    assert source.ByteSource is base.ByteSource is storage.ByteSource
    assert source.MappedSource is mapped.MappedSource is storage.MappedSource
    assert source.CopiedSource is mapped.CopiedSource is storage.CopiedSource
    assert source.open_source is storage.open_source
