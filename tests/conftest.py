"""Fixtures: the decode backend under test, in-memory fsspec storage, and the real S3 /
HDFS test servers.

The servers are reached at ``RECIO_S3_ENDPOINT`` (default http://127.0.0.1:8333, key
and secret from ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``, default
testing/testing, bucket ``RECIO_S3_BUCKET`` = test) and ``RECIO_HDFS_URL`` (default
hdfs://127.0.0.1:9000) / ``RECIO_WEBHDFS_URL`` (default webhdfs://127.0.0.1:9870).
When one does not answer and its URL is not set, the pytest run starts a private one
(``tools/s3_server.sh start`` / ``tools/hdfs_server.sh start`` with a state dir, free
ports and an owner token of its own) and stops it at its end. If that fails the tests
marked ``s3`` / ``hdfs`` skip with the reason, except under CI (env ``CI`` set), where
they fail. The restart tests stop and start only a server this run started (the pytest run's
private one, or tools/run_tests.sh's, named by ``RECIO_SERVERS_STATE`` /
``RECIO_SERVERS_OWNER``); on any other they skip.

Optional pieces are asked for per test: ``@pytest.mark.needs_native`` (the C extension
``recio._native``: skipped where it is not built, failed under CI, which builds it),
``@needs_torch`` and ``@needs_dali`` (the train and dali extras: skipped where missing).
The ``shapes`` fixture holds the small learnable .rec files of the training tests and the
examples.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from recio import decode

from .images import backends

TOOLS = Path(__file__).resolve().parent.parent / "tools"
S3_ENDPOINT = os.environ.get("RECIO_S3_ENDPOINT", "http://127.0.0.1:8333")
S3_BUCKET = os.environ.get("RECIO_S3_BUCKET", "test")
S3_KEY = os.environ.get("AWS_ACCESS_KEY_ID", "testing")
S3_SECRET = os.environ.get("AWS_SECRET_ACCESS_KEY", "testing")
HDFS_URL = os.environ.get("RECIO_HDFS_URL", "hdfs://127.0.0.1:9000")
WEBHDFS_URL = os.environ.get("RECIO_WEBHDFS_URL", "webhdfs://127.0.0.1:9870")


def in_ci() -> bool:
    """Whether the environment variable ``CI`` is set (CI runs with CI=true)."""
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


# --- the C extension ---------------------------------------------------------------------

NATIVE_MISSING = "the C extension recio._native is not built: run pip install -e ."


def native_decision(available: bool, ci: bool) -> str:
    """What a test that needs ``recio._native`` does: "run", "skip" or (under CI, which
    builds the extension, so its absence is a broken build) "fail"."""
    if available:
        return "run"
    return "fail" if ci else "skip"


def native_built() -> bool:
    """Whether the extension is built; where it is not, under CI, the calling test fails."""
    if native_decision(decode.native_available(), in_ci()) == "fail":
        pytest.fail(NATIVE_MISSING + " (CI expects it)", pytrace=False)
    return decode.native_available()


def require_native() -> None:
    """Skip (or under CI fail) the calling test or fixture unless the extension is built."""
    if not native_built():
        pytest.skip(NATIVE_MISSING)


@pytest.hookimpl(tryfirst=True)
@pytest.fixture(autouse=True, scope="module")
def _release_remote_clients():
    """After each test module, drop the fsspec filesystems it left cached, in this process.

    fsspec empties its instance cache in a forked child; an HDFS client (hdfs-native)
    released there waits for runtime threads the child does not have, so a later test
    that forks (im2rec's process pool, DataLoader workers) would hang.
    """
    yield
    import sys

    if "fsspec" in sys.modules:
        import gc

        from fsspec.spec import _registered_classes

        for cls in list(_registered_classes):
            cls.clear_instance_cache()
        gc.collect()


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("needs_native") is not None:
        require_native()


# --- optional extras: skipped where not installed -----------------------------------------


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # a parent package is missing (nvidia)
        return False


needs_torch = pytest.mark.skipif(not _installed("torch"), reason="needs PyTorch (the train extra)")
_needs_dali = pytest.mark.skipif(
    not _installed("nvidia.dali"), reason="needs nvidia-dali (the dali extra)"
)


def needs_dali(test):
    """Marks a test ``dali`` and skips it where nvidia-dali is not installed."""
    return pytest.mark.dali(_needs_dali(test))


@pytest.fixture(scope="session")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Small learnable .rec files (the sample shapes) for the training tests and examples."""
    from ._train_data import make_shapes_rec

    root = tmp_path_factory.mktemp("shapes")
    return {
        "train": make_shapes_rec(str(root / "train.rec"), 384, seed=1),
        "val": make_shapes_rec(str(root / "val.rec"), 128, seed=2),
        "small": make_shapes_rec(str(root / "small.rec"), 96, seed=3),
    }


# --- the S3 and HDFS test servers ----------------------------------------------------------
#
# A server belongs to the run that started it: tools/<script> records, in a state dir
# (RECIO_SERVERS_STATE), the pid it launched, its ports and an owner token
# (RECIO_SERVERS_OWNER), and its stop stops nothing else. tools/run_tests.sh starts its
# own servers on free ports and passes their URLs, state dir and token to pytest; when
# nothing answers and no URL was given, the pytest run starts private ones here and stops them
# at its end. A server found running otherwise (another checkout's, a developer's) is used,
# never stopped: the restart tests skip on it.


@dataclass
class Server:
    """A test server that ``tools/<script>`` started from ``state`` for ``owner``: what
    ``owns``, ``stop`` and ``start`` of the script act on. ``env`` holds the ports and URLs it
    recorded (``RECIO_S3_PORT=...``, ``RECIO_S3_ENDPOINT=...``); ``private``: every port
    picked free (the pytest run's own servers)."""

    script: str
    state: str | None
    owner: str
    private: bool = False
    env: dict[str, str] = field(default_factory=dict)

    def run(self, action: str, timeout: float = 240) -> subprocess.CompletedProcess:
        env = dict(os.environ, RECIO_SERVERS_OWNER=self.owner)
        if self.state is None:
            env.pop("RECIO_SERVERS_STATE", None)
        else:
            env["RECIO_SERVERS_STATE"] = self.state
        if self.private:
            env = {k: v for k, v in env.items() if not k.endswith("_PORT")}
            env["RECIO_SERVERS_PORTS"] = "auto"
        try:
            return subprocess.run(
                [str(TOOLS / self.script), action],
                env=env, capture_output=True, text=True, timeout=timeout,
            )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            return subprocess.CompletedProcess(exc.cmd, 124, "", f"timed out after {timeout}s")

    def owned(self) -> str:
        """Why the server this owner started from the state dir is not running ("" when
        it is; ``env`` is then read again)."""
        done = self.run("owns", timeout=30)
        if done.returncode:
            return done.stderr.strip() or f"{self.script} owns: exit {done.returncode}"
        self.env = dict(line.split("=", 1) for line in done.stdout.split() if "=" in line)
        return ""

    def ports(self) -> list[int]:
        """Every port the server listens on (as recorded)."""
        return [int(v) for k, v in self.env.items() if k.endswith("_PORT")]


def _unavailable(what: str, why: str) -> None:
    message = f"{what} test server unavailable: {why}"
    if in_ci():
        pytest.fail(message + " (CI is set: storage tests must run, not skip)", pytrace=False)
    pytest.skip("!!! " + message + " -- start it with tools/ci_services.sh start !!!")


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on (the system's pick) for a server to take."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def _port_open(url: str) -> bool:
    parts = urlsplit(url)
    return port_open(parts.port, parts.hostname)


@dataclass
class ServerInUse:
    """The server a pytest run's tests use: ``urls`` (``RECIO_S3_ENDPOINT`` or ``RECIO_HDFS_URL``
    and ``RECIO_WEBHDFS_URL``), ``why`` it is unusable ("" if it is), and ``owned``, the
    :class:`Server` if this run started it, else ``not_owned`` says why it may not be stopped."""

    urls: dict[str, str]
    why: str = ""
    owned: Server | None = None
    not_owned: str = ""


def _owned_by_this_run(script: str, key: str, url: str) -> tuple[Server | None, str]:
    """The running server at ``url`` as this run's own, from ``RECIO_SERVERS_OWNER`` and
    ``RECIO_SERVERS_STATE`` (what tools/run_tests.sh passes), or None and why not."""
    owner = os.environ.get("RECIO_SERVERS_OWNER")
    if not owner:
        return None, (f"the server at {url} was not started by this run (no RECIO_SERVERS_OWNER;"
                      " tools/run_tests.sh starts and owns its own)")  # fmt: skip
    server = Server(script, os.environ.get("RECIO_SERVERS_STATE"), owner)
    why = server.owned()
    if why:
        return None, f"the server at {url} is not this run's: {why}"
    if server.env.get(key) != url:
        return None, f"this run's server is at {server.env.get(key)}, the tests use {url}"
    return server, ""


def _server_in_use(script, urls, given, ready, timeout, request) -> ServerInUse:
    """The server at ``urls`` if ``ready(urls)`` (-> "" or why not) says it answers; else,
    when no URL was ``given`` in the environment, a private one started for this run."""
    key = next(iter(urls))
    why = ready(urls)
    if not why:
        return ServerInUse(urls, "", *_owned_by_this_run(script, key, urls[key]))
    if given:
        return ServerInUse(urls, why)
    state = tempfile.mkdtemp(prefix="recio-pytest-servers-")
    server = Server(script, state, f"pytest-{os.getpid()}-{uuid.uuid4().hex[:8]}", private=True)

    def stop() -> None:
        if server.run("stop", timeout=120).returncode == 0:
            shutil.rmtree(state, ignore_errors=True)

    request.addfinalizer(stop)
    done = server.run("start", timeout)
    if done.returncode or server.owned():
        return ServerInUse(urls, f"{script} start failed: {(done.stdout + done.stderr)[-800:]}")
    urls = {k: server.env[k] for k in urls}
    return ServerInUse(urls, ready(urls), server)


def s3_options(endpoint: str = S3_ENDPOINT, **extra) -> dict:
    return {
        "endpoint_url": endpoint,
        "key": S3_KEY,
        "secret": S3_SECRET,
        "skip_instance_cache": True,
        "config_kwargs": {"connect_timeout": 2, "read_timeout": 10},
        **extra,
    }


def _s3_ready(urls: dict[str, str]) -> str:
    endpoint = urls["RECIO_S3_ENDPOINT"]
    if not _port_open(endpoint):
        return f"nothing listens at {endpoint}"
    try:
        import s3fs
    except ImportError:
        return "s3fs is not installed (the s3 extra)"
    try:
        s3fs.S3FileSystem(**s3_options(endpoint)).ls(S3_BUCKET)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


@pytest.fixture(scope="session")
def s3_in_use(request: pytest.FixtureRequest) -> ServerInUse:
    return _server_in_use(
        "s3_server.sh", {"RECIO_S3_ENDPOINT": S3_ENDPOINT}, "RECIO_S3_ENDPOINT" in os.environ,
        _s3_ready, 120, request,
    )  # fmt: skip


@pytest.fixture(scope="session")
def s3_server(s3_in_use: ServerInUse) -> dict:
    """Options for the S3 server the tests use (a private one started if none answers)."""
    if s3_in_use.why:
        _unavailable("S3", s3_in_use.why)
    return s3_options(s3_in_use.urls["RECIO_S3_ENDPOINT"])


@pytest.fixture
def s3_owned_server(s3_server, s3_in_use: ServerInUse) -> Server:
    """The S3 server in use, if this run started it (the only kind a test may stop)."""
    if s3_in_use.owned is None:
        pytest.skip(f"needs an S3 server this run started: {s3_in_use.not_owned}")
    return s3_in_use.owned


@pytest.fixture
def s3_prefix(s3_server) -> str:
    """A fresh s3:// folder for one test."""
    return f"s3://{S3_BUCKET}/pytest-{uuid.uuid4().hex[:10]}"


def _hdfs_ready(urls: dict[str, str]) -> str:
    hdfs, web = urls["RECIO_HDFS_URL"], urls["RECIO_WEBHDFS_URL"]
    if not _port_open(hdfs) or not _port_open(web.replace("webhdfs", "http")):
        return f"nothing listens at {hdfs} / {web}"
    try:
        import hdfs_native.fsspec  # noqa: F401
    except ImportError:
        return "hdfs-native is not installed (the hdfs extra)"
    return ""


@pytest.fixture(scope="session")
def hdfs_in_use(request: pytest.FixtureRequest) -> ServerInUse:
    given = "RECIO_HDFS_URL" in os.environ or "RECIO_WEBHDFS_URL" in os.environ
    urls = {"RECIO_HDFS_URL": HDFS_URL, "RECIO_WEBHDFS_URL": WEBHDFS_URL}
    return _server_in_use("hdfs_server.sh", urls, given, _hdfs_ready, 240, request)


@pytest.fixture(scope="session")
def hdfs_server(hdfs_in_use: ServerInUse) -> str:
    """hdfs:// URL of the HDFS NameNode the tests use (a private one started if none answers)."""
    if hdfs_in_use.why:
        _unavailable("HDFS", hdfs_in_use.why)
    return hdfs_in_use.urls["RECIO_HDFS_URL"]


@pytest.fixture
def hdfs_owned_server(hdfs_server, hdfs_in_use: ServerInUse) -> Server:
    """The HDFS server in use, if this run started it (the only kind a test may stop)."""
    if hdfs_in_use.owned is None:
        pytest.skip(f"needs an HDFS server this run started: {hdfs_in_use.not_owned}")
    return hdfs_in_use.owned


@pytest.fixture
def hdfs_prefix(hdfs_server) -> str:
    return f"{hdfs_server}/pytest-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def webhdfs_prefix(hdfs_server, hdfs_in_use: ServerInUse) -> str:
    return f"{hdfs_in_use.urls['RECIO_WEBHDFS_URL']}/pytest-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def memfs():
    """fsspec's memory file system, emptied after the test."""
    import fsspec

    fs = fsspec.filesystem("memory")
    yield fs
    fs.store.clear()
    fs.pseudo_dirs.clear()
    fs.pseudo_dirs.append("")


@pytest.fixture(params=backends())
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def pool(backend: str):
    with decode.DecodePool(2, backend=backend) as p:
        yield p
