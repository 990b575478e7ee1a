"""tools/bench_resample.py: recio's resample + store against the references, as BENCHMARKS.md
quotes it."""

import os
import re
import subprocess
import sys

import numpy as np
from PIL import Image

from .._paths import REPO


def test_it_prints_each_configuration_per_image_and_its_ratio(tmp_path):
    rng = np.random.default_rng(0)
    for i, (w, h) in enumerate([(320, 240), (180, 300), (500, 375), (97, 61)]):
        pixels = rng.integers(0, 256, (h, w, 3), np.uint8)
        Image.fromarray(pixels).save(tmp_path / f"{i}.jpg", quality=90)
    out = subprocess.run(
        [sys.executable, "tools/bench_resample.py", str(tmp_path), "--rounds", "2"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("4 windows,"), out.stdout
    rows = dict(re.findall(r"^(\w[\w -]*?\w)\s+([\d.]+)\s+\d+%\s+[\d.]+$", out.stdout, re.M))
    assert {"recio u8", "recio f32", "pillow u8"} <= rows.keys(), out.stdout
    assert all(float(us) > 0 for us in rows.values())
