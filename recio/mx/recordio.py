"""``mx.recordio``: recio's MXNet RecordIO façade (:mod:`recio.records.recordio`)."""

from __future__ import annotations

from typing import Any

from ..records.recordio import (
    IRHeader,
    MXIndexedRecordIO,
    MXRecordIO,
    pack,
    pack_img,
    unpack,
    unpack_img,
)
from .unsupported import unsupported

__all__ = [
    "IRHeader",
    "MXIndexedRecordIO",
    "MXRecordIO",
    "pack",
    "pack_img",
    "unpack",
    "unpack_img",
]


def __getattr__(name: str) -> Any:
    return unsupported(f"mx.recordio.{name}", name)
