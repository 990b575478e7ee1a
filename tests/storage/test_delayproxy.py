"""The delay proxy really delays: first bytes late by its delay, each connection capped."""

from __future__ import annotations

import http.client
import threading
import time

import pytest

from ..delayproxy import DelayProxy
from ..rangeserver import RangeServer


@pytest.fixture
def server():
    s = RangeServer({"/small": b"x" * 100, "/big": bytes(range(256)) * (8 << 10)})  # 2 MiB
    yield s
    s.close()


def get(conn: http.client.HTTPConnection, path: str) -> tuple[bytes, float]:
    """One GET on ``conn``: the body and the seconds to its first byte (the status line)."""
    t0 = time.perf_counter()
    conn.request("GET", path)
    response = conn.getresponse()
    first = time.perf_counter() - t0
    return response.read(), first


def test_every_request_waits_the_delay(server):
    proxy = DelayProxy(server.port, delay_s=0.08, rate=1e9)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        firsts = []
        for _ in range(3):  # one connection, three requests: each is delayed
            body, first = get(conn, "/small")
            assert body == b"x" * 100
            firsts.append(first)
        conn.close()
        assert min(firsts) >= 0.08, firsts
        assert proxy.stats["requests"] == 3 and proxy.stats["delay_s"] == pytest.approx(0.24)
    finally:
        proxy.close()


def test_each_connection_is_capped_at_its_rate(server):
    big = server.files["/big"]
    proxy = DelayProxy(server.port, delay_s=0.0, rate=10e6)  # 2 MiB: >= 0.2 s at 10 MB/s
    try:
        times = []

        def one():
            conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
            t0 = time.perf_counter()
            body, _ = get(conn, "/big")
            times.append(time.perf_counter() - t0)
            assert body == big
            conn.close()

        threads = [threading.Thread(target=one) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # 64 KiB may go at once (the bucket's burst): the rest waits for the rate
        floor = (len(big) - (64 << 10)) / 10e6
        assert len(times) == 2 and min(times) >= floor, times
        assert proxy.stats["bytes_down"] >= 2 * len(big) and proxy.stats["connections"] == 2
    finally:
        proxy.close()


def test_direct_requests_are_fast_the_proxy_is_what_delays(server):
    """The check above means something: without the proxy the same GET is quick."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    _, first = get(conn, "/small")
    conn.close()
    assert first < 0.08


def test_peak_held_counts_requests_held_at_once(server):
    proxy = DelayProxy(server.port, delay_s=0.2, rate=1e9)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        for _ in range(2):  # one after another: never two at once
            get(conn, "/small")
        conn.close()
        assert proxy.stats["peak_held"] == 1 and len(proxy.arrivals) == 2
        proxy.reset_peak()
        assert proxy.stats["peak_held"] == 0
        conns = [http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10) for _ in range(3)]
        threads = [threading.Thread(target=get, args=(c, "/small")) for c in conns]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for c in conns:
            c.close()
        assert proxy.stats["peak_held"] == 3 and proxy.stats["held"] == 0
    finally:
        proxy.close()
