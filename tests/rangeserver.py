"""A small HTTP server on 127.0.0.1 that serves files from memory with byte ranges.

``RangeServer({"/d.rec": data, ...})`` answers HEAD (length and an ETag) and GET with one
``Range: bytes=a-b`` (206) or without (200), and records every ranged GET as
``(path, start, end)`` in ``ranges``: what the tests count fetches with. With ``tls``
(a certificate file and its key), it serves HTTPS.
"""

from __future__ import annotations

import hashlib
import http.server
import re
import ssl
import threading

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


class RangeServer:
    """Serve ``files`` (path -> bytes) at ``url``; ``ranges`` logs the ranged GETs."""

    def __init__(self, files: dict[str, bytes], tls: tuple[str, str] | None = None) -> None:
        self.files = dict(files)
        self.ranges: list[tuple[str, int, int]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _head(self, code: int, length: int, data: bytes, extra: dict) -> None:
                self.send_response(code)
                self.send_header("Content-Length", str(length))
                self.send_header("ETag", '"' + hashlib.md5(data).hexdigest() + '"')
                self.send_header("Accept-Ranges", "bytes")
                for k, v in extra.items():
                    self.send_header(k, v)
                self.end_headers()

            def _file(self) -> bytes | None:
                data = server.files.get(self.path.split("?")[0])
                if data is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                return data

            def do_HEAD(self):  # noqa: N802 - http.server's name
                data = self._file()
                if data is not None:
                    self._head(200, len(data), data, {})

            def do_GET(self):  # noqa: N802
                data = self._file()
                if data is None:
                    return
                m = _RANGE.match(self.headers.get("Range", ""))
                if m is None:
                    self._head(200, len(data), data, {})
                    self.wfile.write(data)
                    return
                start = int(m[1])
                end = min(int(m[2]) + 1 if m[2] else len(data), len(data))
                with server._lock:
                    server.ranges.append((self.path, start, end))
                extra = {"Content-Range": f"bytes {start}-{end - 1}/{len(data)}"}
                self._head(206, end - start, data, extra)
                self.wfile.write(data[start:end])

            def log_message(self, *args):
                pass

        class Server(http.server.ThreadingHTTPServer):
            request_queue_size = 64  # many clients connecting at once (a node's 8 ranks)

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)
            self.url = f"https://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    def fetched(self, path: str) -> int:
        """Bytes the ranged GETs of ``path`` have sent."""
        with self._lock:
            return sum(e - s for p, s, e in self.ranges if p == path)

    def close(self) -> None:
        """Stop serving."""
        self._httpd.shutdown()
        self._httpd.server_close()
