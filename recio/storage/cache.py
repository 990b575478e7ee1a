"""A local copy of a remote file, made once and mmap'd by later opens."""

from __future__ import annotations

import os
import warnings

from .atomic import AtomicOutput
from .mapped import CopiedSource
from .remote import FsspecSource

# What fsspec file systems give in ``info()`` that changes when a file's content does:
# S3 (ETag, LastModified, VersionId), GCS (etag, generation, updated), Azure (etag,
# last_modified), HTTP (ETag, Last-Modified, Content-MD5, Digest), local and SFTP
# (mtime), HDFS (hdfs-native: modification_time; WebHDFS: modificationTime), ...
# "created" is not among them: a file rewritten in place may keep it.
VERSION_KEYS = (
    "ETag", "etag", "e_tag", "VersionId", "version_id", "generation", "md5Hash", "Content-MD5",
    "content_md5", "Digest", "checksum", "mtime", "modified", "LastModified", "last_modified",
    "Last-Modified", "updated", "modification_time", "modificationTime",
)  # fmt: skip

_warned_unversioned: set[str] = set()


def file_version(info: dict) -> str | None:
    """What in an fsspec ``info()`` changes with the file's content, or None if nothing."""
    found = [f"{k}={info[k]}" for k in VERSION_KEYS if info.get(k) not in (None, "", 0)]
    return "\n".join(found) if found else None


def source_version(source: FsspecSource) -> str | None:
    """The version (``file_version``) of the file ``source`` reads.

    Where the store reports none, a warning says so (once per URL).
    """
    info = source.info()
    version = file_version(info)
    if version is None and source.url not in _warned_unversioned:
        _warned_unversioned.add(source.url)
        warnings.warn(
            f"cache_dir: {source.url} has no version (ETag or modification time) in its "
            "store's file info, so cached data could be stale: this process does not share "
            "or reuse it",
            stacklevel=4,
        )
    return version


def cached_copy(source: FsspecSource, cache_dir: str) -> CopiedSource:
    """The mmap'd local copy of ``source`` in ``cache_dir``, copied first if not there.

    A copy is keyed by URL, size and version (the ETag, modification time or the like
    that the store reports, see ``VERSION_KEYS``), so a changed file is copied again.
    A store that reports no version (fsspec's memory://, some HTTP servers) cannot tell
    a file rewritten at the same size from the copy: its files are copied again at
    every open (with a warning, once per URL). ``source`` is closed; the returned source
    keeps its URL for messages, and opens it again to repair a damaged record
    (:class:`~recio.storage.mapped.CopiedSource`).
    """
    info = source.info()
    version = file_version(info)
    import hashlib  # here, as uuid below: ~12 ms of start-up that local reads never need

    key = hashlib.sha256(f"{source.url}\n{source.size}\n{version}".encode()).hexdigest()[:24]
    name = f"{key}-{os.path.basename(source.path.rstrip('/'))}"
    path = os.path.join(cache_dir, name)
    if version is None and source.url not in _warned_unversioned:
        _warned_unversioned.add(source.url)
        warnings.warn(
            f"cache_dir: {source.url} has no version (ETag or modification time) in its "
            "store's file info, so a cached copy could be stale: it is copied again at "
            "every open",
            stacklevel=3,
        )
    if version is None or not (os.path.exists(path) and os.path.getsize(path) == source.size):
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
    url, storage_options, fetch = source.url, source.storage_options, source.fetch
    kind = type(source)  # the same client again (fsspec's or obstore's)
    return CopiedSource(path, url, lambda: kind(url, storage_options, fetch=fetch))
