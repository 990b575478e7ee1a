"""recio's crop resample and store (``recio._native.resample_windows``: the code a crop decode
runs on its rows) against the numpy reference (resample_reference.py), bit for bit: every
filter, output widths below, at and past each vector width, odd and one-pixel windows,
windows that scale up and down, both flips, uint8 and float32 (table) NCHW stores and the
NHWC one; and each SIMD level giving the same bytes.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from recio import _native
from recio.decode import DecodePool
from recio.decode import pool as pool_module
from recio.decode.batch import DecodeJob
from recio.decode.options import DecodeOptions, lut, lut_line

from ..simd_levels import outputs_at_each_level
from . import resample_reference as ref

pytestmark = pytest.mark.needs_native

MEAN, STD = (123.68, 116.28, 103.53), (58.395, 57.12, 57.375)
# (image width, height, output width, height): odd and one-pixel images; outputs narrower
# and wider than 4 (the AVX2 horizontal step), 16 and 32 (the vector passes' steps)
SHAPES = [
    (1, 1, 1, 1),
    (1, 5, 3, 2),
    (5, 1, 2, 7),
    (7, 3, 33, 9),
    (31, 17, 16, 15),
    (64, 40, 31, 5),
    (97, 61, 35, 33),
    (259, 257, 224, 12),
    (130, 90, 224, 7),
    (601, 450, 17, 19),
]


def job_options(n: int, out: np.ndarray, **fields):
    """The native JobOptions a decode of n images into out with these options takes."""
    fields = {"layout": "NCHW", **fields}
    job = DecodeJob.build(n, out, None, None, None, None, DecodeOptions.of(None, fields))
    with DecodePool(1) as pool:
        return pool.job_options(job)


def resample_windows(images, boxes, flips, out: np.ndarray, **fields) -> None:
    """recio's resample of each image's box into out[i], as a crop decode stores it."""
    n = len(images)
    options = job_options(n, out, **fields)
    sizes = np.array([(im.shape[1], im.shape[0]) for im in images], np.int32)
    pool_module._native.resample_windows(
        [np.ascontiguousarray(im) for im in images],
        sizes,
        np.array(boxes, np.float64),
        np.array(flips, np.uint8),
        out,
        options,
    )


def cases(seed: int) -> list[tuple[np.ndarray, tuple, int, int]]:
    rng = np.random.default_rng(seed)
    out = []
    for w, h, ow, oh in SHAPES:
        pixels = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        out.append((pixels, ref.window_of(w, h, rng), ow, oh))
        out.append((pixels, (0.0, 0.0, float(w), float(h)), ow, oh))  # the whole image
    return out


@pytest.mark.parametrize("interp", ref.INTERPOLATIONS)
@pytest.mark.parametrize("store", ["u8 NCHW", "f32 NCHW", "u8 NHWC"])
def test_resample_matches_the_reference(interp: str, store: str) -> None:
    for i, (pixels, box, ow, oh) in enumerate(cases(seed=len(interp) + len(store))):
        flip = i % 2
        want = ref.resample(pixels, box, ow, oh, interp, bool(flip))
        if store == "u8 NHWC":
            out = np.zeros((1, oh, ow, 3), np.uint8)
            resample_windows([pixels], [box], [flip], out, interpolation=interp, layout="NHWC")
            np.testing.assert_array_equal(out[0], want, err_msg=f"{pixels.shape} {box} {ow}x{oh}")
            continue
        f32 = store.startswith("f32")
        out = np.zeros((1, 3, oh, ow), np.float32 if f32 else np.uint8)
        norm = {"mean": MEAN, "std": STD} if f32 else {}
        resample_windows([pixels], [box], [flip], out, interpolation=interp, **norm)
        table = lut(np.dtype(np.float32), MEAN, STD) if f32 else None
        np.testing.assert_array_equal(
            out[0], ref.store_nchw(want, table), err_msg=f"{pixels.shape} {box} {ow}x{oh}"
        )


def test_a_flipped_window_is_the_mirror_image() -> None:
    rng = np.random.default_rng(5)
    for w, h, ow, oh in SHAPES:
        pixels = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        box = ref.window_of(w, h, rng)
        for dtype, norm in ((np.uint8, {}), (np.float32, {"mean": MEAN, "std": STD})):
            out = np.zeros((2, 3, oh, ow), dtype)
            resample_windows([pixels, pixels], [box, box], [0, 1], out, **norm)
            np.testing.assert_array_equal(out[1], out[0][:, :, ::-1])


def test_a_bad_window_is_refused_naming_the_image() -> None:
    pixels = np.zeros((10, 10, 3), np.uint8)
    out = np.zeros((2, 3, 4, 4), np.uint8)
    for box in ((0, 0, 11, 10), (5, 5, 5, 8), (-1, 0, 4, 4), (0, 0, float("nan"), 4)):
        with pytest.raises(ValueError, match="image 1: bad resample parameters"):
            resample_windows([pixels, pixels], [(0, 0, 10, 10), box], [0, 0], out)
    with pytest.raises(ValueError, match="image 0: 299 bytes do not hold 10x10 RGB pixels"):
        pool_module._native.resample_windows(
            [bytes(299)],
            np.array([[10, 10]], np.int32),
            np.array([[0, 0, 10, 10]], np.float64),
            bytes(1),
            out,
            job_options(1, out),
        )


_DIGEST = """
import hashlib, sys
import numpy as np
sys.path.insert(0, ".")
from tests.decode.test_resample_window import MEAN, STD, cases, resample_windows
from recio.decode import pool
h = hashlib.sha256()
for interp in ("bilinear", "area", "nearest"):
    for pixels, box, ow, oh in cases(seed=7):
        for flip in (0, 1):
            for dtype, norm in ((np.uint8, {}), (np.float32, {"mean": MEAN, "std": STD})):
                out = np.zeros((1, 3, oh, ow), dtype)
                resample_windows([pixels], [box], [flip], out, interpolation=interp, **norm)
                h.update(out.tobytes())
print(pool._native.SIMD, h.hexdigest())
"""


def test_each_simd_level_gives_the_same_bytes() -> None:
    """The AVX2 passes and stores against the SSE2 ones (RECIO_SIMD=sse2), which the
    reference test checks only on this CPU's own level."""

    default, sse2 = outputs_at_each_level(_DIGEST)
    assert default[1] == sse2[1]
    assert hashlib.sha256().hexdigest() not in (default[1], sse2[1])


# (mean, std, scale): ImageNet's; levels at exactly the mean (a zero); 0..1; a negative
# scale, whose zero is -0.0 in the table but +0.0 on its line (so it is looked up)
NORMS = [
    (MEAN, STD, 1.0),
    ((128.0, 0.0, 255.0), (1.0, 3.0, 0.7), 1.0),
    ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0), 1 / 255),
    ((128.0, 64.0, 7.5), (2.0, 64.0, 0.3), -1.0),
]


@pytest.mark.parametrize(("mean", "std", "scale"), NORMS)
@pytest.mark.parametrize("order", ["RGB", "BGR"])
def test_the_float_store_gives_the_tables_bits(mean, std, scale, order: str) -> None:
    """The float32 NCHW store computes each level on its channel's line where that gives the
    table's bits (NOTE [float store]): the output is the table's, bit for bit, -0.0 included."""
    rng = np.random.default_rng(11)
    pixels = rng.integers(0, 256, (40, 300, 3), dtype=np.uint8)
    pixels[0, :256, 0] = pixels[1, :256, 1] = pixels[2, :256, 2] = np.arange(256)  # every level
    box, ow, oh = (0.0, 0.0, 300.0, 40.0), 300, 40  # identity: each level stored as it is
    out = np.zeros((1, 3, oh, ow), np.float32)
    resample_windows(
        [pixels], [box], [0], out, mean=mean, std=std, scale=scale, channel_order=order
    )
    rgb = pixels[:, :, ::-1] if order == "BGR" else pixels
    table = lut(np.dtype(np.float32), mean, std, scale)
    want = ref.store_nchw(ref.resample(rgb, box, ow, oh, "bilinear", False), table)
    assert out.view(np.uint32).tobytes() == want.view(np.uint32).tobytes()


def test_a_line_that_misses_the_table_is_not_used() -> None:
    """A lut_line that does not give the table's values is ignored: the table is looked up."""
    table = lut(np.dtype(np.float32), MEAN, STD)
    rng = np.random.default_rng(3)
    pixels = rng.integers(0, 256, (20, 70, 3), dtype=np.uint8)
    outs = []
    for line in (lut_line(MEAN, STD), lut_line(MEAN, STD) * 1.001, None):
        out = np.zeros((1, 3, 20, 70), np.float32)
        options = _native.JobOptions(
            out_h=20, out_w=70, layout=1, itemsize=4, interp=0, bgr=0, dct_mode=1, roi=1,
            max_pixels=1 << 27, lut=table, lut_line=line,
        )  # fmt: skip
        _native.resample_windows(
            [pixels],
            np.array([[70, 20]], np.int32),
            np.array([[0.5, 0.25, 69.5, 19.0]]),
            np.zeros(1, np.uint8),
            out,
            options,
        )
        outs.append(out)
    want = ref.store_nchw(
        ref.resample(pixels, (0.5, 0.25, 69.5, 19.0), 70, 20, "bilinear", 0), table
    )
    for out in outs:
        assert out.tobytes() == want.tobytes()
