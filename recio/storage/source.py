"""Opening a URL for reading: :func:`open_source` picks the ``ByteSource`` for it.

A local file is mmap'd (:class:`~recio.storage.mapped.MappedSource`); a remote one is an
:class:`~recio.storage.objectsource.ObjectStoreSource` where obstore serves its scheme
(:mod:`~recio.storage.stores`), else an :class:`~recio.storage.remote.FsspecSource`;
either optionally copied whole into a local cache first
(:class:`~recio.storage.mapped.CopiedSource`) or read through a bounded block cache
(:class:`~recio.storage.cached.CachedSource`). This module may import every source;
no source imports it.
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING, Any

from .base import ByteSource
from .mapped import CopiedSource, MappedSource
from .retry import translate_error
from .urls import is_local, local_path

if TYPE_CHECKING:
    from .options import FetchOptions

__all__ = ["ByteSource", "CopiedSource", "MappedSource", "open_source"]


def open_source(
    url: str,
    storage_options: dict[str, Any] | None = None,
    *,
    fetch: FetchOptions | None = None,
    cache_dir: str | None = None,
    cache_limit: int | None = None,
) -> ByteSource:
    """Open ``url`` for random-access reading.

    Local paths and ``file://`` URLs are mmap'd. With ``cache_dir`` and ``cache_limit``
    (bytes), a remote file is read through a bounded block cache in ``cache_dir``
    (:class:`~recio.storage.cached.CachedSource`, NOTE [block cache]): its blocks kept
    on local disk up to the limit, shared by the processes that use the folder. With
    ``cache_dir`` alone, it is first copied whole into ``cache_dir`` (with large
    concurrent reads) and mmap'd from there (a :class:`CopiedSource`); later opens of the
    same unchanged file (same size and ETag/mtime) are local-speed.

    Raises:
        ValueError: ``cache_limit`` without ``cache_dir``, or below 1.
    """
    if cache_limit is not None and cache_dir is None:
        raise ValueError(f"cache_limit={cache_limit} needs a cache_dir (opening {url})")
    if is_local(url):
        try:
            return MappedSource(local_path(url))
        except FileNotFoundError as exc:
            raise translate_error(exc, url) from exc
    # Imported here: local-only runs never load the remote machinery (or fsspec).
    from .cache import cached_copy, source_version
    from .remote import FsspecSource
    from .stores import uses_obstore

    kind = FsspecSource
    if uses_obstore(url, fetch):
        from .objectsource import ObjectStoreSource as kind
    try:
        source = kind(url, storage_options, fetch=fetch)
    except (OSError, ValueError, ImportError):
        raise
    except Exception as exc:  # deep client errors (botocore) become builtin OSErrors
        new = translate_error(exc, url)
        if new is exc:
            raise OSError(errno.EIO, f"cannot open {url}: {type(exc).__name__}: {exc}") from exc
        raise new from exc
    if cache_dir is None:
        return source
    if cache_limit is None:
        return cached_copy(source, cache_dir)
    from .blockcache import BlockCache
    from .cached import CachedSource

    try:
        cache = BlockCache(cache_dir, cache_limit, policy=source.fetch.cache_policy)
        version = source_version(source)
    except BaseException:
        source.close()
        raise
    return CachedSource(source, cache, source.fetch.cache_block, version)
