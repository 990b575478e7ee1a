"""A TCP proxy on 127.0.0.1 that makes a local server look far away: latency and bandwidth.

``DelayProxy(upstream_port, delay_s=0.03, rate=100e6)`` holds every HTTP request
(``protocol="turns"``: every message the client sends after the server has answered, for
binary request/answer protocols such as HDFS's DataNode transfers) ``delay_s`` seconds
before forwarding it (so the answer's first byte comes at least that
late) and sends each connection's answers at no more than ``rate`` bytes per second (a
token bucket of 64 KiB). ``stats`` counts requests, connections, bytes sent down and the
seconds of delay added; ``stats["peak_held"]`` is the most requests held at once (in their
delay together: how many connections a client really kept busy in parallel), and
``arrivals`` the ``time.monotonic()`` of each request's arrival (the latest 100,000).

As a program it runs in a process of its own (so that its CPU is not the client's) and
prints its port; each line it reads on stdin makes it print its ``stats`` as one JSON line::

    python -m tests.delayproxy --upstream 8333 --delay 0.03 --rate 100e6
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import sys
import threading
import time
from collections import deque

_METHODS = (b"GET ", b"PUT ", b"POST ", b"HEAD ", b"DELETE ")
_CHUNK = 64 << 10


class DelayProxy:
    """Forward 127.0.0.1:``port`` to ``upstream``, adding latency and capping bandwidth."""

    def __init__(
        self,
        upstream_port: int,
        upstream_host: str = "127.0.0.1",
        *,
        delay_s: float = 0.03,
        rate: float = 100e6,
        port: int = 0,
        host: str = "127.0.0.1",
        protocol: str = "http",
    ) -> None:
        if delay_s < 0 or rate <= 0:
            raise ValueError(f"delay_s must be >= 0 and rate > 0, not {delay_s}, {rate}")
        if protocol not in ("http", "turns"):
            raise ValueError(f"protocol must be 'http' or 'turns', not {protocol!r}")
        self.upstream = (upstream_host, upstream_port)
        self.delay_s, self.rate = float(delay_s), float(rate)
        self.protocol = protocol
        self.stats = {"requests": 0, "connections": 0, "bytes_down": 0, "delay_s": 0.0,
                      "held": 0, "peak_held": 0}  # fmt: skip
        self.arrivals: deque[float] = deque(maxlen=100_000)
        self._lock = threading.Lock()
        self._listener = socket.create_server((host, port))
        self.host = host
        self.port = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="delayproxy").start()

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:port``: what a client connects to instead of the server."""
        return f"http://{self.host}:{self.port}"

    def _add(self, key: str, value: float) -> None:
        with self._lock:
            self.stats[key] += value

    def _arrive(self) -> None:
        with self._lock:
            self.arrivals.append(time.monotonic())
            self.stats["requests"] += 1
            self.stats["held"] += 1
            self.stats["peak_held"] = max(self.stats["peak_held"], self.stats["held"])

    def reset_peak(self) -> None:
        """Start counting ``peak_held`` afresh (from the requests held now)."""
        with self._lock:
            self.stats["peak_held"] = self.stats["held"]

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._add("connections", 1)
            threading.Thread(target=self._up, args=(client,), daemon=True).start()

    def _up(self, client: socket.socket) -> None:
        """Client to server: each request held ``delay_s`` before it goes on."""
        try:
            server = socket.create_connection(self.upstream, timeout=30)
        except OSError:
            client.close()
            return
        for s in (client, server):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        answered = [True]  # "turns": the server spoke since the client's last request
        threading.Thread(target=self._down, args=(server, client, answered), daemon=True).start()
        try:
            while True:
                data = client.recv(_CHUNK)
                if not data:
                    break
                if data.startswith(_METHODS) if self.protocol == "http" else answered[0]:
                    # a new request (HTTP clients do not pipeline; in a binary protocol, the
                    # client's first bytes after an answer)
                    answered[0] = False
                    self._arrive()
                    if self.delay_s:
                        time.sleep(self.delay_s)
                    self._add("delay_s", self.delay_s)
                    self._add("held", -1)
                server.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_WR)

    def _down(self, server: socket.socket, client: socket.socket, answered: list) -> None:
        """Server to client, paced to ``rate`` bytes/s on this connection."""
        free_at = time.monotonic()  # when the bucket next has room for a chunk
        try:
            while True:
                data = server.recv(_CHUNK)
                if not data:
                    break
                now = time.monotonic()
                free_at = max(free_at, now)
                if free_at > now:
                    time.sleep(free_at - now)
                self._add("bytes_down", len(data))  # before: the client may read it at once
                client.sendall(data)
                answered[0] = True
                free_at += len(data) / self.rate
        except OSError:
            pass
        for s in (client, server):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def close(self) -> None:
        """Stop accepting connections (open ones end with their peers)."""
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()


def main(argv: list[str] | None = None) -> int:
    """Run a proxy until killed; print its port on the first line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", type=int, required=True, help="the server's port")
    parser.add_argument("--delay", type=float, default=0.03, help="seconds per request")
    parser.add_argument("--rate", type=float, default=100e6, help="bytes/s per connection")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    proxy = DelayProxy(args.upstream, delay_s=args.delay, rate=args.rate, port=args.port)
    print(proxy.port, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        for line in sys.stdin:
            with proxy._lock:
                stats = dict(proxy.stats)
            print(json.dumps(stats), flush=True)
            if line.strip() == "reset":
                proxy.reset_peak()
        while True:  # stdin closed: run until killed
            time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
