"""The Pillow path: PNG and the other formats libjpeg-turbo does not read."""

from __future__ import annotations

import numpy as np
import pytest

from recio import decode

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
