"""JpegEncoder: the native pool's encoder API, on a pool of the native backend only.

JPEG → JPEG in C (im2rec's re-encoding): planes for YCbCr/grey sources, RGB for the rest;
RGB pixels decoded elsewhere → JPEG. Every C transcode is compared with Pillow doing the
same crop and resize on the decoded source; the two differ by JPEG re-encoding and by
resampling in YCbCr (chroma at half size).
"""

from __future__ import annotations

import hashlib
import io
import re

import numpy as np
import pytest
from PIL import Image

from recio import decode
from recio.im2rec import JpegEncoder
from recio.im2rec.transcode import crop_box, output_size

from ..images import encode
from ..simd_levels import outputs_at_each_level
from .conftest import psnr, reference

native_only = pytest.mark.needs_native


def test_the_encoder_needs_a_native_pool() -> None:
    with (
        decode.DecodePool(1, backend="python") as pool,
        pytest.raises(RuntimeError, match="native backend"),
    ):
        JpegEncoder(pool)


@pytest.mark.needs_native
def test_the_encoder_reports_through_its_pool_and_closes_with_it() -> None:
    """Its errors are the pool's last_errors (this thread's); a closed pool refuses it."""
    pool = decode.DecodePool(1, backend="native")
    encoder = JpegEncoder(pool)
    status, out = encoder.transcode_jpeg([encode(40, 30), b"not a jpeg"], np.full((2, 2), 20))
    assert status.tolist() == [0, decode.STATUS_UNSUPPORTED]
    assert out[0][:2] == b"\xff\xd8" and out[1] is None
    errors = encoder.last_errors()
    assert errors == pool.last_errors() and errors[0] is None and errors[1]
    pool.close()
    with pytest.raises(ValueError, match="closed"):
        encoder.resize_encode(np.zeros((8, 8, 3), np.uint8), (4, 4))


def transcode(encoder, data: bytes, size, crop=None, *, gray=False, quality=95):
    status, out = encoder.transcode_jpeg(
        [data],
        np.array([size], np.int32),
        crops=None if crop is None else np.array([crop], np.int32),
        quality=quality,
        gray=gray,
    )
    assert status[0] == 0, encoder.last_errors()
    return Image.open(io.BytesIO(out[0]))


# Sources libjpeg stores in different ways: chroma subsampling, grey, CMYK, progressive.
SOURCES = {
    "420": dict(subsampling=2),
    "422": dict(subsampling=1),
    "444": dict(subsampling=0),
    "progressive": dict(subsampling=2, progressive=True),
    "grey": dict(mode="L"),
    "cmyk": dict(mode="CMYK"),
}


@pytest.mark.parametrize("kind", list(SOURCES))
@pytest.mark.parametrize(
    "src_size, out_size",
    [
        ((413, 545), (256, 337)),  # im2rec --resize 256 on a typical photo
        ((97, 61), (97, 61)),  # odd sizes, no resize: planes copied, chroma odd
        ((50, 33), (151, 99)),  # upscaling
        ((1200, 900), (160, 120)),  # a DCT-scaled decode (1/4) then resampled
    ],
)
def test_matches_pillow_resize(encoder, kind, src_size, out_size):
    args = dict(SOURCES[kind])
    mode = args.pop("mode", "RGB")
    data = encode(*src_size, mode=mode, quality=95, **args)
    im = transcode(encoder, data, out_size)
    assert im.size == out_size
    assert im.mode == "RGB"
    assert im.info.get("progressive", 0) == 0  # baseline output, as OpenCV writes
    ref = reference(data, out_size, (0, 0, *src_size), "RGB")
    assert psnr(np.asarray(im), ref) > 30


@pytest.mark.parametrize("kind", ["420", "grey", "cmyk"])
def test_grey_output(encoder, kind):
    args = dict(SOURCES[kind])
    mode = args.pop("mode", "RGB")
    data = encode(300, 200, mode=mode, quality=95, **args)
    im = transcode(encoder, data, (150, 100), gray=True)
    assert im.mode == "L" and im.size == (150, 100)
    assert psnr(np.asarray(im), reference(data, (150, 100), (0, 0, 300, 200), "L")) > 30


@pytest.mark.parametrize("kind", ["420", "cmyk"])
def test_center_crop(encoder, kind):
    args = dict(SOURCES[kind])
    mode = args.pop("mode", "RGB")
    data = encode(400, 240, mode=mode, quality=95, **args)
    box = crop_box(400, 240, center_crop=True)
    size = output_size(box[2] - box[0], box[3] - box[1], 128)
    crop = (box[0], box[1], box[2] - box[0], box[3] - box[1])
    im = transcode(encoder, data, size, crop)
    assert im.size == (128, 128)
    assert psnr(np.asarray(im), reference(data, size, box, "RGB")) > 30


def test_output_is_420_at_the_quality_asked(encoder):
    data = encode(256, 256, subsampling=0, quality=95)
    small = transcode(encoder, data, (256, 256), quality=30)
    large = transcode(encoder, data, (256, 256), quality=98)
    assert small.layer[0][1:3] == (2, 2) and small.layer[1][1:3] == (1, 1)  # 4:2:0
    assert len(small.fp.getvalue()) < len(large.fp.getvalue())


def test_same_bytes_every_time_and_in_any_batch(encoder):
    """NOTE [output order]: each record depends only on its image (im2rec's reproducibility)."""
    datas = [encode(200 + 7 * i, 150 + 3 * i, seed=i, subsampling=i % 3) for i in range(6)]
    sizes = np.array([output_size(200 + 7 * i, 150 + 3 * i, 96) for i in range(6)], np.int32)
    alone = [encoder.transcode_jpeg([d], s[None])[1][0] for d, s in zip(datas, sizes, strict=True)]
    with decode.DecodePool(3, backend="native") as threaded:
        for _ in range(3):
            status, together = JpegEncoder(threaded).transcode_jpeg(datas, sizes)
            assert not status.any()
            assert together == alone


def _smooth(width: int, height: int, mode: str, **save) -> bytes:
    """A JPEG of slow gradients: a resize off by a column or a garbage edge shows."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float64)
    g = 40 + 170 * (xx / max(width - 1, 1)) * 0.6 + 170 * (yy / max(height - 1, 1)) * 0.4
    rgb = np.stack([g, 255 - g, 128 + 60 * np.sin(xx / 9 + yy / 13)], -1).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(rgb).convert(mode).save(buf, "JPEG", quality=98, **save)
    return buf.getvalue()


_PLANE_CASES = [
    ((413, 545), (256, 337)),  # the common im2rec downscale
    ((61, 35), (1, 1)),  # one pixel
    ((61, 35), (2, 3)),  # fewer rows and columns than a 16x16 transpose tile
    ((97, 61), (33, 61)),  # rows copied (vertical identity), columns resampled
    ((97, 61), (97, 17)),  # columns copied, rows resampled
    ((300, 20), (255, 17)),  # a strip: window wider than its transposed height
    ((20, 300), (17, 255)),
    ((40, 31), (131, 97)),  # upscaling, odd on both axes
]


# Colour only where the output is some pixels across: a 4:2:0 chroma sample of a 1x1 or
# 2x3 output stands for a 2x2 luma block the image does not have (differences of 20-50).
@pytest.mark.parametrize(
    "kind, src, size",
    [("grey", *c) for c in _PLANE_CASES]
    + [(k, *c) for k in ("420", "444") for c in _PLANE_CASES if min(c[1]) >= 16],
)
def test_plane_resample_is_right_up_to_every_edge(encoder, kind, src, size):
    """The planes are resampled column-wise as passes over transposed rows, padded to
    whole 16-byte tiles; every output row and column, the last ones too, matches Pillow's
    resize of the decoded source."""
    mode = "L" if kind == "grey" else "RGB"
    save = {} if kind == "grey" else {"subsampling": {"420": 2, "444": 0}[kind]}
    data = _smooth(*src, mode, **save)
    im = transcode(encoder, data, size, gray=kind == "grey", quality=98)
    assert im.size == size
    got = np.asarray(im).astype(np.int16)
    ref = reference(data, size, (0, 0, *src), mode).astype(np.int16)
    diff = np.abs(got - ref).reshape(size[1], size[0], -1).max(axis=2)
    # Luma alone differs by JPEG's rounding; colour also by chroma resampled at half size.
    bound = 4 if kind == "grey" else 14
    assert diff[:, -1].max() <= bound and diff[-1, :].max() <= bound, (diff[:, -1], diff[-1])
    assert diff[:, 0].max() <= bound and diff[0, :].max() <= bound
    assert diff.max() <= bound


def _photo(width: int, height: int, seed: int) -> np.ndarray:
    """RGB pixels with detail (a 1-pixel shift in a resize shows)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width]
    base = np.stack([xx * 255 // width, yy * 255 // height, (xx * yy) % 251], -1)
    return np.clip(base + rng.integers(0, 40, (height, width, 3)), 0, 255).astype(np.uint8)


@pytest.mark.parametrize(
    "src, crop, size",
    [
        ((469, 392), None, (256, 214)),  # im2rec --resize 256 on a PNG
        ((300, 200), (50, 0, 200, 200), (128, 128)),  # --center-crop: a box inside
        ((97, 61), None, (97, 61)),  # no resize: copied
        ((50, 33), (3, 4, 40, 25), (151, 99)),  # upscaling a box
    ],
)
def test_resize_encode_resizes_as_pillow_does(encoder, src, crop, size):
    """Pixels decoded elsewhere (PNG): the resize matches Pillow's resize(box=). Both sides
    go through the same encoder (ours, quality 100, at the output size), so what differs is
    the resize alone: one level here and there (14-bit weights against Pillow's 22), which
    the JPEG step spreads a little; a box one pixel off would differ by ~1.7 on average."""
    pixels = _photo(*src, seed=src[0])
    box = (0, 0, *src) if crop is None else (crop[0], crop[1], crop[0] + crop[2], crop[1] + crop[3])
    got = encoder.resize_encode(pixels, size, crop=crop, quality=100)
    pillow = np.asarray(Image.fromarray(pixels).resize(size, Image.Resampling.BILINEAR, box=box))
    want = encoder.resize_encode(pillow, size, quality=100)
    a = np.asarray(Image.open(io.BytesIO(got))).astype(int)
    b = np.asarray(Image.open(io.BytesIO(want))).astype(int)
    assert a.shape == (size[1], size[0], 3)
    diff = np.abs(a - b)
    assert diff.mean() < 0.8 and diff.max() <= 8, (diff.mean(), diff.max())  # 1 px off: ~1.7, 28


def test_resize_encode_refuses_bad_input(encoder):
    pixels = _photo(40, 30, seed=1)
    big = 2**31 - 1
    for crop in [(-1, 0, 10, 10), (35, 0, 10, 10), (0, 0, 0, 10), (1, 0, big, 10), (0, 1, 10, big)]:
        with pytest.raises(ValueError, match="bad resize parameters"):
            encoder.resize_encode(pixels, (20, 15), crop=crop)
    with pytest.raises(ValueError, match="not a valid output size"):
        encoder.resize_encode(pixels, (0, 15))
    with pytest.raises(ValueError, match="shape"):
        encoder.resize_encode(pixels[..., 0], (20, 15))


_DIGEST_OF_TRANSCODES = """
import hashlib, numpy as np
from recio import decode
from recio.im2rec.encoder import JpegEncoder
from tests.images import encode
h = hashlib.sha256()
with decode.DecodePool(1, backend="native") as p:
    encoder = JpegEncoder(p)
    # source widths for kernels of 2 (upscale), 4 and 6 taps, and wider (8+) ones
    for w in (90, 137, 300, 341, 397, 509, 700, 1100):
        data = encode(w, 3 * w // 4, seed=w)
        for gray in (False, True):
            st, out = encoder.transcode_jpeg([data], np.array([[256, 192]], np.int32), gray=gray)
            assert st[0] == 0, p.last_errors()
            h.update(out[0])
        rgb = np.zeros((1, 150, 200, 3), np.uint8)  # the iterator's path: interleaved rows
        assert p.decode_batch([data], rgb, crops=[[3, 5, w - 9, w // 2]]).tolist() == [0]
        h.update(rgb.tobytes())
        h.update(encoder.resize_encode(rgb[0], (77, 61), crop=(2, 3, 190, 140)))  # im2rec's PNGs
print(decode.pool._native.SIMD, h.hexdigest())
"""


@native_only
def test_avx2_and_sse2_passes_give_the_same_bytes():
    """The vertical pass (which a plane's horizontal pass also runs, over its transposed
    rows) has an AVX2 version picked at run time; with RECIO_SIMD=sse2 the SSE2 one runs.
    Same images, same bytes, at every kernel width, for transcodes (planes) and decodes
    (interleaved RGB rows)."""

    default, sse2 = outputs_at_each_level(_DIGEST_OF_TRANSCODES)
    assert len(default[1]) == len(hashlib.sha256().hexdigest())
    assert default[1] == sse2[1]


def test_bad_inputs_get_a_status_not_a_crash(encoder):
    good = encode(120, 80)
    cases = {
        "empty": (b"", decode.STATUS_EMPTY),
        "png": (encode(32, 32, fmt="PNG"), decode.STATUS_UNSUPPORTED),
        "garbage": (b"\xff\xd8\xff" + bytes(range(256)) * 4, decode.STATUS_CORRUPT),
        "truncated": (good[: len(good) // 2], decode.STATUS_TRUNCATED),
    }
    datas = [d for d, _ in cases.values()] + [good]
    status, out = encoder.transcode_jpeg(datas, np.full((len(datas), 2), 40, np.int32))
    assert list(status) == [st for _, st in cases.values()] + [0]
    assert out[:-1] == [None] * len(cases) and out[-1][:2] == b"\xff\xd8"
    errors = encoder.last_errors()
    assert all(errors[:-1]) and errors[-1] is None
    with pytest.raises(ValueError, match="shape"):
        encoder.transcode_jpeg([good], np.zeros((2, 2), np.int32))
    # a bad output size is that image's error; the rest of the batch is transcoded
    status, out = encoder.transcode_jpeg([good, good], np.array([[0, 5], [30, 20]], np.int32))
    assert list(status) == [decode.STATUS_BAD_PARAM, 0] and out[1][:2] == b"\xff\xd8"
    assert "valid output size" in encoder.last_errors()[0]


def test_sizes_and_crops_beyond_int32_are_refused_not_wrapped(encoder):
    """An output size or window int32 cannot hold is an error naming it (2**32 + 64 wrapped to
    64: a valid size, silently)."""
    good = encode(120, 80)
    with pytest.raises(ValueError, match=re.escape("sizes[1, 0] = 4294967360")):
        encoder.transcode_jpeg([good, good], np.array([[40, 40], [2**32 + 64, 40]], np.int64))
    with pytest.raises(ValueError, match=re.escape("crops[0, 3] = -4294967216")):
        encoder.transcode_jpeg(
            [good], np.array([[40, 40]]), crops=np.array([[0, 0, 80, 80 - 2**32]], np.int64)
        )
    status, out = encoder.transcode_jpeg([good], np.array([[40, 30]], np.int64))
    assert status.tolist() == [0] and Image.open(io.BytesIO(out[0])).size == (40, 30)


def test_too_large_is_refused(encoder):
    with decode.DecodePool(1, backend="native", max_pixels=100) as small:
        status, _ = JpegEncoder(small).transcode_jpeg(
            [encode(20, 20)], np.array([[10, 10]], np.int32)
        )
    assert status[0] == decode.STATUS_TOO_LARGE
