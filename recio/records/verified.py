"""Reads checked against a checksum sidecar: verified, fetched again, mended.

A :class:`~.file.RecordFile` opened with a sidecar (NOTE [checksum sidecar] in
:mod:`.checksum`) checks every record it reads through its :class:`SidecarChecks`: a local
map's records in one call (:meth:`SidecarChecks.verify_view`), remote extents as fetched
(a mismatch fetched again once from the store), and a whole-file copy of remote data
mended from the store before it is parsed.
"""

from __future__ import annotations

import errno
import threading
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ChecksumError, RecordIOError
from .checksum import (
    Checksums,
    MismatchedPayload,
    extent_crcs,
    frame_crcs,
    load_sidecar,
    sidecar_path,
)

if TYPE_CHECKING:
    from .file import RecordFile

__all__ = ["SidecarChecks", "put_problems"]


class SidecarChecks:
    """A :class:`~.file.RecordFile`'s checksum sidecar, and what its reads found against it.

    ``checksums``: the sidecar (None: reads are not verified); ``stats``: records fetched
    again and mismatches (the file's ``checksum_stats``). Each check takes the file it
    checks: its ``url``, ``source``, ``offsets`` and ``lengths``, and its ``bad_record``
    for the errors.
    """

    def __init__(self, checksums: Checksums | None) -> None:
        self.checksums = checksums
        self.stats = {"refetched": 0, "mismatched": 0}
        self._stats_lock = threading.Lock()  # decode threads read batches concurrently

    @classmethod
    def load(cls, records: RecordFile, mode: bool | str) -> SidecarChecks:
        """The checks of ``records`` under ``mode``: its sidecar loaded and matched, or none.

        ``mode``: ``resolve_verify``'s True, False or "auto".

        Raises:
            FileNotFoundError: ``mode`` True and no sidecar.
            IndexMismatchError: a sidecar of another write.
        """
        if mode is False:
            return cls(None)
        path = sidecar_path(records.url, records.idx_url)
        found = load_sidecar(path, records.storage_options)
        if found is None:
            if mode is True:
                raise FileNotFoundError(
                    errno.ENOENT,
                    f"verify_checksums=True, but {records.url} has no checksum sidecar "
                    f"(`recio checksum {records.url}` writes it)",
                    path,
                )
            return cls(None)
        found.check_matches(len(records), records.url, records.source.size, records.idx_url)
        return cls(found)

    def _count(self, kind: str, n: int = 1) -> None:
        with self._stats_lock:
            self.stats[kind] += n

    def repairs(self, records: RecordFile) -> bool:
        """Whether local reads mend damaged records first: a whole-file copy, verified."""
        return self.checksums is not None and records.source.mends

    def check_extents(
        self, records: RecordFile, indices: Sequence[int], datas: list, until: int | None = None
    ) -> dict[int, ChecksumError]:
        """Check remote records' extents as fetched (``datas``) against the sidecar.

        One that does not match is fetched again once from the store (damaged there or on
        the way; through a block cache, its entries are dropped first): if that matches, it
        replaces the first in ``datas``; else slot -> the error. Called only with a sidecar
        loaded.
        """
        assert self.checksums is not None
        positions = np.asarray(indices, dtype=np.int64)
        crcs, ends = extent_crcs(datas)
        bad = np.flatnonzero((crcs != self.checksums.table[positions]) | (ends < 0))
        problems: dict[int, ChecksumError] = {}
        for j in bad.tolist():
            i = int(positions[j])
            self._count("refetched")
            offset, length = int(records.offsets[i]), int(records.lengths[i])
            again = [records.source.refetch(offset, length, until=until)]  # never a cache's
            crc, end = extent_crcs(again)
            if end[0] >= 0 and crc[0] == self.checksums.table[i]:
                datas[j] = again[0]
                continue
            self._count("mismatched")
            problems[j] = self.checksums.mismatch(records, i, int(crc[0]), refetched=True)
        return problems

    def verify_view(
        self, records: RecordFile, view: memoryview, positions: np.ndarray
    ) -> dict[int, RecordIOError]:
        """Check the records at ``positions`` of a local map against the sidecar.

        Returns slot -> :class:`~recio.errors.ChecksumError` for those that do not match
        (empty without a sidecar), and slot -> the framing error (naming the file, byte
        and key) for those whose frames do not chain. Each mismatch is counted in
        ``stats``.
        """
        if self.checksums is None or not len(positions):
            return {}
        offsets = records.offsets[positions]
        unchained: dict[int, RecordIOError] = {}
        try:
            crcs = frame_crcs(view, offsets, records.url)
        except RecordIOError:  # a record whose frames do not chain: each record alone
            crcs = np.zeros(len(positions), dtype=np.uint32)
            for j in range(len(positions)):
                try:
                    crcs[j] = frame_crcs(view, offsets[j : j + 1], records.url)[0]
                except RecordIOError as exc:
                    unchained[j] = records.bad_record(int(positions[j]), exc)
        bad = np.flatnonzero(crcs != self.checksums.table[positions])
        bad = bad[~np.isin(bad, list(unchained))]
        if not bad.size:
            return unchained
        self._count("mismatched", int(bad.size))
        again = self.repairs(records)  # a copy's damaged record was fetched again (mend_copy)
        for j in bad.tolist():
            i = int(positions[j])
            unchained[j] = self.checksums.mismatch(records, i, int(crcs[j]), refetched=again)
        return unchained

    def crcs_match(self, positions: np.ndarray, crcs: np.ndarray) -> bool:
        """Whether the records at ``positions`` have the checksums ``crcs`` (no count).

        ``crcs``: their frames' CRC32C as the decode threads took them (NOTE [one pass per
        record] in native/bind_pool.c). Nothing is counted or raised: the iterator's common
        batch checks this way (NOTE [lean batches] in :mod:`recio.pipeline.queued`), and one
        that does not match goes the way that names, counts and marks its records
        (:meth:`crcs_problems`). Called only with a sidecar.
        """
        assert self.checksums is not None
        return bool(np.array_equal(crcs, self.checksums.table[positions]))

    def crcs_problems(
        self, records: RecordFile, positions: np.ndarray, crcs: np.ndarray
    ) -> dict[int, ChecksumError]:
        """:meth:`verify_view` of records whose frames' CRC32C are ``crcs`` (taken already).

        Slot -> the :class:`~recio.errors.ChecksumError` of each record whose checksum is
        not the sidecar's (counted in ``stats``); empty without a sidecar.
        """
        if self.checksums is None or not len(positions):
            return {}
        bad = np.flatnonzero(crcs != self.checksums.table[positions])
        if not bad.size:
            return {}
        self._count("mismatched", int(bad.size))
        again = self.repairs(records)  # a copy's damaged record was fetched again (mend_copy)
        return {
            j: self.checksums.mismatch(records, int(positions[j]), int(crcs[j]), refetched=again)
            for j in bad.tolist()
        }

    def mend_copy(self, records: RecordFile, view: memoryview, positions: np.ndarray) -> None:
        """Records of a whole-file copy that fail their checksum, fetched again and written over.

        The copy, not the store, went bad (a disk's rot, a byte written over): each such
        record is fetched again from the remote file and, if that matches its checksum,
        written over the copy (:meth:`~recio.storage.CopiedSource.repair`), so the map
        holds the store's bytes before anything parses them. One the store cannot mend
        stays as it is, for the check after the parse to report. Each is counted in
        ``stats["refetched"]``.
        """
        assert self.checksums is not None
        source = records.source
        expected = self.checksums.table[positions]
        offsets, lengths = records.offsets[positions], records.lengths[positions]
        try:
            bad = np.flatnonzero(frame_crcs(view, offsets, records.url) != expected)
        except RecordIOError:  # frames that no longer chain: each record's extent alone
            spans = zip(offsets.tolist(), lengths.tolist(), strict=True)
            extents = [view[o : o + n] for o, n in spans]
            crcs, ends = extent_crcs(extents)
            bad = np.flatnonzero((crcs != expected) | (ends < 0))
        for j in bad.tolist():
            offset, length = int(offsets[j]), int(lengths[j])
            self._count("refetched")
            data = source.refetch(offset, length)
            crc, end = extent_crcs([data])
            if end[0] < 0 or crc[0] != expected[j]:
                continue  # damaged in the store too: reported as a mismatch after the parse
            try:
                source.repair(offset, data)
            except OSError as exc:
                warnings.warn(
                    f"{records.url}: record {int(positions[j])} of the local copy "
                    f"{source.path} is damaged, and the copy cannot be written ({exc}): "
                    "it is reported as a checksum mismatch",
                    stacklevel=3,
                )


def put_problems(out: list, problems: dict[int, RecordIOError], bad: str) -> None:
    """Raise the first problem of a read (``bad="raise"``) or mark its records."""
    if not problems:
        return
    if bad == "raise":
        raise problems[min(problems)]
    for j, error in problems.items():
        out[j] = MismatchedPayload(error)
