"""tools/gpu_check.sh and tools/gpu_check.py: what a GPU machine's call carries, and the check."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from ..conftest import needs_torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_the_carried_wheels_and_checkout_stay_under_40_mib(tmp_path):
    """--build makes recio's 3.12 wheel with libjpeg-turbo inside it, and its small needs."""
    carry = tmp_path / "carry"
    proc = subprocess.run(
        ["bash", "tools/gpu_check.sh", "--build"], cwd=REPO, capture_output=True, text=True,
        env={**os.environ, "RECIO_GPU_CARRY": str(carry)}, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    mib = int(re.search(r"carries (\d+) MiB", proc.stdout).group(1))
    assert 1 <= mib < 40
    wheels = sorted(p.name for p in carry.iterdir())
    (recio,) = [w for w in wheels if w.startswith("recio-")]
    assert "-cp312-cp312-manylinux" in recio
    import zipfile

    names = zipfile.ZipFile(carry / recio).namelist()
    assert any(n.startswith("recio.libs/libjpeg") for n in names)
    assert not any(w.startswith(("numpy", "pillow", "torch")) for w in wheels)


@needs_torch
@pytest.mark.slow
def test_the_check_runs_on_the_cpu_device(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "tools/gpu_check.py", "--out", str(out), "--device", "cpu",
         "--images", "12", "--seconds", "0.2", "--batch", "8", "--workdir", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["pixels_ok"] and report["device"] == "cpu"
    for crop in report["pixels"].values():
        assert crop["cut_vs_whole_max"] == 0 and crop["max_levels"] <= 2
    paths = {(r["crop"], r["path"]) for r in report["rows"]}
    assert ("rrc224_flip", "recio CPU iterator (all cores)") in paths
    assert any("cut" in p for _, p in paths) and all(r["img_per_s"] > 0 for r in report["rows"])
