"""URLs: which store a URL names, and its fsspec filesystem."""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator
from typing import Any

from .._install import install_hint

# Optional backends named by the extra that installs them.
_EXTRA_FOR_PROTOCOL = {"s3": "s3", "s3a": "s3", "hdfs": "hdfs", "viewfs": "hdfs"}


def split_protocol(url: str) -> tuple[str, str]:
    """('file', '/x/y.rec') for plain paths and file:// URLs; ('s3', 'bucket/key') etc."""
    url = os.fspath(url)
    if "://" not in url:
        return "file", url
    protocol, rest = url.split("://", 1)
    return protocol, rest


def is_local(url: str) -> bool:
    """Whether ``url`` is a local file: a plain path, ``file://`` or ``local://``."""
    return split_protocol(url)[0] in ("file", "local")


def local_path(url: str) -> str:
    """The path of a local ``url``: a plain path as it is, else the part after ``://``."""
    return split_protocol(url)[1]


# The filesystems made inside one_client(): (protocol, options' token) -> instance.
_one_client: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "recio_one_client", default=None
)


@contextlib.contextmanager
def one_client() -> Iterator[None]:
    """Within it, one client per protocol and storage options (obstore: per bucket too).

    Opening a dataset reads several files (``.rec``, ``.idx``, the checksum sidecar, and
    whether each exists) with the same options. fsspec reuses an instance for equal
    options anyway, except with ``skip_instance_cache=True``: then every read made its own
    client (an S3 dataset's five took 1.2 s and left 141,000 objects for the garbage
    collector). Inside this block such reads share one fresh instance, never one from
    before it: :func:`filesystem`'s, or the obstore store of :mod:`~recio.storage.stores`.
    """
    token = _one_client.set({})
    try:
        yield
    finally:
        _one_client.reset(token)


def shared_client(key: Any, make: Any) -> Any:
    """``make()``, or inside :func:`one_client` the one made before for ``key``."""
    made = _one_client.get()
    if made is None:
        return make()
    if key not in made:
        made[key] = make()
    return made[key]


def filesystem(url: str, storage_options: dict[str, Any] | None = None):
    """The fsspec filesystem for ``url`` and the path within it.

    A missing optional backend is reported with the extra that installs it.
    """
    import fsspec.core  # here, not at the top: local-only runs skip its ~60 ms import

    protocol, _ = split_protocol(url)
    made = _one_client.get()
    key = None
    if made is not None and "::" not in url:  # chained URLs: left to fsspec
        from fsspec.utils import tokenize

        key = (protocol, tokenize(storage_options or {}))
        if key in made:
            fs = made[key]
            return fs, fs._strip_protocol(url)
    try:
        fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    except ImportError as exc:
        extra = _EXTRA_FOR_PROTOCOL.get(protocol)
        hint = install_hint(extra) if extra else f"install fsspec's {protocol} backend"
        raise ImportError(f"reading {protocol}:// URLs needs an extra package: {hint}") from exc
    if key is not None:
        made[key] = fs
    return fs, path


def with_client_defaults(url: str, storage_options: dict[str, Any] | None) -> dict[str, Any]:
    """Storage options with bounded timeouts and client retries; the caller's options win.

    So recio's own retry loop (which names the range) decides, and a dead server fails in
    seconds, not minutes.
    """
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
