"""MappedSource and CopiedSource: local files mmap'd, zero-copy reads, truncation, repair."""

from __future__ import annotations

import pytest

from recio.errors import TruncatedRecordError
from recio.storage.mapped import CopiedSource, MappedSource


def test_reads_are_views_of_the_map_clipped_at_the_end(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"0123456789")
    with MappedSource(str(path)) as src:
        assert src.size == 10 and src.url == str(path) and src.mapped
        got = src.read_ranges([(2, 3), (8, 5), (10, 1)])
        assert all(isinstance(g, memoryview) for g in got)
        assert [bytes(g) for g in got] == [b"234", b"89", b""]
        assert bytes(src.read(0, 4)) == b"0123"
        assert bytes(src.mapped_view()) == b"0123456789"
    kept = got[0]
    assert bytes(kept) == b"234"  # a view handed out outlives close()
    with pytest.raises(ValueError, match="closed"):
        src.current_size()


def test_an_empty_file_reads_as_empty(tmp_path):
    path = tmp_path / "empty"
    path.write_bytes(b"")
    with MappedSource(str(path), url="memory://e/empty") as src:
        assert src.size == 0 and src.url == "memory://e/empty"
        assert bytes(src.read(0, 5)) == b""


def test_a_range_the_file_lost_while_open_is_a_truncation_not_a_fault(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(bytes(2 * 4096))
    src = MappedSource(str(path))
    try:
        with open(path, "r+b") as f:
            f.truncate(4096)
        assert src.current_size() == 4096 and len(src.current_view()) == 4096
        assert bytes(src.read(0, 16)) == bytes(16)  # what is still there reads
        with pytest.raises(TruncatedRecordError, match="now 4096 bytes, was 8192") as info:
            src.read_ranges([(0, 8), (4000, 200)])
        assert info.value.offset == 4000
    finally:
        src.close()


def test_a_copy_refetches_from_its_origin_and_is_mended_in_place(tmp_path):
    origin_path = tmp_path / "origin"
    origin_path.write_bytes(b"abcdefghij")
    copy_path = tmp_path / "copy"
    copy_path.write_bytes(b"abcdXXghij")  # damaged on the local disk
    opened = []

    def reopen():
        opened.append(MappedSource(str(origin_path), url="memory://o/origin"))
        return opened[-1]

    src = CopiedSource(str(copy_path), "memory://o/origin", reopen)
    assert src.mends and src.mapped and src.url == "memory://o/origin"
    assert bytes(src.read(4, 2)) == b"XX"
    fixed = src.refetch(4, 2)
    assert bytes(fixed) == b"ef" and len(opened) == 1
    assert bytes(src.refetch(0, 1)) == b"a" and len(opened) == 1  # opened once
    src.repair(4, fixed)
    assert bytes(src.read(0, 10)) == b"abcdefghij"  # the shared map sees it at once
    assert copy_path.read_bytes() == b"abcdefghij"
    src.close()
    assert opened[0].closed and src.closed
