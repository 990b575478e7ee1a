"""DecodeOptions: one frozen value for a decode's interpolation, normalisation and layout,
the same decode as the keywords it replaces."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from recio.decode import DecodeOptions, DecodePool
from recio.decode.options import lut

from ..images import encode


def test_options_are_frozen_and_keep_mean_and_std_as_float_tuples() -> None:
    options = DecodeOptions(mean=np.array([1, 2, 3]), std=[4, 5, 6], scale=2)
    assert options.mean == (1.0, 2.0, 3.0) and options.std == (4.0, 5.0, 6.0)
    assert options.scale == 2.0 and type(options.scale) is float
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.layout = "NCHW"  # type: ignore[misc]
    # tuples: the lookup table of every batch is the cached one
    assert lut(np.dtype(np.float32), options.mean, options.std) is lut(
        np.dtype(np.float32), DecodeOptions(mean=[1, 2, 3]).mean, (4.0, 5.0, 6.0)
    )


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"layout": "HWC"}, "layout must be"),
        ({"channel_order": "GBR"}, "channel_order must be"),
        ({"interpolation": "cubic"}, "interpolation must be one of"),
        ({"scale": 0}, "scale must be finite and non-zero"),
        ({"scale": float("inf")}, "scale must be finite and non-zero"),
    ],
)
def test_bad_options_are_refused_when_made(fields, error) -> None:
    with pytest.raises(ValueError, match=error):
        DecodeOptions(**fields)


def test_of_puts_keywords_into_options() -> None:
    base = DecodeOptions(layout="NCHW", mean=(1, 2, 3))
    assert DecodeOptions.of(base, {}) is base
    merged = DecodeOptions.of(base, {"channel_order": "BGR"})
    assert (merged.layout, merged.mean, merged.channel_order) == ("NCHW", base.mean, "BGR")
    assert DecodeOptions.of(None, {"scale": 3}).scale == 3.0
    with pytest.raises(TypeError):
        DecodeOptions.of(None, {"colour": 1})


@pytest.mark.parametrize("backend", ["native", "python"])
def test_options_decode_as_the_keywords_do(backend) -> None:
    """decode_batch / decode_records / records_job: ``options=`` and the keyword forms give
    the same pixels."""
    if backend == "native":
        from recio.decode.pool import _native

        if _native is None:
            pytest.fail("the extension is not built")
    fields = dict(
        interpolation="area", mean=(120.0, 110.0, 100.0), std=(60.0, 50.0, 40.0),
        layout="NCHW", channel_order="BGR", scale=0.5,
    )  # fmt: skip
    options = DecodeOptions(**fields)
    images = [encode(40 + 8 * k, 30 + 4 * k, seed=k) for k in range(4)]
    with DecodePool(2, backend=backend) as pool:
        by_keywords = np.zeros((4, 3, 16, 24), np.float32)
        by_options = np.zeros_like(by_keywords)
        assert not pool.decode_batch(images, by_keywords, **fields).any()
        assert not pool.decode_batch(images, by_options, options=options).any()
        plain = np.zeros_like(by_keywords)
        pool.decode_batch(images, plain, layout="NCHW")
    np.testing.assert_array_equal(by_options, by_keywords)
    assert not np.array_equal(plain, by_options)
