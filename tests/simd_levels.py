"""One script's output at this CPU's SIMD level and at SSE2 (``RECIO_SIMD=sse2``).

The tests that compare the AVX2 passes with the SSE2 ones run a script printing
``SIMD DIGEST`` in a fresh interpreter at each level (the level is chosen at import).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ._paths import REPO


def _output(script: str, **env: str) -> list[str]:
    run = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return run.stdout.split()


def outputs_at_each_level(script: str) -> tuple[list[str], list[str]]:
    """``script``'s words at this CPU's level and at SSE2; skips on a CPU without AVX2."""
    default, sse2 = _output(script), _output(script, RECIO_SIMD="sse2")
    if default[0] != "avx2":
        pytest.skip("this CPU has no AVX2: there is one path only")
    assert sse2[0] == "sse2"
    return default, sse2
