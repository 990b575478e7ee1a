"""JpegEncoder: the native pool's encoder API, on a pool of the native backend only."""

from __future__ import annotations

import numpy as np
import pytest

from recio import decode
from recio.im2rec import JpegEncoder

from ..images import encode


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
