"""tools/bench_entropy.py: recio's Huffman decoder against libjpeg's, as BENCHMARKS.md quotes."""

import io
import os
import re
import subprocess
import sys

import numpy as np
from PIL import Image

from recio.records.format import IRHeader
from recio.records.recordio import MXIndexedRecordIO, pack

from .._paths import REPO


def test_it_prints_both_decoders_and_their_ratio(tmp_path):
    rec = str(tmp_path / "small.rec")
    rng = np.random.default_rng(0)
    with MXIndexedRecordIO(rec[:-4] + ".idx", rec, "w") as writer:
        for key in range(4):
            jpeg = io.BytesIO()
            Image.fromarray(rng.integers(0, 256, (120, 160, 3), np.uint8)).save(jpeg, "JPEG")
            writer.write_idx(key, pack(IRHeader(0, 0.0, key, 0), jpeg.getvalue()))
    out = subprocess.run(
        [sys.executable, "tools/bench_entropy.py", rec, "--rounds", "2", "--images", "4"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = re.findall(r"^(\S+): recio (\d+) us/image, libjpeg (\d+) us/image; .* median ([\d.]+)",
                      out.stdout, re.M)  # fmt: skip
    assert [r[0] for r in rows] == ["RRC-224+flip", "centre-crop-224"], out.stdout
    assert all(int(a) > 0 and int(b) > 0 and float(m) > 0 for _, a, b, m in rows)
