"""What the tools that measure this checkout against another one share.

The other checkout is a directory built in place (``git archive COMMIT | tar -x -C DIR``,
then ``python setup.py build_ext --inplace`` there). Either its extension is loaded beside
this one's in the same process (``bench_decode_core.py``, ``bench_resample.py``), or a tool
runs one measure in a subprocess that imports recio from it (``bench_epoch_overlap.py``,
``bench_iter_overhead.py``).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import types
from pathlib import Path

#: The ImageNet mean and standard deviation the float32 measures normalise with.
MEAN = (123.68, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)


def load_extension(checkout: Path):
    """Another checkout's built recio._native, loaded under a name of its own."""
    found = sorted((checkout / "recio").glob("_native*.so"))
    if not found:
        raise SystemExit(f"no built extension in {checkout / 'recio'} (build it there first)")
    name = "recio_against._native"  # the init function is found by the last part, _native
    loader = importlib.machinery.ExtensionFileLoader(name, str(found[0]))
    spec = importlib.util.spec_from_file_location(name, str(found[0]), loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def without_lut_line(extension) -> types.SimpleNamespace:
    """A stand-in for ``extension`` whose ``JobOptions`` drops ``lut_line``.

    For a build whose ``JobOptions`` takes no ``lut_line`` (one without NOTE [float
    store]): its float32 store looks every level up.
    """

    def job_options(**fields):
        return extension.JobOptions(**{k: v for k, v in fields.items() if k != "lut_line"})

    return types.SimpleNamespace(JobOptions=job_options)


def run_in(code: str, script: str, argv: list[str]) -> str:
    """The last line ``script`` prints, run with ``argv`` on recio imported from ``code``.

    One measure a subprocess: each side starts with a fresh process (its pool threads, its
    allocator, the whole-stream set of NOTE [whole-stream check]).
    """
    env = {**os.environ, "PYTHONPATH": code, "OPENBLAS_NUM_THREADS": "1"}
    cmd = [sys.executable, os.path.abspath(script), *argv]
    out = subprocess.run(cmd, env=env, cwd=code, capture_output=True, text=True, check=True)
    return out.stdout.splitlines()[-1]
