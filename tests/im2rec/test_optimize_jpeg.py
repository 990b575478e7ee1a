"""JpegEncoder.optimize_jpeg: the lossless transcode ``recio optimize`` makes of each JPEG.

Every output must decode (Pillow's libjpeg and recio's own decoder) to exactly the source's
pixels, carry restart markers at the interval asked, and be baseline.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from recio import decode
from recio.decode import Status
from recio.im2rec import JpegEncoder

from ..conftest import require_native

SOF_BASELINE, SOF_PROGRESSIVE, DRI, SOS = 0xC0, 0xC2, 0xDD, 0xDA


@pytest.fixture(scope="module")
def encoder():
    require_native()
    with decode.DecodePool(2, backend="native") as p:
        yield JpegEncoder(p)


def jpeg(w: int, h: int, *, mode: str = "RGB", seed: int = 0, **save) -> bytes:
    """A JPEG of smooth noise (so every block has AC coefficients)."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (h // 4 + 2, w // 4 + 2, 3), dtype=np.uint8)
    im = Image.fromarray(small).resize((w, h), Image.Resampling.BICUBIC)
    im = im.convert(mode)
    out = io.BytesIO()
    im.save(out, "JPEG", quality=save.pop("quality", 90), **save)
    return out.getvalue()


def segments(data: bytes) -> dict[int, list[bytes]]:
    """The marker segments before the scan data: marker -> their bodies."""
    found: dict[int, list[bytes]] = {}
    pos = 2
    while pos + 4 <= len(data):
        marker = data[pos + 1]
        length = int.from_bytes(data[pos + 2 : pos + 4], "big")
        found.setdefault(marker, []).append(data[pos + 4 : pos + 2 + length])
        if marker == SOS:
            break
        pos += 2 + length
    return found


def restart_markers(data: bytes) -> int:
    """RSTn markers in the entropy-coded data (0xFF 0xD0..0xD7; stuffed 0xFF00 never match)."""
    return sum(data.count(bytes([0xFF, 0xD0 + k])) for k in range(8))


def pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)))


CASES = {
    "444": dict(w=53, h=37, subsampling=0),
    "422": dict(w=61, h=29, subsampling=1),
    "420": dict(w=77, h=45, subsampling=2),
    "420-even": dict(w=64, h=48, subsampling=2),
    "grey": dict(w=45, h=39, mode="L"),
    "progressive": dict(w=71, h=33, subsampling=2, progressive=True),
    "progressive-grey": dict(w=30, h=50, mode="L", progressive=True),
    "cmyk": dict(w=40, h=24, mode="CMYK"),
}


def mcu_grid(case: dict) -> tuple[int, int]:
    """MCUs per row and MCU rows of a case's JPEG (grey: one 8x8 block per MCU)."""
    mw, mh = {0: (8, 8), 1: (16, 8), 2: (16, 16)}[case.get("subsampling", 0)]
    if case.get("mode") in ("L", "CMYK"):
        mw, mh = 8, 8
    return -(-case["w"] // mw), -(-case["h"] // mh)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("restart", [1, 3, "row"])
def test_the_transcode_is_lossless_baseline_with_restart_markers(encoder, name, restart) -> None:
    case = dict(CASES[name])
    w, h = case.pop("w"), case.pop("h")
    src = jpeg(w, h, **case)
    status, out = encoder.optimize_jpeg([src], restart=restart)
    assert status[0] == 0, encoder.last_errors()
    new = out[0]
    assert np.array_equal(pixels(new), pixels(src))
    seg = segments(new)
    assert SOF_BASELINE in seg and SOF_PROGRESSIVE not in seg
    cols, rows = mcu_grid(CASES[name])
    interval = int.from_bytes(seg[DRI][0], "big")
    assert interval == (cols if restart == "row" else restart)
    assert restart_markers(new) == -(-(cols * rows) // interval) - 1


def test_recio_decodes_the_transcode_to_the_same_pixels(encoder) -> None:
    sources = [jpeg(97, 65, subsampling=s, seed=s) for s in (0, 1, 2)]
    sources.append(jpeg(97, 65, progressive=True, seed=4))
    status, out = encoder.optimize_jpeg(sources, restart=2)
    assert not status.any()
    before = np.zeros((4, 65, 97, 3), np.uint8)
    after = np.ones_like(before)
    assert not encoder.pool.decode_batch(sources, before).any()
    assert not encoder.pool.decode_batch(out, after).any()
    assert np.array_equal(before, after)


def test_no_restart_gives_none_and_smaller_files(encoder) -> None:
    src = jpeg(120, 80, subsampling=2)
    status, (plain,) = encoder.optimize_jpeg([src], restart=0)
    _, (marked,) = encoder.optimize_jpeg([src], restart=1)
    assert status[0] == 0
    assert DRI not in segments(plain) and restart_markers(plain) == 0
    assert restart_markers(marked) > 0 and len(marked) > len(plain)
    assert np.array_equal(pixels(plain), pixels(src))


def test_app_and_comment_segments_are_kept(encoder) -> None:
    im = Image.open(io.BytesIO(jpeg(40, 30)))
    exif = Image.Exif()
    exif[0x010E] = "a description"
    out = io.BytesIO()
    im.save(out, "JPEG", exif=exif.tobytes(), comment=b"kept", icc_profile=b"\0" * 300)
    src = out.getvalue()
    _, (new,) = encoder.optimize_jpeg([src])
    before, after = segments(src), segments(new)
    for marker in (0xE1, 0xE2, 0xFE):  # EXIF, ICC, COM
        assert after[marker] == before[marker]
    assert len(after[0xE0]) == 1  # the JFIF header once, not copied twice


def test_what_is_not_a_clean_jpeg_is_refused(encoder) -> None:
    good = jpeg(64, 64)
    status, out = encoder.optimize_jpeg([b"not a jpeg", good[: len(good) // 2], b"", good])
    assert list(status[:3]) == [Status.UNSUPPORTED, Status.TRUNCATED, Status.UNSUPPORTED]
    assert out[:3] == [None, None, None] and out[3] is not None
    errors = encoder.last_errors()
    assert "not a JPEG" in errors[0] and "truncated" in errors[1]


def test_the_pixel_limit_is_kept(encoder) -> None:
    with decode.DecodePool(1, backend="native", max_pixels=1000) as pool:
        status, _ = JpegEncoder(pool).optimize_jpeg([jpeg(64, 64)])
        assert status[0] == Status.TOO_LARGE


@pytest.mark.parametrize("bad", [-1, 65536, 1.5, True, "rows"])
def test_a_bad_interval_is_refused(encoder, bad) -> None:
    with pytest.raises(ValueError, match="restart"):
        encoder.optimize_jpeg([jpeg(16, 16)], restart=bad)


@pytest.mark.parametrize("name", ["420", "422", "444", "grey", "cmyk"])
def test_the_huffman_tables_are_optimal(encoder, name) -> None:
    """A source libjpeg wrote with its own optimal tables (optimize_coding) comes out at its
    size: recio's faster statistics pass finds tables as good for the same coefficients."""
    case = dict(CASES[name])
    w, h = case.pop("w") * 3, case.pop("h") * 3  # enough blocks for the tables to matter
    src = jpeg(w, h, optimize=True, **case)
    status, (ours,) = encoder.optimize_jpeg([src], restart=0)
    assert status[0] == 0 and np.array_equal(pixels(ours), pixels(src))
    assert abs(len(ours) - len(src)) <= 8, (len(ours), len(src))
