"""A TCP proxy on 127.0.0.1 that injects faults between an HTTP client and server.

Faults are queued per request: ``proxy.inject("reset", "503", "cut", "delay")``; each
new HTTP request the client sends takes the next one:

- ``reset``: the connection is reset before the request reaches the server;
- ``503``: the proxy answers ``503 SlowDown`` itself (S3's throttling reply);
- ``cut``: the server's answer is cut after 16 KiB and the connection reset;
- ``delay``: the request is held ``proxy.delay_s`` seconds, then forwarded.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections import deque

_METHODS = (b"GET ", b"PUT ", b"POST ", b"HEAD ", b"DELETE ")
_SLOWDOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


def _reset(sock: socket.socket) -> None:
    # SO_LINGER 0: close() sends RST, the client sees "connection reset by peer". The other
    # direction's thread may be blocked in recv() on this socket, which holds it open (and
    # the RST unsent) until the client gives up: shutdown(SHUT_RD) wakes that thread first.
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RD)
    with contextlib.suppress(OSError):
        sock.close()


class FaultProxy:
    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.faults: deque[str] = deque()
        self.delay_s = 0.5
        self.injected: list[str] = []
        self.requests = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def inject(self, *faults: str) -> None:
        with self._lock:
            self.faults.extend(faults)

    def _take(self) -> str | None:
        with self._lock:
            self.requests += 1
            if not self.faults:
                return None
            fault = self.faults.popleft()
            self.injected.append(fault)
            return fault

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            server = socket.create_connection(self.upstream, timeout=10)
        except OSError:
            _reset(client)
            return
        state = {"cut": False}
        threading.Thread(target=self._down, args=(server, client, state), daemon=True).start()
        try:
            while True:
                data = client.recv(1 << 16)
                if not data:
                    break
                fault = self._take() if data.startswith(_METHODS) else None
                if fault == "reset":
                    _reset(client)
                    _reset(server)
                    return
                if fault == "503":
                    head = (
                        b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                        b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(_SLOWDOWN)
                    )
                    with contextlib.suppress(OSError):
                        client.sendall(head + _SLOWDOWN)
                    client.close()
                    _reset(server)
                    return
                if fault == "delay":
                    time.sleep(self.delay_s)
                if fault == "cut":
                    state["cut"] = True
                server.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_WR)

    def _down(self, server: socket.socket, client: socket.socket, state: dict) -> None:
        sent = 0
        try:
            while True:
                data = server.recv(1 << 16)
                if not data:
                    break
                if state["cut"] and sent + len(data) > 16 << 10:
                    client.sendall(data[: max(0, (16 << 10) - sent)])
                    _reset(client)
                    _reset(server)
                    return
                client.sendall(data)
                sent += len(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            client.shutdown(socket.SHUT_WR)
        with contextlib.suppress(OSError):
            client.close()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
