"""im2rec's test data (a folder of small JPEGs in class folders, a folder of bad files) and
the helpers its tests share: run the command line, read the records back."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from recio import decode, im2rec
from recio.bench.sample import make_sample_folder
from recio.im2rec.encoder import JpegEncoder
from recio.records.format import unpack
from recio.records.recordio import MXIndexedRecordIO

from ..conftest import require_native


def run(*argv: object) -> int:
    return im2rec.main([*map(str, argv), "--quiet"])


def read_records(stem: Path) -> list[tuple]:
    """(key, header, image bytes) of every record, in file order."""
    with MXIndexedRecordIO(f"{stem}.idx", f"{stem}.rec", "r") as r:
        out = []
        for key in r.keys:
            header, img = unpack(r.read_idx(key))
            out.append((key, header, bytes(img)))
        return out


def decode_image(data: bytes, mode: str = "RGB") -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert(mode), dtype=np.float64)


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    """24 small JPEGs in 4 class folders."""
    root = tmp_path_factory.mktemp("images")
    return Path(make_sample_folder(str(root), 24, min_side=48, max_side=120))


def make_list(tmp_path: Path, root: Path, name: str = "data", *extra: object) -> Path:
    prefix = tmp_path / name
    assert run("--list", "--recursive", *extra, prefix, root) == 0
    return prefix


@pytest.fixture
def bad_folder(tmp_path, images) -> Path:
    root = tmp_path / "bad"
    shutil.copytree(images / "class_00", root)
    good = sorted(root.iterdir())[0].read_bytes()
    (root / "empty.jpg").write_bytes(b"")
    (root / "truncated.jpg").write_bytes(good[: len(good) // 2])
    (root / "text.jpg").write_text("this is not an image\n")
    png = io.BytesIO()
    Image.new("RGB", (20, 20)).save(png, format="PNG")
    (root / "cut.png").write_bytes(png.getvalue()[:-20])
    (root / "garbage.jpg").write_bytes(b"\xff\xd8\xff\xe0" + bytes(range(256)) * 8 + b"\xff\xd9")
    return root


BAD = {"empty.jpg", "truncated.jpg", "text.jpg", "cut.png", "garbage.jpg"}


@pytest.fixture(scope="module")
def encoder():
    """A JpegEncoder on a one-thread native pool."""
    require_native()
    with decode.DecodePool(1, backend="native") as p:
        yield JpegEncoder(p)


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255**2 / mse)


def reference(data: bytes, size, box, mode: str) -> np.ndarray:
    im = Image.open(io.BytesIO(data)).convert(mode)
    return np.asarray(im.resize(size, Image.Resampling.BILINEAR, box=box))
