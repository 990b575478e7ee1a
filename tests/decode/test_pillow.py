"""The Pillow path: PNG and the other formats libjpeg-turbo does not read."""

from __future__ import annotations

import io
import threading

import numpy as np
import pytest
from PIL import Image

from recio import decode
from recio.decode import _pillow

from ..images import encode
from .test_pool import assert_close, reference


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "P", "L"])
def test_png_goes_through_pillow(pool: decode.DecodePool, mode: str) -> None:
    buf = encode(120, 90, mode=mode, fmt="PNG")
    jpg = encode(120, 90)
    out = np.zeros((2, 40, 50, 3), np.uint8)
    status = pool.decode_batch([buf, jpg], out, crops=[(5, 5, 100, 80)] * 2, flips=[1, 0])
    assert status.tolist() == [0, 0]
    assert_close(out[0], reference(buf, (5, 5, 100, 80), True, (50, 40), "bilinear"), exact=True)


@pytest.mark.parametrize(
    ("mode", "fmt"),
    [("1", "PNG"), ("LA", "PNG"), ("I;16", "PNG"), ("PA", "TIFF"), ("I", "TIFF"), ("CMYK", "TIFF")],
)
def test_crop_before_the_rgb_conversion_gives_the_same_pixels(mode: str, fmt: str) -> None:
    """The Pillow path crops in the source mode, then converts (one whole-image RGB copy
    fewer): the same pixels as convert("RGB").crop(), which is pointwise for every mode."""
    buf = encode(120, 90, mode=mode, fmt=fmt)
    out = np.zeros((1, 40, 50, 3), np.uint8)
    with decode.DecodePool(1, backend="python") as p:
        assert p.decode_batch([buf], out, crops=[(5, 7, 100, 80)]).tolist() == [0]
    want = reference(buf, (5, 7, 100, 80), False, (50, 40), "bilinear")
    np.testing.assert_array_equal(out[0], want)


def test_decode_bytes_counts_the_decoded_image_and_its_copies() -> None:
    def opened(mode: str, fmt: str = "PNG", **kw: object) -> Image.Image:
        return Image.open(io.BytesIO(encode(400, 300, mode=mode, fmt=fmt, **kw)))

    whole, out = (0, 0, 400, 300), (40, 30)
    small = 40 * 30 * 15  # the array handed back, and its float lookup
    resize = 300 * 40 * 4 + 40 * 30 * 4  # the horizontal pass, then the vertical one
    assert _pillow.decode_bytes(opened("RGB"), whole, out) == 400 * 300 * 4 + resize + small
    # P: 1 byte a pixel, and its RGB conversion; a crop copies in the source mode first
    p = _pillow.decode_bytes(opened("P"), (0, 0, 200, 100), (200, 100))
    assert p == 400 * 300 + 200 * 100 * (1 + 4) + 200 * 100 * 15
    # a progressive JPEG: libjpeg's coefficients, two bytes a sample
    baseline = _pillow.decode_bytes(opened("RGB", "JPEG"), whole, out)
    progressive = _pillow.decode_bytes(opened("RGB", "JPEG", progressive=True), whole, out)
    assert progressive - baseline == 400 * 300 * 3 * 2


def test_python_byte_budget_waits_and_refuses() -> None:
    budget = _pillow.ByteBudget(100)
    assert not budget.reserve(101)
    assert budget.reserve(60) and budget.reserve(40)
    got = threading.Event()
    t = threading.Thread(target=lambda: budget.reserve(30) and got.set())
    t.start()
    assert not got.wait(0.2)  # 60 + 40 held: 30 more waits
    budget.release(40)
    assert got.wait(5)
    t.join()
    assert _pillow.ByteBudget(0).reserve(1 << 60)  # 0: no limit
