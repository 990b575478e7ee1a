"""Where bytes come from and go to: local files (mmap'd) and any fsspec URL.

Readers get a ``ByteSource``: ``size``, ``read(offset, length)`` and
``read_ranges(ranges)``. A local file is mmap'd and its reads are zero-copy
memoryview slices. A remote one is read by byte ranges through fsspec: the
ranges of a call are coalesced into large requests (neighbours closer than
``FetchOptions.gap`` merge, up to ``max_request`` bytes), several requests run
concurrently, and transient failures are retried with backoff and jitter.
After the last attempt one ``RemoteReadError`` names the URL and byte range.

Writers get an ``AtomicOutput``: what it writes appears under the final name
only on ``commit()``; ``abort()`` (or a crash) leaves nothing that looks whole.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import random
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, BinaryIO, TypeVar

__all__ = [
    "AtomicOutput",
    "ByteSource",
    "FetchOptions",
    "FsspecSource",
    "MappedSource",
    "RemoteReadError",
    "coalesce",
    "exists",
    "filesystem",
    "is_local",
    "open_source",
    "read_text",
    "split_protocol",
]

T = TypeVar("T")

# Optional backends named by the extra that installs them.
_EXTRA_FOR_PROTOCOL = {"s3": "s3", "s3a": "s3", "hdfs": "hdfs", "viewfs": "hdfs"}

# Stores that publish an object only when its upload completes (an aborted multipart
# upload leaves nothing); elsewhere a writer writes a hidden temporary name and renames it.
_PUBLISH_ON_CLOSE = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl"}

# Error types that mean "try again" although they are not OSErrors (botocore, aiohttp,
# urllib3, requests, hdfs-native): matched by name so that none of them must be installed.
_TRANSIENT_NAMES = {
    "ClientPayloadError",
    "ServerDisconnectedError",
    "ClientConnectorError",
    "ClientOSError",
    "ServerTimeoutError",
    "EndpointConnectionError",
    "ConnectionClosedError",
    "ReadTimeoutError",
    "ConnectTimeoutError",
    "ResponseStreamingError",
    "IncompleteReadError",
    "IncompleteRead",
    "ProtocolError",
    "ChunkedEncodingError",
    "HTTPClientError",
    "FSTimeoutError",
    "TimeoutError",
    "CancelledError",
}
#: Lifetime of the presigned URLs S3 range reads go through (renewed at half of it).
PRESIGN_SECONDS = 3600

# ... and words in the message of those that come as plain exceptions. hdfs-native names the
# NameNode's Java exception: a restarted NameNode stays in safe mode until the DataNodes
# have reported their blocks, and leaves it by itself; a standby one points to the active.
_TRANSIENT_TEXT = ("503", "500", "SlowDown", "Throttl", "reset", "timed out",
                   "SafeModeException", "RetriableException", "StandbyException")  # fmt: skip

# Never retried: the answer will not change.
_PERMANENT = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError,
              FileExistsError)  # fmt: skip


class RemoteReadError(OSError):
    """A remote read that still failed after every retry; names the URL and byte range."""

    def __init__(self, url: str, start: int, end: int, attempts: int, cause: BaseException):
        self.url, self.start, self.end, self.attempts = url, start, end, attempts
        what = f"reading bytes {start}-{end} of {url}" if end > start else f"reaching {url}"
        super().__init__(
            errno.EIO,
            f"{what} failed after {attempts} attempt(s): {type(cause).__name__}: {cause}",
        )


@dataclass(frozen=True)
class FetchOptions:
    """How remote ranges are fetched.

    Args:
        gap: ranges closer than this many bytes merge into one request (the gap is
            read and thrown away: cheaper than a request round trip).
        max_request: a merged request grows to at most this many bytes (a single
            range larger than this is still read whole).
        concurrency: requests in flight at once per ``read_ranges`` call.
        retries: attempts after the first for a transient error (reset, timeout, 5xx).
        backoff: first retry delay in seconds; doubles each attempt, with full jitter.
        max_backoff: cap of one delay.
        presign_s3: read ``s3://`` ranges over plain HTTP with a presigned GET URL
            (fsspec's aiohttp client) instead of one signed botocore call per range: about
            a sixth of the client CPU per request (measured in tools/bench_storage.py).
            Turn off for what a presigned URL cannot carry (SSE-C keys, requester pays).
    """

    gap: int = 256 << 10
    max_request: int = 16 << 20
    concurrency: int = 8
    retries: int = 5
    backoff: float = 0.2
    max_backoff: float = 5.0
    presign_s3: bool = True

    def __post_init__(self) -> None:
        for name in ("gap", "retries"):
            if getattr(self, name) < 0:
                raise ValueError(f"FetchOptions.{name} must be >= 0, not {getattr(self, name)}")
        for name in ("max_request", "concurrency"):
            if getattr(self, name) < 1:
                raise ValueError(f"FetchOptions.{name} must be >= 1, not {getattr(self, name)}")


def split_protocol(url: str) -> tuple[str, str]:
    """('file', '/x/y.rec') for plain paths and file:// URLs; ('s3', 'bucket/key') etc."""
    url = os.fspath(url)
    if "://" not in url:
        return "file", url
    protocol, rest = url.split("://", 1)
    return protocol, rest


def is_local(url: str) -> bool:
    return split_protocol(url)[0] in ("file", "local")


def local_path(url: str) -> str:
    return split_protocol(url)[1]


def filesystem(url: str, storage_options: dict[str, Any] | None = None):
    """The fsspec filesystem for ``url`` and the path within it.

    A missing optional backend is reported with the extra that installs it.
    """
    import fsspec.core  # here, not at the top: local-only runs skip its ~60 ms import

    protocol, _ = split_protocol(url)
    try:
        fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    except ImportError as exc:
        extra = _EXTRA_FOR_PROTOCOL.get(protocol)
        hint = f"pip install 'recio[{extra}]'" if extra else f"install fsspec's {protocol} backend"
        raise ImportError(f"reading {protocol}:// URLs needs an extra package: {hint}") from exc
    return fs, path


# --- errors and retries ----------------------------------------------------------------


def is_transient(exc: BaseException) -> bool:
    """True for errors worth retrying: resets, timeouts, 5xx and throttling."""
    if isinstance(exc, _PERMANENT):
        return False
    for cls in type(exc).__mro__:
        if cls.__name__ in _TRANSIENT_NAMES:
            return True
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    if isinstance(exc, OSError):
        # s3fs turns unrecognised server errors (500, 503 SlowDown, ...) into OSError(EIO).
        return True
    text = str(exc)
    return any(s in text for s in _TRANSIENT_TEXT)


def translate_error(exc: BaseException, url: str) -> BaseException:
    """A builtin OSError subclass that names ``url``, for errors that retrying cannot fix.

    Missing files and buckets become FileNotFoundError; refused or unknown credentials
    PermissionError. Anything else is returned unchanged.
    """
    if isinstance(exc, FileNotFoundError):
        new: OSError = FileNotFoundError(errno.ENOENT, f"no such file or bucket: {url}")
    elif isinstance(exc, PermissionError):
        new = PermissionError(errno.EACCES, f"access denied to {url} (check credentials): {exc}")
    elif type(exc).__name__ in ("NoCredentialsError", "PartialCredentialsError"):
        new = PermissionError(errno.EACCES, f"no credentials found for {url}: {exc}")
    elif _http_status(exc) == 403:
        new = PermissionError(errno.EACCES, f"access denied to {url}: {exc}")
    elif _http_status(exc) == 404:
        new = FileNotFoundError(errno.ENOENT, f"no such file or bucket: {url}")
    elif type(exc).__name__ == "NoSuchBucket" or "NoSuchBucket" in str(exc):
        new = FileNotFoundError(errno.ENOENT, f"no such bucket: {url}")
    else:
        return exc
    new.filename = url
    new.__cause__ = exc
    return new


def _http_status(exc: object) -> int | None:
    """The HTTP status of an aiohttp response error (fsspec's http client), else None."""
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) else None


def _delay(attempt: int, options: FetchOptions) -> float:
    # Full jitter: clients retrying together spread out instead of hitting the server in step.
    return random.uniform(0, min(options.max_backoff, options.backoff * (2**attempt)))


def retrying(
    call: Callable[[], T],
    url: str,
    start: int,
    end: int,
    options: FetchOptions,
    on_retry: Callable[[BaseException], None] | None = None,
) -> T:
    """``call()``, retried on transient errors; then one RemoteReadError for the range."""
    attempt = 0
    while True:
        try:
            return call()
        except Exception as exc:
            if not is_transient(exc):
                raise translate_error(exc, url) from exc
            if attempt >= options.retries:
                raise RemoteReadError(url, start, end, attempt + 1, exc) from exc
            if on_retry is not None:
                on_retry(exc)
            time.sleep(_delay(attempt, options))
            attempt += 1


# --- coalescing ------------------------------------------------------------------------


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


# --- sources ---------------------------------------------------------------------------


class ByteSource:
    """Random access to the bytes of one file."""

    url: str
    size: int

    def read(self, offset: int, length: int) -> bytes | memoryview:
        raise NotImplementedError

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes | memoryview]:
        """Read several (offset, length) ranges; remote sources coalesce and fetch concurrently."""
        return [self.read(offset, length) for offset, length in ranges]

    def close(self) -> None:
        pass

    def __enter__(self) -> ByteSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MappedSource(ByteSource):
    """A local file, mmap'd read-only: reads are zero-copy slices of the page cache."""

    def __init__(self, path: str, url: str | None = None) -> None:
        self.url = url or path
        with open(path, "rb") as f:
            self.size = os.fstat(f.fileno()).st_size
            # mmap refuses empty files; an empty buffer behaves the same.
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if self.size else None
        self.buffer = memoryview(self._map) if self._map is not None else memoryview(b"")

    def read(self, offset: int, length: int) -> memoryview:
        return self.buffer[offset : offset + length]

    def close(self) -> None:
        # Views handed out keep the map alive; release ours and let GC unmap.
        self.buffer = memoryview(b"")
        self._map = None


class FsspecSource(ByteSource):
    """A file behind any fsspec URL, read by coalesced, concurrent, retried byte ranges.

    ``read_ranges`` returns, for each range, bytes or a zero-copy memoryview into the
    larger request it was merged into. ``stats`` counts requests and bytes fetched.
    Pickles as its URL and options; the copy reconnects.
    """

    def __init__(
        self,
        url: str,
        storage_options: dict[str, Any] | None = None,
        *,
        fetch: FetchOptions | None = None,
    ) -> None:
        self.url = url
        self.storage_options = storage_options
        self.fetch = fetch or FetchOptions()
        self.fs, self.path = filesystem(url, _with_client_defaults(url, storage_options))
        self._async = bool(getattr(self.fs, "async_impl", False))
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self.stats = {"requests": 0, "bytes": 0, "retries": 0}
        self.size = int(retrying(lambda: self.fs.size(self.path), url, 0, 0, self.fetch))
        # S3 ranges over plain HTTP (FetchOptions.presign_s3): the URL and when it was made.
        self._http: Any = None
        self._presigned: tuple[str, float] | None = None
        if self.fetch.presign_s3 and split_protocol(url)[0] in ("s3", "s3a"):
            import aiohttp
            import fsspec

            # Bounded like the S3 client (_with_client_defaults): a stalled read fails and
            # is retried instead of waiting out aiohttp's five minutes.
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=30)
            self._http = fsspec.filesystem("http", client_kwargs={"timeout": timeout})

    def _ranges_from(self, refresh: bool = False) -> tuple[Any, str]:
        """The filesystem and path that range reads go to: the store's own, or (S3) plain
        HTTP on a presigned URL, renewed at half its lifetime or when refused (expired)."""
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

    def _cat(self, start: int, end: int) -> bytes:
        fs, path = self._ranges_from()
        try:
            data = fs.cat_file(path, start=start, end=end)
        except Exception as exc:
            if fs is not self._http or _http_status(exc) != 403:
                raise
            fs, path = self._ranges_from(refresh=True)  # the presigned URL expired
            data = fs.cat_file(path, start=start, end=end)
        if len(data) != end - start:
            # A short body (connection cut mid-transfer) must not pass as the record.
            raise ConnectionError(f"short read: {len(data)} of {end - start} bytes")
        return data

    def read(self, offset: int, length: int) -> bytes:
        end = min(offset + length, self.size)
        if end <= offset:
            return b""
        data = retrying(
            lambda: self._cat(offset, end), self.url, offset, end, self.fetch, self._retried
        )
        self._count(1, len(data))
        return data

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes | memoryview]:
        if not ranges:
            return []
        ranges = [(int(o), max(0, min(int(o) + int(n), self.size) - int(o))) for o, n in ranges]
        requests = coalesce(ranges, self.fetch.gap, self.fetch.max_request)
        blobs = self._fetch_all([(start, end) for start, end, _ in requests])
        out: list[bytes | memoryview] = [b""] * len(ranges)
        for (start, _, members), blob in zip(requests, blobs, strict=True):
            if len(members) == 1 and ranges[members[0]] == (start, len(blob)):
                out[members[0]] = blob
                continue
            view = memoryview(blob)
            for k in members:
                offset, length = ranges[k]
                out[k] = view[offset - start : offset - start + length]
        return out

    def _fetch_all(self, spans: list[tuple[int, int]]) -> list[bytes]:
        """The bytes of every (start, end) span, concurrently, each retried on its own."""
        if len(spans) == 1:
            return [self.read(spans[0][0], spans[0][1] - spans[0][0])]
        if self._async:
            return self._fetch_async(spans)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.fetch.concurrency, thread_name_prefix="recio-io")
        futures = [self._pool.submit(self.read, s, e - s) for s, e in spans]
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
            got = fs.cat_ranges(
                [path] * len(pending),
                [spans[k][0] for k in pending],
                [spans[k][1] for k in pending],
                on_error="return",
                batch_size=self.fetch.concurrency,
            )
            failed = []
            expired = False
            for k, data in zip(pending, got, strict=True):
                start, end = spans[k]
                if isinstance(data, bytes | bytearray) and len(data) != end - start:
                    data = ConnectionError(f"short read: {len(data)} of {end - start} bytes")
                if isinstance(data, BaseException):
                    if fs is self._http and _http_status(data) == 403 and not renewed:
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
            if expired:
                renewed = True
                self._ranges_from(refresh=True)
            if failed:
                with self._lock:
                    self.stats["retries"] += len(failed)
                time.sleep(_delay(attempt, self.fetch))
                attempt += 1
            pending = failed
        return results

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None


def _with_client_defaults(url: str, storage_options: dict[str, Any] | None) -> dict[str, Any]:
    """Storage options with bounded timeouts and client retries, so recio's own retry
    loop (which names the range) decides, and a dead server fails in seconds, not minutes.
    The caller's options win."""
    options = dict(storage_options or {})
    if split_protocol(url)[0] in ("s3", "s3a"):
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("connect_timeout", 5)
        config.setdefault("read_timeout", 30)
        config.setdefault("retries", {"max_attempts": 2, "mode": "standard"})
        # botocore's default pool of 10 connections caps concurrent range requests.
        config.setdefault("max_pool_connections", 64)
        options["config_kwargs"] = config
    return options


def open_source(
    url: str,
    storage_options: dict[str, Any] | None = None,
    *,
    fetch: FetchOptions | None = None,
    cache_dir: str | None = None,
) -> ByteSource:
    """Open ``url`` for random-access reading.

    Local paths and ``file://`` URLs are mmap'd. With ``cache_dir``, a remote file is
    first copied whole into ``cache_dir`` (with large concurrent reads) and mmap'd from
    there; later opens of the same unchanged file (same size and ETag/mtime) are
    local-speed.
    """
    if is_local(url):
        try:
            return MappedSource(local_path(url))
        except FileNotFoundError as exc:
            raise translate_error(exc, url) from exc
    try:
        source = FsspecSource(url, storage_options, fetch=fetch)
    except (OSError, ValueError, ImportError):
        raise
    except Exception as exc:  # deep client errors (botocore) become builtin OSErrors
        new = translate_error(exc, url)
        if new is exc:
            raise OSError(errno.EIO, f"cannot open {url}: {type(exc).__name__}: {exc}") from exc
        raise new from exc
    if cache_dir is None:
        return source
    return _cached(source, cache_dir)


def _cached(source: FsspecSource, cache_dir: str) -> MappedSource:
    info = retrying(lambda: source.fs.info(source.path), source.url, 0, 0, source.fetch)
    version = info.get("ETag") or info.get("etag") or info.get("mtime") or info.get("modified")
    import hashlib  # here, as uuid below: ~12 ms of start-up that local reads never need

    key = hashlib.sha256(f"{source.url}\n{source.size}\n{version}".encode()).hexdigest()[:24]
    name = f"{key}-{os.path.basename(source.path.rstrip('/'))}"
    path = os.path.join(cache_dir, name)
    if not (os.path.exists(path) and os.path.getsize(path) == source.size):
        os.makedirs(cache_dir, exist_ok=True)
        out = AtomicOutput(path)
        try:
            step = source.fetch.max_request
            spans = [(o, min(step, source.size - o)) for o in range(0, source.size, step)]
            # A few requests at a time: memory stays at concurrency x max_request.
            for k in range(0, len(spans), source.fetch.concurrency):
                for data in source.read_ranges(spans[k : k + source.fetch.concurrency]):
                    out.write(data)
            out.commit()
        except BaseException:
            out.abort()
            raise
    source.close()
    return MappedSource(path, url=source.url)


def read_text(url: str, storage_options: dict[str, Any] | None = None) -> str:
    if is_local(url):
        try:
            with open(local_path(url), encoding="utf-8") as f:
                return f.read()
        except FileNotFoundError as exc:
            raise translate_error(exc, url) from exc
    fs, path = filesystem(url, _with_client_defaults(url, storage_options))
    data = retrying(lambda: fs.cat_file(path), url, 0, -1, FetchOptions())
    return data.decode("utf-8")


def exists(url: str, storage_options: dict[str, Any] | None = None) -> bool:
    if is_local(url):
        return os.path.exists(local_path(url))
    fs, path = filesystem(url, _with_client_defaults(url, storage_options))
    return bool(retrying(lambda: fs.exists(path), url, 0, 0, FetchOptions()))


# --- writing ---------------------------------------------------------------------------


class AtomicOutput:
    """A file that appears under its name only on ``commit()``.

    Local files and file systems with a rename (HDFS, WebHDFS, memory, ...) are
    written under a hidden ``.name.<random>.partial`` name beside the target and
    renamed into place. Object stores (S3, GCS, Azure) write the object directly
    (multipart above the block size); the store publishes it only when the upload
    completes, and ``abort()`` aborts the upload.
    """

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None) -> None:
        self.url = url
        self.closed = False
        self._fs = None
        if is_local(url):
            path = local_path(url)
            directory = os.path.dirname(os.path.abspath(path))
            fd, self._tmp = tempfile.mkstemp(
                prefix=f".{os.path.basename(path)}.", suffix=".partial", dir=directory
            )
            self._file: BinaryIO = os.fdopen(fd, "wb", buffering=1 << 20)
            return
        fs, path = filesystem(url, _with_client_defaults(url, storage_options))
        self._fs, self._path = fs, path
        protocol = split_protocol(url)[0]
        if protocol in _PUBLISH_ON_CLOSE:
            self._tmp = None
            target = path
        else:
            head, _, base = path.rstrip("/").rpartition("/")
            import uuid

            self._tmp = f"{head}/.{base}.{uuid.uuid4().hex[:12]}.partial"
            target = self._tmp
        try:
            self._file = fs.open(target, "wb")
        except Exception as exc:
            new = translate_error(exc, url)
            raise (new if new is not exc else exc) from exc

    def write(self, data: bytes | bytearray | memoryview) -> int:
        return self._file.write(data)

    def commit(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self._file.close()
            if self._fs is None:
                os.chmod(self._tmp, 0o666 & ~_umask())
                os.replace(self._tmp, local_path(self.url))
            elif self._tmp is not None:
                if self._fs.exists(self._path):
                    self._fs.rm(self._path)  # HDFS rename refuses to overwrite
                self._fs.mv(self._tmp, self._path)
        except BaseException:
            self._remove_tmp()
            raise

    def abort(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._fs is not None and self._tmp is None:
            discard = getattr(self._file, "discard", None)
            if discard is not None:
                discard()
                # s3fs's discard leaves the file "open": its __del__ would flush a None buffer.
                with contextlib.suppress(Exception):
                    self._file.closed = True
                return
            # No way to abort: leave the half-written object? Never; remove it after close.
            with contextlib.suppress(Exception):
                self._file.close()
            with contextlib.suppress(Exception):
                self._fs.rm(self._path)
            return
        with contextlib.suppress(Exception):
            self._file.close()
        self._remove_tmp()

    def _remove_tmp(self) -> None:
        if self._tmp is None:
            return
        with contextlib.suppress(Exception):
            if self._fs is None:
                os.unlink(self._tmp)
            else:
                self._fs.rm(self._tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
