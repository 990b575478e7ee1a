"""Which storage errors are worth retrying, the retry loop, and builtin errors that name the URL.

Transient failures (resets, timeouts, 5xx, throttling, a NameNode in safe mode) are retried
with backoff and full jitter; after the last attempt one ``RemoteReadError`` names the URL and
byte range. Errors that retrying cannot fix become ``FileNotFoundError`` / ``PermissionError``
naming the URL, as in fsspec.
"""

from __future__ import annotations

import errno
import random
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from .options import FetchOptions

T = TypeVar("T")

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

# ... and words in the message of those that come as plain exceptions. hdfs-native names the
# NameNode's Java exception: a restarted NameNode stays in safe mode until the DataNodes
# have reported their blocks, and leaves it by itself; a standby one points to the active.
_TRANSIENT_TEXT = ("503", "500", "SlowDown", "Throttl", "reset", "timed out",
                   "SafeModeException", "RetriableException", "StandbyException")  # fmt: skip


class RangeIgnoredError(OSError):
    """A server that answered a ranged read with more bytes than asked: it ignores ``Range``.

    Permanent (never retried): every request would download the whole file again.
    """

    def __init__(self, url: str, start: int, end: int, received: int):
        self.url, self.start, self.end, self.received = url, start, end, received
        super().__init__(
            errno.EIO,
            f"reading bytes {start}-{end} of {url}: the server ignored the Range header "
            f"(sent {received} bytes for a request of {end - start}); recio reads remote "
            "files by byte ranges: serve it from a server that supports them, or download "
            "it and read the local copy",
        )


# Never retried: the answer will not change.
_PERMANENT = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError,
              FileExistsError, RangeIgnoredError, ssl.SSLCertVerificationError)  # fmt: skip


class RemoteReadError(OSError):
    """A remote read that still failed after every retry; names the URL and byte range."""

    def __init__(self, url: str, start: int, end: int, attempts: int, cause: BaseException):
        self.url, self.start, self.end, self.attempts = url, start, end, attempts
        what = f"reading bytes {start}-{end} of {url}" if end > start else f"reaching {url}"
        super().__init__(
            errno.EIO,
            f"{what} failed after {attempts} attempt(s): {type(cause).__name__}: {cause}",
        )


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
    PermissionError; the URL is the error's ``filename`` (so the message names it once).
    Anything else is returned unchanged.
    """
    if type(exc) in (FileNotFoundError, PermissionError) and exc.filename == url:
        return exc  # already one of these, naming the URL (obstore's, translated)
    missing = "no such file" if "://" not in url or url.startswith("file://") else None
    if isinstance(exc, FileNotFoundError):
        new: OSError = FileNotFoundError(errno.ENOENT, missing or "no such file or bucket", url)
    elif isinstance(exc, PermissionError):
        new = PermissionError(errno.EACCES, f"access denied (check credentials): {exc}", url)
    elif type(exc).__name__ in ("NoCredentialsError", "PartialCredentialsError"):
        new = PermissionError(errno.EACCES, f"no credentials found: {exc}", url)
    elif http_status(exc) == 403:
        new = PermissionError(errno.EACCES, f"access denied: {exc}", url)
    elif http_status(exc) == 404:
        new = FileNotFoundError(errno.ENOENT, "no such file or bucket", url)
    elif type(exc).__name__ == "NoSuchBucket" or "NoSuchBucket" in str(exc):
        new = FileNotFoundError(errno.ENOENT, "no such bucket", url)
    else:
        return exc
    new.__cause__ = exc
    return new


def http_status(exc: object) -> int | None:
    """The HTTP status of an HTTP error (aiohttp's, or recio's range client's), else None."""
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) else None


def backoff_delay(attempt: int, options: FetchOptions) -> float:
    """Seconds to wait before retry ``attempt`` (0-based), at most ``options.max_backoff``."""
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
            time.sleep(backoff_delay(attempt, options))
            attempt += 1
