"""The test servers' scripts (tools/s3_server.sh, tools/hdfs_server.sh) and fixtures: a server
belongs to the state dir and owner token that started it, and a stop from anyone else --
another owner, another state dir, a server found running -- leaves it running.

The first tests fake the servers (a process, an HTTP listener) and run in a second; the
others start real private instances on free ports, never the servers others may be using."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time
import uuid

import pytest

from .conftest import (
    S3_BUCKET,
    TOOLS,
    Server,
    _s3_ready,
    _server_in_use,
    _unavailable,
    port_open,
    s3_options,
)

SCRIPTS = {"s3": ("s3_server.sh", "weed.pid"), "hdfs": ("hdfs_server.sh", "namenode.pid")}


def script(name: str, action: str, state, owner: str | None, **env) -> subprocess.CompletedProcess:
    """``tools/<name> action`` for ``state`` and ``owner``, every port free-picked unless given."""
    full = {k: v for k, v in os.environ.items() if not k.endswith("_PORT")}
    full.update(RECIO_SERVERS_STATE=str(state), RECIO_SERVERS_PORTS="auto", **env)
    full.pop("RECIO_SERVERS_OWNER", None)
    if owner is not None:
        full["RECIO_SERVERS_OWNER"] = owner
    return subprocess.run(
        [str(TOOLS / name), action], env=full, capture_output=True, text=True, timeout=240
    )


@pytest.fixture
def stand_in(tmp_path):
    """A process that looks launched from a state dir (its command line names it)."""
    procs = []

    def make(kind: str, owner: str):
        name, pidfile = SCRIPTS[kind]
        folder = tmp_path / "state" / kind
        folder.mkdir(parents=True, exist_ok=True)
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", f"{folder}/"])
        procs.append(p)
        (folder / pidfile).write_text(f"{p.pid}\n")
        (folder / "owner").write_text(owner + "\n")
        return p

    yield make
    for p in procs:
        p.kill()
        p.wait()


@pytest.mark.parametrize("kind", SCRIPTS)
def test_stop_refuses_another_owners_server(kind, tmp_path, stand_in):
    name = SCRIPTS[kind][0]
    p = stand_in(kind, "owner-a")
    state = tmp_path / "state"
    for other in ("owner-b", None):  # None: the default owner
        done = script(name, "stop", state, other)
        assert done.returncode == 3, done
        assert "started by owner 'owner-a'" in done.stderr and "not stopping it" in done.stderr
        assert p.poll() is None
        assert script(name, "owns", state, other).returncode == 1
        assert script(name, "clean", state, other).returncode == 3
    assert script(name, "owns", state, "owner-a").returncode == 0
    done = script(name, "stop", state, "owner-a")
    assert done.returncode == 0, done
    assert p.wait(timeout=5) is not None  # the owner's stop did stop it


@pytest.mark.parametrize("kind", SCRIPTS)
def test_stop_kills_no_pid_its_state_dir_did_not_launch(kind, tmp_path):
    """A recorded pid that is now some other process (pid reuse, a stale file) is left alone."""
    name, pidfile = SCRIPTS[kind]
    folder = tmp_path / "state" / kind
    folder.mkdir(parents=True)
    other = subprocess.Popen(["sleep", "600"])
    try:
        (folder / pidfile).write_text(f"{other.pid}\n")
        (folder / "owner").write_text("owner-a\n")
        done = script(name, "stop", tmp_path / "state", "owner-a")
        assert done.returncode == 0 and "not running" in done.stdout, done
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


class _FakeS3(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # a ListBuckets answer with the test bucket, to anyone
        body = f"<ListAllMyBucketsResult><Buckets><Bucket><Name>{S3_BUCKET}</Name></Bucket>"
        body = (body + "</Buckets></ListAllMyBucketsResult>").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_server_found_running_is_used_never_stopped(tmp_path):
    """Something answers on the S3 port that no state dir of ours started: start uses it,
    owns says no, stop refuses, and it keeps answering."""
    fake = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeS3)
    threading.Thread(target=fake.serve_forever, daemon=True).start()
    port = str(fake.server_address[1])
    try:
        state = tmp_path / "state"
        done = script("s3_server.sh", "start", state, "owner-a", RECIO_S3_PORT=port)
        assert done.returncode == 0 and "not started from" in done.stdout, done
        assert not (state / "s3" / "owner").exists()
        assert script("s3_server.sh", "owns", state, "owner-a", RECIO_S3_PORT=port).returncode == 1
        done = script("s3_server.sh", "stop", state, "owner-a", RECIO_S3_PORT=port)
        assert done.returncode == 3 and "not started from" in done.stderr, done
        assert port_open(int(port))
    finally:
        fake.shutdown()
        fake.server_close()


# --- real private instances ------------------------------------------------------------------


def _open_ports(server: Server) -> list[int]:
    return [p for p in server.ports() if port_open(p)]


REAL = [
    pytest.param("s3", marks=pytest.mark.s3),
    pytest.param("hdfs", marks=[pytest.mark.hdfs, pytest.mark.slow]),
]


@pytest.mark.parametrize("kind", REAL)
def test_private_server_survives_others_stops_and_its_owners_stop_stops_it(kind, tmp_path):
    name = SCRIPTS[kind][0]
    state = tmp_path / "state"
    owner = f"test-{uuid.uuid4().hex[:8]}"
    server = Server(name, str(state), owner, private=True)
    try:
        done = server.run("start")
        if done.returncode:
            _unavailable(kind.upper(), f"{name} start failed: {(done.stdout + done.stderr)[-800:]}")
        assert server.owned() == ""
        assert len(set(server.ports())) == len(server.ports()) == 5
        ports = {k: v for k, v in server.env.items() if k.endswith("_PORT")}
        # another owner, the default owner, another state dir on the same ports: all refused
        for who, where in (("intruder", state), (None, state), (owner, tmp_path / "elsewhere")):
            done = script(name, "stop", where, who, **ports)
            assert done.returncode == 3 and "not stopping it" in done.stderr, (who, where, done)
            assert server.run("status", timeout=30).returncode == 0
        assert script(name, "clean", state, "intruder").returncode == 3
        assert (state / kind / "data").is_dir()
        # the owner's stop stops it: not ready, every port closed; its start brings it back
        before = dict(server.env)
        assert server.run("stop").returncode == 0
        assert server.run("status", timeout=30).returncode == 1
        assert _open_ports(server) == []
        assert server.run("start").returncode == 0 and server.owned() == ""
        assert server.env == before  # the same ports and URLs
    finally:
        stopped = server.run("stop")
    assert stopped.returncode == 0, stopped
    assert _open_ports(server) == []


class _Finalizers:
    def __init__(self):
        self.calls = []

    def addfinalizer(self, fn):
        self.calls.append(fn)


@pytest.mark.s3
def test_a_pytest_run_starts_and_stops_a_private_s3_server_when_none_answers():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there
    request = _Finalizers()
    urls = {"RECIO_S3_ENDPOINT": f"http://127.0.0.1:{port}"}
    used = _server_in_use("s3_server.sh", urls, False, _s3_ready, 120, request)
    try:
        if used.owned is None:
            _unavailable("S3", used.why)
        assert used.why == "" and used.urls["RECIO_S3_ENDPOINT"] != urls["RECIO_S3_ENDPOINT"]
        assert used.owned.owner.startswith("pytest-") and used.owned.state
        assert _s3_ready(used.urls) == ""
        import s3fs

        fs = s3fs.S3FileSystem(**s3_options(used.urls["RECIO_S3_ENDPOINT"]))
        assert fs.ls(S3_BUCKET) == []  # its own data, not someone else's
    finally:
        for fn in request.calls:
            fn()
    deadline = time.monotonic() + 5
    while _open_ports(used.owned) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _open_ports(used.owned) == []
    assert not os.path.exists(used.owned.state)  # its state dir went with it
