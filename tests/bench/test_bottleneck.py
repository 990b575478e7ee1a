"""``recio bench --step-ms``: the limiting stage named, on pipelines made slow on purpose."""

import json
import time

import pytest

from recio.bench.bottleneck import measure_step, verdict
from recio.bench.cli import add_arguments, run

from ..pipeline.test_iterator import make_rec


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    return make_rec(tmp_path_factory.mktemp("bottleneck"), n=600)


def _figures(**changes):
    f = {
        "step_ms": 100.0,
        "images_per_s": 1000.0,
        "decode_ms_per_image": 1.0,
        "decode_cpu_ms_per_image": 1.0,
        "handover_ms_per_image": 0.01,
        "threads": 4,
        "share": 4,
        "cores": 8,
        "remote": False,
        "utilisation": {
            "storage": 0.01,
            "decode+augment": 0.5,
            "hand-over": 0.01,
            "step": 0.95,
            "input wait": 0.01,
        },
    }
    f["utilisation"].update(changes.pop("u", {}))
    f.update(changes)
    return f


def test_verdicts_on_made_up_figures():
    assert verdict(_figures())[0] == "step"
    assert "2 decode thread" in verdict(_figures())[1]  # 1000/s x 1 ms x 1.25
    starved = {"input wait": 0.4, "step": 0.5}
    limit, advice = verdict(_figures(threads=2, u={**starved, "decode+augment": 0.97}))
    assert limit == "decode+augment" and "preprocess_threads=" in advice
    limit, advice = verdict(_figures(u={**starved, "decode+augment": 0.97}))
    assert limit == "decode+augment" and "smaller" in advice  # every thread of the share
    limit, advice = verdict(_figures(remote=True, u={**starved, "storage": 0.6}))
    assert limit == "storage" and "cache_dir" in advice
    assert verdict(_figures(u={**starved, "storage": 0.9}))[0] == "storage"
    assert verdict(_figures(u={**starved, "hand-over": 0.3}))[0] == "hand-over"
    assert verdict(_figures(u={"input wait": 0.01, "step": 0.1, "hand-over": 0.5}))[0] == (
        "hand-over"
    )
    limit, advice = verdict(_figures(u=starved))
    assert limit == "prefetch" and "prefetch_buffer" in advice
    contended = _figures(decode_cpu_ms_per_image=0.5, u={**starved, "decode+augment": 0.6})
    assert verdict(contended)[0] == "cores"


def test_a_sleeping_consumer_is_the_limit(rec):
    f = measure_step(rec, 60, batch_size=16, shape=(3, 64, 64), seconds=1.5)
    assert f["limit"] == "step", f
    assert f["utilisation"]["step"] > 0.8
    assert f["utilisation"]["input wait"] < 0.05
    assert f["decode_cpu_ms_per_image"] > 0


def test_a_tiny_thread_budget_is_named(rec, monkeypatch):
    """One decode thread, a step that takes no time: decoding limits. With the rank's share
    of the cores more than one, the advice is more threads; with a share of one (eight
    ranks on this node), that the CPU is the limit."""
    busy = dict(batch_size=64, shape=(3, 224, 224), seconds=2.0, read_rate=False)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    f = measure_step(rec, 0.01, **busy)
    assert f["threads"] == 1 and f["limit"] == "decode+augment", f
    assert "CPU is the limit" in f["advice"]
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    if f["cores"] < 2:
        return
    f = measure_step(rec, 0.01, threads=1, **busy)
    assert f["limit"] == "decode+augment", f
    assert "more threads" in f["advice"]


def test_recio_python_per_batch_is_named(rec):
    """Tiny images, tiny batches, no step: recio's hand-over per batch is what there is."""
    f = measure_step(rec, 0.0, batch_size=2, shape=(3, 8, 8), seconds=1.0, read_rate=False)
    assert f["limit"] == "hand-over", f


def test_the_command_line(rec, tmp_path, capsys):
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    out = tmp_path / "b.json"
    args = parser.parse_args(
        [rec, "--step-ms", "40", "--batch-size", "16", "--shape", "3,64,64", "--seconds", "2",
         "--json", str(out)]
    )  # fmt: skip
    start = time.perf_counter()
    assert run(args) == 0
    assert time.perf_counter() - start < 60
    text = capsys.readouterr().out
    assert "limit: step" in text and "decode+augment" in text
    got = json.loads(out.read_text())
    assert got["limit"] == "step" and got["step_ms"] == 40


def test_a_slow_store_is_named(rec, memfs, monkeypatch):
    """A remote source that serves 2 ms a record, one request at a time: the storage limits."""
    import threading

    from recio.records.file import RecordFile

    from ..pipeline.test_iterator import _upload

    url = _upload(rec, "memory://bottleneck/data.rec", {})
    read_extents = RecordFile.read_extents
    lane = threading.Lock()  # one request at a time: concurrency cannot hide it

    def slow(self, indices, *args, **kwargs):
        with lane:
            time.sleep(0.002 * len(indices))
        return read_extents(self, indices, *args, **kwargs)

    monkeypatch.setattr(RecordFile, "read_extents", slow)
    f = measure_step(url, 1, batch_size=16, shape=(3, 32, 32), seconds=2.0)
    assert f["remote"] and f["limit"] == "storage", (f["utilisation"], f["images_per_s"])
    assert "cache_dir" in f["advice"]
    assert f["utilisation"]["storage"] > f["utilisation"]["decode+augment"]


@pytest.mark.s3
def test_a_far_s3_store_is_named(rec, s3_server, s3_prefix):
    """The test S3 server behind tests/delayproxy.py (150 ms a request, 2 MB/s): what limits
    a fast step is the store, and the advice is to keep the data near."""
    from ..conftest import s3_options
    from ..delayproxy import DelayProxy
    from ..pipeline.test_iterator import _upload

    url = _upload(rec, f"{s3_prefix}/data.rec", s3_server)
    port = int(s3_server["endpoint_url"].rsplit(":", 1)[1])
    proxy = DelayProxy(port, delay_s=0.15, rate=2e6)
    try:
        f = measure_step(
            url, 1, batch_size=16, shape=(3, 32, 32), seconds=2.0,
            storage_options=s3_options(proxy.endpoint),
        )  # fmt: skip
    finally:
        proxy.close()
    assert proxy.stats["requests"] > 0  # the reads went through the delay
    assert f["remote"] and f["limit"] == "storage", (f["utilisation"], f["images_per_s"])
    assert "cache_dir" in f["advice"]
