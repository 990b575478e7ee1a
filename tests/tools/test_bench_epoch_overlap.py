"""tools/bench_epoch_overlap.py: both sides measured in turns, the paired ratio reported."""

import os
import re
import subprocess
import sys

import pytest

from .._paths import REPO
from ..pipeline.test_iterator import make_rec

pytestmark = pytest.mark.needs_native


@pytest.mark.parametrize("where", [[], ["--remote"]], ids=["local", "remote"])
def test_rounds_measure_both_sides_and_report_the_ratio(tmp_path, where):
    rec = make_rec(tmp_path, n=12)
    out = subprocess.run(
        [sys.executable, "tools/bench_epoch_overlap.py", rec, "--before", str(REPO),
         "--batch-sizes", "4", "--rounds", "2", "--epochs", "1", "--threads", "1",
         "--step-ms-per-image", "0.1", *where],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    rounds = re.findall(r"round (\d): overlap ([\d,]+), drain ([\d,]+) images/s", out.stdout)
    assert [r for r, _, _ in rounds] == ["0", "1"], out.stdout
    rates = [float(x.replace(",", "")) for _, a, b in rounds for x in (a, b)]
    assert all(rate > 0 for rate in rates), out.stdout
    assert re.search(r"batch 4: .* ratio median [\d.]+x", out.stdout), out.stdout


def test_the_baseline_checkout_is_required(tmp_path):
    out = subprocess.run(
        [sys.executable, "tools/bench_epoch_overlap.py", str(tmp_path / "x.rec")],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2 and "--before" in out.stderr
