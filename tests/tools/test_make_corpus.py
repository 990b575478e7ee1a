"""tools/make_corpus.py: deterministic per seed, class folders, every file an image."""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from .._paths import REPO

SCRIPT = REPO / "tools" / "make_corpus.py"


def _load():
    spec = importlib.util.spec_from_file_location("make_corpus", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and process pools look modules up by name
    spec.loader.exec_module(module)
    return module


make_corpus = _load()

# 20 images with 10 % PNG: 2 PNGs, 2 greyscale and 1 CMYK JPEG among them.
ARGS = ["--count", "20", "--classes", "4", "--png-fraction", "0.1", "--quiet"]


def files(root: Path) -> dict[str, bytes]:
    """Relative path -> bytes of every file under root (the manifest included)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("corpus") / "seed0"
    assert make_corpus.main([str(out), "--seed", "0", *ARGS]) == 0
    return out


def test_same_seed_same_bytes_from_the_command_line_in_two_processes(corpus, tmp_path):
    again = tmp_path / "again"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), str(again), *ARGS[:-1], "--jobs", "2"],  # seed 0: default
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "20 images" in run.stdout and "seed 0" in run.stdout
    assert files(again) == files(corpus)


def test_other_seed_other_images(corpus, tmp_path):
    other = tmp_path / "seed1"
    assert make_corpus.main([str(other), "--seed", "1", *ARGS, "--count", "5"]) == 0
    first = files(corpus)
    for name, data in files(other).items():
        if name != "MANIFEST.tsv":
            assert data not in first.values(), name


def test_an_image_does_not_depend_on_the_count(corpus, tmp_path):
    small = tmp_path / "small"
    assert make_corpus.main([str(small), "--seed", "0", *ARGS, "--count", "6"]) == 0
    # the specials are placed by count, so compare the colour JPEGs both runs made
    mine, full = files(small), files(corpus)
    rows = [r.split("\t") for r in mine["MANIFEST.tsv"].decode().splitlines()[1:]]
    same = [r[0] for r in rows if r[4] == "RGB" and r[5] == "JPEG" and r[0] in full]
    assert same and all(mine[name] == full[name] for name in same)


def test_layout_manifest_and_every_file_decodes(corpus):
    rows = [r.split("\t") for r in (corpus / "MANIFEST.tsv").read_text().splitlines()]
    assert rows[0] == ["relpath", "class", "width", "height", "mode", "format", "bytes", "sha256"]
    rows = rows[1:]
    assert sorted(p.name for p in corpus.iterdir()) == [
        "MANIFEST.tsv", "class_00", "class_01", "class_02", "class_03"
    ]  # fmt: skip
    images = sorted(str(p.relative_to(corpus)) for p in corpus.glob("class_*/*"))
    assert images == sorted(r[0] for r in rows) and len(images) == 20
    kinds = {}
    for rel, cls, width, height, mode, fmt, size, sha in rows:
        index = int(Path(rel).stem.split("_")[1])
        assert Path(rel).parent.name == f"class_{index % 4:02d}" == f"class_{int(cls):02d}"
        data = (corpus / rel).read_bytes()
        assert len(data) == int(size) and hashlib.sha256(data).hexdigest() == sha
        with Image.open(corpus / rel) as im:
            assert im.format == fmt and im.mode == mode
            assert im.size == (int(width), int(height))
            im.load()  # the whole file decodes
            assert Path(rel).suffix == {"JPEG": ".jpg", "PNG": ".png"}[fmt]
            if fmt == "JPEG" and mode == "RGB":
                assert im.layer[0][1:3] == (2, 2)  # 4:2:0
                assert not im.info.get("progressive")
        assert 300 <= min(int(width), int(height)) <= 500
        kinds[(fmt, mode)] = kinds.get((fmt, mode), 0) + 1
    assert kinds == {("JPEG", "RGB"): 15, ("PNG", "RGB"): 2, ("JPEG", "L"): 2, ("JPEG", "CMYK"): 1}


def test_content_is_photo_like(corpus):
    """Photo-like detail, not flat colour: colour JPEGs cost about as many bits per pixel
    as photos do (flat or gradient-only images: 0.2-0.5)."""
    rows = [r.split("\t") for r in (corpus / "MANIFEST.tsv").read_text().splitlines()[1:]]
    rgb = [r for r in rows if r[4:6] == ["RGB", "JPEG"]]
    bpp = 8 * sum(int(r[6]) for r in rgb) / sum(int(r[2]) * int(r[3]) for r in rgb)
    assert 2.5 < bpp < 5.0, bpp


def test_its_jpegs_stay_on_recios_decoder(corpus):
    """The corpus the figures are measured on (BENCHMARKS.md) decodes on recio's Huffman
    decoder to the end, as it comes and optimized, whole and in drawn crops: a decode that
    fell back to libjpeg's (_native.second_decodes) gives the same pixels, slower."""
    from recio import _native
    from recio.augment import CropSpec, KeyedDraw
    from recio.decode import DecodePool
    from recio.im2rec import JpegEncoder

    from ..conftest import require_native

    require_native()
    jpegs = [p.read_bytes() for p in sorted(corpus.glob("class_*/*.jpg"))]
    records = np.arange(len(jpegs), dtype=np.int64)
    with DecodePool(2, backend="native") as pool:
        status, optimized = JpegEncoder(pool).optimize_jpeg(jpegs, restart=1)
        assert not status.any()
        before = _native.second_decodes()
        for images in (jpegs, optimized):
            assert all(_native.own_entropy(i) for i in images)
            for epoch in range(2):  # the first decodes read each whole stream, later ones not
                for spec in (CropSpec(64, 64, random_resized_crop=True), CropSpec(64, 64)):
                    out = np.empty((len(images), 64, 64, 3), np.uint8)
                    draw = KeyedDraw(spec, 5, epoch)
                    assert not pool.decode_batch(images, out, draw=draw, records=records).any()
    assert _native.second_decodes() == before
