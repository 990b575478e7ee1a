"""open_source: local files and file:// URLs mapped, missing files named."""

from __future__ import annotations

import pytest

from recio import storage


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


def test_a_source_without_capabilities_gets_their_defaults(tmp_path):
    class Bytes(storage.ByteSource):
        url, size = "mem://x", 10

        def read(self, offset, length):
            return b"0123456789"[offset : offset + length]

    plain = Bytes()
    assert not (plain.mapped or plain.schedules or plain.mends)
    assert plain.mapped_view() is None
    plain.schedule([0], [0], [4])  # nothing to tell
    assert plain.refetch(2, 3, until=5) == b"234"
    with pytest.raises(NotImplementedError, match="mem://x has no local copy"):
        plain.repair(0, b"x")
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    with storage.MappedSource(str(path)) as mapped:
        assert mapped.mapped and bytes(mapped.mapped_view()) == b"abc"
