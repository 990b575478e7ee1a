"""recio's Huffman decoder (NOTE [entropy decode] in native/entropy.h).

It must hand libjpeg the coefficients libjpeg's own decoder would, so every image decodes to
the same pixels and status with it (the default) as with libjpeg's (RECIO_STOCK_ENTROPY=1):
clean files with and without restart markers across samplings, intervals, crops and DCT
scales, and damaged ones, where it stops and libjpeg decodes the image again.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from recio import _native, decode
from recio.augment import CropSpec, GeometrySpec, KeyedDraw
from recio.im2rec import JpegEncoder

from ..conftest import require_native
from .crafted_jpeg import (
    huffman_lengths,
    random_blocks,
    staircase,
    symbol_counts,
    table_from_lengths,
    write_jpeg,
)
from .test_restart_cut import IMAGES, crops, jpeg


def make_pool(monkeypatch, stock: bool, **kw) -> decode.DecodePool:
    """A one-thread pool whose worker reads RECIO_STOCK_ENTROPY as it starts."""
    require_native()
    with monkeypatch.context() as m:
        m.setenv("RECIO_STOCK_ENTROPY", "1" if stock else "0")
        return decode.DecodePool(1, backend="native", **kw)


@pytest.fixture(params=["off", "all"])
def pools(request, monkeypatch):
    own = make_pool(monkeypatch, False, dct_scaling=request.param)
    stock = make_pool(monkeypatch, True, dct_scaling=request.param)
    with own, stock:
        yield own, stock


def marked(sources: list[bytes], restart) -> list[bytes]:
    with decode.DecodePool(1, backend="native") as pool:
        status, out = JpegEncoder(pool).optimize_jpeg(sources, restart=restart)
    assert not status.any()
    return out


def both(pools, images, size, **kw) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    own, stock = pools
    got = np.full((len(images), size[1], size[0], 3), 7, np.uint8)
    want = np.zeros_like(got)
    return own.decode_batch(images, got, **kw), got, stock.decode_batch(images, want, **kw), want


def both_clean(pools, images, size, **kw) -> tuple[np.ndarray, np.ndarray]:
    """both() on images that must decode without fault, each on recio's decoder to its end:
    none decoded again with libjpeg's Huffman decoder (_native.second_decodes), which the
    pixels would not show."""
    before = _native.second_decodes()
    s1, got, s2, want = both(pools, images, size, **kw)
    assert not s1.any() and not s2.any()
    assert _native.second_decodes() == before, "a valid image left recio's decoder"
    return got, want


def test_it_takes_one_scan_baseline_files_only() -> None:
    require_native()
    source = jpeg(131, 97, "RGB", seed=1, subsampling=2)
    (plain,) = marked([source], 0)
    (one,) = marked([source], 1)
    progressive = jpeg(131, 97, "RGB", seed=1, progressive=True)
    assert _native.own_entropy(one)
    assert _native.own_entropy(plain)
    assert _native.own_entropy(source)
    assert not _native.own_entropy(progressive)
    assert not _native.own_entropy(source[:-2])  # no EOI: libjpeg says what is missing
    assert not _native.own_entropy(one[: len(one) * 2 // 3])  # cut short: libjpeg says so
    assert not _native.own_entropy(one.replace(b"\xff\xd3", b"\xff\xd5", 1))  # out of order
    assert not _native.own_entropy(b"not a jpeg")


@pytest.mark.parametrize("name", sorted(set(IMAGES) - {"progressive"}))
def test_clean_files_decode_as_libjpeg_does(pools, name) -> None:
    w, h, mode, save, mcu = IMAGES[name]
    source = jpeg(w, h, mode, seed=11, **save)
    boxes = crops(w, h)
    for restart in (0, 1, 2, 3, "row"):
        (image,) = marked([source], restart) if restart else (source,)
        assert _native.own_entropy(image)
        for size in ((24, 24), (4, 3), (w, h)):  # (4, 3): DC only at 1/8 where scaling is on
            for flip in (0, 1):
                flips = np.full(len(boxes), flip, np.uint8)
                got, want = both_clean(pools, [image] * len(boxes), size, crops=boxes, flips=flips)
                assert np.array_equal(got, want), (restart, size, flip)


def test_drawn_crops_and_the_whole_image_match(pools) -> None:
    sources = [jpeg(160 + 9 * i, 120 - 4 * i, "RGB", seed=i, subsampling=2) for i in range(10)]
    images = marked(sources, 1)
    records = np.arange(len(images), dtype=np.int64)
    for size, spec in (
        (32, CropSpec(32, 32, random_resized_crop=True, rand_mirror=True)),
        (48, CropSpec(48, 48, resize=56)),
    ):
        draw = KeyedDraw(spec, 3, 0)
        got, want = both_clean(pools, images, (size, size), draw=draw, records=records)
        assert np.array_equal(got, want)


def mutations(image: bytes, count: int, seed: int) -> list[bytes]:
    """The marked image with bytes of its entropy-coded data changed: bits flipped, a byte
    set to 0xFF (a stray marker or a stuffed byte), a run of bytes cut out or doubled."""
    rng = np.random.default_rng(seed)
    sos = image.index(b"\xff\xda")
    start = sos + 2 + int.from_bytes(image[sos + 2 : sos + 4], "big")
    end = len(image) - 2
    out = []
    for _ in range(count):
        data = bytearray(image)
        at = int(rng.integers(start, end))
        kind = int(rng.integers(4))
        if kind == 0:
            data[at] ^= 1 << int(rng.integers(8))
        elif kind == 1:
            data[at] = 0xFF
        elif kind == 2:
            del data[at : at + int(rng.integers(1, 6))]
        else:
            data[at:at] = data[at : at + int(rng.integers(1, 6))]
        out.append(bytes(data))
    return out


def compare_damaged(pools, name: str, restart, count: int, seed: int) -> np.ndarray:
    """Statuses of `count` damaged copies' whole-image decodes, after checking that both
    decoders give every copy the same status, and the same pixels where it decodes."""
    w, h, mode, save, _ = IMAGES[name]
    source = jpeg(w, h, mode, seed=5, **save)
    (image,) = marked([source], restart) if restart else (source,)
    damaged = mutations(image, count, seed=seed)
    whole, before = None, _native.second_decodes()
    for box in crops(w, h)[[0, 1, 4, 9]]:  # the whole image, two corners, the interior
        batch = np.repeat(box[None], len(damaged), 0)
        s1, got, s2, want = both(pools, damaged, (24, 24), crops=batch)
        assert np.array_equal(s1, s2), (restart, box.tolist())
        ok = s1 == 0
        assert np.array_equal(got[ok], want[ok]), (restart, box.tolist())
        whole = s1 if whole is None else whole
    if restart:  # some of what fails is framed as it should be: recio's decoder met it
        taken = np.array([_native.own_entropy(d) for d in damaged])
        assert (taken & (whole != 0)).any() and (taken & (whole == 0)).any()
        assert _native.second_decodes() > before  # and libjpeg's decoded those again
    return whole


@pytest.mark.parametrize("name", ["420", "422", "444", "grey"])
@pytest.mark.parametrize("restart", [0, 1, "row"])
def test_damaged_files_decode_and_fail_as_libjpeg_does(pools, name, restart) -> None:
    """Where the data is damaged recio's decoder stops and libjpeg's decodes the image again:
    the same status, the same pixels (libjpeg's grey or smeared blocks included)."""
    whole = compare_damaged(pools, name, restart, 100, seed=len(name))
    assert (whole != 0).any() and (whole == 0).any()  # the damage both fails and passes


@pytest.mark.slow
@pytest.mark.parametrize("name", ["420", "422", "444", "grey", "cmyk"])
def test_many_damaged_files_decode_as_libjpeg_does(pools, name) -> None:
    for restart in (0, 1, 2, "row"):
        for seed in range(10):
            compare_damaged(pools, name, restart, 200, seed=100 + seed)


@pytest.mark.parametrize("restart", [0, 1])
def test_data_cut_short_before_the_eoi_is_truncation_as_before(pools, restart) -> None:
    """A partial download padded with an EOI. Without markers it is framed well, so recio's
    decoder takes it, runs past the data's end and stops; with markers segments are missing,
    so libjpeg's takes it from the start. Either way the image is reported incomplete."""
    (image,) = marked([jpeg(131, 97, "RGB", seed=4, subsampling=2)], restart)
    short = image[: len(image) * 3 // 4] + b"\xff\xd9"
    assert _native.own_entropy(short) == (not restart)
    box = np.array([[0, 0, 131, 97]], np.int32)
    s1, got, s2, want = both(pools, [short], (24, 24), crops=box)
    assert s1[0] == s2[0] == decode.Status.TRUNCATED
    assert np.array_equal(got, want)


def encoded(w: int, h: int, seed: int, smooth: bool, **save) -> bytes:
    """Pixel noise, or noise scaled up 4x (smooth, photo-like). At quality 100 most of
    the noise's blocks code their 63rd coefficient: a block's last symbol is a value, not
    the end of the block."""
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (h // 4 + 2, w // 4 + 2, 3) if smooth else (h, w, 3), np.uint8)
    image = Image.fromarray(pixels)
    if smooth:
        image = image.resize((w, h), Image.Resampling.BICUBIC)
    out = io.BytesIO()
    image.save(out, "JPEG", **save)
    return out.getvalue()


def test_tables_and_block_ends_of_every_kind_decode_as_libjpeg_does(pools) -> None:
    """One worker, image after image: the standard tables and each image's own (Pillow's
    optimize), short codes and long ones (qualities 30 to 100), blocks that end at their
    63rd coefficient (noise) and at an end of block, with and without markers. The decoder
    keeps an image's tables for the next that has the same ones, and reads two symbols a
    lookup where both are short: every image must still decode as libjpeg decodes it."""
    sources = [
        encoded(48 + 8 * i, 40 + 4 * i, i, smooth, quality=quality, optimize=optimize)
        for i, quality in enumerate((30, 75, 95, 100))
        for optimize in (False, True)
        for smooth in (False, True)
    ]
    sources += marked(sources, 1) + marked(sources, "row")
    assert all(_native.own_entropy(s) for s in sources)
    boxes = np.array([[0, 0, 48, 40]] * len(sources), np.int32)
    for size in ((48, 40), (6, 5)):
        got, want = both_clean(pools, sources, size, crops=boxes)
        assert np.array_equal(got, want), size


@pytest.mark.parametrize("name", ["420", "422", "444", "grey"])
def test_crops_at_every_column_decode_as_libjpeg_does(pools, name) -> None:
    """The decoder stores no coefficient of an MCU column libjpeg leaves out of its IDCT
    (jpeg_crop_scanline's columns): crops whose left and right edges fall on every pixel
    column of a few MCUs, narrow and wide, at each DCT scale, must still give libjpeg's
    pixels, the first decode (the whole stream read) and the later ones alike."""
    w, h, mode, save, mcu = IMAGES[name]
    source = jpeg(w, h, mode, seed=23, **save)
    for restart in (0, 1):
        (image,) = marked([source], restart) if restart else (source,)
        boxes = np.array(
            [(x, h // 4, cw, h // 2) for x in range(0, 3 * mcu + 1) for cw in (1, mcu + 3)]
            + [(w - x - cw, 0, cw, h) for x in range(0, 2 * mcu + 1) for cw in (2, 2 * mcu)],
            np.int32,
        )
        for size in ((24, 24), (4, 3)):
            for _ in range(2):  # (the first decode reads the whole stream, the second not)
                got, want = both_clean(pools, [image] * len(boxes), size, crops=boxes)
                assert np.array_equal(got, want), (restart, size)


@pytest.mark.parametrize("name", ["420", "422", "444", "grey"])
def test_warped_crops_decode_as_libjpeg_does(pools, name) -> None:
    """The geometry's way (decode_warped) decodes only the iMCU columns its warp reads, and the
    entropy decoder stores no others: small square crops, rotated and sheared, drawn all over
    the image, must give libjpeg's pixels, the first decode and the later ones alike."""
    w, h, mode, save, _ = IMAGES[name]
    source = jpeg(w, h, mode, seed=29, **save)
    geometry = GeometrySpec(max_rotate_angle=20, max_shear_ratio=0.1, min_crop_size=12,
                            max_crop_size=20)  # fmt: skip
    spec = CropSpec(16, 16, rand_crop=True, rand_mirror=True)
    records = np.arange(24, dtype=np.int64)
    for restart in (0, 1):
        (image,) = marked([source], restart) if restart else (source,)
        for epoch in range(3):  # (the first decode reads the whole stream, the later ones not)
            draw = KeyedDraw(spec, seed=3, epoch=epoch, geometry=geometry)
            got, want = both_clean(
                pools, [image] * len(records), (16, 16), draw=draw, records=records
            )
            assert np.array_equal(got, want), (restart, epoch)


@pytest.mark.parametrize("keep", [0, 1, 3])
def test_a_segment_cut_short_inside_an_mcu_fails_as_libjpeg_does(pools, keep) -> None:
    """A marker every MCU, the last segment cut to `keep` bytes, its framing intact: recio's
    decoder takes the scan, reads past the segment's end within the MCU (it checks once an
    MCU, the copy's padding covering the rest of the MCU's reads) and stops; libjpeg's decodes
    the image again. The same status and pixels as libjpeg's own decoder gives."""
    (image,) = marked([jpeg(131, 97, "RGB", seed=8, subsampling=2)], 1)
    last = max(image.rfind(bytes([0xFF, 0xD0 + n])) for n in range(8))
    short = image[: last + 2 + keep] + b"\xff\xd9"
    assert _native.own_entropy(short)
    box = np.array([[0, 0, 131, 97]], np.int32)
    s1, got, s2, want = both(pools, [short], (24, 24), crops=box)
    assert s1[0] == s2[0] != 0
    assert np.array_equal(got, want)


def crafted(tables: str, restart: int, seed: int) -> bytes:
    """A greyscale JPEG of random_blocks coded with Huffman's tables for its symbols
    (`huffman`: short codes, pairs, parts) or with long ones (`long`: DC codes of 2 to 16
    bits, the most frequent AC symbols 2 to 15 bits and the rest 16)."""
    blocks = random_blocks(12, 20, seed)
    dcs, acs = symbol_counts(blocks)
    if tables == "huffman":
        dc, ac = huffman_lengths(dcs), huffman_lengths(acs)
    else:
        sizes = [s for s, _ in dcs.most_common()]
        dc = dict(zip(sizes, [16, 14, 12, 10, 9, 8, 7, 6, 5, 4, 3, 2], strict=False))
        ac = staircase([s for s, _ in acs.most_common()])
    return write_jpeg(blocks, table_from_lengths(dc), table_from_lengths(ac), restart)


@pytest.mark.parametrize("restart", [0, 7])
@pytest.mark.parametrize("tables", ["huffman", "long"])
def test_crafted_codes_of_every_length_decode_as_libjpeg_does(pools, tables, restart) -> None:
    """Codes written directly (crafted_jpeg): DC differences of every size, DC and AC codes
    of up to 16 bits (past the DC table's 9 bits and the fast table's 10), runs of sixteen
    zeros, blocks that end at their 63rd coefficient without an end of block, segments of 7
    blocks. Whole and cropped (columns and rows read past), first and later decodes, the
    same image after image (the tables kept): libjpeg's pixels every time."""
    images = [crafted(tables, restart, seed) for seed in range(4)]
    assert all(_native.own_entropy(i) for i in images)
    boxes = np.array([[0, 0, 160, 96], [37, 41, 50, 30], [120, 8, 40, 88], [0, 90, 9, 6]])
    for box in boxes:
        for _ in range(2):  # (the first decode reads the whole stream, the second not)
            batch = np.repeat(box[None], len(images), 0).astype(np.int32)
            got, want = both_clean(pools, images, (32, 24), crops=batch)
            assert np.array_equal(got, want), (tables, restart, box.tolist())


@pytest.mark.parametrize("tables", ["huffman", "long"])
def test_damaged_crafted_codes_fail_as_libjpeg_does(pools, tables) -> None:
    """Damage inside long codes and unused code space (the long tables leave most of it
    unused: a code no table has): the same status and pixels as libjpeg's decoder."""
    image = crafted(tables, 0, seed=9)
    damaged = mutations(image, 150, seed=3)
    for box in ([0, 0, 160, 96], [60, 40, 40, 20]):
        batch = np.repeat(np.array([box], np.int32), len(damaged), 0)
        s1, got, s2, want = both(pools, damaged, (32, 24), crops=batch)
        assert np.array_equal(s1, s2), box
        assert np.array_equal(got[s1 == 0], want[s1 == 0]), box
        assert (s1 != 0).any()
