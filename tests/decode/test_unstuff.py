"""The unstuffed copy of a scan, made as far as the decode reads (native/unstuff.h, NOTE
[entropy decode] in native/entropy.h).

The copy is made a piece at a time: it must come out the same wherever the pieces end (a
stuffed 0xFF00 or a marker cut in two by a piece's end included), see no framing fault
before it reaches it, and see every one it reaches. Decodes that stop high in a scan of many
pieces (a crop ending at each MCU row) must give libjpeg's pixels, and damage or a stream cut
short anywhere (just past where a crop's copy ends included) the status libjpeg's decoder
gives, on the first decode (the whole stream read) and the later ones.
"""

from __future__ import annotations

import numpy as np
import pytest

from recio import _native, decode

from ..conftest import require_native
from .test_entropy import both, encoded, make_pool, marked

MORE, DONE, BAD = 0, 1, 2


def scan(segments: list[bytes], end: bytes = b"\xff\xd9") -> bytes:
    """Entropy-coded data: the segments with 0xFF stuffed, RST markers in sequence between
    them, then `end` and a byte after it."""
    stuffed = [s.replace(b"\xff", b"\xff\x00") for s in segments]
    out = stuffed[0]
    for i, s in enumerate(stuffed[1:]):
        out += bytes([0xFF, 0xD0 + (i & 7)]) + s
    return out + end + b"\x55"


def marker_offsets(segments: list[bytes]) -> list[int]:
    """Where scan(segments) has the RST marker after each segment but the last."""
    out, at = [], 0
    for part in segments[:-1]:
        at += len(part.replace(b"\xff", b"\xff\x00"))
        out.append(at)
        at += 2
    return out


def segments(seed: int, count: int) -> list[bytes]:
    """Data whose bytes are often 0xFF (stuffed in the scan), an empty segment among them."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        data = rng.integers(0, 256, int(rng.integers(0, 40)) if i != 2 else 0, np.uint8)
        data[rng.random(len(data)) < 0.25] = 0xFF
        out.append(data.tobytes())
    return out


def test_the_copy_is_the_same_wherever_its_pieces_end() -> None:
    """Every byte of the scan (a stuffed pair's 0xFF and 0x00, a marker's two bytes) ends a
    piece once: the copy, the segments and the EOI are those of the copy made at once."""
    require_native()
    parts = segments(1, 9)
    data = scan(parts)
    _, whole, starts, eoi = _native.unstuff(data, len(parts), [])
    assert whole == b"".join(parts)
    assert starts == list(np.cumsum([0] + [len(p) for p in parts]))
    assert eoi == len(data) - 3
    for want in range(len(whole) + 2):
        steps, copy, at, end = _native.unstuff(data, len(parts), [want, want, want + 1])
        assert (copy, at, end) == (whole, starts, eoi), want
        for got, asked in zip(steps, (want, want, want + 1), strict=True):
            copied, found, state = got
            assert state == (MORE if copied < len(whole) or found < len(parts) else DONE)
            assert copied >= asked or state == DONE
            assert starts[: found + 1] == [s for s in starts if s <= copied][: found + 1]
        assert steps[0] == steps[1]  # asked again for no more: nothing more copied


@pytest.mark.parametrize(
    "fault",
    [
        ("fill", lambda d, at: d[:at] + b"\xff" + d[at:]),  # 0xFF 0xFF before a marker
        ("order", lambda d, at: d[: at + 1] + bytes([d[at + 1] ^ 1]) + d[at + 2 :]),
        ("short", lambda d, at: d[:at]),  # cut short before a marker, no EOI after
    ],
    ids=lambda f: f[0],
)
def test_a_framing_fault_is_seen_when_the_copy_reaches_it(fault) -> None:
    """A marker out of sequence, fill bytes or data cut short: the pieces copied before it
    are good, the first that reaches it is bad, and so is the whole copy. (The copy goes on
    to the next 0xFF, so data cut short is seen once it is asked for more than the last
    0xFF before the cut.)"""
    require_native()
    parts = segments(2, 9)
    data = scan(parts)
    name, damage = fault
    marker = data.index(bytes([0xFF, 0xD3]))  # the fourth segment's marker
    bad = damage(data, marker)
    seen = sum(len(p) for p in parts[:4])  # the copy's bytes before that marker
    if name == "short":
        seen = b"".join(parts[:4]).rindex(b"\xff") + 1
    for want in (0, seen // 2, seen - 1):
        steps, _, _, eoi = _native.unstuff(bad, len(parts), [want, seen + 1])
        assert steps[0][2] == MORE, (name, want)
        assert steps[1][2] == BAD, name
        assert eoi == -1


def window_segments(cols, rows, interval, c0, c1, r0, r1) -> list[int]:
    """The source segments a restart cut's window keeps (NOTE [restart cut])."""
    if c0 == 0 and c1 == cols:
        return list(range(r0 * cols // interval, (r1 * cols - 1) // interval + 1))
    return [
        s
        for r in range(r0, r1)
        for s in range((r * cols + c0) // interval, (r * cols + c1 - 1) // interval + 1)
    ]


@pytest.mark.parametrize(
    "window",
    [
        (6, 4, 2, 2, 6, 1, 3),  # columns: two rows of two segments
        (6, 4, 2, 0, 2, 0, 4),  # the first column of segments, every row
        (6, 4, 4, 0, 6, 2, 4),  # whole rows, segments across rows, to the scan's last
        (6, 4, 4, 0, 6, 0, 2),  # whole rows from the first
    ],
)
def test_a_window_is_copied_straight_from_the_source(window) -> None:
    """A restart cut's segments copied from the whole scan, the others passed over: the copy
    is theirs as the segments of a scan of their own, wherever its pieces end; fill bytes
    before a marker passed over are let through (as the cut lets them), in the window they
    are not, nor is a marker out of sequence up to the window's last segment."""
    require_native()
    cols, rows, interval = window[:3]
    total = -(-cols * rows // interval)
    parts = segments(3, total)
    data = scan(parts)
    kept = window_segments(*window)
    want = b"".join(parts[s] for s in kept)
    starts = list(np.cumsum([0] + [len(parts[s]) for s in kept]))
    for asked in range(0, len(want) + 2, 3):
        steps, copy, at, eoi = _native.unstuff(data, len(kept), [asked], window)
        assert (copy, at, eoi) == (want, starts, -1), asked
        assert steps[0][2] == (DONE if steps[0][1] == len(kept) else MORE)
    for s, marker in enumerate(marker_offsets(parts)):
        filled = data[:marker] + b"\xff" + data[marker:]
        steps, copy, _, _ = _native.unstuff(filled, len(kept), [len(want) + 1], window)
        if s in kept:  # the end of a segment copied
            assert steps[0][2] == BAD, s
        else:
            assert steps[0][2] == DONE and copy == want, s
        swapped = data[: marker + 1] + bytes([data[marker + 1] ^ 1]) + data[marker + 2 :]
        steps, _, _, _ = _native.unstuff(swapped, len(kept), [len(want) + 1], window)
        assert steps[0][2] == (BAD if s <= kept[-1] else DONE), s  # (past the window: unread)


@pytest.fixture
def pools(monkeypatch):
    own = make_pool(monkeypatch, False)
    stock = make_pool(monkeypatch, True)
    with own, stock:
        yield own, stock


# A scan of many pieces: noise, 4:2:0 and 4:4:4, some 40-80 KB of data in MCU rows of 1-2 KB.
TALL = [
    encoded(64, 640, seed, smooth, quality=quality, subsampling=subsampling)
    for seed, (smooth, quality, subsampling) in enumerate(((False, 90, 2), (True, 100, 0)))
]


def test_crops_ending_at_every_row_decode_as_libjpeg_does(pools) -> None:
    """Crops from the top to each MCU row: the later decodes (the stream checked) copy only
    as far as their last row reads, wherever that falls among the copy's pieces. The two
    images take turns on one worker, so what a piece not yet copied holds is the other
    image's data: a copy short of what the decode reads would change the pixels."""
    for image in TALL:
        both(pools, [image], (8, 8), crops=np.array([[0, 0, 64, 8]], np.int32))  # checked
        assert _native.stream_checked(image)
    boxes = np.array([(0, 0, 64, y) for y in range(8, 641, 8)], np.int32)
    for size in ((64, 24), (16, 16)):
        for image in TALL:
            images = [image, TALL[0] if image is TALL[1] else TALL[1]] * len(boxes)
            s1, got, s2, want = both(pools, images, size, crops=np.repeat(boxes, 2, 0))
            assert not s1.any() and not s2.any()
            assert np.array_equal(got, want), size


def scan_start(image: bytes) -> int:
    sos = image.index(b"\xff\xda")
    return sos + 2 + int.from_bytes(image[sos + 2 : sos + 4], "big")


def decoded_twice(pools, images: list[bytes], box) -> tuple[np.ndarray, np.ndarray]:
    """Each image's crop `box` decoded by both decoders twice (the first decode of clean
    bytes reads the whole stream; the later ones, of bytes read whole cleanly, do not):
    both give the same status and, where it is good, the same pixels, both times. The
    statuses, and whether each image's stream is now known clean."""
    batch = np.repeat(np.array([box], np.int32), len(images), 0)
    first = None
    for _ in range(2):
        s1, got, s2, want = both(pools, images, (24, 24), crops=batch)
        assert np.array_equal(s1, s2)
        ok = s1 == 0
        assert np.array_equal(got[ok], want[ok])
        if first is None:
            first = s1
        assert np.array_equal(s1, first)  # a status never depends on the decode's shortcuts
    return first, np.array([_native.stream_checked(i) for i in images])


def test_damage_anywhere_past_a_crop_is_reported_on_every_decode(pools) -> None:
    """A stray marker or flipped bits every few bytes of the scan, a crop of its top rows:
    the first decode reads the whole stream and reports the damage as libjpeg does; the
    damaged stream is never known clean, so the later decodes report it again."""
    image = TALL[0]
    start, end = scan_start(image), len(image) - 2
    rng = np.random.default_rng(3)
    damaged = []
    for at in range(start, end, 53):
        if rng.random() < 0.5:
            damaged.append(image[:at] + b"\xff\xd5" + image[at:])
        else:
            flipped = bytearray(image)
            flipped[at] ^= 0xA5
            damaged.append(bytes(flipped))
    status, checked = decoded_twice(pools, damaged, (0, 0, 64, 96))
    assert (status != 0).sum() > len(damaged) // 2
    assert not checked[status != 0].any()


@pytest.mark.parametrize("restart", [0, 1, "row"])
def test_fill_bytes_past_a_crop_leave_a_checked_stream_good(pools, restart) -> None:
    """libjpeg reads 0xFF fill bytes ("FF FF 00", "FF FF D3") as one 0xFF; recio's copy
    refuses them and leaves the scan to libjpeg wherever it meets them (a restart cut's
    segments copied from the source included: the pass is run again with libjpeg's decoder
    and a cut holding the segments). One such pair anywhere in the scan: the first decode is
    libjpeg's, clean, so the stream is known clean, and the later crop decodes (the rows
    above the crop's end; with markers, the cut), whose copy may stop before the pair or
    pass over it, stay good with libjpeg's pixels."""
    (image,) = marked([TALL[0]], restart) if restart else (TALL[0],)
    start = scan_start(image)
    pairs = [
        at
        for at in range(start, len(image) - 2)
        if image[at] == 0xFF and (image[at + 1] == 0 or 0xD0 <= image[at + 1] <= 0xD7)
    ]
    assert len(pairs) > 30
    filled = [image[:at] + b"\xff" + image[at:] for at in pairs[:: max(1, len(pairs) // 60)]]
    for box in ((0, 0, 64, 96), (16, 200, 24, 160)):
        status, checked = decoded_twice(pools, filled, box)
        assert not status.any() and checked.all()


@pytest.mark.parametrize("eoi", [False, True])
def test_a_stream_cut_short_anywhere_is_reported_as_libjpeg_does(pools, eoi) -> None:
    """The stream cut every few hundred bytes (a partial download, and one padded with an
    EOI): the first decode of a top crop reports it as libjpeg does, and so do the later
    ones; cuts inside the copy's first piece and far past the crop's rows alike."""
    image = TALL[1]
    start = scan_start(image)
    cuts = range(start + 1, len(image) - 2, 397)
    short = [image[:at] + (b"\xff\xd9" if eoi else b"") for at in cuts]
    status, checked = decoded_twice(pools, short, (0, 0, 64, 64))
    assert (status == decode.Status.TRUNCATED).all()
    assert not checked.any()
