"""The re-coder behind ``optimize_jpeg`` (native/recode.c, NOTE [re-code]).

It re-codes a baseline JPEG's entropy-coded data symbol by symbol; what it does not take goes
to libjpeg's coefficient transcode. Its output must carry the same coefficients (the same
pixels) whatever restart markers the source had, with libjpeg's optimal tables, and a
source libjpeg warns about must still be refused.
"""

from __future__ import annotations

import numpy as np
import pytest

from recio.decode import Status

from .test_optimize_jpeg import CASES, SOS, encoder, jpeg, pixels  # noqa: F401

PLAIN = sorted(name for name in CASES if "progressive" not in name)


def scan_data(data: bytes) -> bytes:
    """The entropy-coded data: everything after the SOS segment."""
    at = data.index(bytes([0xFF, SOS]))
    return data[at + 2 + int.from_bytes(data[at + 2 : at + 4], "big") :]


def one(encoder, src: bytes, restart) -> bytes:  # noqa: F811
    status, (out,) = encoder.optimize_jpeg([src], restart=restart)
    assert status[0] == 0, encoder.last_errors()
    return out


@pytest.mark.parametrize("name", PLAIN)
def test_an_optimal_source_comes_back_with_the_same_scan(encoder, name) -> None:  # noqa: F811
    """The tables are libjpeg's optimize_coding's to the bit (the same symbol counts, the same
    merges, ties to the larger symbol): a source it wrote comes back with the same scan."""
    case = dict(CASES[name])
    w, h = case.pop("w") * 2, case.pop("h") * 2
    src = jpeg(w, h, optimize=True, **case)
    assert scan_data(one(encoder, src, 0)) == scan_data(src)


@pytest.mark.parametrize("name", PLAIN)
@pytest.mark.parametrize("first", [1, 3, "row"])
def test_a_marked_source_recodes_as_the_plain_one(encoder, name, first) -> None:  # noqa: F811
    """The source's own restart markers are followed (its DC predictors reset at each)."""
    case = dict(CASES[name])
    src = jpeg(case.pop("w"), case.pop("h"), **case)
    direct = one(encoder, src, 1)
    again = one(encoder, one(encoder, src, first), 1)
    assert scan_data(again) == scan_data(direct)
    assert np.array_equal(pixels(again), pixels(src))


def test_sources_libjpeg_warns_about_are_still_refused(encoder) -> None:  # noqa: F811
    src = jpeg(64, 48, subsampling=2)
    junk = src[:-2] + b"\x12\x34\x56\x78" * 4 + src[-2:]  # bytes between the data and EOI
    marked = bytearray(one(encoder, src, 1))
    at = marked.index(bytes([0xFF, 0xD3]))
    marked[at + 1] = 0xD5  # a restart marker out of sequence
    status, out = encoder.optimize_jpeg([junk, bytes(marked), src])
    assert list(status) == [Status.CORRUPT, Status.CORRUPT, 0], encoder.last_errors()
    assert out[:2] == [None, None]


def test_damaged_scan_data_is_refused_or_transcoded_losslessly(encoder) -> None:  # noqa: F811
    """Bytes flipped in the entropy-coded data (a bad code, a coefficient past 63, a marker
    in the wrong place, a value out of range): never a crash; a transcode returned decodes
    to the pixels recio decodes the damaged source to, without a warning about either."""
    rng = np.random.default_rng(5)
    sources = [jpeg(61, 45, subsampling=2, seed=1), jpeg(40, 32, mode="L", seed=2)]
    damaged = []
    for src in sources:
        start = src.index(bytes([0xFF, SOS]))
        for _ in range(60):
            b = bytearray(src)
            for at in rng.integers(start + 14, len(b) - 2, rng.integers(1, 4)):
                b[at] = int(rng.integers(0, 256))
            damaged.append(bytes(b))
    status, out = encoder.optimize_jpeg(damaged, restart=1)
    assert set(status.tolist()) <= {0, Status.CORRUPT, Status.TRUNCATED}
    ok = [i for i, st in enumerate(status) if st == 0]
    assert ok and len(ok) < len(damaged)  # some of each
    for i in ok:
        want = np.zeros((1, 48, 64, 3), np.uint8)
        got = np.ones_like(want)
        crop = np.array([[0, 0, 32, 32]], np.int32)
        assert not encoder.pool.decode_batch([damaged[i]], want, crops=crop).any()
        assert not encoder.pool.decode_batch([out[i]], got, crops=crop).any()
        assert np.array_equal(got, want), i
