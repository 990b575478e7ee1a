"""tools/bench_peers.py: every contestant measured or named missing; ratios from its rates."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from .._paths import REPO

CONTESTANTS = (
    "plain decode (PyTurboJPEG, full size)",
    "recio RRC-224+flip, original",
    "recio RRC-224+flip, optimized",
    "recio centre crop 224, original",
    "recio centre crop 224, optimized",
    "TurboLoader RRC-224+flip (TAR)",
    "Pillow + thread pool RRC-224+flip",
    "DALI CPU RRC-224+flip (readers.mxnet)",
)
PLAIN = CONTESTANTS[0]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """24 small photo-like JPEGs in two class folders, and a PNG the tool leaves out."""
    root = tmp_path_factory.mktemp("peers") / "corpus"
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:180, 0:240]
    for i in range(24):
        folder = root / f"class_{i % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        base = (x * rng.uniform(0.2, 1) + y * rng.uniform(0.2, 1))[..., None] * rng.uniform(
            0.3, 1, 3
        )
        pixels = np.clip(base + rng.normal(0, 12, (180, 240, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(folder / f"img_{i:03d}.jpg", quality=90)
    Image.fromarray(pixels).save(root / "class_0" / "extra.png")
    return root


def run(corpus: Path, tmp_path: Path, *extra: str, env: dict | None = None):
    out = tmp_path / "result.json"
    done = subprocess.run(
        [sys.executable, "tools/bench_peers.py", "--corpus", str(corpus), "--seconds", "0.05",
         "--rounds", "3", "--batch", "8", "--quiet", "--json", str(out), *extra],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, json.loads(out.read_text())


def median_ratio(a: list[float], b: list[float]) -> float:
    """The median of the per-round ratios (three rounds: the middle one)."""
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def test_every_contestant_is_measured_or_named_missing_and_ratios_come_from_its_rates(
    corpus, tmp_path
):
    stdout, result = run(corpus, tmp_path)
    assert result["setup"]["images"] == 24  # the JPEGs; the PNG is left out
    measured, missing = result["contestants"], result["missing"]
    for name in CONTESTANTS:
        assert (name in measured) != (name in missing), name
        assert name not in missing or missing[name].strip(), name
    assert PLAIN in measured and "recio RRC-224+flip, original" in measured
    plain = measured[PLAIN]["rounds"]
    for name, row in measured.items():
        assert len(row["rounds"]) == 3 and all(r > 0 for r in row["rounds"]), name
        assert row["images_per_s"]["median"] == statistics.median(row["rounds"]), name
        assert row["cpu_ms_per_image"] == statistics.median(row["cpu_ms_rounds"]) > 0, name
        if name == PLAIN:
            continue
        expected = median_ratio(row["rounds"], plain)
        assert math.isclose(row["vs_plain_decode"]["median"], expected, rel_tol=1e-9), name
        cpu = median_ratio(measured[PLAIN]["cpu_ms_rounds"], row["cpu_ms_rounds"])
        assert math.isclose(row["vs_plain_decode"]["cpu"]["median"], cpu, rel_tol=1e-9), name
        # the printed row: the median rate and the ratio, as the JSON has them
        line = next(ln for ln in stdout.splitlines() if ln.startswith(name))
        rate, shown = re.search(r"\s([\d,]+) \(.*\s([\d.]+)x \(", line).groups()
        assert int(rate.replace(",", "")) == round(row["images_per_s"]["median"]), line
        assert float(shown) == round(expected, 2), line
    for pair in result["pairs"]:
        a, b = measured[pair["a"]]["rounds"], measured[pair["b"]]["rounds"]
        assert math.isclose(pair["median"], median_ratio(a, b), rel_tol=1e-9)
        a, b = measured[pair["a"]]["cpu_ms_rounds"], measured[pair["b"]]["cpu_ms_rounds"]
        assert math.isclose(pair["cpu"]["median"], median_ratio(b, a), rel_tol=1e-9)
    for target in result["targets"]:
        if target["ratio"] is None:
            assert target["a"] in missing or target["b"] in missing
        else:
            assert target["met"] == (target["ratio"] >= target["target"])
    for name, why in missing.items():
        assert f"missing: {name}: {why}" in stdout


def test_a_peer_that_does_not_import_is_named_with_the_reason(corpus, tmp_path):
    blocked = tmp_path / "blocked"
    (blocked / "turboloader").mkdir(parents=True)
    (blocked / "turboloader" / "__init__.py").write_text(
        "raise ImportError('no turboloader in this test')\n"
    )
    stdout, result = run(
        corpus,
        tmp_path,
        "--only",
        "rrc,turboloader",
        env={"PYTHONPATH": f"{blocked}{os.pathsep}{REPO}"},
    )
    assert set(result["contestants"]) == {PLAIN, "recio RRC-224+flip, original"}
    why = result["missing"]["TurboLoader RRC-224+flip (TAR)"]
    assert "no turboloader in this test" in why and "pip install turboloader==2.39.0" in why
    target = next(t for t in result["targets"] if t["b"] == "TurboLoader RRC-224+flip (TAR)")
    assert target["ratio"] is None and target["met"] is None


def load_tool():
    spec = importlib.util.spec_from_file_location("bench_peers", REPO / "tools" / "bench_peers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_callgrind_counts_instructions_per_image_inside_each_decoder(corpus, tmp_path):
    tool = load_tool()
    rec = tmp_path / "original.rec"
    tool.pack_rec(tool.corpus_jpegs(corpus), corpus, rec)
    for kind in ("rrc", "plain"):  # recio's decode call; PyTurboJPEG's C calls
        count = tool.callgrind(kind, rec, 2, tmp_path)
        assert count["images"] == 2, kind
        # a 240x180 JPEG takes far more than 10k instructions and far fewer than 100M
        assert 1e4 < count["per_image"] < 1e8, (kind, count)
        assert 1e4 < count["first_pass_per_image"] < 1e8, (kind, count)
