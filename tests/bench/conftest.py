"""One benchmark run on the built-in sample, shared by the bench tests."""

import pytest

from recio.bench import build_sample_rec, run_bench


@pytest.fixture(scope="session")
def result(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("bench")
    rec = build_sample_rec(str(workdir), num_images=48)
    trace = workdir / "trace.json"
    res = run_bench(
        rec,
        threads=2,
        batch_size=8,
        shape=(3, 64, 64),
        seconds=0.3,
        repeats=2,
        trace_path=str(trace),
        log=lambda _: None,
    )
    res["_trace"] = trace
    res["_workdir"] = workdir
    return res
