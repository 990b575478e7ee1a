"""Requests and read-ahead sized from measured latency x rate (NOTE [adaptive fetch])."""

from __future__ import annotations

import time

import numpy as np
import pytest

from recio import storage
from recio.storage.adaptive import LinkEstimate, jobs_ahead
from recio.storage.prefetch import Prefetcher

from ..delayproxy import DelayProxy
from ..rangeserver import RangeServer


def test_link_estimate_recovers_latency_and_rate():
    link = LinkEstimate()
    assert link.estimate() is None and link.request_size(1, 10**9) is None
    for n in (1000, 300_000, 2_000_000, 4_000_000, 500, 1_000_000):
        link.add(n, 0.03 + n / 100e6)
    latency, rate = link.estimate()
    assert latency == pytest.approx(0.03, rel=0.01) and rate == pytest.approx(100e6, rel=0.05)
    assert link.request_size(256 << 10, 16 << 20) == pytest.approx(6e6, rel=0.05)  # 2 L R
    assert link.request_size(256 << 10, 4 << 20) == 4 << 20  # within the cap


def test_jobs_ahead_is_littles_law_within_bounds():
    # 100 MB/s consumed, a 10 MB job takes 0.3 s: 3 in flight, plus one
    assert jobs_ahead(100e6, 0.3, 10e6, 1, 16) == 4
    assert jobs_ahead(100e6, 0.3, 10e6, 1, 2) == 2  # the memory bound wins
    assert jobs_ahead(1e6, 0.01, 10e6, 2, 16) == 2  # never below the fixed depth
    assert jobs_ahead(0.0, 0.3, 10e6, 2, 16) == 2  # nothing measured yet


def test_requests_follow_the_measured_link():
    """Behind the delay proxy (30 ms, 8 MB/s a connection) the source measures about
    those, and merged requests shrink from max_request to about 2 x latency x rate."""
    data = bytes(range(256)) * (12 << 10)  # 3 MiB
    server = RangeServer({"/f": data})
    proxy = DelayProxy(server.port, delay_s=0.03, rate=8e6)
    try:
        fetch = storage.FetchOptions(gap=0, max_request=2 << 20, concurrency=8, retries=1)
        src = storage.open_source(f"{proxy.endpoint}/f", fetch=fetch)
        assert src.request_size() == 2 << 20  # nothing measured yet
        step = 256 << 10
        for _ in range(2):
            ranges = [(o, step) for o in range(0, len(data), step)]
            assert b"".join(bytes(b) for b in src.read_ranges(ranges)) == data
        src.read(0, 100)
        latency, rate = src.link.estimate()
        assert 0.03 <= latency < 1 and rate < 8e6 * 1.3
        assert src.request_size() < 2 << 20  # 0.5 MB unloaded; under 2 MiB up to 0.13 s
        before = len(server.ranges)
        src.read_ranges([(0, len(data))])  # one range: read whole
        ranges = [(o, 64 << 10) for o in range(0, len(data), 64 << 10)]
        size = src.request_size()
        src.read_ranges(ranges)
        sizes = [e - s for _, s, e in server.ranges[before + 1 :]]
        assert len(sizes) >= len(data) // size and max(sizes) <= size
    finally:
        proxy.close()
        server.close()


class _SlowRecords:
    """A stand-in file: every read_many takes ``fetch_s``; records of 1000 bytes."""

    def __init__(self, n: int, fetch_s: float) -> None:
        self.lengths = np.full(n, 1000, dtype=np.int64)
        self.fetch_s = fetch_s

    def read_many(self, indices):
        time.sleep(self.fetch_s)
        return [bytes(4) for _ in indices]


def test_read_ahead_grows_for_a_fast_consumer_within_its_memory_bound():
    batches = np.array_split(np.arange(400), 40)  # 10 records, 10 KB a batch
    fast = Prefetcher(_SlowRecords(400, 0.03), batches, depth=1, group_bytes=0,
                      read_ahead=60_000)  # fmt: skip
    seen = []
    for _ in fast:
        seen.append(fast.in_flight)
        assert len(fast._jobs) <= 5
    assert max(seen) == 5  # with the one being used, 60 KB of jobs: the bound
    slow = Prefetcher(_SlowRecords(400, 0.001), batches, depth=1, group_bytes=0,
                      read_ahead=60_000)  # fmt: skip
    seen = []
    for _ in slow:
        time.sleep(0.01)  # the consumer is the slow side: nothing more to fetch ahead
        seen.append(slow.in_flight)
    assert max(seen) <= 2
    fixed = Prefetcher(_SlowRecords(400, 0.03), batches, depth=2, group_bytes=0)
    assert all(fixed.in_flight == 2 for _ in fixed)
