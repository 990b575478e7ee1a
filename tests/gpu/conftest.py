"""recio.gpu's tests' data: .rec files of JPEGs with and without restart markers, and PNGs."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from recio import decode
from recio.bench.sample import sample_image
from recio.im2rec import JpegEncoder
from recio.records.recordio import IRHeader, MXIndexedRecordIO, pack

from ..conftest import _installed

# recio.gpu needs torch (the gpu extra): without it these tests are not collected
collect_ignore_glob = [] if _installed("torch") else ["test_*.py"]


def encoded(image: Image.Image, kind: str) -> bytes:
    """``image`` as a JPEG ("jpeg"), a grey JPEG ("grey"), a CMYK JPEG ("cmyk") or a PNG."""
    out = io.BytesIO()
    if kind == "png":
        image.save(out, "PNG")
    elif kind == "grey":
        image.convert("L").save(out, "JPEG", quality=90)
    elif kind == "cmyk":
        image.convert("CMYK").save(out, "JPEG", quality=90)
    else:
        image.save(out, "JPEG", quality=90)
    return out.getvalue()


def write_rec(path, bodies: list[bytes]) -> str:
    """A .rec/.idx of ``bodies``: record k has id 1000 + k and label k % 5."""
    rec, idx = str(path / "data.rec"), str(path / "data.idx")
    with MXIndexedRecordIO(idx, rec, "w") as w:
        for key, body in enumerate(bodies):
            w.write_idx(key, pack(IRHeader(0, float(key % 5), 1000 + key, 0), body))
    return rec


def make_images(n: int, seed: int = 0, sides=(120, 360), kinds=("jpeg",)) -> list[bytes]:
    """``n`` sample images of random sizes, of the kinds given in turn."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        size = tuple(int(v) for v in rng.integers(sides[0], sides[1] + 1, size=2))
        out.append(encoded(sample_image(rng, k % 5, size).convert("RGB"), kinds[k % len(kinds)]))
    return out


def with_markers(bodies: list[bytes], restart: int | str = 1) -> list[bytes]:
    """The JPEGs losslessly re-encoded with restart markers (same pixels); others as they are."""
    with decode.DecodePool(1) as pool:
        status, marked = JpegEncoder(pool).optimize_jpeg(bodies, restart=restart)
    return [m if s == 0 else b for b, s, m in zip(bodies, status, marked, strict=True)]


@pytest.fixture(scope="module")
def plain_rec(tmp_path_factory):
    return write_rec(tmp_path_factory.mktemp("gpu_plain"), make_images(24))


@pytest.fixture(scope="module")
def marked_rec(tmp_path_factory):
    return write_rec(tmp_path_factory.mktemp("gpu_marked"), with_markers(make_images(24)))
