"""Every pixel a function of the record: no state kept from the image a thread decoded
before (NOTE [fresh tables]), no byte libjpeg never wrote (4x2 luma sampling at reduced DCT
scales), crops of an incomplete progressive JPEG (NOTE [incomplete progressive])."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from recio import decode
from recio.augment import CropSpec, GeometrySpec, KeyedDraw

from ..conftest import require_native
from .sampling_corpus import HEIGHT, WIDTH, files, scan_cuts


@pytest.fixture(scope="module")
def pool():
    require_native()
    with decode.DecodePool(1, backend="native", dct_scaling="pow2") as p:
        yield p


def without(data: bytes, marker: int) -> bytes:
    """The JPEG ``data`` without its header segments of ``marker`` (DQT 0xDB, DHT 0xC4)."""
    out, i = bytearray(data[:2]), 2
    while data[i + 1] != 0xDA:
        end = i + 2 + int.from_bytes(data[i + 2 : i + 4], "big")
        if data[i + 1] != marker:
            out += data[i:end]
        i = end
    return bytes(out + data[i:])


def encode(pixels: np.ndarray, **save) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", **save)
    return out.getvalue()


@pytest.fixture(scope="module")
def pixels() -> np.ndarray:
    rng = np.random.default_rng(3)
    small = rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)
    return np.asarray(Image.fromarray(small).resize((64, 48), Image.Resampling.BICUBIC))


def decode_one(pool, data: bytes, size=(64, 48)) -> tuple[int, np.ndarray]:
    out = np.zeros((1, size[1], size[0], 3), np.uint8)
    return int(pool.decode_batch([data], out)[0]), out[0]


def test_a_jpeg_without_quantisation_tables_fails_after_any_other(pool, pixels) -> None:
    plain = encode(pixels, quality=90)
    no_dqt = without(plain, 0xDB)
    alone = decode_one(pool, no_dqt)[0]
    assert alone == decode.Status.CORRUPT
    assert "Quantization table 0x00 was not defined" in pool.last_errors()[0]
    for before in (plain, encode(pixels, quality=20)):
        decode_one(pool, before)
        assert decode_one(pool, no_dqt)[0] == decode.Status.CORRUPT


def test_a_jpeg_without_huffman_tables_gets_the_standard_ones(pool, pixels) -> None:
    """Pillow writes libjpeg's standard Huffman tables unless it optimises them: without its
    DHT segments the file decodes, alone, as it did with them (Pillow agrees); after an image
    with other (optimised) tables, still the same."""
    plain = encode(pixels, quality=90)
    no_dht = without(plain, 0xC4)
    reference = np.asarray(Image.open(io.BytesIO(plain)).convert("RGB"))
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(no_dht)).convert("RGB")), reference)
    status, want = decode_one(pool, plain)
    assert status == 0
    for before in (None, encode(pixels, quality=30, optimize=True), encode(pixels[::-1])):
        if before is not None:
            assert decode_one(pool, before)[0] == 0
        status, got = decode_one(pool, no_dht)
        assert status == 0, pool.last_errors()
        assert np.array_equal(got, want)


@pytest.mark.parametrize("name", ["4x2-baseline", "4x2-progressive", "2x4-baseline"])
def test_crops_at_half_and_quarter_scale_are_the_whole_decodes(pool, name) -> None:
    """Libjpeg gives chroma an 8-point IDCT where luma has 4 or 2 (4x2 at 1/2, 1/4): the crop's
    upsampler must fill the whole cropped row. Crops at every MCU offset (32 pixels)."""
    data = files()[name]
    boxes = np.array([(x, (3 * x) % 40, 60, 40) for x in range(0, WIDTH - 60)], np.int32)
    with decode.DecodePool(1, backend="native", dct_scaling="pow2", roi_decode=False) as whole:
        for div in (2, 4):
            size = (60 // div, 40 // div)
            want = np.zeros((len(boxes), size[1], size[0], 3), np.uint8)
            got = np.ones_like(want)
            assert not whole.decode_batch([data] * len(boxes), want, crops=boxes).any()
            assert not pool.decode_batch([data] * len(boxes), got, crops=boxes).any()
            for i, box in enumerate(boxes):
                assert np.array_equal(got[i], want[i]), (div, box.tolist())


@pytest.mark.parametrize("name", ["2x2-progressive", "1x1-progressive", "grey-progressive"])
def test_crops_of_a_progressive_jpeg_cut_at_a_scan_boundary_match_its_whole_decode(
    pool, name
) -> None:
    boxes = np.array([(33, 21, 50, 40), (50, 0, WIDTH - 50, HEIGHT), (1, 1, 17, 60)], np.int32)
    for k, cut in enumerate(scan_cuts(files()[name])):
        status, full = decode_one(pool, cut, (WIDTH, HEIGHT))
        assert status == 0, (k, pool.last_errors())
        for x, y, w, h in boxes:
            got = np.zeros((1, h, w, 3), np.uint8)
            assert pool.decode_batch([cut], got, crops=[(x, y, w, h)])[0] == 0
            assert np.array_equal(got[0], full[y : y + h, x : x + w]), (k, (x, y, w, h))


def test_a_jpeg_cut_short_is_truncated_under_every_drawn_warp(pool) -> None:
    """The geometry's way decodes only the rows its warp reads: a JPEG cut short below them is
    still truncated, in every epoch (NOTE [whole-stream check])."""
    rng = np.random.default_rng(5)
    small = rng.integers(0, 256, (30, 40, 3), dtype=np.uint8)
    good = encode(np.asarray(Image.fromarray(small).resize((160, 120))), quality=90)
    cut = good[: len(good) * 3 // 4]
    spec = CropSpec(24, 24, rand_crop=True)
    out = np.zeros((1, 24, 24, 3), np.uint8)
    for epoch in range(6):
        draw = KeyedDraw(spec, seed=1, epoch=epoch, geometry=GeometrySpec(max_rotate_angle=10))
        records = np.array([epoch], np.int64)
        assert pool.decode_batch([good], out, draw=draw, records=records)[0] == 0
        status = pool.decode_batch([cut], out, draw=draw, records=records)[0]
        assert status == decode.Status.TRUNCATED, (epoch, pool.last_errors())
