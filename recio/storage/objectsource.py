"""``ObjectStoreSource``: an object in S3, GCS, Azure or behind HTTPS, read through obstore.

It is an :class:`~recio.storage.remote.FsspecSource` in everything but the transfer: the
same coalescing, request sizes (NOTE [adaptive fetch]), concurrency, retry loop, counts and
gaps dropped; each request is one obstore ``get_range`` on a fetch thread, with the GIL
released while it runs. Not ``get_ranges``: it merges ranges less than 1 MiB apart with no
bound on the merged size, so a job's requests (cut to spread over every connection, NOTE
[adaptive fetch]) would go back to one long request over one capped connection.

Small whole-object reads (an ``.idx``) and existence checks go through the same store
(:func:`read_object`, :func:`object_exists`).
"""

from __future__ import annotations

import time
from typing import Any

from .options import FetchOptions
from .remote import FsspecSource, compact
from .retry import retrying
from .stores import StoreLocation, store_for, translate

__all__ = ["ObjectStoreSource", "object_exists", "read_object"]


class ObjectStoreSource(FsspecSource):
    """A remote object read by coalesced, concurrent, retried ranges through obstore.

    ``read_ranges`` returns bytes-likes (memoryviews of obstore's buffers, no copy for a
    range read on its own). Pickles as its URL and options; the copy makes its own store.

    Raises:
        FileNotFoundError: no such object (the message names the store).
        PermissionError: the store refused the credentials (the message says what to check).
        ValueError: an option obstore cannot take, or a URL with no bucket or key.
    """

    def __init__(
        self,
        url: str,
        storage_options: dict[str, Any] | None = None,
        *,
        fetch: FetchOptions | None = None,
    ) -> None:
        self.init_counts(url, storage_options, fetch)
        self.location = _location(url, storage_options)
        self.path = self.location.key
        self.meta = self._head()
        self.size = int(self.meta["size"])

    def _head(self) -> dict[str, Any]:
        import obstore

        loc = self.location
        return retrying(lambda: _call(obstore.head, loc, self.url), self.url, 0, 0, self.fetch)

    def info(self) -> dict[str, Any]:
        """What the store says of the object: size, ETag, version, last modified."""
        return dict(self.meta)

    def _cat(self, start: int, end: int, keep: list[tuple[int, int]] | None = None) -> Any:
        import obstore

        loc = self.location
        t0 = time.perf_counter()
        data = _call(obstore.get_range, loc, self.url, start=start, end=end)
        data = self.checked_range(memoryview(data), start, end, end - start)
        self.link.add(end - start, time.perf_counter() - t0)
        return data if keep is None else compact(data, start, keep)


def _location(url: str, storage_options: dict[str, Any] | None) -> StoreLocation:
    try:
        return store_for(url, storage_options)
    except ValueError:
        raise
    except Exception as exc:  # obstore's configuration errors name no URL
        raise translate(exc, url, "the store") from exc


def _call(function: Any, loc: StoreLocation, url: str, **kwargs: Any) -> Any:
    """``function(store, key, ...)``, its obstore errors as recio's (naming store and key)."""
    try:
        return function(loc.store, loc.key, **kwargs)
    except Exception as exc:
        new = translate(exc, url, loc.where)
        if new is exc:
            raise
        raise new from exc


def read_object(url: str, storage_options: dict[str, Any] | None = None) -> bytes:
    """The whole object at ``url`` (a small one: an ``.idx``), retried."""
    import obstore

    loc = _location(url, storage_options)
    got = retrying(lambda: _call(obstore.get, loc, url).bytes(), url, 0, -1, FetchOptions())
    return bytes(got)


def object_exists(url: str, storage_options: dict[str, Any] | None = None) -> bool:
    """Whether ``url`` names an object, retried."""
    import obstore

    loc = _location(url, storage_options)

    def head() -> bool:
        try:
            _call(obstore.head, loc, url)
        except FileNotFoundError:
            return False
        return True

    return retrying(head, url, 0, 0, FetchOptions())
