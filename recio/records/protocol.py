"""What a set of records is to its readers: one ``.rec`` or several shards, alike.

:class:`Records` is the interface the pipeline reads through; :class:`~.file.RecordFile`
(one file) and :class:`~.shards.ShardedRecords` (several) both have it, and
:func:`~.shards.open_records` opens either. :class:`RecordsBase` is the part they share:
the context manager, the check that they are open, and pickling (a pickle holds what
opens them again, never their data).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from typing import Self

    from .batch import BatchRecords
    from .open_options import OpenOptions
    from .samples import RecordLayout

__all__ = ["Records", "RecordsBase"]


@runtime_checkable
class Records(Protocol):
    """Records numbered ``0 .. len - 1`` in index order, read by position.

    ``keys``, ``offsets`` and ``lengths`` are int64 arrays, one entry per record (offsets
    are bytes of each record's own file). Reads of a closed set raise ``ValueError``.
    """

    url: str
    keys: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    closed: bool
    checksum_stats: dict[str, int]

    def __len__(self) -> int: ...

    @property
    def is_local(self) -> bool:
        """Whether every record is in a local (mapped) file."""
        ...

    @property
    def cached(self) -> bool:
        """Whether reads go through a bounded block cache."""
        ...

    @property
    def size(self) -> int:
        """The bytes of the ``.rec`` files."""
        ...

    def check_open(self) -> None:
        """Raise ``ValueError`` if closed."""
        ...

    def read(self, i: int) -> memoryview | bytes:
        """The payload of record ``i``."""
        ...

    def read_many(
        self, indices: Sequence[int], *, until: int | None = None, bad: str = "raise"
    ) -> list[memoryview | bytes]:
        """The payloads of several records."""
        ...

    def read_extents(self, indices: Sequence[int], *, until: int | None = None) -> list:
        """Several records as stored (their frames), unparsed."""
        ...

    def read_batch(
        self, positions: Any, label_width: int, payloads: Sequence[Any] | None = None
    ) -> BatchRecords:
        """One batch's records read and their IRHeaders parsed."""
        ...

    def schedule_reads(self, steps: Sequence[tuple[int, Any]]) -> None:
        """Tell a block cache which records the coming steps read."""
        ...

    def describe(self, position: int, record_id: int | None = None) -> str:
        """Where record ``position`` is, for messages."""
        ...

    def detect_layout(self) -> RecordLayout:
        """Which records are samples."""
        ...

    def close(self) -> None:
        """Close the files; payloads already read stay valid."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


class RecordsBase:
    """The context manager, ``check_open`` and pickling that every :class:`Records` shares.

    A subclass names the state ``__init__`` takes besides ``options`` (its
    :class:`~.open_options.OpenOptions`, ``self.options``): ``_PLACE``
    (given by position) and ``_NAMED`` (by name), and gives their values in
    :meth:`_place`. Unpickling opens the records again with them.
    """

    url: str
    closed: bool
    options: OpenOptions
    _PLACE: tuple[str, ...] = ()
    _NAMED: tuple[str, ...] = ()

    def check_open(self) -> None:
        """Raise ``ValueError`` if closed."""
        if self.closed:
            raise ValueError(f"I/O on a closed {type(self).__name__} {self.url}")

    def close(self) -> None:
        """Close the files (each subclass its own)."""
        raise NotImplementedError

    def _place(self) -> dict[str, Any]:
        """The values of ``_PLACE`` and ``_NAMED``: which files these records are."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict:
        return {**self._place(), "options": self.options}

    def __setstate__(self, state: dict) -> None:
        named = {key: state[key] for key in self._NAMED}
        self.__init__(*(state[key] for key in self._PLACE), **named, options=state["options"])
