"""Storage stage: where bytes come from and go to, local files (mmap'd) and any fsspec URL.

Readers get a ``ByteSource`` (``size``, ``read(offset, length)``, ``read_ranges(ranges)``)
from :func:`open_source`: a local file is mmap'd and read zero-copy
(:mod:`~recio.storage.source`); a remote one is read by coalesced, concurrent, retried byte
ranges (:mod:`~recio.storage.remote`, :mod:`~recio.storage.retry`), optionally from a local
copy (:mod:`~recio.storage.cache`). :mod:`~recio.storage.prefetch` fetches the ranges of
upcoming batches ahead of the decoder. Writers get an ``AtomicOutput``
(:mod:`~recio.storage.atomic`): what it writes appears under the final name only on
``commit()``; ``abort()`` (or a crash) leaves nothing that looks whole.
"""

from .atomic import AtomicOutput
from .options import PRESIGN_SECONDS, FetchOptions
from .remote import FsspecSource, coalesce
from .retry import (
    RangeIgnoredError,
    RemoteReadError,
    http_status,
    is_transient,
    retrying,
    translate_error,
)
from .source import ByteSource, CopiedSource, MappedSource, open_source
from .urls import (
    exists,
    filesystem,
    is_local,
    local_path,
    one_client,
    read_bytes,
    read_text,
    split_protocol,
)

__all__ = [
    "PRESIGN_SECONDS",
    "AtomicOutput",
    "ByteSource",
    "CopiedSource",
    "FetchOptions",
    "FsspecSource",
    "MappedSource",
    "RangeIgnoredError",
    "RemoteReadError",
    "coalesce",
    "exists",
    "filesystem",
    "http_status",
    "is_local",
    "is_transient",
    "local_path",
    "one_client",
    "open_source",
    "read_bytes",
    "read_text",
    "retrying",
    "split_protocol",
    "translate_error",
]
