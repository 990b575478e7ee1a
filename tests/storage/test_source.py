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
