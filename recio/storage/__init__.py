"""Storage stage: where bytes come from and go to, local files (mmap'd) and any URL.

Readers get a ``ByteSource`` (:mod:`~recio.storage.base`: ``size``, ``read(offset,
length)``, ``read_ranges(ranges)`` and optional capabilities) from :func:`open_source`
(:mod:`~recio.storage.source`): a local file is mmap'd and read zero-copy
(:mod:`~recio.storage.mapped`); a remote one is read by coalesced, concurrent, retried byte
ranges (:mod:`~recio.storage.remote`, :mod:`~recio.storage.retry`; object stores through
obstore where installed: :mod:`~recio.storage.stores`, :mod:`~recio.storage.objectsource`),
optionally from a local copy (:mod:`~recio.storage.cache`) or through a bounded block cache
(:mod:`~recio.storage.blockcache`, read by :mod:`~recio.storage.cached`).
:mod:`~recio.storage.prefetch` fetches the ranges of upcoming batches ahead of the decoder,
each read stamped with the schedule's :func:`clock`; batch arrays and receive buffers are
reused memory, each held by a :class:`Lease` (:mod:`~recio.storage.buffers`). Writers get
an ``AtomicOutput`` (:mod:`~recio.storage.atomic`; object stores' multipart uploads:
:mod:`~recio.storage.upload`): what it writes appears under the final name only on
``commit()``; ``abort()`` (or a crash) leaves nothing that looks whole.

The names below are the storage layer's public interface: the layers above import them
from here, not from its modules.
"""

from .atomic import AtomicOutput, remove_partials
from .base import ByteSource
from .buffers import Lease
from .mapped import CopiedSource, MappedSource
from .options import PRESIGN_SECONDS, FetchOptions
from .partials import describe_partials, find_partials
from .prefetch import Lookahead, Prefetcher
from .remote import FsspecSource, coalesce
from .retry import (
    RangeIgnoredError,
    RemoteReadError,
    http_status,
    is_transient,
    retrying,
    translate_error,
)
from .schedule import clock
from .source import open_source
from .urls import (
    filesystem,
    is_local,
    local_path,
    one_client,
    split_protocol,
)
from .whole import exists, read_bytes, read_text

__all__ = [
    "PRESIGN_SECONDS",
    "AtomicOutput",
    "ByteSource",
    "CopiedSource",
    "FetchOptions",
    "FsspecSource",
    "Lease",
    "Lookahead",
    "MappedSource",
    "Prefetcher",
    "RangeIgnoredError",
    "RemoteReadError",
    "clock",
    "coalesce",
    "describe_partials",
    "exists",
    "filesystem",
    "find_partials",
    "http_status",
    "is_local",
    "is_transient",
    "local_path",
    "one_client",
    "open_source",
    "read_bytes",
    "read_text",
    "remove_partials",
    "retrying",
    "split_protocol",
    "translate_error",
]
