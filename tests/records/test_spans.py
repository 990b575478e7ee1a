"""Spans: byte ranges of one buffer, as a sequence of zero-copy memoryviews."""

import numpy as np
import pytest

from recio.records.spans import Spans


def test_items_are_zero_copy_slices_of_the_base():
    base = bytearray(b"0123456789")
    spans = Spans(base, [2, 0, 9, 5], [3, 1, 1, 0])
    assert len(spans) == 4 and spans.starts.dtype == np.int64
    assert [bytes(x) for x in spans] == [b"234", b"0", b"9", b""]
    assert bytes(spans[-3]) == b"0"
    base[2] = ord("X")
    assert bytes(spans[0]) == b"X34"  # a view, not a copy
    with pytest.raises(IndexError):
        spans[4]
    part = spans[1:3]
    assert isinstance(part, Spans) and [bytes(x) for x in part] == [b"0", b"9"]
    assert [bytes(x) for x in spans.take([3, 0])] == [b"", b"X34"]
    assert repr(spans) == "Spans(4 spans of a 10-byte buffer)"


@pytest.mark.parametrize(
    ("starts", "lengths", "error"),
    [
        ([0, 8], [2, 3], r"span 1 \(start 8, length 3\) is outside the base buffer \(10 bytes\)"),
        ([-1], [1], r"span 0 \(start -1, length 1\)"),
        ([0], [-2], r"span 0 \(start 0, length -2\)"),
        ([0, 1], [1], r"1-D of one length, got shapes \(2,\) and \(1,\)"),
        ([[0]], [[1]], r"1-D of one length"),
    ],
)
def test_spans_outside_the_base_are_refused(starts, lengths, error):
    with pytest.raises(ValueError, match=error):
        Spans(b"0123456789", starts, lengths)


def test_the_spans_hold_the_base_as_their_own_view():
    base = bytearray(b"abcdef")
    owner = memoryview(base)
    spans = Spans(owner, [1], [2])
    owner.release()  # the owner's view goes (a file closed): the spans' stays valid
    assert bytes(spans[0]) == b"bc"
    with pytest.raises(BufferError):  # held: the bytearray cannot move under the spans
        base.append(0)
    del spans
    base.append(0)


def test_a_multi_dimensional_base_is_taken_as_its_bytes():
    base = np.arange(12, dtype=np.uint16).reshape(3, 4)
    spans = Spans(base, [2, 22], [2, 2])
    assert len(spans.base) == 24
    assert [bytes(x) for x in spans] == [b"\x01\x00", b"\x0b\x00"]
