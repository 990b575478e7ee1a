"""Sizing remote reads from what they measure: latency × rate (Little's law).

NOTE [adaptive fetch]

A request of ``n`` bytes on one connection takes about ``latency + n / rate``.
:class:`LinkEstimate` fits those two numbers to the requests a source has made (the
smallest duration seen bounds the latency; the large requests give the rate). From them:

- request size: ``2 × latency × rate`` (clamped to ``[min_request, max_request]``), so the
  wait for the first byte is at most a third of a request's time;
- concurrency: a fetch job of ``J`` bytes is cut into requests of that size, but of at
  most ``J / concurrency`` (at least ``min_request``), and all of them run at once, up to
  ``FetchOptions.concurrency`` connections (the cap): the job takes about one request's
  time (``latency + J / (concurrency × rate)``), not ``J / rate`` on a few connections
  while the others idle. One 100 MB/s connection is slower than a decoder of small
  images on two cores; eight are not. The cap is 16 by default: a global shuffle's job
  is many separate requests (a random sample of the file), and at 30 ms a request eight
  connections gave 0.52-0.72 of local's images/s in alternating runs, sixteen 0.70-0.75
  (the client then CPU-bound); block shuffle's windows went as fast with either;
- job size, global shuffle: half of ``read_ahead``. A job's records are a random sample
  of the file, so the larger the job, the denser they lie and the fewer, fuller requests
  they merge into (neighbours within ``gap`` are read with the bytes between, which the
  client drops as they come: NOTE [dropped gaps] in :mod:`recio.storage.httprange`; on
  the wire and in the kernel they still cost about 0.45 ns a byte of the client's CPU).
  On 8,000 images of 33 KB from a store 30 ms away (tools/bench_far_remote.py's sample,
  256 MB of read-ahead, a probe alternating the two): jobs of a quarter of the bound
  fetched 93-102 KB an image in 0.10-0.11 requests, and the client spent 54-74 us an
  image in its fetch threads; jobs of half of it 65 KB in 0.011, 32-46 us. Block
  shuffle's jobs are its windows;
- read-ahead (``Prefetcher``): Little's law, jobs in flight = consumption rate × a job's
  fetch time / a job's bytes, plus one, within ``FetchOptions.read_ahead`` bytes with the
  job being used: the user's memory bound for fetched, not yet decoded data.

Until a few requests are measured, the fixed settings (``max_request``, ``concurrency``,
the Prefetcher's ``depth``) apply. Across an epoch's end: once a Prefetcher has submitted
its last job, the iterator starts the next epoch's (``Prefetcher.when_issued``), so the
next epoch's first window is fetched while this one's last jobs are used.
"""

from __future__ import annotations

import math
import threading
from collections import deque

__all__ = ["LinkEstimate", "jobs_ahead"]

_MIN_SAMPLES = 3
_BIG = 256 << 10  # requests at least this large tell the rate


class LinkEstimate:
    """Latency and per-connection rate of a remote source, from its requests' durations.

    Args:
        window: how many recent requests the estimate uses.
    """

    def __init__(self, window: int = 64) -> None:
        self._samples: deque[tuple[int, float]] = deque(maxlen=window)
        self._lock = threading.Lock()

    def add(self, nbytes: int, seconds: float) -> None:
        """Record one request of ``nbytes`` that took ``seconds`` (first byte to last)."""
        if seconds > 0 and nbytes >= 0:
            with self._lock:
                self._samples.append((int(nbytes), float(seconds)))

    def estimate(self) -> tuple[float, float] | None:
        """``(latency_s, bytes_per_s)``, or None until enough requests were seen."""
        with self._lock:
            samples = list(self._samples)
        if len(samples) < _MIN_SAMPLES:
            return None
        # The quickest request is mostly latency (and bounds it from above).
        latency = min(d for _, d in samples)
        small = [d for n, d in samples if n < _BIG]
        if small:
            latency = min(latency, sorted(small)[len(small) // 2])
        rates = sorted(n / (d - latency) for n, d in samples if n >= _BIG and d > latency)
        if not rates:
            return None
        return latency, rates[len(rates) // 2]

    def request_size(self, lo: int, hi: int) -> int | None:
        """Bytes per request that keep the latency at most a third of it (None: unknown)."""
        est = self.estimate()
        if est is None:
            return None
        latency, rate = est
        return int(min(hi, max(lo, 2 * latency * rate)))


def jobs_ahead(consume_bps: float, fetch_s: float, job_bytes: float, low: int, high: int) -> int:
    """Fetch jobs to keep in flight: Little's law (rate × time in system / size), plus one.

    Args:
        consume_bps: bytes per second the consumer takes.
        fetch_s: seconds one job takes to fetch.
        job_bytes: bytes of one job.
        low: at least this many.
        high: at most this many (the memory bound in jobs).
    """
    if job_bytes <= 0 or consume_bps <= 0 or fetch_s <= 0:
        return max(1, min(low, high))
    need = math.ceil(consume_bps * fetch_s / job_bytes) + 1
    return max(1, min(high, max(low, need)))
