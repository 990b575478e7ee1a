"""CRC32C (Castagnoli): the one function that every checksum in recio is computed with.

The records' checksums (the sidecar, NOTE [checksum sidecar]) and the block cache's
entries (NOTE [block cache]) both go through :func:`crc32c`. It is the extension's where
it is built (SSE4.2, three chains at once: NOTE [three streams] in ``native/crc32c.c``),
else the ``crc32c`` package's; both give the same values.
"""

from __future__ import annotations

from typing import Any

try:
    from ._native import crc32c as _native_crc32c
except ImportError:  # built without the extension: the crc32c package
    _native_crc32c = None

__all__ = ["crc32c"]


def crc32c(data: Any, value: int = 0) -> int:
    """CRC32C of a bytes-like object (a memoryview too, not copied); ``value`` continues one.

    The extension's where it is built; else the crc32c package's (imported on first use:
    its import takes ~50 ms, most of it importlib.metadata).
    """
    if _native_crc32c is not None:
        return _native_crc32c(data, value)
    from crc32c import crc32c as _crc

    return _crc(data, value)
