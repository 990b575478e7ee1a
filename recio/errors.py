"""recio's exceptions.

Every data problem is a ``ValueError`` subclass that names where it happened:
the file, the byte offset and, when known, the record number and its ``.idx`` key.
Storage problems stay the builtin ``OSError`` family, as in fsspec.
"""

from __future__ import annotations


class RecordIOError(ValueError):
    """A RecordIO file (or its .idx / .lst) does not hold what it should."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        offset: int | None = None,
        record_index: int | None = None,
        key: int | None = None,
    ) -> None:
        self.message = message  # without the place
        self.path = path
        self.offset = offset
        self.record_index = record_index
        self.key = key  # the record's .idx key, where known
        where = []
        if offset is not None:
            where.append(f"at byte {offset}")
        if path:
            where.append(f"of {path}")
        if record_index is not None:
            where.append(f"(record {record_index})")
        if key is not None:
            where.append(f"with key {key}")
        super().__init__(" ".join([message, *where]))


class CorruptRecordError(RecordIOError):
    """Bad magic, a broken continuation sequence, or an offset that is no record start."""


class TruncatedRecordError(RecordIOError):
    """The file ends inside a length word or a payload."""


class IndexMismatchError(RecordIOError):
    """The .idx names offsets that are not record starts or lie past the end."""


class ChecksumError(RecordIOError):
    """A record's bytes do not give the CRC32C its checksum sidecar holds for it.

    The record was damaged after the checksum was taken (on disk, in a copy, on the
    wire); the message names the file, the byte offset, the record and the sidecar.
    """


class DecodeError(ValueError):
    """An image of a batch could not be decoded.

    Attributes:
        index: position of the image in the batch (None when not about one image).
        status: the decoder's status code (see ``recio.decode.STATUS_NAMES``), if any.
    """

    def __init__(self, message: str, *, index: int | None = None, status: int | None = None):
        super().__init__(message if index is None else f"image {index} of the batch: {message}")
        self.index = index
        self.status = status


class IndexWarning(UserWarning):
    """A ``.idx`` that can be read but looks wrong for its ``.rec``, or is missing.

    Duplicate offsets, or an index whose last record does not end where the ``.rec``
    ends: records missing from the index, a truncated ``.rec``, or a ``.rec`` and
    ``.idx`` from different writes (a publish interrupted between the two files). A
    ``.rec`` with no ``.idx`` is read whole to find its records, once per file, and said
    so (``recio index`` writes the index).
    """


class ResumeStateError(ValueError):
    """A ``state_dict()`` that an iterator cannot resume from.

    A field of the wrong type or out of range, a missing field, or a state saved with
    another dataset, seed or shuffle; the message names the field and its value.
    """


class ResumeStateTypeError(ResumeStateError, TypeError):
    """A state that is no ``state_dict()`` at all (not a dict), or a field of the wrong type.

    Both a ``ResumeStateError`` (a ``ValueError``) and a ``TypeError``.
    """
