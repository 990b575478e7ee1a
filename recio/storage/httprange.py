"""Byte ranges over plain HTTP(S): the presigned S3 read path.

One keep-alive connection per thread and host. A request is written in one ``sendall``;
the answer's status line and headers are parsed by httptools (llhttp, in C), and a range's
body is read with ``recv_into`` straight into one buffer of the asked size (one used before
where the client has :class:`~recio.storage.buffers.ReceiveBuffers`), not zeroed first
(every byte of it is the body's, or the read fails). Errors look like the ones
:mod:`recio.storage.retry` knows: resets and short bodies are ``ConnectionError``
(retried), 5xx and 429 too, other statuses an :class:`HTTPStatusError` with ``status``
(403: the presigned URL expired, renewed by the caller; 404: missing).

NOTE [request cost]: a far global shuffle makes a request per few records, so what one
request costs the trainer's process counts as much as what a byte does. The standard
library's ``http.client`` parses every answer's headers through ``email.parser``: against
the SeaweedFS test server, on 2 vCPU, it took 443 us of CPU per 1-byte range, this client
177 us (medians of 3 rounds, tools/bench_range_client.py); per byte both take about
0.5 ns on 4 MiB ranges. fsspec's aiohttp client cost about four times as much per byte
as the http.client reader did (1.85 against 0.43 ms per MB on 4 MiB ranges).

NOTE [dropped gaps]: a merged request (:func:`recio.storage.remote.coalesce`) reads the
bytes between its ranges too, one request instead of several, and those bytes are of no
use. Kept, they would cost a copy each and hold memory: a global shuffle's job, a random
sample of the file, fetched two to three times its records' bytes, all of it alive while
any record in it was, over the read-ahead's bound. Given the spans to keep, the client
reads only those into the buffer it returns and drops the rest as it arrives: on Linux
with ``MSG_TRUNC`` (tcp(7): the kernel frees them without copying them out), over TLS
through a scratch buffer (they must be decrypted anyway).

NOTE [large reads]: a connection paced by a far link delivers a body a few segments at a
time, and each ``recv`` that returns is a wake-up of the fetch thread and a GIL acquire in
the trainer's process. On plain-HTTP connections the body is read in pieces of at most
``RECV_PIECE`` bytes with the socket's receive low-water mark (``SO_RCVLOWAT``) set to the
piece's size, so the kernel wakes the thread once a piece has arrived whole. The mark is
never above what is left of the body (else the last wait would be for bytes that never
come). The read timeout still applies to each wait: a piece that does not arrive within
``read_timeout`` fails the read as a stall does. Pieces of 1 MiB rather than 256 KiB cut the
client's context switches on a far S3's block shuffle from 0.44 to 0.28 an image, and its
CPU beyond the decoders by 1.4-2 us an image (tools/bench_far_remote.py's configurations,
three alternating pairs); Linux grows the socket's receive buffer to hold the mark.
"""

from __future__ import annotations

import socket
import ssl
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httptools
import numpy as np

if TYPE_CHECKING:
    from .buffers import ReceiveBuffers


__all__ = ["RECV_PIECE", "HTTPStatusError", "RangeClient"]

#: The most bytes one wait for a body's bytes asks the kernel for (NOTE [large reads]).
RECV_PIECE = 1 << 20
# Linux and the BSDs; elsewhere bodies are read as they come.
_RCVLOWAT = getattr(socket, "SO_RCVLOWAT", None)
_HEAD_READ = 64 << 10  # one read of an answer's head (and whatever of the body came with it)
# Linux: a TCP recv with MSG_TRUNC drops the bytes instead of copying them (tcp(7)); the
# BSDs have the flag but not that meaning for TCP.
_MSG_TRUNC = socket.MSG_TRUNC if sys.platform.startswith("linux") else 0


class HTTPStatusError(Exception):
    """An HTTP answer that is neither the range nor a transient failure; ``status`` is its code."""

    def __init__(self, status: int, reason: str, url: str) -> None:
        self.status = status
        super().__init__(f"HTTP {status} {reason} for {url.split('?')[0]}")


class _Connection:
    """One keep-alive HTTP/1.1 connection (``sock``), TLS for ``https``."""

    def __init__(self, scheme: str, netloc: str, connect_timeout: float, read_timeout: float):
        parts = urlsplit(f"//{netloc}")
        host, port = parts.hostname or "", parts.port or (443 if scheme == "https" else 80)
        sock = socket.create_connection((host, port), timeout=connect_timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a request is one write
            if scheme == "https":
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
            sock.settimeout(read_timeout)
        except BaseException:
            sock.close()
            raise
        self.sock, self.tls = sock, scheme == "https"
        self._buf = bytearray(_HEAD_READ)
        # what dropped bytes are read into (with MSG_TRUNC, never written: no memory used)
        self.scratch = memoryview(np.empty(RECV_PIECE, dtype=np.uint8))

    def close(self) -> None:
        self.sock.close()

    def request(self, head: bytes) -> _Answer:
        """Send one request; its answer, read up to the end of its headers.

        Raises:
            ConnectionError: the connection was closed before the answer's headers came
                (the server dropped an idle keep-alive connection, or failed).
        """
        self.sock.sendall(head)
        answer = _Answer()
        view = memoryview(self._buf)
        while not answer.heard.headers_done:
            n = self.sock.recv_into(view)
            if not n:
                raise ConnectionError("connection closed before the answer's headers")
            try:
                answer.parser.feed_data(view[:n])
            except httptools.HttpParserError as exc:
                raise ConnectionError(f"bad HTTP answer: {exc}") from None
        # The rule of RFC 9112 9.3 (llhttp's should_keep_alive resets with a whole message)
        tokens = answer.heard.connection
        if answer.parser.get_http_version() == "1.0":
            answer.keep = "keep-alive" in tokens
        else:
            answer.keep = "close" not in tokens
        return answer

    def read_message(self, answer: _Answer) -> bytearray:
        """The rest of ``answer``'s body, to its end, whatever its framing."""
        view = memoryview(self._buf)
        while not answer.heard.message_done:
            n = self.sock.recv_into(view)
            if not n:  # a body that ends when the connection does, or one cut short
                answer.keep = False
                break
            try:
                answer.parser.feed_data(view[:n])
            except httptools.HttpParserError as exc:
                raise ConnectionError(f"bad HTTP answer: {exc}") from None
        return bytearray(b"".join(answer.body))


class _Answer:
    """One answer being read: its parser, and what the parser's callbacks gathered.

    The callbacks live on their own object (``_Heard``), which references neither the
    answer nor the parser: a parser holding bound methods of an object that holds the
    parser would make a reference cycle per request, garbage only a full collection frees.
    """

    def __init__(self) -> None:
        self.heard = _Heard()
        self.parser = httptools.HttpResponseParser(self.heard)
        self.keep = True  # the connection takes the next request (known once headers are in)

    @property
    def status(self) -> int:
        return self.parser.get_status_code()

    @property
    def reason(self) -> str:
        return self.heard.reason

    @property
    def length(self) -> int | None:
        return self.heard.length

    @property
    def body(self) -> list[bytes]:
        return self.heard.body


class _Heard:
    """httptools' callbacks for one answer: status, framing headers, body pieces."""

    def __init__(self) -> None:
        self.reason = ""
        self.length: int | None = None
        self.connection: set[str] = set()  # the Connection header's tokens, lower case
        self.headers_done = self.message_done = False
        self.body: list[bytes] = []

    def on_status(self, reason: bytes) -> None:
        self.reason += reason.decode("latin-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-length":
            self.length = int(value)
        elif name == b"connection":
            self.connection |= {t.strip() for t in value.decode("latin-1").lower().split(",")}

    def on_headers_complete(self) -> None:
        self.headers_done = True

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.message_done = True


class RangeClient:
    """``cat_file(url, start, end)`` over per-thread keep-alive connections.

    Args:
        connect_timeout: seconds to open a connection.
        read_timeout: seconds a read may stall before it fails (and is retried).
        piece: the most bytes of a body one wait asks for (NOTE [large reads]); 0 reads
            a body as it comes.
        buffers: where ranges' bodies are received (NOTE [reused buffers]); None: a fresh
            buffer each.
    """

    def __init__(
        self,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        piece: int = RECV_PIECE,
        buffers: ReceiveBuffers | None = None,
    ) -> None:
        self.connect_timeout, self.read_timeout = connect_timeout, read_timeout
        self.piece = max(0, int(piece))
        self.buffers = buffers
        self._local = threading.local()

    def _connection(self, scheme: str, netloc: str) -> tuple[_Connection, bool]:
        """This thread's connection to ``netloc``, and whether it was made just now."""
        conns = self._local.__dict__.setdefault("conns", {})
        conn = conns.get((scheme, netloc))
        if conn is not None:
            return conn, False
        if scheme not in ("http", "https"):
            raise ValueError(f"not an http(s) URL: {scheme}://{netloc}")
        conn = _Connection(scheme, netloc, self.connect_timeout, self.read_timeout)
        conns[(scheme, netloc)] = conn
        return conn, True

    def _drop(self, scheme: str, netloc: str) -> None:
        conn = self._local.__dict__.get("conns", {}).pop((scheme, netloc), None)
        if conn is not None:
            conn.close()

    def _read_body(
        self, conn: _Connection, answer: _Answer, parts: Sequence[memoryview | int]
    ) -> int:
        """Read the body into ``parts`` in turn until they are full or the body ends.

        A part is a buffer to fill, or a count of bytes to drop (NOTE [dropped gaps]).
        Returns the bytes read, dropped ones included.
        """
        early = b"".join(answer.body)  # what came with the headers
        answer.body.clear()
        sock, mark, at, got = conn.sock, 1, 0, 0
        lowat = bool(self.piece and _RCVLOWAT) and not conn.tls  # TLS: records, not bytes
        try:
            for part in parts:
                keep = not isinstance(part, int)
                want = len(part) if keep else part
                done = min(want, len(early) - at)
                if keep and done:
                    part[:done] = early[at : at + done]
                at += done
                while done < want:
                    n = min(want - done, self.piece) if self.piece else want - done
                    if not keep:
                        n = min(n, len(conn.scratch))
                    if lowat and n != mark:
                        sock.setsockopt(socket.SOL_SOCKET, _RCVLOWAT, n)
                        mark = n
                    if keep:
                        k = sock.recv_into(part[done : done + n])
                    elif conn.tls or not _MSG_TRUNC:
                        k = sock.recv_into(conn.scratch, n)
                    else:  # the kernel drops them: no copy into this process
                        k = sock.recv_into(conn.scratch, n, _MSG_TRUNC)
                    if not k:
                        return got + done
                    done += k
                got += done
        finally:
            if mark != 1:
                sock.setsockopt(socket.SOL_SOCKET, _RCVLOWAT, 1)
        return got

    def cat_file(
        self, url: str, start: int, end: int, keep: Sequence[tuple[int, int]] | None = None
    ) -> bytes | bytearray | memoryview:
        """Bytes ``start`` to ``end`` (exclusive) of ``url``, in one GET.

        ``keep``: sorted, disjoint ``(offset, end)`` spans of the file within the range;
        then only their bytes come back, one span after another, and the bytes between
        are dropped as they arrive (NOTE [dropped gaps]).

        Raises:
            ConnectionError: reset, cut short, or a 5xx / 429 answer (worth retrying).
            HTTPStatusError: any other status but 206 (and 200 for an empty range).
        """
        parts = urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        key = (parts.scheme, parts.netloc)
        want = end - start
        head = (
            f"GET {target or '/'} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            f"Range: bytes={start}-{end - 1}\r\nAccept-Encoding: identity\r\n\r\n"
        ).encode("latin-1")
        try:
            conn, fresh = self._connection(*key)
            try:
                answer = conn.request(head)
            except OSError as exc:  # ConnectionError included
                if fresh or isinstance(exc, TimeoutError):
                    raise
                # The server closed the idle keep-alive connection: once more on a new one.
                self._drop(*key)
                conn, _ = self._connection(*key)
                answer = conn.request(head)
            status = answer.status
            if status not in (200, 206):
                conn.read_message(answer)  # the small error body: the connection stays usable
                if not answer.keep:
                    self._drop(*key)
                if status >= 500 or status == 429:
                    raise ConnectionError(f"HTTP {status} {answer.reason}")
                raise HTTPStatusError(status, answer.reason, url)
            if status == 200 or answer.length is None or answer.length != want:
                # A whole body for a ranged GET (or no length): the caller judges its size.
                data = conn.read_message(answer)
                self._drop(*key)
                if keep is None or len(data) > want:
                    return data
                if len(data) < want:
                    raise ConnectionError(f"short read: {len(data)} of {want} bytes")
                # the range's length: the whole file from byte 0, so the range itself
                return b"".join(data[s - start : e - start] for s, e in keep)
            # not zeroed (a bytearray would be: a pass over every byte for nothing)
            size = want if keep is None else sum(e - s for s, e in keep)
            buffers = self.buffers  # once: a closing source sets it to None
            if buffers is None:
                buf = memoryview(np.empty(size, dtype=np.uint8))
            else:
                buf = buffers.take(size)
            got = self._read_body(
                conn, answer, [buf] if keep is None else _parts(buf, start, end, keep)
            )
            if got < want:
                self._drop(*key)
                raise ConnectionError(f"short read: {got} of {want} bytes")
            if not answer.keep:
                self._drop(*key)
            return buf
        except HTTPStatusError:
            raise
        except OSError:
            self._drop(*key)  # a connection in an unknown state is not reused
            raise


def _parts(
    buf: memoryview, start: int, end: int, keep: Sequence[tuple[int, int]]
) -> list[memoryview | int]:
    """``start..end``'s body as :meth:`RangeClient._read_body` reads it.

    ``keep``'s spans are views into ``buf``, one after another; the bytes between them
    are counts to drop.
    """
    parts: list[memoryview | int] = []
    pos = at = start
    for s, e in keep:
        if not start <= pos <= s <= e <= end:
            raise ValueError(
                f"spans to keep {list(keep)} are not sorted, disjoint spans of {start}..{end}"
            )
        if s > pos:
            parts.append(s - pos)
        parts.append(buf[at - start : at - start + e - s])
        at += e - s
        pos = e
    if end > pos:
        parts.append(end - pos)
    return parts
