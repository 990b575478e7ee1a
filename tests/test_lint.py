"""The lint docs/development.md gives, run by the suite: ruff on the Python, clang-format on the C.

The versions are the `lint` extra's pins (pyproject.toml): another release formats a little
differently, so the check is only as good as the pin.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    # the virtual environment's own copy first: the one the pin installed
    here = Path(sys.executable).with_name(name)
    found = str(here) if here.exists() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[lint]' (the pinned versions)")
    return found


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("check", [["check", "."], ["format", "--check", "."]])
def test_ruff(check):
    done = _run(_tool("ruff"), *check)
    assert done.returncode == 0, done.stdout + done.stderr


def test_clang_format():
    sources = sorted(
        str(p.relative_to(ROOT))
        for pattern in ("native/*.c", "native/*.h", "tools/valgrind/*.c")
        for p in ROOT.glob(pattern)
    )
    assert "native/pool.c" in sources
    done = _run(_tool("clang-format"), "--dry-run", "--Werror", *sources)
    assert done.returncode == 0, done.stderr[-4000:]
