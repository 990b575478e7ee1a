"""recio.records.shard_names: which forms name several files, and the URLs they name."""

import os
import subprocess
import sys

import pytest

from recio.records.shard_names import MAX_SHARDS, expand_shards, is_shard_spec


def test_brace_ranges_pad_like_the_shell():
    assert expand_shards("a-{8..11}.rec") == ["a-8.rec", "a-9.rec", "a-10.rec", "a-11.rec"]
    assert expand_shards("a-{008..010}.rec") == ["a-008.rec", "a-009.rec", "a-010.rec"]
    assert expand_shards("{x,y}-{0..1}.rec") == ["x-0.rec", "x-1.rec", "y-0.rec", "y-1.rec"]


def test_several_files_are_named_by_form_alone(tmp_path):
    for spec in (["a.rec"], ("a.rec", "b.rec"), "t-{0..3}.rec", "data/*.rec", "d/t-0[12].rec"):
        assert is_shard_spec(spec), spec
    for spec in ("a.rec", tmp_path / "a.rec", "data/train", "https://host/x*y.rec"):
        assert not is_shard_spec(spec), spec
    assert not os.path.exists("data/train")  # STEM is found by expand_shards, not by form


# Under a bound on address space, a BLAS that starts a thread per core (each with its
# stack and malloc arena reserved) could fail before the test does anything: one thread.
_FEW_THREADS = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                "MKL_NUM_THREADS": "1"}  # fmt: skip

_EXPAND_UNDER_LIMIT = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from recio.records.shard_names import expand_shards
try:
    expand_shards(sys.argv[1])
except BaseException as exc:
    print(type(exc).__name__, exc)
"""


def test_a_pattern_naming_too_many_shards_is_refused_before_expansion(tmp_path):
    """{0..99999999}: refused from its count (under a memory limit), not made name by name."""
    pattern = str(tmp_path / "train-{0..99999999}.rec")
    run = subprocess.run(
        [sys.executable, "-c", _EXPAND_UNDER_LIMIT, pattern], capture_output=True, text=True,
        timeout=120, env=_FEW_THREADS,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("ValueError"), run.stdout
    assert pattern in run.stdout and f"{MAX_SHARDS:,}" in run.stdout
    # the count is of every brace together: two of 1001 each are over the limit too
    with pytest.raises(ValueError, match="more than"):
        expand_shards(str(tmp_path / "a-{0..1000}-{0..1000}.rec"))
    assert len(expand_shards(str(tmp_path / "a-{1..1000}-{1..1000}.rec"))) == MAX_SHARDS
