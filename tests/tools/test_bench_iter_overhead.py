"""tools/bench_iter_overhead.py: both checkouts measured in turns, the CPU split reported."""

import os
import re
import subprocess
import sys

import pytest

from .._paths import REPO
from ..pipeline.test_iterator import make_rec

pytestmark = pytest.mark.needs_native

LINE = (
    r"(this|against) +([\d,]+) images/s  cpu ([\d.]+) ms  pool ([\d.]+)  rest (-?[\d.]+)  "
    r"busy ([\d.]+)  got ([\d.]+)"
)


def test_rounds_measure_both_checkouts_and_split_the_cpu(tmp_path):
    rec = make_rec(tmp_path, n=14)  # batches of 4: the last one padded
    out = subprocess.run(
        [sys.executable, "tools/bench_iter_overhead.py", rec, "--against", str(REPO),
         "--batch", "4", "--rounds", "2", "--epochs", "2", "--threads", "1"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    rounds = re.findall(r"1 threads, round (\d): " + LINE, out.stdout)
    assert sorted((r[0], r[1]) for r in rounds) == [
        ("0", "against"), ("0", "this"), ("1", "against"), ("1", "this")
    ], out.stdout  # fmt: skip
    for _, _, rate, cpu, pool, rest, busy, got in rounds:
        assert float(rate.replace(",", "")) > 0
        assert float(pool) > 0 and float(busy) > 0 and float(got) > 0
        assert abs(float(pool) + float(rest) - float(cpu)) < 0.002  # the split adds up
    assert re.search(r"this / against: images/s [\d.]+x .*CPU an image .* [\d.]+x", out.stdout)


def test_one_checkout_alone(tmp_path):
    rec = make_rec(tmp_path, n=8)
    out = subprocess.run(
        [sys.executable, "tools/bench_iter_overhead.py", rec, "--batch", "4", "--rounds", "1",
         "--epochs", "1", "--threads", "2", "--centre"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert len(re.findall(r"2 threads, round 0: " + LINE, out.stdout)) == 1, out.stdout
    assert "against" not in out.stdout
