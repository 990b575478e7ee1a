"""recio-fed DALI against DALI's own readers.mxnet, and tools/dali_check.py on the CPU."""

import os
import subprocess
import sys

from recio.dali import bench as dali_bench

from .._paths import REPO
from ..conftest import needs_dali


@needs_dali
def test_bench_and_gpu_check_dry_run(rec, tmp_path):
    res = dali_bench.bench_pipelines(rec, 8, (32, 32), 2, 0.2, rounds=1)
    assert set(res["images_per_s"]) == {"recio", "recio_windows", "dali_mxnet"}
    assert min(res["images_per_s"].values()) > 0
    out = subprocess.run(
        [sys.executable, "tools/dali_check.py", "--cpu", "--rec", rec, "--seconds", "0.2"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "PASS correctness" in out.stdout
