"""The crop decode of restart-marked JPEGs (NOTE [restart cut] in native/restart.h).

A JPEG with restart markers is decoded from the segments that cover the crop alone; its
pixels must be, bit for bit, those of the whole-stream decode, the one every JPEG without markers
gets. The same image without markers (the lossless transcode with restart=0: the same DCT
coefficients) is that reference: both are decoded with the same crops, flips, sizes and DCT
scaling, across every position class of the crop, samplings, odd sizes and intervals.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from recio import decode
from recio.augment import CropSpec, KeyedDraw
from recio.im2rec import JpegEncoder

from ..conftest import require_native


@pytest.fixture(scope="module", params=["off", "pow2", "all"])
def pool(request):
    require_native()
    with decode.DecodePool(1, backend="native", dct_scaling=request.param) as p:
        yield p


def jpeg(w: int, h: int, mode: str, seed: int, **save) -> bytes:
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (h // 4 + 2, w // 4 + 2, 3), dtype=np.uint8)
    im = Image.fromarray(small).resize((w, h), Image.Resampling.BICUBIC).convert(mode)
    out = io.BytesIO()
    im.save(out, "JPEG", quality=90, **save)
    return out.getvalue()


# (width, height, Pillow mode, save arguments, MCU size)
IMAGES = {
    "420": (131, 97, "RGB", {"subsampling": 2}, 16),
    "420-small": (50, 35, "RGB", {"subsampling": 2}, 16),
    "422": (77, 53, "RGB", {"subsampling": 1}, 16),
    "444": (93, 71, "RGB", {"subsampling": 0}, 8),
    "grey": (85, 67, "L", {}, 8),
    "cmyk": (61, 45, "CMYK", {}, 8),
    "progressive": (120, 90, "RGB", {"progressive": True}, 16),
}


def crops(w: int, h: int) -> np.ndarray:
    """Crops touching each border and corner, inside, the whole image, tiny and thin ones."""
    cw, ch = max(1, w // 3), max(1, h // 3)
    return np.array(
        [
            (0, 0, w, h),
            (0, 0, cw, ch),  # top left
            (w - cw, 0, cw, ch),  # top right
            (0, h - ch, cw, ch),  # bottom left
            (w - cw, h - ch, cw, ch),  # bottom right
            (w // 3, 0, cw, ch),  # top
            (w // 3, h - ch, cw, ch),  # bottom
            (0, h // 3, cw, ch),  # left
            (w - cw, h // 3, cw, ch),  # right
            (w // 3, h // 3, cw, ch),  # interior
            (w // 2, h // 2, 1, 1),  # one pixel
            (w - 3, 0, 3, h),  # a thin column at the right edge
            (0, h // 2, w, 2),  # a thin row across
            (17, 19, w - 30, h - 25),  # most of it
        ],
        np.int32,
    )


def intervals(w: int, mcu: int) -> list:
    cols = -(-w // mcu)
    return [1, 2, 3, "row", 2 * cols]  # segments that straddle rows (2, 3) get no cut


@pytest.mark.parametrize("name", sorted(IMAGES))
@pytest.mark.parametrize("size", [(24, 24), (37, 19), (96, 80)])
def test_the_cut_decodes_the_pixels_of_the_whole_decode(pool, name, size) -> None:
    w, h, mode, save, mcu = IMAGES[name]
    encoder = JpegEncoder(pool)
    source = jpeg(w, h, mode, seed=len(name), **save)
    status, (plain,) = encoder.optimize_jpeg([source], restart=0)
    assert status[0] == 0
    boxes = crops(w, h)
    for restart in intervals(w, mcu):
        status, (marked,) = encoder.optimize_jpeg([source], restart=restart)
        assert status[0] == 0
        for flip in (0, 1):
            flips = np.full(len(boxes), flip, np.uint8)
            want = np.zeros((len(boxes), size[1], size[0], 3), np.uint8)
            got = np.ones_like(want)
            assert not pool.decode_batch([plain] * len(boxes), want, crops=boxes, flips=flips).any()
            assert not pool.decode_batch([marked] * len(boxes), got, crops=boxes, flips=flips).any()
            for i, box in enumerate(boxes):
                assert np.array_equal(got[i], want[i]), (restart, flip, box.tolist())


def test_drawn_random_resized_crops_match_too(pool) -> None:
    """RandomResizedCrop + flip drawn in C as it decodes: the iterator's path."""
    encoder = JpegEncoder(pool)
    sizes = [(160 + 7 * i, 120 - 5 * i) for i in range(12)]
    sources = [jpeg(w, h, "RGB", seed=i, subsampling=2) for i, (w, h) in enumerate(sizes)]
    _, plain = encoder.optimize_jpeg(sources, restart=0)
    _, marked = encoder.optimize_jpeg(sources, restart=1)
    spec = CropSpec(32, 32, random_resized_crop=True, rand_mirror=True)
    for epoch in range(3):
        draw = KeyedDraw(spec, 7, epoch)
        want = np.zeros((len(sources), 32, 32, 3), np.uint8)
        got = np.ones_like(want)
        records = np.arange(len(sources), dtype=np.int64)
        assert not pool.decode_batch(plain, want, draw=draw, records=records).any()
        assert not pool.decode_batch(marked, got, draw=draw, records=records).any()
        assert np.array_equal(got, want)


def test_a_damaged_marked_jpeg_is_decoded_whole(pool) -> None:
    encoder = JpegEncoder(pool)
    source = jpeg(131, 97, "RGB", seed=3, subsampling=2)
    _, (marked,) = encoder.optimize_jpeg([source], restart=1)
    cut = marked[: len(marked) * 2 // 3]  # segments missing: no cut, the whole decode says so
    missing = marked.replace(b"\xff\xd3", b"\x12\x34", 1)  # a marker out of sequence
    box = np.array([[90, 60, 30, 30]], np.int32)
    for damaged in (cut, missing):
        plain = np.zeros((1, 16, 16, 3), np.uint8)
        status = pool.decode_batch([damaged], plain, crops=box)
        again = np.zeros_like(plain)
        with decode.DecodePool(1, backend="native", roi_decode=False) as whole:
            assert whole.decode_batch([damaged], again, crops=box)[0] == status[0]


def test_a_damaged_segment_outside_the_crop_makes_the_record_bad_under_every_crop(pool) -> None:
    """The first segment is garbage, its framing intact. The cut would never read it, but a
    JPEG not yet read whole is read whole (NOTE [whole-stream check] in native/streamcheck.h):
    every crop, in every epoch, gets the whole decode's status."""
    encoder = JpegEncoder(pool)
    source = jpeg(131, 97, "RGB", seed=3, subsampling=2)
    _, (marked,) = encoder.optimize_jpeg([source], restart=1)
    sos = marked.index(b"\xff\xda")
    start = sos + 2 + int.from_bytes(marked[sos + 2 : sos + 4], "big")
    end = marked.index(b"\xff\xd0", start)
    damaged = marked[:start] + b"\x5a" * (end - start) + marked[end:]
    with decode.DecodePool(1, backend="native", roi_decode=False) as whole:
        out = np.zeros((1, 16, 16, 3), np.uint8)
        want = whole.decode_batch([damaged], out)[0]
    assert want == decode.Status.CORRUPT
    boxes = np.array([[90, 60, 30, 30], [0, 0, 20, 20], [40, 30, 50, 40]], np.int32)
    for _epoch in range(3):
        for box in boxes:
            assert pool.decode_batch([marked], out, crops=box[None])[0] == 0
            assert pool.decode_batch([damaged], out, crops=box[None])[0] == want, box.tolist()


def test_a_jpeg_damaged_below_the_crop_is_bad_under_every_crop(pool) -> None:
    """Without markers too: a crop at the top leaves the rows below it unread, a JPEG cut short
    or damaged there is still reported as the whole decode reports it."""
    source = jpeg(131, 97, "RGB", seed=4, subsampling=2)
    sos = source.index(b"\xff\xda")
    scan = len(source) - sos
    cut = source[: sos + scan * 3 // 4]
    garbled = source[: sos + scan * 3 // 4] + b"\x00\xff\x12" * 40 + source[-2:]
    top = np.array([[0, 0, 131, 20]], np.int32)
    with decode.DecodePool(1, backend="native", roi_decode=False) as whole:
        out = np.zeros((1, 16, 16, 3), np.uint8)
        for damaged, status in ((cut, decode.Status.TRUNCATED), (garbled, decode.Status.CORRUPT)):
            assert whole.decode_batch([damaged], out, crops=top)[0] == status
            for _epoch in range(2):
                assert pool.decode_batch([damaged], out, crops=top)[0] == status


@pytest.mark.parametrize("name", ["420", "422", "444"])
def test_crops_that_start_and_end_near_mcu_edges_match(pool, name) -> None:
    """The cut keeps only the margin the chroma upsampling reads (a sample or two), not a
    whole MCU: crops whose edges fall 0..5 pixels from an MCU's edge, on every side."""
    w, h, mode, save, mcu = IMAGES[name]
    encoder = JpegEncoder(pool)
    source = jpeg(w, h, mode, seed=7, **save)
    _, (plain,) = encoder.optimize_jpeg([source], restart=0)
    _, (marked,) = encoder.optimize_jpeg([source], restart=1)
    boxes = []
    for d in range(6):
        for e in range(6):
            x0, y0 = 2 * mcu + d, mcu + e
            x1, y1 = 5 * mcu - e, 4 * mcu - d
            boxes.append((x0, y0, x1 - x0, y1 - y0))
            boxes.append((x0, y0, mcu - d + e + 1, mcu + 1))  # small: one MCU or two
    boxes = np.array(boxes, np.int32)
    for size in ((24, 24), (40, 40)):
        want = np.zeros((len(boxes), size[1], size[0], 3), np.uint8)
        got = np.ones_like(want)
        assert not pool.decode_batch([plain] * len(boxes), want, crops=boxes).any()
        assert not pool.decode_batch([marked] * len(boxes), got, crops=boxes).any()
        for i, box in enumerate(boxes):
            assert np.array_equal(got[i], want[i]), (size, box.tolist())
