"""tools/bench_autotune.py --hook: the per-batch hook's cost, as BENCHMARKS.md quotes it."""

import os
import re
import subprocess
import sys

from .._paths import REPO


def test_hook_mode_prints_both_costs():
    out = subprocess.run(
        [sys.executable, "tools/bench_autotune.py", "--hook", "--repeats", "1"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    costs = re.findall(r"hook, (fixed threads|tuner): +([\d.]+)", out.stdout)
    assert [name for name, _ in costs] == ["fixed threads", "tuner"], out.stdout
    assert all(0 < float(us) < 1000 for _, us in costs)
