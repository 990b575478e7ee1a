"""The hidden ``.partial`` temporaries of atomic writers: whose they are, and the stale ones.

NOTE [partial owners]: an :class:`~.atomic.AtomicOutput` writes ``NAME`` under the hidden
name ``.NAME.w<pid>-<start>-<ns>@<host>.<random>.partial`` beside it: the writer's process
id, that process's start time (``/proc``'s clock ticks since boot), its pid namespace and
its host. A writer killed before ``commit()`` leaves that file. The next writer of
``NAME`` removes the temporaries whose writer is gone: written on this host, in this pid
namespace, by a process that no longer runs (no such pid, or a pid that now belongs to a
process started at another time). It never removes one of a writer that still runs, nor
one it cannot tell: of another host or pid namespace (a container with the same host
name), or without an owner in its name (written by an earlier recio). ``recio info`` and
``recio verify`` list the ones they see. The Dask engine, which knows no writer of a shard
is left, removes them all (:func:`~.atomic.remove_partials`).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
from typing import Any, NamedTuple

from .urls import filesystem, is_local, local_path, split_protocol, with_client_defaults

__all__ = [
    "GONE",
    "RUNNING",
    "UNKNOWN",
    "Partial",
    "describe_partials",
    "find_partials",
    "partial_prefix",
    "remove_stale_partials",
]

RUNNING, GONE, UNKNOWN = "running", "gone", "unknown"

# Stores that publish an object only when its upload completes: no temporaries there.
PUBLISH_ON_CLOSE = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl"}

_OWNER = re.compile(r"w(?P<pid>\d+)-(?P<start>\d+)-(?P<ns>\d+)@(?P<host>[A-Za-z0-9._-]+)")


class Partial(NamedTuple):
    """One hidden temporary beside an output, and what is known of its writer."""

    url: str  # the temporary's own path or URL
    size: int  # bytes (-1 where the listing does not say)
    state: str  # RUNNING, GONE or UNKNOWN
    writer: str  # "pid 123 on host h", or why it is unknown


def _host() -> str:
    name = re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname())[:64]
    return name or "localhost"


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux ``/proc``), else None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return int(data.rsplit(b")", 1)[1].split()[19])  # field 22; after "(comm)": 3
    except (OSError, IndexError, ValueError):
        return None


def _pid_namespace() -> int:
    """The inode of this process's pid namespace (Linux), else 0."""
    try:
        return int(re.sub(r"\D", "", os.readlink("/proc/self/ns/pid")) or 0)
    except (OSError, ValueError):
        return 0


def partial_prefix(base: str) -> str:
    """The hidden name's start for an output named ``base``, with this writer's identity."""
    pid = os.getpid()
    return f".{base}.w{pid}-{_start_time(pid) or 0}-{_pid_namespace()}@{_host()}."


def _writer(name: str, base: str) -> tuple[str, str] | None:
    """``(state, writer)`` of a temporary of ``base`` called ``name``; None if it is none."""
    head = f".{base}."
    if not (name.startswith(head) and name.endswith(".partial")):
        return None
    middle = name[len(head) : -len(".partial")]  # owner.random, or random (an old recio's)
    owner, dot, _ = middle.rpartition(".")
    found = _OWNER.fullmatch(owner) if dot else None
    if found is None:
        if "." in middle:  # another output's: ".a.rec.idx.X.partial" is not a.rec's
            return None
        return UNKNOWN, "a writer its name does not record"
    pid, start, ns, host = int(found["pid"]), int(found["start"]), int(found["ns"]), found["host"]
    writer = f"pid {pid} on host {host}"
    if host != _host() or ns != _pid_namespace():
        return UNKNOWN, writer + (" (another pid namespace)" if host == _host() else "")
    return _process_state(pid, start), writer


def _process_state(pid: int, start: int) -> str:
    if pid <= 0:
        return UNKNOWN
    try:
        os.kill(pid, 0)  # signal 0: is there such a process?
    except ProcessLookupError:
        return GONE
    except PermissionError:
        pass  # there is, another user's
    except (OSError, OverflowError):
        return UNKNOWN
    now = _start_time(pid)
    if start and now is not None and now != start:
        return GONE  # the pid now belongs to another process
    return RUNNING


def _listing(url: str, options: dict[str, Any] | None) -> tuple[str, list[tuple[str, str, int]]]:
    """``(base, [(name, url, size)])``: the hidden entries beside ``url`` that may be its."""
    if is_local(url):
        folder, base = os.path.split(os.path.abspath(local_path(url)))
        found = []
        for entry in os.scandir(folder):
            if entry.name.startswith(f".{base}.") and entry.name.endswith(".partial"):
                with contextlib.suppress(OSError):
                    found.append((entry.name, entry.path, entry.stat().st_size))
        return base, found
    if split_protocol(url)[0] in PUBLISH_ON_CLOSE:
        return "", []
    fs, path = filesystem(url, with_client_defaults(url, options))
    head, _, base = path.rstrip("/").rpartition("/")
    found = []
    for name, info in fs.glob(f"{head}/.{base}.*.partial", detail=True).items():
        found.append((name.rpartition("/")[2], fs.unstrip_protocol(name), info.get("size", -1)))
    return base, found


def find_partials(url: str, storage_options: dict[str, Any] | None = None) -> list[Partial]:
    """The hidden temporaries of writers of ``url`` (NOTE [partial owners]), by name.

    Best effort: a folder that cannot be listed gives none.
    """
    try:
        base, entries = _listing(url, storage_options)
    except Exception:
        return []
    found = []
    for name, where, size in sorted(entries):
        owner = _writer(name, base)
        if owner is not None:
            found.append(Partial(where, size, *owner))
    return found


def remove_stale_partials(url: str, storage_options: dict[str, Any] | None = None) -> int:
    """Remove the temporaries of ``url`` whose writer is gone (NOTE [partial owners]).

    Never one of a writer that runs or that cannot be told. Best effort; returns how many.
    """
    removed = 0
    for partial in find_partials(url, storage_options):
        if partial.state != GONE:
            continue
        with contextlib.suppress(Exception):
            if is_local(partial.url):
                os.unlink(partial.url)
            else:
                fs, path = filesystem(partial.url, with_client_defaults(url, storage_options))
                fs.rm(path)
            removed += 1
    return removed


def describe_partials(partials: list[Partial], output: str) -> str:
    """One line for ``recio info`` / ``verify`` about the temporaries beside ``output``."""
    total = sum(max(p.size, 0) for p in partials)
    parts = []
    for state, what in (
        (GONE, "of writers that are gone: the next write of it removes them"),
        (RUNNING, "of writers still running"),
        (UNKNOWN, "of writers that cannot be told from here: remove them by hand once no "
                  "writer is at work"),
    ):  # fmt: skip
        mine = [p for p in partials if p.state == state]
        if mine:
            parts.append(f"{len(mine)} {what} (first: {mine[0].url}, {mine[0].writer})")
    n = len(partials)
    return f"{n} unfinished write{'s' if n != 1 else ''} of {output} ({total} bytes): " + (
        "; ".join(parts)
    )
