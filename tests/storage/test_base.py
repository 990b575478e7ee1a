"""ByteSource: reads, and the defaults of the capabilities a source may have."""

from __future__ import annotations

import pytest

from recio import storage
from recio.errors import TruncatedRecordError


class Bytes(storage.ByteSource):
    url, size = "mem://x", 10

    def read(self, offset, length):
        return b"0123456789"[offset : offset + length]


def test_a_source_without_capabilities_gets_their_defaults(tmp_path):
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


def test_reads_of_several_ranges_closing_and_the_truncation_error():
    closed = []

    class Closing(Bytes):
        def close(self):
            closed.append(True)

    with Closing() as src:
        assert src.read_ranges([(0, 2), (8, 5)]) == [b"01", b"89"]
    assert closed == [True]
    err = Bytes().truncated(7, 4, record_index=3)
    assert isinstance(err, TruncatedRecordError)
    assert (err.path, err.offset, err.record_index) == ("mem://x", 7, 3)
    assert "mem://x was truncated while open: now 4 bytes, was 10" in str(err)


def test_read_is_what_a_source_must_give():
    with pytest.raises(NotImplementedError):
        storage.ByteSource().read(0, 1)
