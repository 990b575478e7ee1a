"""The RecordIO layer: MXNet's ``.rec``/``.idx`` files, record by record.

Framing and IRHeader (:mod:`.format`), the walk of a whole file (:mod:`.scan`), the
``.idx`` checks (:mod:`.index`), one file read by position in its index (:mod:`.file`,
:mod:`.cursor`), a batch read and parsed (:mod:`.batch`), several files as one dataset
(:mod:`.shard_names`, :mod:`.shards`), the :class:`Records` both are (:mod:`.protocol`),
which records are samples (:mod:`.samples`), per-record checksums (:mod:`.checksum`,
:mod:`.verified`), and MXNet's own names (:mod:`.recordio`). Nothing here knows of
training, and nothing decodes an image but MXNet's façade: :func:`~.recordio.pack_img` and
:func:`~.recordio.unpack_img` encode and decode one image with Pillow, as MXNet's own
``recordio`` module does with OpenCV.

:func:`open_records` opens one ``.rec`` or a set of shards; both are :class:`Records`.
How they are opened (storage, fetch, cache, checksums) is one value, :class:`OpenOptions`
(:mod:`.open_options`).
"""

import importlib
from typing import Any

# name -> module that defines it (imported on first use: `import recio.records.format`
# stays light)
_EXPORTS = {
    "Records": "recio.records.protocol",
    "OpenOptions": "recio.records.open_options",
    "RecordFile": "recio.records.file",
    "ShardedRecords": "recio.records.shards",
    "open_records": "recio.records.shards",
    "expand_shards": "recio.records.shard_names",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'recio.records' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
