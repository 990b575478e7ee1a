"""FsspecSource: coalesced range requests, ranged reads, pickling as a URL (no servers)."""

from __future__ import annotations

import http.server
import itertools
import pickle
import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from recio import storage
from recio.storage.remote import kept_spans

FAST = storage.FetchOptions(backoff=0.001, max_backoff=0.01, retries=3)


@given(
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 500)), max_size=60),
    st.integers(0, 300),
    st.integers(1, 3000),
)
def test_coalesce_covers_every_range_once(ranges, gap, max_request):
    requests = storage.coalesce(ranges, gap, max_request)
    members = sorted(k for _, _, m in requests for k in m)
    assert members == list(range(len(ranges)))
    for start, end, m in requests:
        for k in m:
            assert start <= ranges[k][0] and ranges[k][0] + ranges[k][1] <= end
        if len(m) > 1:
            assert end - start <= max_request
    starts = [s for s, _, _ in requests]
    assert starts == sorted(starts)


def test_coalesce_merges_neighbours_and_respects_gap():
    assert storage.coalesce([(0, 10), (10, 10), (25, 5)], 5, 100) == [(0, 30, [0, 1, 2])]
    assert storage.coalesce([(0, 10), (10, 10), (25, 5)], 4, 100) == [
        (0, 20, [0, 1]),
        (25, 30, [2]),
    ]
    assert storage.coalesce([(0, 10), (10, 10)], 0, 15) == [(0, 10, [0]), (10, 20, [1])]


@given(
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 500)), min_size=1, max_size=60),
    st.integers(0, 300),
)
def test_kept_spans_hold_every_member_and_drop_only_holes_of_min_gap(ranges, min_gap):
    ((start, end, members),) = storage.coalesce(ranges, 20_000, 1 << 30)
    spans, at = kept_spans(ranges, members, min_gap)
    assert spans == sorted(spans) and all(s <= e for s, e in spans)
    holes = [b[0] - a[1] for a, b in itertools.pairwise(spans)]
    assert all(h >= min_gap and h > 0 for h in holes), (spans, min_gap)
    data = bytes(i % 251 for i in range(end + 300))  # byte i of the "file" is i % 251
    laid = b"".join(data[s:e] for s, e in spans)
    for k, pos in zip(members, at, strict=True):
        offset, length = ranges[k]
        assert laid[pos : pos + length] == data[offset : offset + length]
    assert spans[0][0] == start and spans[-1][1] == end


def test_read_ranges_equal_slices(memfs):
    data = np.random.default_rng(1).integers(0, 256, 300_000, dtype=np.uint8).tobytes()
    memfs.pipe("/b/blob", data)
    src = storage.open_source(
        "memory://b/blob", fetch=storage.FetchOptions(gap=1000, max_request=50_000)
    )
    rng = np.random.default_rng(2)
    ranges = [
        (int(o), int(n))
        for o, n in zip(rng.integers(0, 299_000, 200), rng.integers(0, 3000, 200), strict=True)
    ]
    ranges.append((299_990, 100))  # runs past the end: clipped like a file read
    got = src.read_ranges(ranges)
    assert [bytes(g) for g in got] == [data[o : o + n] for o, n in ranges]
    assert src.stats["requests"] < len(ranges)
    assert src.read(5, 10) == data[5:15]
    # merged over holes larger than the smallest dropped one: the holes are dropped
    sparse = [(o, 2_000) for o in range(0, 290_000, 29_000)]
    src.fetch = storage.FetchOptions(gap=40_000, max_request=1 << 20, adaptive=False)
    got = src.read_ranges(sparse)
    assert [bytes(g) for g in got] == [data[o : o + n] for o, n in sparse]
    assert {len(g.obj) for g in got} == {2_000 * len(sparse)}  # one buffer, of the ranges


def test_source_pickles_as_url(memfs):
    memfs.pipe("/p/x", b"0123456789")
    src = storage.open_source("memory://p/x", fetch=FAST)
    copy = pickle.loads(pickle.dumps(src))
    assert copy.read(2, 3) == b"234" and copy.fetch == FAST


class _NoRangeHandler(http.server.BaseHTTPRequestHandler):
    """Serves ``body`` whole with 200 whatever the Range header asks, and counts GETs."""

    body = b""
    gets = 0

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()

    def do_GET(self):
        type(self).gets += 1
        self.do_HEAD()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.fixture
def no_range_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NoRangeHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield _NoRangeHandler, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_server_ignoring_range_is_reported_once(no_range_server):
    """A whole 200 body for a ranged GET is not a "short read" to retry six times: one
    request, and an error that says what the server did."""
    handler, root = no_range_server
    handler.body = bytes(range(256)) * 64
    src = storage.open_source(f"{root}/d.rec", fetch=storage.FetchOptions(gap=0, retries=3))
    reads = [
        (lambda: src.read(100, 50), 1),
        (lambda: src.read_ranges([(0, 10), (9000, 10)]), 2),  # two requests, concurrently
    ]
    for read, requests in reads:
        handler.gets = 0
        with pytest.raises(OSError, match="the server ignored the Range header") as info:
            read()
        assert isinstance(info.value, storage.RangeIgnoredError) and root in str(info.value)
        assert handler.gets == requests  # none retried
