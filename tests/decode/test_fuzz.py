"""Mutation fuzz of DecodePool.decode_batch: any bytes, any crop, never a crash.

The CI part runs a bounded number of examples (~10 s) from a fixed seed, and the slow
test 1,500 more from a new seed each run (so runs add up); RECIO_FUZZ_EXAMPLES=N sets the
first. Every status must be a known code, and images that report success must be fully
written (no stale sentinel values).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recio import decode
from recio.im2rec.encoder import JpegEncoder

from ..conftest import native_built
from ..images import encode

SEEDS = [
    encode(64, 48),
    encode(40, 72, progressive=True),
    encode(33, 17, mode="L"),
    encode(24, 24, mode="CMYK"),
    encode(50, 30, subsampling=0),
    encode(20, 20, fmt="PNG"),
]
KNOWN = set(decode.STATUS_NAMES)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            data[at] = draw(st.sampled_from([0x00, 0xFF, 0xD8, 0xD9, 0xDA, 0xC0, 0xC2, 0x7F]))
        elif op == "cut":
            del data[at:]
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:
            del data[at : at + draw(st.integers(1, 64))]
    return bytes(data)


crops = st.tuples(
    st.integers(-100, 100), st.integers(-100, 100), st.integers(1, 300), st.integers(1, 300)
)


def _run(
    pool: decode.DecodePool, bufs, crop_list, flip, out_shape, dtype, layout, interp, fill=123
):
    out = np.full(out_shape, fill, dtype)
    kw = {"mean": (1.0, 2.0, 3.0), "std": (4.0, 5.0, 6.0)} if dtype != np.uint8 else {}
    status = pool.decode_batch(
        bufs,
        out,
        crops=np.array(crop_list, np.int32),
        flips=[flip] * len(bufs),
        layout=layout,
        interpolation=interp,
        **kw,
    )
    assert set(status.tolist()) <= KNOWN
    errors = pool.last_errors()
    for i, s in enumerate(status):
        assert (errors[i] is None) == (s == 0)
    return status, out


def fuzz_test(max_examples: int):
    @settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        derandomize=max_examples == int(os.environ.get("RECIO_FUZZ_EXAMPLES", "250")),
    )
    @given(
        bufs=st.lists(mutated(), min_size=1, max_size=4),
        crop=crops,
        flip=st.booleans(),
        size=st.tuples(st.integers(1, 40), st.integers(1, 40)),
        dtype=st.sampled_from([np.uint8, np.float32, np.float16]),
        layout=st.sampled_from(["NHWC", "NCHW"]),
        interp=st.sampled_from(["bilinear", "area", "nearest"]),
    )
    def run(pools, bufs, crop, flip, size, dtype, layout, interp) -> None:
        h, w = size
        shape = (len(bufs), h, w, 3) if layout == "NHWC" else (len(bufs), 3, h, w)
        results = [
            _run(p, bufs, [crop] * len(bufs), flip, shape, dtype, layout, interp) for p in pools
        ]
        for p, (status, out) in zip(pools, results, strict=True):
            if p.backend == "native" and (status == 0).any():
                # Written everywhere: no sentinel left. A real image may happen to equal one
                # sentinel (a 1x1 grey output of 123), never two different ones.
                _, again = _run(p, bufs, [crop] * len(bufs), flip, shape, dtype, layout, interp, 45)
                for i in np.flatnonzero(status == 0):
                    assert not ((out[i] == 123).all() and (again[i] == 45).all())

    return run


@pytest.fixture(scope="module")
def pools():
    # both backends; the Pillow path alone where the extension is not built (under CI it fails)
    native = native_built()
    ps = [decode.DecodePool(2, backend="python")]
    if native:
        ps.insert(0, decode.DecodePool(2, backend="native", max_pixels=1 << 20))
    yield ps
    for p in ps:
        p.close()


def test_fuzz_decode_batch(pools) -> None:
    fuzz_test(int(os.environ.get("RECIO_FUZZ_EXAMPLES", "250")))(pools)


@pytest.mark.slow
def test_fuzz_decode_batch_long(pools) -> None:
    fuzz_test(1500)(pools)


@pytest.mark.needs_native
def test_fuzz_transcode_jpeg(pools) -> None:
    """im2rec's JPEG → JPEG in C: any bytes, crop, size and grey/colour; a status or a JPEG."""
    native = pools[0]

    @settings(
        max_examples=int(os.environ.get("RECIO_FUZZ_EXAMPLES", "250")),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        derandomize=True,
    )
    @given(
        bufs=st.lists(mutated(), min_size=1, max_size=4),
        crop=st.one_of(st.none(), crops),
        size=st.tuples(st.integers(1, 40), st.integers(1, 40)),
        gray=st.booleans(),
        quality=st.integers(1, 100),
    )
    def run(bufs, crop, size, gray, quality) -> None:
        n = len(bufs)
        status, out = JpegEncoder(native).transcode_jpeg(
            bufs,
            np.array([size] * n, np.int32),
            crops=None if crop is None else np.array([crop] * n, np.int32),
            quality=quality,
            gray=gray,
        )
        assert set(status.tolist()) <= KNOWN
        for s, jpeg, err in zip(status, out, native.last_errors(), strict=True):
            assert (s == 0) == (jpeg is not None) == (err is None)
            if jpeg is not None:
                assert jpeg[:2] == b"\xff\xd8" and jpeg[-2:] == b"\xff\xd9"

    run()
