#!/usr/bin/env python3
"""The client's CPU per range request and per byte: recio's RangeClient against http.client.

    tools/s3_server.sh start
    python tools/bench_range_client.py [--rounds 3] [--requests 1000]

Against the S3 server at ``RECIO_S3_ENDPOINT`` (default http://127.0.0.1:8333,
testing/testing), one presigned URL of a 64 MiB object, one thread, one keep-alive
connection per client: ranges of 1 B, 32 KiB (a small image) and 4 MiB (a far request),
at random offsets. The clients take turns in each round:

* recio: :class:`recio.storage.httprange.RangeClient` (sockets; httptools parses the
  answers' heads);
* http.client: the standard library's keep-alive connection, ``getresponse`` and
  ``readinto`` into an unzeroed buffer (what the presigned path used before).

Reported: the medians over rounds of this thread's CPU time per request (``thread_time``:
the server's CPU is not in it), and per byte on the 4 MiB ranges.
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from recio import storage  # noqa: E402
from recio.storage.httprange import RangeClient  # noqa: E402

SIZES = (1, 32 << 10, 4 << 20)
OBJECT = 64 << 20


class StdlibClient:
    """A range GET on one http.client keep-alive connection, the body read into place."""

    def __init__(self, url: str) -> None:
        self.conn = http.client.HTTPConnection(urlsplit(url).netloc, timeout=30)

    def cat_file(self, url: str, start: int, end: int) -> memoryview:
        parts = urlsplit(url)
        self.conn.request("GET", f"{parts.path}?{parts.query}",
                          headers={"Range": f"bytes={start}-{end - 1}"})  # fmt: skip
        response = self.conn.getresponse()
        buf = memoryview(np.empty(end - start, dtype=np.uint8))
        got = 0
        while got < len(buf):
            n = response.readinto(buf[got:])
            if not n:
                raise ConnectionError(f"short read: {got} of {len(buf)}")
            got += n
        return buf


def per_request(client, url: str, size: int, n: int, rng: np.random.Generator) -> float:
    """This thread's CPU seconds per request of ``size`` bytes, over ``n`` requests."""
    offsets = rng.integers(0, OBJECT - size, n)
    client.cat_file(url, 0, 1)  # connected
    t0 = time.thread_time()
    for offset in offsets:
        got = client.cat_file(url, int(offset), int(offset) + size)
        assert len(got) == size
    return (time.thread_time() - t0) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=1000, help="small ones; 4 MiB: 1/20")
    args = parser.parse_args()
    endpoint = os.environ.get("RECIO_S3_ENDPOINT", "http://127.0.0.1:8333")
    bucket = os.environ.get("RECIO_S3_BUCKET", "test")
    options = {"key": os.environ.get("AWS_ACCESS_KEY_ID", "testing"),
               "secret": os.environ.get("AWS_SECRET_ACCESS_KEY", "testing"),
               "client_kwargs": {"endpoint_url": endpoint}}  # fmt: skip
    fs, path = storage.filesystem(f"s3://{bucket}/bench-range-client-{os.getpid()}", options)
    fs.pipe_file(path, os.urandom(OBJECT))
    try:
        url = fs.url(path, expires=3600)
        rng = np.random.default_rng(0)
        times: dict[tuple[str, int], list[float]] = {}
        for _ in range(args.rounds):
            for name, client in (("recio", RangeClient()), ("http.client", StdlibClient(url))):
                for size in SIZES:
                    n = args.requests if size < 1 << 20 else max(5, args.requests // 20)
                    times.setdefault((name, size), []).append(
                        per_request(client, url, size, n, rng)
                    )
    finally:
        fs.rm(path)
    print(f"S3 at {endpoint}, {args.rounds} rounds; CPU of this thread, medians")
    print(f"{'client':12} " + " ".join(f"{s:>12,} B" for s in SIZES) + "   per byte, 4 MiB")
    for name in ("recio", "http.client"):
        med = [statistics.median(times[(name, s)]) for s in SIZES]
        cells = " ".join(f"{m * 1e6:>11.0f} us" for m in med)
        print(f"{name:12} {cells}   {(med[2] - med[0]) / (SIZES[2] - 1) * 1e9:.2f} ns")
    ratio = statistics.median(times[("http.client", 1)]) / statistics.median(times[("recio", 1)])
    print(f"http.client / recio, 1 B ranges: {ratio:.2f}x")


if __name__ == "__main__":
    main()
