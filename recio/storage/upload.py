"""``ObjectUpload``: an object written through obstore, visible only once it is whole.

Writes are buffered and sent as the parts of a multipart upload (``PART_BYTES`` each,
several in flight); :meth:`ObjectUpload.close` completes the upload, which is when the
store publishes the object. :meth:`ObjectUpload.discard` aborts it: the store drops the
parts and nothing appears under the key. A process killed before ``close`` leaves an
unfinished upload, which no reader sees (a bucket's lifecycle rule removes such parts).
"""

from __future__ import annotations

from typing import Any

from .stores import store_for, translate

__all__ = ["PART_BYTES", "ObjectUpload"]

#: Bytes of each part of a multipart upload (S3's smallest part is 5 MiB).
PART_BYTES = 8 << 20


class _Aborted(Exception):
    """Handed to obstore's writer so that it aborts the upload rather than complete it."""


class ObjectUpload:
    """A write-only object at ``url`` through obstore (see the module's docstring)."""

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None) -> None:
        import obstore

        self.url = url
        self.closed = False
        self._loc = store_for(url, storage_options)
        self._writer = obstore.open_writer(self._loc.store, self._loc.key, buffer_size=PART_BYTES)

    def write(self, data: Any) -> int:
        """Append ``data`` (any contiguous bytes-like); the number of bytes taken."""
        try:
            return self._writer.write(data)
        except Exception as exc:
            raise self._translated(exc) from exc

    def close(self) -> None:
        """Send what is buffered and complete the upload: the object appears whole."""
        if self.closed:
            return
        self.closed = True
        try:
            self._writer.close()
        except Exception as exc:
            raise self._translated(exc) from exc

    def discard(self) -> None:
        """Abort the upload: nothing appears under the key."""
        if self.closed:
            return
        self.closed = True
        self._writer.__exit__(_Aborted, _Aborted(), None)

    def _translated(self, exc: BaseException) -> BaseException:
        return translate(exc, self.url, self._loc.where)
