"""recio: a data input pipeline engine for image models on MXNet-compatible RecordIO.

The data flows through one package per stage, each importing only the ones before it::

    storage ─▶ records ─▶ sampling, augment ─▶ decode ─▶ pipeline ─▶ consumers
    (mmap,      (framing,   (order, shards;    (C pool,  (ImageRecordIter, (frameworks,
     fsspec,     IRHeader,   crop windows,      libjpeg-  its threads and   dali, train,
     prefetch)   .idx,       flips, colour)     turbo)    prefetch)         bench, cli)
                 shards)

MXNet's names live in :mod:`recio.records.recordio` (``from recio import recordio``); the
converter in :mod:`recio.im2rec`; map-style access for a DataLoader of the user's own is
:class:`recio.frameworks.dataset.RecordDataset`. The names below are importable from
``recio`` itself; they are loaded on first use, so ``import recio`` stays cheap. Modules
that moved into the packages keep their old import paths (:mod:`recio._moved`).
"""

from __future__ import annotations

import importlib
from typing import Any

from . import _moved

__version__ = "0.1.0"
_moved.install()  # recio.reader, recio.iterator, ...: the old paths of modules that moved

# name -> module that defines it
_EXPORTS = {
    "ImageRecordIter": "recio.pipeline.iterator",
    "RecordDataset": "recio.frameworks.dataset",
    "RecordLayout": "recio.records.samples",
    "Mixture": "recio.sampling.mixing",
    "Source": "recio.sampling.mixing",
    "Batch": "recio.pipeline.positioned",
    "IterStats": "recio.pipeline.positioned",
    "IterConfig": "recio.pipeline.config",
    "CropSpec": "recio.pipeline.config",
    "Normalize": "recio.pipeline.config",
    "Sharding": "recio.pipeline.config",
    "Storage": "recio.pipeline.config",
    "RecordFile": "recio.records.file",
    "MXRecordIO": "recio.records.recordio",
    "MXIndexedRecordIO": "recio.records.recordio",
    "IRHeader": "recio.records.format",
    "pack": "recio.records.format",
    "unpack": "recio.records.format",
    "pack_img": "recio.records.recordio",
    "unpack_img": "recio.records.recordio",
    "DecodePool": "recio.decode",
    "RecordIOError": "recio.errors",
    "CorruptRecordError": "recio.errors",
    "TruncatedRecordError": "recio.errors",
    "IndexMismatchError": "recio.errors",
    "ChecksumError": "recio.errors",
    "IndexWarning": "recio.errors",
    "DecodeError": "recio.errors",
    "ResumeStateError": "recio.errors",
    "ResumeStateTypeError": "recio.errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        # Subpackages and modules (recio.records.recordio, recio.storage, ...) import as usual.
        try:
            return importlib.import_module(f"recio.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"recio.{name}":
                raise
        raise AttributeError(f"module 'recio' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
