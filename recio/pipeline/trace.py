"""A tiny span recorder writing Chrome-trace / Perfetto JSON (chrome://tracing, ui.perfetto.dev).

Each thread name gets its own track (threads restarted each epoch keep their
track); spans are complete events ("ph": "X") with microsecond timestamps.
Recording is a list append under the GIL, cheap enough to leave on for a
benchmark run.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class Tracer:
    """Spans recorded in memory, saved as one Chrome-trace JSON file; any thread may add."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self._t0 = time.perf_counter_ns()
        self._tracks: dict[str, int] = {}

    def now_us(self) -> float:
        """Microseconds since the tracer was made: the clock of span starts and ends."""
        return (time.perf_counter_ns() - self._t0) / 1000

    def add(
        self,
        name: str,
        start_us: float,
        end_us: float,
        thread_name: str | None = None,
        **args: object,
    ) -> None:
        """Record a span on the track of ``thread_name`` (default: the calling thread's)."""
        if thread_name is None:
            thread_name = threading.current_thread().name
        tid = self._tracks.setdefault(thread_name, len(self._tracks) + 1)
        event = {
            "name": name,
            "ph": "X",
            "ts": start_us,
            "dur": max(end_us - start_us, 0.0),
            "pid": os.getpid(),
            "tid": tid,
        }
        if args:
            event["args"] = args
        self.events.append(event)

    @contextmanager
    def span(self, name: str, **args: object) -> Iterator[None]:
        """Record the ``with`` block as a span on the calling thread's track, with ``args``."""
        start = self.now_us()
        try:
            yield
        finally:
            self.add(name, start, self.now_us(), **args)

    def to_json(self) -> dict:
        """The trace as a Chrome-trace dict: thread-name metadata, then the spans."""
        meta = [
            {
                "name": "thread_name",
                "ph": "M",
                "pid": os.getpid(),
                "tid": tid,
                "args": {"name": name},
            }
            for name, tid in self._tracks.items()
        ]
        return {"traceEvents": meta + self.events, "displayTimeUnit": "ms"}

    def save(self, path: str) -> None:
        """Write the trace to ``path`` as JSON (chrome://tracing, ui.perfetto.dev)."""
        with open(path, "w") as f:
            json.dump(self.to_json(), f)


@contextmanager
def maybe_span(tracer: Tracer | None, name: str, **args: object) -> Iterator[None]:
    """``tracer.span`` when tracing, nothing otherwise."""
    if tracer is None:
        yield
    else:
        with tracer.span(name, **args):
            yield
