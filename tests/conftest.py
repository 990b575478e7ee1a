"""Fixtures: the decode backend under test, in-memory fsspec storage, and the real S3 /
HDFS test servers.

The servers are reached at ``RECIO_S3_ENDPOINT`` (default http://127.0.0.1:8333, key
and secret from ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``, default
testing/testing, bucket ``RECIO_S3_BUCKET`` = test) and ``RECIO_HDFS_URL`` (default
hdfs://127.0.0.1:9000) / ``RECIO_WEBHDFS_URL`` (default webhdfs://127.0.0.1:9870).
When one does not answer, the fixture starts it with ``tools/s3_server.sh start`` or
``tools/hdfs_server.sh start``. If that fails the tests marked ``s3`` / ``hdfs`` skip
with the reason, except under CI (env ``CI`` set), where they fail.

Optional pieces are asked for per test: ``@pytest.mark.needs_native`` (the C extension
``recio._native``: skipped where it is not built, failed under CI, which builds it),
``@needs_torch`` and ``@needs_dali`` (the train and dali extras: skipped where missing).
The ``shapes`` fixture holds the small learnable .rec files of the training tests and the
examples.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import uuid
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


def _unavailable(what: str, why: str) -> None:
    message = f"{what} test server unavailable: {why}"
    if in_ci():
        pytest.fail(message + " (CI is set: storage tests must run, not skip)", pytrace=False)
    pytest.skip("!!! " + message + " -- start it with tools/ci_services.sh start !!!")


def _port_open(url: str) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=1):
            return True
    except OSError:
        return False


def _start(script: str, timeout: float) -> str:
    try:
        done = subprocess.run(
            [str(TOOLS / script), "start"], capture_output=True, text=True, timeout=timeout
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{script} start: {exc}"
    return "" if done.returncode == 0 else f"{script} start failed: {done.stdout[-800:]}"


def s3_options(endpoint: str = S3_ENDPOINT, **extra) -> dict:
    return {
        "endpoint_url": endpoint,
        "key": S3_KEY,
        "secret": S3_SECRET,
        "skip_instance_cache": True,
        "config_kwargs": {"connect_timeout": 2, "read_timeout": 10},
        **extra,
    }


def _s3_ready() -> str:
    if not _port_open(S3_ENDPOINT):
        return f"nothing listens at {S3_ENDPOINT}"
    try:
        import s3fs
    except ImportError:
        return "s3fs is not installed (the s3 extra)"
    try:
        s3fs.S3FileSystem(**s3_options()).ls(S3_BUCKET)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


@pytest.fixture(scope="session")
def s3_server() -> dict:
    """Options for the running S3 server (started if needed)."""
    why = _s3_ready()
    if why and S3_ENDPOINT == "http://127.0.0.1:8333":
        why = _start("s3_server.sh", 120) or _s3_ready()
    if why:
        _unavailable("S3", why)
    return s3_options()


@pytest.fixture
def s3_prefix(s3_server) -> str:
    """A fresh s3:// folder for one test."""
    return f"s3://{S3_BUCKET}/pytest-{uuid.uuid4().hex[:10]}"


def _hdfs_ready() -> str:
    if not _port_open(HDFS_URL) or not _port_open(WEBHDFS_URL.replace("webhdfs", "http")):
        return f"nothing listens at {HDFS_URL} / {WEBHDFS_URL}"
    try:
        import hdfs_native.fsspec  # noqa: F401
    except ImportError:
        return "hdfs-native is not installed (the hdfs extra)"
    return ""


@pytest.fixture(scope="session")
def hdfs_server() -> str:
    """hdfs:// URL of the running HDFS NameNode (started if needed)."""
    why = _hdfs_ready()
    if why and HDFS_URL == "hdfs://127.0.0.1:9000":
        why = _start("hdfs_server.sh", 240) or _hdfs_ready()
    if why:
        _unavailable("HDFS", why)
    return HDFS_URL


@pytest.fixture
def hdfs_prefix(hdfs_server) -> str:
    return f"{hdfs_server}/pytest-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def webhdfs_prefix(hdfs_server) -> str:
    return f"{WEBHDFS_URL}/pytest-{uuid.uuid4().hex[:10]}"


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
