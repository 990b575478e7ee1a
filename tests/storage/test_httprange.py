"""The range client of the presigned S3 path (sockets, and httptools for the answers' heads)."""

from __future__ import annotations

import gc
import socket
import threading
import time

import numpy as np
import pytest

from recio import storage
from recio.storage import httprange
from recio.storage.buffers import ReceiveBuffers
from recio.storage.httprange import HTTPStatusError, RangeClient
from recio.storage.retry import retrying

from ..delayproxy import DelayProxy
from ..faultproxy import FaultProxy
from ..rangeserver import RangeServer


@pytest.fixture(scope="module")
def server():
    s = RangeServer({"/f": bytes(range(256)) * 4096})  # 1 MiB
    yield s
    s.close()


def test_ranges_on_one_kept_alive_connection(server):
    client = RangeClient()
    data = server.files["/f"]
    for start, end in [(0, 10), (1000, 300_000), (len(data) - 5, len(data))]:
        got = client.cat_file(f"{server.url}/f", start, end)
        assert bytes(got) == data[start:end]
    assert len(client._local.conns) == 1


def test_bodies_reuse_a_buffer_once_its_views_are_gone(server):
    """NOTE [reused buffers]: a body lands in the buffer of an earlier one only after every
    view of that one is gone; a view still held keeps its bytes."""
    client = RangeClient(buffers=ReceiveBuffers(8 << 20))
    data, url = server.files["/f"], f"{server.url}/f"

    def at(view) -> int:
        return np.frombuffer(view, dtype=np.uint8).ctypes.data

    first = client.cat_file(url, 0, 600_000)
    held, where = first[1000:2000], at(first)
    del first
    second = client.cat_file(url, 1, 600_001)
    assert at(second) != where and bytes(held) == data[1000:2000]
    assert bytes(second) == data[1:600_001]
    del held, second
    third = client.cat_file(url, 7, 600_007, keep=[(7, 300_007), (300_100, 600_007)])
    assert at(third) == where and client.buffers.reused == 1
    assert bytes(third) == data[7:300_007] + data[300_100:600_007]


def test_statuses_and_faults_read_as_retry_knows_them(server):
    client = RangeClient()
    with pytest.raises(HTTPStatusError) as missing:
        client.cat_file(f"{server.url}/nope", 0, 10)
    assert storage.http_status(missing.value) == 404 and not storage.is_transient(missing.value)
    assert isinstance(storage.translate_error(missing.value, "s3://b/nope"), FileNotFoundError)
    proxy = FaultProxy(server.port)
    try:
        for fault in ("reset", "503", "cut"):
            proxy.inject(fault)
            with pytest.raises(ConnectionError) as failed:
                client.cat_file(f"{proxy.endpoint}/f", 0, 200_000)
            assert storage.is_transient(failed.value), fault
            # the next request (a new connection) is whole
            assert bytes(client.cat_file(f"{proxy.endpoint}/f", 5, 50)) == server.files["/f"][5:50]
    finally:
        proxy.close()


def test_a_server_that_closed_the_idle_connection_is_reconnected(server):
    client = RangeClient()
    assert len(client.cat_file(f"{server.url}/f", 0, 10)) == 10
    (conn,) = client._local.conns.values()
    conn.sock.close()  # as a server does with an idle keep-alive connection
    assert bytes(client.cat_file(f"{server.url}/f", 0, 10)) == server.files["/f"][:10]


class _Recording:
    """A socket that records the receive low-water marks set and what each recv returned."""

    def __init__(self, sock):
        self._sock, self.marks, self.recvs = sock, [], []

    def setsockopt(self, level, option, value):
        if option == socket.SO_RCVLOWAT:
            self.marks.append(value)
        return self._sock.setsockopt(level, option, value)

    def recv_into(self, view, *args):
        n = self._sock.recv_into(view, *args)
        self.recvs.append(n)
        return n

    def __getattr__(self, name):
        return getattr(self._sock, name)


@pytest.mark.skipif(not hasattr(socket, "SO_RCVLOWAT"), reason="no SO_RCVLOWAT here")
def test_a_paced_body_is_read_in_whole_pieces_and_arrives_in_order(server):
    # 20 MB/s, 64 KiB at a time: without the mark a recv returns as each chunk lands.
    proxy = DelayProxy(server.port, delay_s=0.0, rate=20e6)
    client = RangeClient(piece=128 << 10)
    data = server.files["/f"]
    try:
        url = f"{proxy.endpoint}/f"
        assert bytes(client.cat_file(url, 0, 10)) == data[:10]  # connect
        (conn,) = client._local.conns.values()
        conn.sock = rec = _Recording(conn.sock)
        start, end = 1000, 1000 + 700_000
        assert bytes(client.cat_file(url, start, end)) == data[start:end]
        # The proxy sends 64 KiB every 3.3 ms: a read woken by each would take 11 or more.
        # With the mark, a wake-up brings a piece (the kernel wakes earlier only while the
        # receive window is still small, at the connection's start), then the mark is 1.
        head, *pieces = rec.recvs  # the first read: the headers, and what came with them
        assert head + sum(pieces) < end - start + 1000 and len(pieces) <= 9, rec.recvs
        assert (128 << 10) in pieces and rec.marks[-1] == 1, pieces
        assert rec.marks[:-1] and max(rec.marks[:-1]) == 128 << 10
        assert rec.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1
        # the connection is kept and takes the next request
        assert bytes(client.cat_file(url, 5, 70_000)) == data[5:70_000]
        assert client._local.conns[("http", f"127.0.0.1:{proxy.port}")] is conn
    finally:
        proxy.close()


class _Flagged(_Recording):
    """A recording socket that also records each recv's flags."""

    def __init__(self, sock):
        super().__init__(sock)
        self.flags = []

    def recv_into(self, view, nbytes=0, flags=0):
        self.flags.append(flags)
        return super().recv_into(view, nbytes, flags)


@pytest.mark.parametrize("paced", [False, True], ids=["at-once", "paced"])
def test_kept_spans_come_back_laid_end_to_end_and_the_bytes_between_are_dropped(server, paced):
    proxy = DelayProxy(server.port, delay_s=0.0, rate=20e6) if paced else None
    url = f"{proxy.endpoint if paced else server.url}/f"
    client = RangeClient(piece=128 << 10)
    data = server.files["/f"]
    try:
        assert bytes(client.cat_file(url, 0, 10)) == data[:10]  # connect
        (conn,) = client._local.conns.values()
        conn.sock = rec = _Flagged(conn.sock)
        conn.scratch[:] = b"\xab" * len(conn.scratch)
        start, end = 1000, 1000 + 900_000
        # a span at the range's start, a hole larger than a piece, small ones, one at the end
        keep = [(1000, 2000), (400_000, 401_000), (401_500, 500_000), (899_000, end)]
        got = client.cat_file(url, start, end, keep=keep)
        assert bytes(got) == b"".join(data[s:e] for s, e in keep)
        assert len(got) == sum(e - s for s, e in keep)  # the buffer holds the spans only
        if httprange._MSG_TRUNC:  # Linux: dropped without a copy
            assert socket.MSG_TRUNC in rec.flags
            assert bytes(conn.scratch) == b"\xab" * len(conn.scratch)
        # the whole body was read: the connection takes the next request
        assert bytes(client.cat_file(url, 5, 70_000)) == data[5:70_000]
        assert client._local.conns[("http", url.split("/")[2])] is conn
    finally:
        if proxy is not None:
            proxy.close()


def test_spans_to_keep_must_be_sorted_disjoint_and_inside_the_range(server):
    client = RangeClient()
    for keep in ([(10, 20), (15, 30)], [(20, 30), (10, 15)], [(0, 20)], [(90, 120)]):
        with pytest.raises(ValueError, match="not sorted, disjoint spans of 10..100"):
            client.cat_file(f"{server.url}/f", 10, 100, keep=keep)


class _Listener:
    """A server on 127.0.0.1 that hands each connection it accepts to ``on_connection``."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/f"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.on_connection(conn)

    def on_connection(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self._listener.close()


class _HalfBody(_Listener):
    """A server that answers every GET with a 206 of ``length`` bytes, sends ``sent`` of them,
    then stalls for ``stall`` seconds (or closes at once: ``stall`` 0)."""

    def __init__(self, length: int, sent: int, stall: float) -> None:
        self.length, self.sent, self.stall = length, sent, stall
        self.requests = 0
        super().__init__()

    def on_connection(self, conn: socket.socket) -> None:
        threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            self.requests += 1
            head = f"HTTP/1.1 206 Partial Content\r\nContent-Length: {self.length}\r\n\r\n"
            conn.sendall(head.encode() + b"x" * self.sent)
            time.sleep(self.stall)


def test_a_body_that_stalls_past_the_timeout_fails_and_is_retried():
    stalled = _HalfBody(length=600_000, sent=300_000, stall=2.0)
    try:
        client = RangeClient(read_timeout=0.3)
        url = f"http://127.0.0.1:{stalled.port}/f"
        t0 = time.monotonic()
        with pytest.raises(TimeoutError) as failed:
            client.cat_file(url, 0, 600_000)
        assert time.monotonic() - t0 < 1.5 and storage.is_transient(failed.value)
        assert not client._local.conns  # a connection in an unknown state is dropped
        fetch = storage.FetchOptions(retries=1, backoff=0.01)
        with pytest.raises(storage.RemoteReadError):
            retrying(lambda: client.cat_file(url, 0, 600_000), url, 0, 600_000, fetch)
        assert stalled.requests == 3  # the first, then one attempt and its retry
    finally:
        stalled.close()


def test_a_body_cut_short_is_a_connection_error():
    cut = _HalfBody(length=600_000, sent=400_000, stall=0.0)
    try:
        client = RangeClient(read_timeout=5)
        with pytest.raises(ConnectionError, match="short read: 400000 of 600000"):
            client.cat_file(f"http://127.0.0.1:{cut.port}/f", 0, 600_000)
        assert not client._local.conns
    finally:
        cut.close()


class _Scripted(_Listener):
    """A server that answers each GET on a connection with the next of ``answers``."""

    def __init__(self, *answers: bytes) -> None:
        self.answers, self.connections = list(answers), 0
        super().__init__()

    def on_connection(self, conn: socket.socket) -> None:
        self.connections += 1
        with conn:
            while self.answers and conn.recv(65536):
                answer = self.answers.pop(0)
                conn.sendall(answer)
                if b"Connection: close" in answer:
                    break


def test_answers_framed_otherwise_are_read_whole_and_judged_by_the_caller():
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n"
    )
    until_close = b"HTTP/1.1 206 Partial Content\r\nConnection: close\r\n\r\nwhole body"
    server = _Scripted(chunked, until_close)
    try:
        client = RangeClient()
        assert bytes(client.cat_file(server.url, 0, 4)) == b"helloabc"  # a whole body: 8
        assert not client._local.conns  # not kept: a whole body for a range is suspect
        assert bytes(client.cat_file(server.url, 0, 4)) == b"whole body"
        assert server.connections == 2
    finally:
        server.close()


def test_a_whole_body_with_spans_to_keep_is_cut_only_where_it_is_the_range():
    whole = b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nhelloabc"
    server = _Scripted(whole, whole, whole)
    try:
        client = RangeClient()
        # the whole file from byte 0 is the range 0..8: the spans are cut from it
        assert bytes(client.cat_file(server.url, 0, 8, keep=[(0, 2), (5, 8)])) == b"heabc"
        # longer than the range: handed back whole, for the caller to refuse
        assert bytes(client.cat_file(server.url, 0, 6, keep=[(0, 2), (5, 6)])) == b"helloabc"
        with pytest.raises(ConnectionError, match="short read: 8 of 10"):
            client.cat_file(server.url, 0, 10, keep=[(0, 2), (5, 10)])
    finally:
        server.close()


def test_an_error_answer_with_a_body_keeps_the_connection_unless_it_says_close():
    body = b"<Error><Code>NoSuchKey</Code></Error>"
    missing = b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    busy = b"HTTP/1.1 503 Slow Down\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    fine = b"HTTP/1.1 206 Partial Content\r\nContent-Length: 4\r\n\r\nabcd"
    server = _Scripted(missing, fine, busy, fine)
    try:
        client = RangeClient()
        with pytest.raises(HTTPStatusError, match="HTTP 404 Not Found"):
            client.cat_file(server.url, 0, 4)
        assert bytes(client.cat_file(server.url, 0, 4)) == b"abcd"  # the same connection
        assert server.connections == 1
        with pytest.raises(ConnectionError, match="HTTP 503 Slow Down"):
            client.cat_file(server.url, 0, 4)
        assert not client._local.conns
        assert bytes(client.cat_file(server.url, 0, 4)) == b"abcd"
        assert server.connections == 2
    finally:
        server.close()


def test_garbage_for_an_answer_is_a_connection_error():
    server = _Scripted(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
    try:
        client = RangeClient()
        with pytest.raises(ConnectionError, match="bad HTTP answer"):
            client.cat_file(server.url, 0, 4)
        assert not client._local.conns
    finally:
        server.close()


def test_a_request_leaves_no_reference_cycle_behind():
    # cyclic garbage waits for a full collection, which stops every thread: none per request
    fine = b"HTTP/1.1 206 Partial Content\r\nContent-Length: 4\r\n\r\nabcd"
    server = _Scripted(*[fine] * 60)
    try:
        client = RangeClient()
        client.cat_file(server.url, 0, 4)
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds stays in gc.garbage
        try:
            for _ in range(50):
                assert bytes(client.cat_file(server.url, 0, 4)) == b"abcd"
            gc.collect()
            # only the client's own objects count: other threads (an S3 client's event loop
            # left by earlier tests) make garbage of their own meanwhile
            modules = [type(o).__module__ or "" for o in gc.garbage]
            ours = [m for m in modules if m == httprange.__name__ or m.startswith("httptools")]
            assert ours == []
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
    finally:
        server.close()


@pytest.mark.parametrize(
    "version, connection, kept",
    [("1.1", "", True), ("1.1", "Connection: Close\r\n", False), ("1.0", "", False),
     ("1.0", "Connection: keep-alive\r\n", True)],
)  # fmt: skip
def test_a_connection_is_kept_as_the_answer_allows(version, connection, kept):
    fine = f"HTTP/{version} 206 Partial Content\r\nContent-Length: 4\r\n{connection}\r\nabcd"
    server = _Scripted(fine.encode(), fine.encode())
    try:
        client = RangeClient()
        assert bytes(client.cat_file(server.url, 0, 4)) == b"abcd"
        assert bool(client._local.conns) == kept
    finally:
        server.close()
