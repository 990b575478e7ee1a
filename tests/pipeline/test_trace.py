"""Tracer: spans per thread, written as Chrome-trace / Perfetto JSON; maybe_span without one."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from recio.pipeline.trace import Tracer, maybe_span


def spans(tracer: Tracer) -> list[dict]:
    return [e for e in tracer.to_json()["traceEvents"] if e["ph"] == "X"]


def tracks(tracer: Tracer) -> dict[int, str]:
    """tid -> thread name, from the metadata events."""
    meta = [e for e in tracer.to_json()["traceEvents"] if e["ph"] == "M"]
    assert all(e["name"] == "thread_name" for e in meta)
    return {e["tid"]: e["args"]["name"] for e in meta}


def test_spans_are_recorded_per_thread_with_names_and_durations():
    tracer = Tracer()

    def work(name: str) -> None:
        with tracer.span(name, batch=3):
            time.sleep(0.02)

    with tracer.span("main"):
        pass
    threads = [threading.Thread(target=work, args=("read",), name="recio-reader"),
               threading.Thread(target=work, args=("decode",), name="recio-decoder")]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    again = threading.Thread(target=work, args=("read",), name="recio-reader")  # next epoch
    again.start()
    again.join()
    names = tracks(tracer)
    by_thread: dict[str, list[dict]] = {}
    for e in spans(tracer):
        by_thread.setdefault(names[e["tid"]], []).append(e)
    assert {k: [e["name"] for e in v] for k, v in by_thread.items()} == {
        threading.current_thread().name: ["main"],
        "recio-reader": ["read", "read"],  # a thread started again keeps its track
        "recio-decoder": ["decode"],
    }
    assert len(names) == 3  # one track per thread name
    for e in by_thread["recio-reader"] + by_thread["recio-decoder"]:
        assert e["dur"] >= 0.9 * 20_000  # microseconds
        assert e["args"] == {"batch": 3}
    assert by_thread[threading.current_thread().name][0]["dur"] < 20_000
    assert "args" not in by_thread[threading.current_thread().name][0]


def test_to_json_is_a_chrome_trace(tmp_path):
    tracer = Tracer()
    with tracer.span("a"):
        pass
    start = float(int(tracer.now_us()) + 1)  # whole microseconds: exact sums
    tracer.add("b", start, start + 5.0, thread_name="elsewhere", k=1)
    tracer.add("c", start, start - 1.0)  # a clock that went back: no negative duration
    path = tmp_path / "trace.json"
    tracer.save(str(path))
    trace = json.loads(path.read_text())
    assert trace == json.loads(json.dumps(tracer.to_json()))
    assert trace["displayTimeUnit"] == "ms"
    events = trace["traceEvents"]
    assert [e["ph"] for e in events] == ["M", "M", "X", "X", "X"]
    for e in events:
        assert e["pid"] == os.getpid() and isinstance(e["tid"], int)
    complete = [e for e in events if e["ph"] == "X"]
    for e in complete:
        assert {"name", "ph", "ts", "dur", "pid", "tid"} <= e.keys()
        assert e["ts"] >= 0 and e["dur"] >= 0
    assert [e["dur"] for e in complete[1:]] == [5.0, 0.0]
    assert complete[0]["ts"] <= complete[1]["ts"]  # microseconds since the tracer began
    assert tracks(tracer)[complete[1]["tid"]] == "elsewhere"


def test_a_span_is_recorded_when_its_body_raises():
    tracer = Tracer()
    with pytest.raises(ValueError), tracer.span("boom"):
        raise ValueError("inside")
    assert [e["name"] for e in spans(tracer)] == ["boom"]


def test_maybe_span_without_a_tracer_does_nothing():
    ran = []
    with maybe_span(None, "nothing", batch=1):
        ran.append(True)
    assert ran == [True]
    with pytest.raises(KeyError), maybe_span(None, "nothing"):
        raise KeyError("passes through")
    tracer = Tracer()
    with maybe_span(tracer, "something", batch=2):
        pass
    assert [(e["name"], e["args"]) for e in spans(tracer)] == [("something", {"batch": 2})]
