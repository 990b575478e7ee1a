"""The far-S3 benchmark's core split: every thread of a process pinned, later ones too."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

_TOOL = Path(__file__).resolve().parents[2] / "tools" / "bench_far_remote.py"
_CHILD = """
import sys, threading, time
threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
print("up", flush=True)
sys.stdin.readline()  # pinned now: start one more thread
threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
print("more", flush=True)
time.sleep(30)
"""


def _bench():
    spec = importlib.util.spec_from_file_location("bench_far_remote", _TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _affinities(pid: int) -> list[set[int]]:
    return [os.sched_getaffinity(int(t)) for t in os.listdir(f"/proc/{pid}/task")]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_pin_moves_every_thread_and_the_threads_started_after():
    core = {min(os.sched_getaffinity(0))}
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "up"
        assert len(_affinities(child.pid)) >= 2
        _bench().pin(child.pid, core)
        assert all(a == core for a in _affinities(child.pid))
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "more"
        time.sleep(0.05)
        threads = _affinities(child.pid)
        assert len(threads) >= 3 and all(a == core for a in threads)
    finally:
        child.kill()
        child.wait()


def test_only_names_the_configurations_to_run(capsys):
    bench = _bench()
    assert bench.parse_args([]).only == set(bench.CONFIGS)
    picked = bench.parse_args(["--only", "cache-belady", "local-block"]).only
    assert picked == {"cache-belady", "local-block"}
    with pytest.raises(SystemExit):
        bench.parse_args(["--only", "cache-fifo"])
    assert "invalid choice" in capsys.readouterr().err


def test_full_collections_are_counted_and_timed():
    """The GC column counts the full collections only (the young ones are every few ms)."""
    import gc

    collections = _bench().FullCollections()
    try:
        gc.collect(0)
        assert collections.count == 0
        gc.collect()
        gc.collect()
        assert collections.count == 2 and collections.seconds > 0
    finally:
        collections.close()
    gc.collect()
    assert collections.count == 2
