"""Remote files behind any fsspec URL, read by coalesced, concurrent, retried byte ranges.

The ranges of one ``read_ranges`` call are coalesced into large requests (neighbours closer
than ``FetchOptions.gap`` merge, up to ``max_request`` bytes), several requests run
concurrently, and transient failures are retried (:mod:`recio.storage.retry`). S3 ranges go
over plain HTTP on a presigned URL (``FetchOptions.presign_s3``).
"""

from __future__ import annotations

import os
import threading
import time
import warnings
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .._install import install_hint
from . import buffers
from .adaptive import LinkEstimate
from .base import ByteSource
from .options import PRESIGN_SECONDS, FetchOptions
from .retry import (
    RangeIgnoredError,
    RemoteReadError,
    backoff_delay,
    http_status,
    is_transient,
    retrying,
    translate_error,
)
from .urls import filesystem, split_protocol, with_client_defaults


def coalesce(
    ranges: Sequence[tuple[int, int]], gap: int, max_request: int
) -> list[tuple[int, int, list[int]]]:
    """Merge (offset, length) ranges into requests ``(start, end, members)``.

    Ranges are taken in file order; a range joins the current request when it starts
    at most ``gap`` bytes after the request's end and the request stays within
    ``max_request`` bytes. ``members`` are positions in ``ranges``. Overlapping and
    repeated ranges share a request.
    """
    order = sorted(range(len(ranges)), key=lambda k: ranges[k][0])
    merged: list[tuple[int, int, list[int]]] = []
    for k in order:
        offset, length = ranges[k]
        end = offset + length
        if merged:
            start, cur_end, members = merged[-1]
            new_end = max(cur_end, end)
            if offset - cur_end <= gap and new_end - start <= max_request:
                merged[-1] = (start, new_end, members)
                members.append(k)
                continue
        merged.append((offset, end, [k]))
    return merged


def kept_spans(
    ranges: Sequence[tuple[int, int]], members: Sequence[int], min_gap: int
) -> tuple[list[tuple[int, int]], list[int]]:
    """The spans of a merged request that its ``members`` need, and where each member lies.

    ``members``: positions in ``ranges``, in file order (as :func:`coalesce` gives them).
    Returns sorted, disjoint ``(offset, end)`` spans covering the members (holes under
    ``min_gap`` bytes kept, read with their neighbours), and each
    member's offset in the spans' bytes laid end to end (NOTE [dropped gaps] in
    :mod:`recio.storage.httprange`).
    """
    spans: list[list[int]] = []
    where: list[tuple[int, int]] = []  # per member: its span, its offset in the span
    for k in members:
        offset, length = ranges[k]
        if spans and offset - spans[-1][1] < max(min_gap, 1):  # touching ones join too
            span = spans[-1]
            span[1] = max(span[1], offset + length)
        else:
            spans.append([offset, offset + length])
        where.append((len(spans) - 1, offset - spans[-1][0]))
    starts, at = [], 0
    for s, e in spans:
        starts.append(at)
        at += e - s
    return [(s, e) for s, e in spans], [starts[j] + off for j, off in where]


def compact(data: Any, start: int, keep: list[tuple[int, int]]) -> bytes:
    """The ``keep`` spans of ``data`` (bytes from ``start``), laid end to end (a copy).

    Where the store's client reads whole spans, the gaps are dropped here, so that a
    fetch holds its ranges' bytes only, as the read-ahead's bound counts them.
    """
    view = memoryview(data)
    return b"".join(view[s - start : e - start] for s, e in keep)


# Holes smaller than this are read with the ranges around them (NOTE [dropped gaps]):
# dropping one is a receive call of its own, copying a few KB is about as cheap. A
# judgement, not a measured break-even.
_MIN_DROP = 16 << 10


class FsspecSource(ByteSource):
    """A file behind any fsspec URL, read by coalesced, concurrent, retried byte ranges.

    ``read_ranges`` returns, for each range, bytes or a zero-copy memoryview into what
    the larger request it was merged into kept: its ranges' bytes, not the gaps between
    (NOTE [dropped gaps] in :mod:`recio.storage.httprange`). ``stats`` counts requests
    and the bytes fetched. Pickles as its URL and options; the copy reconnects.
    """

    def __init__(
        self,
        url: str,
        storage_options: dict[str, Any] | None = None,
        *,
        fetch: FetchOptions | None = None,
    ) -> None:
        self.init_counts(url, storage_options, fetch)
        self.fs, self.path = filesystem(url, with_client_defaults(url, storage_options))
        self._async = bool(getattr(self.fs, "async_impl", False))
        self.size = int(retrying(lambda: self.fs.size(self.path), url, 0, 0, self.fetch))
        if self.fetch.presign_s3 and split_protocol(url)[0] in ("s3", "s3a"):
            try:
                from .httprange import RangeClient
            except ImportError:  # s3fs without the s3 extra: its own (slower) client does
                warnings.warn(
                    f"{url}: ranges are read through s3fs's client, which costs more CPU a "
                    f"request and a byte than the presigned path; that path needs httptools: "
                    f"{install_hint('s3')}",
                    stacklevel=2,
                )
            else:
                # Bounded like the S3 client (with_client_defaults): a stalled read fails and
                # is retried. Synchronous, on the fetch threads (NOTE [request cost]). Bodies
                # land in the process's buffers, kept within the read-ahead's bound and
                # given back when the last source closes (NOTE [reused buffers]).
                self._http = RangeClient(
                    connect_timeout=5,
                    read_timeout=30,
                    buffers=buffers.join(self.fetch.read_ahead),
                )
                self._left = weakref.finalize(
                    self, buffers.leave, self.fetch.read_ahead, os.getpid()
                )
                self._async = False

    def init_counts(
        self, url: str, storage_options: dict[str, Any] | None, fetch: FetchOptions | None
    ) -> None:
        """What every remote source has, whatever moves its bytes: options, counts, threads."""
        self.url = url
        self.storage_options = storage_options
        self.fetch = fetch or FetchOptions()
        self.closed = False
        self._async = False
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self.stats = {"requests": 0, "bytes": 0, "retries": 0}
        self.link = LinkEstimate()  # latency and rate, measured (NOTE [adaptive fetch])
        # S3 ranges over plain HTTP (FetchOptions.presign_s3): the URL and when it was made.
        self._http: Any = None
        self._presigned: tuple[str, float] | None = None

    def info(self) -> dict[str, Any]:
        """The store's file info (size, ETag, modification time ...), retried."""
        return retrying(lambda: self.fs.info(self.path), self.url, 0, 0, self.fetch)

    def _ranges_from(self, refresh: bool = False) -> tuple[Any, str]:
        """The filesystem and path that range reads go to.

        The store's own, or (S3) plain HTTP on a presigned URL, renewed at half its
        lifetime or when refused (expired).
        """
        if self._http is None:
            return self.fs, self.path
        with self._lock:
            now = time.monotonic()
            if refresh or self._presigned is None or now - self._presigned[1] > PRESIGN_SECONDS / 2:
                self._presigned = (self.fs.url(self.path, expires=PRESIGN_SECONDS), now)
            return self._http, self._presigned[0]

    def __getstate__(self) -> dict:
        return {"url": self.url, "storage_options": self.storage_options, "fetch": self.fetch}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["url"], state["storage_options"], fetch=state["fetch"])

    def _count(self, requests: int, nbytes: int) -> None:
        with self._lock:
            self.stats["requests"] += requests
            self.stats["bytes"] += nbytes

    def _retried(self, exc: BaseException) -> None:
        with self._lock:
            self.stats["retries"] += 1

    def _cat(self, start: int, end: int, keep: list[tuple[int, int]] | None = None) -> bytes:
        """Bytes ``start..end``; with ``keep``, only those spans' (NOTE [dropped gaps])."""
        fs, path = self._ranges_from()
        sparse = keep is not None and fs is self._http  # the client drops the gaps itself
        spans = {"keep": keep} if sparse else {}
        t0 = time.perf_counter()
        try:
            data = fs.cat_file(path, start=start, end=end, **spans)
        except Exception as exc:  # noqa: BLE001 - only a refused presigned URL is handled
            if fs is not self._http or http_status(exc) != 403:
                raise
            fs, path = self._ranges_from(refresh=True)  # the presigned URL expired
            self._retried(exc)
            t0 = time.perf_counter()
            data = fs.cat_file(path, start=start, end=end, **spans)
        size = sum(e - s for s, e in keep) if sparse else end - start
        data = self.checked_range(data, start, end, size)
        self.link.add(end - start, time.perf_counter() - t0)
        return data if sparse or keep is None else compact(data, start, keep)

    def checked_range(self, data: Any, start: int, end: int, size: int) -> Any:
        """``data`` if it is ``size`` bytes, as asked; else the error to raise for it."""
        if len(data) == size:
            return data
        if len(data) > size:
            # A whole body for a ranged request: asking again will not change it.
            raise RangeIgnoredError(self.url, start, end, len(data))
        # A short body (connection cut mid-transfer) must not pass as the record.
        raise ConnectionError(f"short read: {len(data)} of {size} bytes")

    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes from ``offset`` (fewer at the end of the file), one retried request.

        Raises:
            RemoteReadError: the range still fails after ``fetch.retries`` retries.
        """
        self._check_open()
        end = min(offset + length, self.size)
        if end <= offset:
            return b""
        return self._read(offset, end)

    def _read(self, start: int, end: int, keep: list[tuple[int, int]] | None = None) -> bytes:
        """:meth:`_cat`, retried; counted as the bytes that came over the wire."""
        if end <= start:
            return b""
        data = retrying(
            lambda: self._cat(start, end, keep), self.url, start, end, self.fetch, self._retried
        )
        self._count(1, end - start)
        return data

    def read_ranges(
        self, ranges: Sequence[tuple[int, int]], *, gap: int | None = None
    ) -> list[bytes | memoryview]:
        """The bytes of each (offset, length) range, fetched as coalesced concurrent requests.

        A range merged into a larger request comes back as a memoryview into the bytes
        that request kept. Ranges are clipped to the file's size. ``gap``: instead of
        ``fetch.gap`` (a block cache's fetches join only adjacent blocks: the bytes between
        others would be dropped).

        Raises:
            RemoteReadError: a request still fails after ``fetch.retries`` retries.
        """
        self._check_open()
        if not ranges:
            return []
        ranges = [(int(o), max(0, min(int(o) + int(n), self.size) - int(o))) for o, n in ranges]
        size = self.request_size(sum(n for _, n in ranges))
        requests = coalesce(ranges, self.fetch.gap if gap is None else gap, size)
        spans, starts = [], []  # per request: (start, end, spans to keep), members' offsets
        for start, end, members in requests:
            keep, at = kept_spans(ranges, members, _MIN_DROP)
            spans.append((start, end, keep if keep != [(start, end)] else None))
            starts.append(at)
        blobs = self._fetch_all(spans)
        out: list[bytes | memoryview] = [b""] * len(ranges)
        for (_, _, members), blob, at in zip(requests, blobs, starts, strict=True):
            if len(members) == 1 and at[0] == 0 and ranges[members[0]][1] == len(blob):
                out[members[0]] = blob
                continue
            view = memoryview(blob)
            for k, pos in zip(members, at, strict=True):
                out[k] = view[pos : pos + ranges[k][1]]
        return out

    def request_size(self, job_bytes: int | None = None) -> int:
        """The most bytes one merged request holds now.

        ``2 × latency × rate`` where measured and ``fetch.adaptive`` (NOTE [adaptive
        fetch]), else ``max_request``; with ``adaptive``, for a read of ``job_bytes`` at most a
        ``concurrency``-th of it (at least ``min_request``), so that the read runs over
        every connection at once rather than a few large requests one after another.
        """
        fetch = self.fetch
        if not fetch.adaptive:
            return fetch.max_request
        lo = min(fetch.min_request, fetch.max_request)
        size = self.link.request_size(lo, fetch.max_request) or fetch.max_request
        if job_bytes:
            size = max(lo, min(size, -(-job_bytes // fetch.concurrency)))
        return size

    def _fetch_all(self, spans: list[tuple[int, int, list | None]]) -> list[bytes]:
        """The bytes of every ``(start, end, keep)`` request, concurrently, each retried."""
        if len(spans) == 1:
            return [self._read(*spans[0])]
        if self._async:
            blobs = self._fetch_async([(s, e) for s, e, _ in spans])
            pairs = zip(spans, blobs, strict=True)
            return [b if k is None else compact(b, s, k) for (s, _, k), b in pairs]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.fetch.concurrency, thread_name_prefix="recio-io")
        futures = [self._pool.submit(self._read, *span) for span in spans]
        return [f.result() for f in futures]

    def _fetch_async(self, spans: list[tuple[int, int]]) -> list[bytes]:
        # One cat_ranges call keeps every request on fsspec's event loop (no thread per
        # request). It returns errors inside the list: check each, retry only those.
        results: list[Any] = [None] * len(spans)
        pending = list(range(len(spans)))
        attempt = 0
        renewed = False
        while pending:
            fs, path = self._ranges_from()
            t0 = time.perf_counter()
            got = fs.cat_ranges(
                [path] * len(pending),
                [spans[k][0] for k in pending],
                [spans[k][1] for k in pending],
                on_error="return",
                batch_size=self.fetch.concurrency,
            )
            # One wave of requests per batch_size: each request took about a wave's time.
            wave = (time.perf_counter() - t0) / -(-len(pending) // self.fetch.concurrency)
            failed = []
            expired = False
            for k, data in zip(pending, got, strict=True):
                start, end = spans[k]
                if isinstance(data, bytes | bytearray) and len(data) > end - start:
                    raise RangeIgnoredError(self.url, start, end, len(data))
                if isinstance(data, bytes | bytearray) and len(data) < end - start:
                    data = ConnectionError(f"short read: {len(data)} of {end - start} bytes")
                if isinstance(data, BaseException):
                    if fs is self._http and http_status(data) == 403 and not renewed:
                        expired = True  # the presigned URL expired: renew it (once), retry
                        failed.append(k)
                        continue
                    if not is_transient(data):
                        raise translate_error(data, self.url) from data
                    if attempt >= self.fetch.retries:
                        raise RemoteReadError(self.url, start, end, attempt + 1, data) from data
                    failed.append(k)
                else:
                    results[k] = data
                    self._count(1, len(data))
                    self.link.add(len(data), wave)
            if expired:
                renewed = True
                self._ranges_from(refresh=True)
            if failed:
                with self._lock:
                    self.stats["retries"] += len(failed)
                time.sleep(backoff_delay(attempt, self.fetch))
                attempt += 1
            pending = failed
        return results

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"I/O on a closed file {self.url}")

    def close(self) -> None:
        """Shut down the fetch threads, without waiting for requests in flight.

        Reads raise ``ValueError`` from now on (requests in flight finish).
        """
        self.closed = True
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
        if self._http is not None:
            self._http.buffers = None
            self._left()  # the last source closed takes the free buffers with it
