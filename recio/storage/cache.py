"""A local copy of a remote file, made once and mmap'd by later opens."""

from __future__ import annotations

import os

from .atomic import AtomicOutput
from .remote import FsspecSource
from .retry import retrying
from .source import MappedSource


def cached_copy(source: FsspecSource, cache_dir: str) -> MappedSource:
    """The mmap'd local copy of ``source`` in ``cache_dir``, copied first if not there.

    A copy is keyed by URL, size and version (ETag or mtime), so a changed file is copied
    again. ``source`` is closed; the returned source keeps its URL for messages.
    """
    info = retrying(lambda: source.fs.info(source.path), source.url, 0, 0, source.fetch)
    version = info.get("ETag") or info.get("etag") or info.get("mtime") or info.get("modified")
    import hashlib  # here, as uuid below: ~12 ms of start-up that local reads never need

    key = hashlib.sha256(f"{source.url}\n{source.size}\n{version}".encode()).hexdigest()[:24]
    name = f"{key}-{os.path.basename(source.path.rstrip('/'))}"
    path = os.path.join(cache_dir, name)
    if not (os.path.exists(path) and os.path.getsize(path) == source.size):
        os.makedirs(cache_dir, exist_ok=True)
        out = AtomicOutput(path)
        try:
            step = source.fetch.max_request
            spans = [(o, min(step, source.size - o)) for o in range(0, source.size, step)]
            # A few requests at a time: memory stays at concurrency x max_request.
            for k in range(0, len(spans), source.fetch.concurrency):
                for data in source.read_ranges(spans[k : k + source.fetch.concurrency]):
                    out.write(data)
            out.commit()
        except BaseException:
            out.abort()
            raise
    source.close()
    return MappedSource(path, url=source.url)
