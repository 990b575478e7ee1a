"""A block cache's entries: written whole or not at all, checked, mapped; maps checked once."""

from __future__ import annotations

import os

import pytest

from recio.storage.entries import (
    HEADER,
    SUFFIX,
    TMP,
    CheckedMaps,
    entry_bytes,
    entry_name,
    file_key,
    map_entry,
    valid,
    write_entry,
)


def test_names_keys_and_sizes():
    assert entry_name("abc", 7) == f"abc-0000000007{SUFFIX}"
    key = file_key("s3://b/x.rec", 100, "ETag=1")
    assert len(key) == 24 and key == file_key("s3://b/x.rec", 100, "ETag=1")
    assert (
        len({key, file_key("s3://b/x.rec", 100, "ETag=2"), file_key("s3://b/x.rec", 99, "ETag=1")})
        == 3
    )
    assert entry_bytes(1000) == HEADER.size + 1000


def test_an_entry_round_trips_and_every_field_is_checked(tmp_path):
    data = os.urandom(5000)
    path = str(tmp_path / entry_name("k", 3))
    write_entry(path, 3, memoryview(data), priority=123_456_789)
    assert os.stat(path).st_mtime_ns == 123_456_789  # the priority, for every process
    assert not [n for n in os.listdir(tmp_path) if n.endswith(TMP)]
    raw, inode = map_entry(path, entry_bytes(len(data)))
    assert inode == os.stat(path).st_ino
    assert bytes(raw[HEADER.size :]) == data
    assert valid(raw, 3, len(data))
    assert not valid(raw, 4, len(data))  # another block's
    assert not valid(raw, 3, len(data) - 1)  # another length
    assert not valid(raw[:10], 3, len(data))  # shorter than a header
    damaged = bytearray(raw)
    damaged[-1] ^= 1
    assert not valid(damaged, 3, len(data))  # the data's CRC32C
    damaged = bytearray(raw)
    damaged[0] ^= 1
    assert not valid(damaged, 3, len(data))  # the magic
    raw.release()


def test_a_torn_entry_is_not_mapped(tmp_path):
    path = str(tmp_path / entry_name("k", 0))
    write_entry(path, 0, b"x" * 100, priority=1)
    with open(path, "r+b") as f:
        f.truncate(50)
    raw, inode = map_entry(path, entry_bytes(100))
    assert raw is None and inode == os.stat(path).st_ino
    with pytest.raises(FileNotFoundError):
        map_entry(str(tmp_path / "gone.blk"), 10)


def test_checked_maps_recall_by_inode_and_keep_the_latest():
    """NOTE [checked once]: a map is recalled only while its entry is the same inode; the
    oldest used go past the limit; forget and let_go drop them."""
    maps = CheckedMaps(limit=2)
    a, b, c = memoryview(b"a"), memoryview(b"b"), memoryview(b"c")
    maps.keep("a", 1, a)
    maps.keep("b", 2, b)
    assert maps.recall("a", 1) is a and maps.recall("b", 2) is b
    assert maps.recall("a", 9) is None and "a" not in maps  # replaced: checked anew
    maps.keep("a", 1, a)
    assert maps.recall("b", 2) is b  # b is now the latest used
    maps.keep("c", 3, c)  # over the limit: a (oldest used) goes
    assert "a" not in maps and "b" in maps and "c" in maps and len(maps) == 2
    maps.forget("b")
    assert maps.recall("b", 2) is None
    maps.keep("b", 2, b)
    maps.let_go({"b": 2, "c": 4})  # c replaced, b still there
    assert "b" in maps and "c" not in maps
