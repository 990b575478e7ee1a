"""For the training tests and the examples: small learnable .rec files (the sample shapes at
40-64 px), a tiny model, and running Python programs (under torchrun) the way users do."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import numpy as np

from recio.bench.sample import SHAPES, sample_image
from recio.records.format import IRHeader, pack
from recio.records.recordio import MXIndexedRecordIO

from ._paths import REPO
from .conftest import free_port

# Small enough for a shared 2-core machine: 16 px images, an 8-channel two-stage ResNet.
TINY = dict(image_size=16, width=8, blocks=(1, 1), num_classes=4, augment=False)


def make_shapes_rec(
    path: str, num_images: int, seed: int = 0, sides: tuple[int, int] = (40, 64)
) -> str:
    """Write ``num_images`` coloured-shape JPEGs (class = shape) to ``path`` and its .idx."""
    rng = np.random.default_rng(seed)
    with MXIndexedRecordIO(os.path.splitext(path)[0] + ".idx", path, "w") as writer:
        for key in range(num_images):
            label = key % len(SHAPES)
            size = tuple(int(v) for v in rng.integers(sides[0], sides[1] + 1, size=2))
            buf = io.BytesIO()
            sample_image(rng, label, size).save(buf, "JPEG", quality=90)
            writer.write_idx(key, pack(IRHeader(0, float(label), key, 0), buf.getvalue()))
    return path


def env() -> dict[str, str]:
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))


# torch's gloo backend now and then aborts a rank as its process exits, after the work and
# destroy_process_group() are done: a C++ thread of gloo's destroyed unjoined ("terminate
# called without an active exception", SIGABRT). Seen about once in ten runs of the DDP
# example on a loaded 2-core machine, never before the exit; such a run is made once more.
_GLOO_EXIT_ABORT = "terminate called without an active exception"


def torchrun(
    args: list[str], timeout: float = 180, cwd: str | os.PathLike = REPO
) -> subprocess.CompletedProcess:
    """``args`` under torchrun with two processes, from ``cwd`` (the repository root); must
    succeed."""
    for attempt in (1, 2):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
        cmd += ["--master-port", str(free_port()), *args]
        proc = subprocess.run(
            cmd, cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout
        )
        if proc.returncode == 0 or _GLOO_EXIT_ABORT not in proc.stderr or attempt == 2:
            break
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def run_example(args: list[str], timeout: float = 120) -> str:
    """``python args...`` from the repository root; must succeed; its stdout."""
    proc = subprocess.run(
        [sys.executable, *args], cwd=REPO, env=env(), capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout
