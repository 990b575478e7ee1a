"""recio._crc32c: the one CRC32C that the records' checksums and the block cache's entries use."""

from __future__ import annotations

import mmap
import os

import pytest

from recio import _crc32c
from recio._crc32c import crc32c


def test_crc32c_is_castagnoli_on_both_paths(monkeypatch):
    """RFC 3720's check value and B.4's 32 zero bytes, continued, with and without the
    extension (the crc32c package's then)."""
    pytest.importorskip("crc32c")
    for native in (True, False):
        if not native:
            monkeypatch.setattr(_crc32c, "_native_crc32c", None)
        elif _crc32c._native_crc32c is None:
            continue
        assert crc32c(b"123456789") == 0xE3069283
        assert crc32c(bytes(32)) == 0x8A9136AA
        assert crc32c(b"6789", crc32c(b"12345")) == 0xE3069283


def test_the_extension_and_the_package_agree_on_views_of_a_map(tmp_path):
    """Read-only memoryview slices of a map (what a block cache's entry is) are taken as
    they are, at any offset and length."""
    package = pytest.importorskip("crc32c")
    data = os.urandom(3 * 8192 + 77)
    path = tmp_path / "blob"
    path.write_bytes(data)
    with open(path, "rb") as f:
        view = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
    try:
        for start, end in [(0, len(data)), (1, 8200), (13, 13), (5, 3 * 8192 + 70)]:
            part = view[start:end]
            assert crc32c(part) == package.crc32c(data[start:end])
    finally:
        part.release()
        view.release()


def test_records_and_block_cache_share_it():
    from recio.records import checksum
    from recio.storage import entries

    assert checksum.crc32c is crc32c and entries.crc32c is crc32c
