"""Small whole-file reads (an ``.idx``, a sidecar) and existence checks, for any URL.

Through obstore where it serves the URL (:mod:`~recio.storage.stores`), else fsspec;
local files directly.
"""

from __future__ import annotations

import os
from typing import Any

from .._text import decode_text
from .options import FetchOptions
from .retry import retrying, translate_error
from .stores import uses_obstore
from .urls import filesystem, is_local, local_path, with_client_defaults

__all__ = ["exists", "read_bytes", "read_text"]


def read_bytes(url: str, storage_options: dict[str, Any] | None = None) -> bytes:
    """A whole small file (such as an ``.idx``) as bytes, in one read; remote reads are retried."""
    if is_local(url):
        try:
            with open(local_path(url), "rb") as f:
                return f.read()
        except FileNotFoundError as exc:
            raise translate_error(exc, url) from exc
    if uses_obstore(url):
        from .objectsource import read_object

        return read_object(url, storage_options)
    fs, path = filesystem(url, with_client_defaults(url, storage_options))
    return retrying(lambda: fs.cat_file(path), url, 0, -1, FetchOptions())


def read_text(url: str, storage_options: dict[str, Any] | None = None) -> str:
    """A whole small file (such as an ``.idx``) as UTF-8 text; remote reads are retried.

    Line ends are read as Python's text files read them (CRLF and CR as LF).

    Raises:
        RecordIOError: the file is not UTF-8 text (names the file, byte and line).
    """
    return decode_text(read_bytes(url, storage_options), path=url)


def exists(url: str, storage_options: dict[str, Any] | None = None) -> bool:
    """Whether ``url`` names an existing file; remote checks are retried."""
    if is_local(url):
        return os.path.exists(local_path(url))
    if uses_obstore(url):
        from .objectsource import object_exists

        return object_exists(url, storage_options)
    fs, path = filesystem(url, with_client_defaults(url, storage_options))
    return bool(retrying(lambda: fs.exists(path), url, 0, 0, FetchOptions()))
