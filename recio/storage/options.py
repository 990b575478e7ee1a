"""How remote byte ranges are fetched: request sizes, concurrency, retries, presigning."""

from __future__ import annotations

from dataclasses import dataclass

#: Lifetime of the presigned URLs S3 range reads go through (renewed at half of it).
PRESIGN_SECONDS = 3600


@dataclass(frozen=True)
class FetchOptions:
    """How remote ranges are fetched.

    Args:
        gap: ranges closer than this many bytes merge into one request (the gap is
            read and thrown away: cheaper than a request round trip).
        max_request: a merged request grows to at most this many bytes (a single
            range larger than this is still read whole).
        concurrency: requests in flight at once per ``read_ranges`` call (with
            ``adaptive``, the most: NOTE [adaptive fetch]).
        retries: attempts after the first for a transient error (reset, timeout, 5xx).
        backoff: first retry delay in seconds; doubles each attempt, with full jitter.
        max_backoff: cap of one delay.
        presign_s3: read ``s3://`` ranges over plain HTTP with a presigned GET URL
            (:mod:`recio.storage.httprange`) instead of one signed botocore call per
            range: a fraction of the client CPU per request and per byte (measured in
            tools/bench_range_client.py and httprange's docstring).
            Turn off for what a presigned URL cannot carry (SSE-C keys, requester pays).
        adaptive: size requests (``2 × latency × rate``, measured) and the read-ahead
            (Little's law) from what the source's requests measure, within
            ``max_request``, ``concurrency`` and ``read_ahead`` (NOTE [adaptive fetch]).
        min_request: the smallest request size ``adaptive`` picks.
        read_ahead: the memory bound, in bytes, of data fetched ahead of the decoder
            (``adaptive``): the iterator keeps at most about this much in flight.
        cache_block: bytes per entry of the bounded block cache (``cache_limit``).
        cache_policy: what the block cache evicts: "belady" (the block needed furthest
            ahead, from the schedule the iterator gives it; LRU where it has none) or
            "lru" (the least recently used).
        client: what reads and writes ``s3://``, ``gs://``, ``az://``/``abfs://`` and
            ``https://`` URLs: "auto" (obstore where installed, else fsspec), "obstore"
            or "fsspec" (:mod:`recio.storage.stores`). Other schemes are always fsspec's.
    """

    gap: int = 256 << 10
    max_request: int = 16 << 20
    concurrency: int = 16  # NOTE [adaptive fetch]: what global shuffle from far away needs
    retries: int = 5
    backoff: float = 0.2
    max_backoff: float = 5.0
    presign_s3: bool = True
    adaptive: bool = True
    min_request: int = 256 << 10
    read_ahead: int = 256 << 20
    cache_block: int = 1 << 20
    cache_policy: str = "belady"
    client: str = "auto"

    def __post_init__(self) -> None:
        for name in ("gap", "retries"):
            if getattr(self, name) < 0:
                raise ValueError(f"FetchOptions.{name} must be >= 0, not {getattr(self, name)}")
        if self.cache_policy not in ("belady", "lru"):
            raise ValueError(
                f"FetchOptions.cache_policy must be 'belady' or 'lru', not {self.cache_policy!r}"
            )
        if self.client not in ("auto", "obstore", "fsspec"):
            raise ValueError(
                f"FetchOptions.client must be 'auto', 'obstore' or 'fsspec', not {self.client!r}"
            )
        for name in ("max_request", "concurrency", "cache_block", "min_request", "read_ahead"):
            if getattr(self, name) < 1:
                raise ValueError(f"FetchOptions.{name} must be >= 1, not {getattr(self, name)}")
