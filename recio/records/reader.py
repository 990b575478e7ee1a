"""The engine's reader: random access to the records of a ``.rec`` by position in its index.

``RecordFile`` takes record offsets from the ``.idx`` (or a scan of the file when there is
none) and reads payloads zero-copy from local files, by ranged reads from remote ones.
``RecordCursor`` parses records at arbitrary offsets of any ``ByteSource``; MXNet's sequential
``MXRecordIO`` reader (:mod:`recio.recordio`) walks a file with it.
"""

from __future__ import annotations

import errno
import struct
import threading
import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .. import storage
from ..errors import (
    ChecksumError,
    CorruptRecordError,
    IndexMismatchError,
    IndexWarning,
    RecordIOError,
    TruncatedRecordError,
)
from .checksum import (
    Checksums,
    MismatchedPayload,
    extent_crcs,
    frame_crcs,
    load_sidecar,
    resolve_verify,
    sidecar_path,
)
from .format import (
    CFLAG_FIRST,
    CFLAG_LAST,
    CFLAG_MIDDLE,
    FRAME_HEADER_SIZE,
    IR_HEADER_SIZE,
    MAGIC,
    MAX_PAYLOAD,
    parse_idx_arrays,
    read_record,
    scan_offsets,
    unpack_labels,
)
from .spans import Spans

__all__ = [
    "BatchRecords",
    "IndexWarning",
    "RecordCursor",
    "RecordFile",
    "batch_headers",
    "default_idx_path",
    "read_batch",
    "scan_source",
]


# Remote sequential reads fetch this much at a time.
_WINDOW = 8 << 20


class RecordCursor:
    """Parses records at arbitrary offsets of a ByteSource.

    Local sources are parsed in place (zero-copy). Remote ones through a
    window of the file that grows or moves as records need.
    """

    def __init__(self, source: storage.ByteSource) -> None:
        self.source = source
        self._mapped = source.mapped
        self._window = memoryview(b"")
        self._window_start = 0

    def read_at(
        self, offset: int, record_index: int | None = None
    ) -> tuple[memoryview | bytes, int]:
        """Parse the record at byte ``offset``: ``(payload, next_offset)``, as ``read_record``.

        ``record_index`` only names the record in error messages.

        Raises:
            TruncatedRecordError: the record is cut short, also by a truncation of a
                local file while open (the file's size is checked on every call).
            CorruptRecordError: no record starts at ``offset``.
        """
        if self._mapped:
            view = self.source.current_view()
            try:
                return read_record(view, offset, path=self.source.url, record_index=record_index)
            except TruncatedRecordError as exc:
                if len(view) < self.source.size:
                    raise self.source.truncated(offset, len(view), record_index) from exc
                raise
        while True:
            start = self._window_start
            inside = start <= offset <= start + len(self._window)
            window_at_eof = start + len(self._window) >= self.source.size
            if inside:
                try:
                    payload, next_offset = read_record(
                        self._window,
                        offset - start,
                        path=self.source.url,
                        record_index=record_index,
                        base=start,
                    )
                    return payload, start + next_offset
                except TruncatedRecordError:
                    if window_at_eof:
                        raise
                    grow = max(_WINDOW, 2 * len(self._window))
                else:
                    grow = _WINDOW
            else:
                grow = _WINDOW
            length = min(grow, self.source.size - offset)
            self._window = memoryview(self.source.read(offset, length))
            self._window_start = offset


def check_offsets(
    idx_path: str, keys: Sequence, offsets: Sequence[int], source: storage.ByteSource
) -> None:
    """Check the offsets of an ``.idx`` against its ``.rec`` (at open).

    Every offset must be a byte of the file and 4-byte aligned. Then, cheaply (one frame
    header read, a request on remote storage), the pair: the record at the largest
    offset must be a record that ends where the file ends, else an :class:`IndexWarning`
    (see :func:`check_pair`).

    Raises:
        IndexMismatchError: an offset that is negative, past the end or not aligned.
    """
    array = np.asarray(offsets, dtype=np.int64)
    # A slice at a time: each mask of 40M offsets would take 40 MB.
    for lo in range(0, len(array), _CHECK_SLICE):
        part = array[lo : lo + _CHECK_SLICE]
        bad = np.flatnonzero((part < 0) | (part >= source.size) | (part & 3 != 0))
        if bad.size:
            raise _bad_offset(idx_path, keys, array, lo + int(bad[0]), source)
    check_pair(idx_path, keys, array, source)


_CHECK_SLICE = 1 << 20


def _bad_offset(
    idx_path: str, keys: Sequence, offsets: np.ndarray, i: int, source: storage.ByteSource
) -> IndexMismatchError:
    offset = int(offsets[i])
    if offset < 0:
        why = "negative"
    elif offset >= source.size:
        why = f"past the end of {source.url} ({source.size} bytes)"
    else:
        why = f"not 4-byte aligned (records of {source.url} start at multiples of 4)"
    # The .idx is the file at fault; the offset is a byte of the .rec, named in the text.
    error = IndexMismatchError(f"{idx_path} gives key {keys[i]} offset {offset}, {why}")
    error.path, error.record_index = idx_path, i
    return error


def check_pair(
    idx_path: str, keys: Sequence, offsets: np.ndarray, source: storage.ByteSource
) -> None:
    """Warn (:class:`IndexWarning`) if the ``.idx`` does not index the ``.rec`` to its end.

    An index written with its ``.rec`` (by MXNet, im2rec or recio) has a record at
    its largest offset that ends exactly where the file ends. A ``.rec`` and ``.idx``
    from different writes almost never do: the offset falls inside a record, past the
    new end, or (a longer new file) before its end. Reads only that record's frame
    headers. Offsets are assumed checked (in the file, aligned).
    """
    url = source.url
    if len(offsets) == 0:
        if source.size:
            _warn(f"{idx_path} is empty, but {url} holds {source.size} bytes: {_PAIR_HINT}")
        return
    j = int(np.argmax(offsets))
    last = int(offsets[j])
    try:
        end = record_end(source, last, j)
    except RecordIOError as exc:
        _warn(
            f"{idx_path}'s last record (key {keys[j]}, at byte {last}) is not a whole record "
            f"of {url} ({exc}): {_PAIR_HINT}"
        )
        return
    if end != source.size:
        _warn(
            f"{idx_path} does not index {url} to its end: its last record (key {keys[j]}, "
            f"at byte {last}) ends at byte {end}, the file at {source.size}: {_PAIR_HINT}"
        )


_PAIR_HINT = (
    "records missing from the .idx, a truncated .rec, or a .rec and .idx from different "
    "writes (a publish interrupted between the two); `recio index` rebuilds the .idx"
)
_FRAME = struct.Struct("<II")


def record_end(source: storage.ByteSource, offset: int, record_index: int | None = None) -> int:
    """Where the record at ``offset`` ends (after its padding), from its frame headers only.

    Raises:
        CorruptRecordError: no record starts at ``offset``, or its frames do not chain.
        TruncatedRecordError: the file ends inside the record.
    """
    start = offset
    while True:
        head = bytes(source.read(offset, FRAME_HEADER_SIZE))
        where = {"path": source.url, "offset": offset, "record_index": record_index}
        if len(head) < FRAME_HEADER_SIZE:
            raise TruncatedRecordError("file ends inside a frame header", **where)
        magic, lrec = _FRAME.unpack(head)
        cflag, length = lrec >> 29, lrec & MAX_PAYLOAD
        continuation = cflag in (CFLAG_MIDDLE, CFLAG_LAST)
        if magic != MAGIC:
            raise CorruptRecordError(f"bad magic 0x{magic:08x}: not a record start", **where)
        if cflag > CFLAG_LAST or continuation != (offset != start):
            raise CorruptRecordError(f"frame with cflag {cflag}: not a record start", **where)
        data_end = offset + FRAME_HEADER_SIZE + length
        if data_end > source.size:
            raise TruncatedRecordError(
                f"file ends inside a payload ({source.size - data_end + length} of {length} "
                "bytes present)",
                **where,
            )
        offset = min(data_end + (-length & 3), source.size)
        if cflag not in (CFLAG_FIRST, CFLAG_MIDDLE):
            return offset


def _warn(message: str) -> None:
    warnings.warn(message, IndexWarning, stacklevel=4)


def not_a_record_start(idx_path: str, key, offset: int, exc: RecordIOError) -> RecordIOError:
    if exc.offset != offset:
        return exc
    error = IndexMismatchError(  # exc names the .rec and the byte
        f"{idx_path} gives key {key} offset {offset}, which is not a record start: {exc}"
    )
    error.path, error.record_index = idx_path, exc.record_index
    return error


class RecordFile:
    """Random access to every record of a ``.rec``, by position in its index.

    Offsets come from ``idx_url`` (default: the ``.rec`` name with ``.idx``) or,
    when there is no ``.idx``, from a scan of the file. ``read(i)`` returns the
    payload of the i-th record in index order: a zero-copy memoryview for local
    files. ``read_many`` fetches several records, concurrently for remote files.
    Keys must fit in int64. Several keys may share an offset (a warning says so):
    each reads the record there.

    Given a list of URLs, a shard pattern or a glob (:mod:`recio.shards`), it opens them
    as one: the object is a :class:`recio.shards.ShardedRecords`, with this interface.

    ``verify_checksums``: check every record read against the checksum sidecar beside the
    ``.idx`` (NOTE [checksum sidecar] in :mod:`recio.checksum`). True: the sidecar must be
    there; "auto" (default): remote data is checked when it has one, local files are not
    (``recio verify`` checks those); False: never. A remote record that does not match is
    fetched again once; if it still does not, :class:`~recio.errors.ChecksumError` (or, for
    batch readers, a bad slot for their ``on_error``). ``checksum_stats`` counts records
    fetched again and mismatches. A sidecar of another write (its count or ``.rec`` size
    differs) is an ``IndexMismatchError`` at open.
    """

    def __new__(cls, url: Any = None, *args: Any, **kwargs: Any) -> Any:
        """A RecordFile; for a list, pattern or glob of shards, a ``ShardedRecords``."""
        if cls is RecordFile and url is not None:
            from .shards import is_shard_spec, open_records  # imports this module

            if is_shard_spec(url):
                return open_records(url, *args, **kwargs)
        return super().__new__(cls)

    def __init__(
        self,
        url: str,
        idx_url: str | None = None,
        *,
        storage_options: dict[str, Any] | None = None,
        fetch: storage.FetchOptions | None = None,
        cache_dir: str | None = None,
        cache_limit: int | None = None,
        verify_checksums: bool | str = "auto",
    ) -> None:
        self.url = str(url)
        self.storage_options = storage_options
        self.fetch, self.cache_dir, self.cache_limit = fetch, cache_dir, cache_limit
        self.verify_checksums = verify_checksums
        mode = resolve_verify(verify_checksums, self.url)
        self.closed = False
        self.checksum_stats = {"refetched": 0, "mismatched": 0}
        self._stats_lock = threading.Lock()  # decode threads read batches concurrently
        with storage.one_client():  # the .rec, .idx and sidecar through one client
            self.source = storage.open_source(
                self.url, storage_options, fetch=fetch, cache_dir=cache_dir,
                cache_limit=cache_limit,
            )  # fmt: skip
            try:
                self._load_index(idx_url)
                self.checksums = self._load_checksums(mode)
            except BaseException:
                self.source.close()
                raise

    def _load_index(self, idx_url: str | None) -> None:
        self._cursor = RecordCursor(self.source)
        if idx_url is None:
            candidate = default_idx_path(self.url)
            idx_url = candidate if storage.exists(candidate, self.storage_options) else None
        self.idx_url = idx_url
        if idx_url is not None:
            data = storage.read_bytes(idx_url, self.storage_options)
            self.keys, self.offsets = parse_idx_arrays(data, path=idx_url)
            del data  # the text of a 40M-line .idx is ~800 MB
            check_offsets(idx_url, self.keys, self.offsets, self.source)
        else:
            self.offsets = np.array(scan_source(self.source), dtype=np.int64)
            self.keys = np.arange(len(self.offsets), dtype=np.int64)
        self.lengths = self._extents()

    def _load_checksums(self, mode: bool | str) -> Checksums | None:
        """The sidecar to verify reads against (None: reads are not verified)."""
        if mode is False:
            return None
        path = sidecar_path(self.url, self.idx_url)
        found = load_sidecar(path, self.storage_options)
        if found is None:
            if mode is True:
                raise FileNotFoundError(
                    errno.ENOENT,
                    f"verify_checksums=True, but {self.url} has no checksum sidecar "
                    f"(`recio checksum {self.url}` writes it)",
                    path,
                )
            return None
        found.check_matches(len(self), self.url, self.source.size, self.idx_url)
        return found

    def _extents(self) -> np.ndarray:
        """Each record's byte length: up to the next distinct record start in file order.

        Keys sharing an offset share its record (and a warning names them).
        """
        offsets, size = self.offsets, self.source.size
        if len(offsets) == 0:
            return np.empty(0, dtype=np.int64)
        # Offsets in file order, as writers leave them: the next start is the next offset.
        lengths = np.empty(len(offsets), dtype=np.int64)
        np.subtract(offsets[1:], offsets[:-1], out=lengths[:-1])
        lengths[-1] = size - offsets[-1]
        if lengths.min() > 0:
            return lengths
        del lengths
        starts, first = np.unique(offsets, return_index=True)
        if len(starts) < len(offsets):
            self._warn_duplicates(first)
        ends = np.append(starts[1:], size)
        return ends[np.searchsorted(starts, offsets)] - offsets

    def _warn_duplicates(self, first: np.ndarray) -> None:
        repeated = np.ones(len(self.offsets), dtype=bool)
        repeated[first] = False
        positions = np.flatnonzero(repeated)
        firsts = dict(zip(self.offsets[first].tolist(), first.tolist(), strict=True))
        examples = []
        for p in positions[:3].tolist():
            offset = int(self.offsets[p])
            examples.append(f"key {self.keys[p]} as key {self.keys[firsts[offset]]}, byte {offset}")
        more = f", and {len(positions) - 3} more" if len(positions) > 3 else ""
        warnings.warn(
            f"{self.idx_url}: {len(positions)} entries repeat the offset of an earlier one "
            f"({'; '.join(examples)}{more}): each reads the record at its offset",
            IndexWarning,
            stacklevel=5,  # the caller of RecordFile(),
        )

    def __len__(self) -> int:
        return len(self.offsets)

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"I/O on a closed RecordFile {self.url}")

    def read(self, i: int) -> memoryview | bytes:
        """The payload of the ``i``-th record in index order (zero-copy for local files).

        Raises:
            IndexMismatchError: the ``.idx`` gives an offset that is not a record start.
            TruncatedRecordError: the file ends inside the record (for a local file, also
                one truncated while open: its size is checked on every read).
            ValueError: the file is closed.
        """
        self._check_open()
        offset = int(self.offsets[i])
        # a whole-file copy is mended before the parse: a damaged header would stop it
        view = self._local_view(np.array([i])) if self._repairs else None
        try:
            payload, _ = self._cursor.read_at(offset, i) if self._is_local else self._read_remote(i)
        except CorruptRecordError as exc:
            key = int(self.keys[i])
            raise not_a_record_start(self.idx_url or self.url, key, offset, exc) from exc
        if self.checksums is not None and self._is_local:
            positions = np.array([i])
            view = self._local_view(positions) if view is None else view
            problems = self.verify_view(view, positions)
            if problems:
                raise problems[0]
        return payload

    @property
    def is_local(self) -> bool:
        """Whether the file is local (mapped): reads are zero-copy slices of the map."""
        return self.source.mapped

    _is_local = is_local

    @property
    def _repairs(self) -> bool:
        """Whether local reads mend damaged records first: a whole-file copy, verified."""
        return self.checksums is not None and self.source.mends

    @property
    def cached(self) -> bool:
        """Whether reads go through a bounded block cache (``cache_limit``)."""
        return self.source.schedules

    def schedule_reads(self, steps: Sequence[tuple[int, Any]]) -> None:
        """Tell a block cache the records the coming steps read (NOTE [block cache]).

        ``steps``: ``(clock, positions)`` per step, in order. Nothing to do without a cache.
        """
        if self.cached:
            positions = [np.asarray(p, dtype=np.int64).reshape(-1) for _, p in steps]
            when = np.repeat([w for w, _ in steps], [len(p) for p in positions])
            flat = np.concatenate(positions) if positions else np.empty(0, dtype=np.int64)
            self.source.schedule(when, self.offsets[flat], self.lengths[flat])

    @property
    def size(self) -> int:
        """The ``.rec``'s size in bytes (as opened)."""
        return int(self.source.size)

    def _read_remote(self, i: int) -> tuple[memoryview | bytes, int]:
        offset, length = int(self.offsets[i]), int(self.lengths[i])
        data = self.source.read(offset, length)
        if self.checksums is not None:
            datas = [data]
            problems = self._check_extents([i], datas)
            if problems:
                raise problems[0]
            data = datas[0]
        return self._parse_extent(i, data)

    def _check_extents(
        self, indices: Sequence[int], datas: list, until: int | None = None
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
            with self._stats_lock:
                self.checksum_stats["refetched"] += 1
            again = [self._refetch(i, until)]
            crc, end = extent_crcs(again)
            if end[0] >= 0 and crc[0] == self.checksums.table[i]:
                datas[j] = again[0]
                continue
            with self._stats_lock:
                self.checksum_stats["mismatched"] += 1
            problems[j] = self.checksums.mismatch(self, i, int(crc[0]), refetched=True)
        return problems

    def _refetch(self, i: int, until: int | None = None):
        """Record ``i``'s extent fetched again from the store (never a cache's copy)."""
        offset, length = int(self.offsets[i]), int(self.lengths[i])
        return self.source.refetch(offset, length, until=until)

    def verify_view(self, view: memoryview, positions: np.ndarray) -> dict[int, ChecksumError]:
        """Check the records at ``positions`` of a local map against the sidecar.

        Returns slot -> :class:`~recio.errors.ChecksumError` for those that do not match
        (empty without a sidecar). Each mismatch is counted in ``checksum_stats``.

        Raises:
            RecordIOError: a record whose frames do not chain (naming the file and byte).
        """
        if self.checksums is None or not len(positions):
            return {}
        crcs = frame_crcs(view, self.offsets[positions], self.url)
        bad = np.flatnonzero(crcs != self.checksums.table[positions])
        if not bad.size:
            return {}
        with self._stats_lock:
            self.checksum_stats["mismatched"] += int(bad.size)
        again = self._repairs  # a copy's damaged record was fetched again (_mend_copy)
        return {
            int(j): self.checksums.mismatch(self, int(positions[j]), int(crcs[j]), refetched=again)
            for j in bad.tolist()
        }

    def _parse_extent(self, i: int, data) -> tuple[memoryview | bytes, int]:
        offset = int(self.offsets[i])
        return read_record(memoryview(data), 0, path=self.url, record_index=i, base=offset)

    def read_many(
        self, indices: Sequence[int], *, until: int | None = None, bad: str = "raise"
    ) -> list[memoryview | bytes]:
        """Payloads of several records (remote: one concurrent ranged fetch).

        A local file's size is checked once per call: a record it no longer holds
        (truncated while open) raises ``TruncatedRecordError``. Otherwise as ``read``.
        ``until``: the clock of the last step the records are for (a block cache's
        schedule, :meth:`schedule_reads`). ``bad``: what a record whose checksum does not
        match becomes, "raise" (its :class:`~recio.errors.ChecksumError`) or "mark" (a
        :class:`~recio.checksum.MismatchedPayload` carrying it, for a batch's ``on_error``).
        """
        self._check_open()
        if bad not in ("raise", "mark"):
            raise ValueError(f'bad must be "raise" or "mark", not {bad!r}')
        if self._is_local:
            out = self._read_many_local(indices)
            if self.checksums is not None:
                positions = np.asarray(indices, dtype=np.int64)
                problems = self.verify_view(self._local_view(positions), positions)
                _put_problems(out, problems, bad)
            return out
        datas, problems = self._fetch_extents(indices, until)
        out: list = [None] * len(datas)
        for j, (i, data) in enumerate(zip(indices, datas, strict=False)):
            if j not in problems:
                out[j] = self.framed(int(i), data)
        _put_problems(out, problems, bad)
        return out

    def read_extents(self, indices: Sequence[int], *, until: int | None = None) -> list[bytes]:
        """Remote records as stored: each one's frames as the ``.idx`` bounds them, unparsed.

        One concurrent ranged fetch, as ``read_many``, for a caller that parses the frames
        itself (the native decoder). Checked against the sidecar where there is one: a
        record that does not match (fetched once more) comes as a
        :class:`~recio.checksum.MismatchedPayload`.
        """
        self._check_open()
        datas, problems = self._fetch_extents(indices, until)
        _put_problems(datas, problems, "mark")
        return datas

    def _fetch_extents(
        self, indices: Sequence[int], until: int | None
    ) -> tuple[list, dict[int, ChecksumError]]:
        positions = np.asarray(indices, dtype=np.int64)
        if self.cached:  # the block cache takes the ranges as an array (NOTE [ranges as arrays])
            ranges = np.stack([self.offsets[positions], self.lengths[positions]], axis=1)
            datas = list(self.source.read_ranges(ranges, until=until))
        else:
            ranges = list(
                zip(self.offsets[positions].tolist(), self.lengths[positions].tolist(), strict=True)
            )
            datas = list(self.source.read_ranges(ranges))
        problems = {} if self.checksums is None else self._check_extents(positions, datas, until)
        return datas, problems

    def framed(self, i: int, data) -> memoryview | bytes:
        """Record ``i``'s payload parsed from its extent ``data`` (errors as ``read``)."""
        try:
            return self._parse_extent(i, data)[0]
        except CorruptRecordError as exc:
            key, offset = int(self.keys[i]), int(self.offsets[i])
            raise not_a_record_start(self.idx_url or self.url, key, offset, exc) from exc

    def _read_many_local(self, indices: Sequence[int]) -> list[memoryview | bytes]:
        positions = np.asarray(indices, dtype=np.int64)
        view = self._local_view(positions)
        offsets = self.offsets[positions]
        words = _words(view)
        head, plain = _gather(words, offsets, 2)  # magic, lrec
        lrec = head[:, 1]
        starts = offsets + FRAME_HEADER_SIZE
        ends = starts + (lrec & MAX_PAYLOAD)
        plain &= (head[:, 0] == MAGIC) & (lrec <= MAX_PAYLOAD) & (ends <= len(view))  # cflag 0
        out = [view[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
        for j in np.flatnonzero(~plain).tolist():
            out[j] = self._read_local(view, int(positions[j]))
        return out

    def _local_view(self, positions: np.ndarray) -> memoryview:
        """The map as far as the file reaches now (parsing it cannot fault).

        Of a whole-file copy of remote data, with a checksum sidecar, the records at
        ``positions`` are checked first and any damaged one mended (:meth:`_mend_copy`).

        Raises:
            TruncatedRecordError: the file, truncated while open, lost a record of
                ``positions``.
        """
        view = self.source.current_view()  # parsing it cannot touch a page past the end
        if len(view) < self.source.size:
            gone = np.flatnonzero(self.offsets[positions] + self.lengths[positions] > len(view))
            if gone.size:
                i = int(positions[gone[0]])
                raise self.source.truncated(int(self.offsets[i]), len(view), i)
        if self._repairs:
            self._mend_copy(view, np.asarray(positions, dtype=np.int64))
        return view

    def _mend_copy(self, view: memoryview, positions: np.ndarray) -> None:
        """Records of a whole-file copy that fail their checksum, fetched again and written over.

        The copy, not the store, went bad (a disk's rot, a byte written over): each such
        record is fetched again from the remote file and, if that matches its checksum,
        written over the copy (:meth:`~recio.storage.CopiedSource.repair`), so the map
        holds the store's bytes before anything parses them. One the store cannot mend
        stays as it is, for the check after the parse to report. Each is counted in
        ``checksum_stats["refetched"]``.
        """
        assert self.checksums is not None
        expected = self.checksums.table[positions]
        offsets, lengths = self.offsets[positions], self.lengths[positions]
        try:
            bad = np.flatnonzero(frame_crcs(view, offsets, self.url) != expected)
        except RecordIOError:  # frames that no longer chain: each record's extent alone
            spans = zip(offsets.tolist(), lengths.tolist(), strict=True)
            extents = [view[o : o + n] for o, n in spans]
            crcs, ends = extent_crcs(extents)
            bad = np.flatnonzero((crcs != expected) | (ends < 0))
        for j in bad.tolist():
            offset, length = int(offsets[j]), int(lengths[j])
            with self._stats_lock:
                self.checksum_stats["refetched"] += 1
            data = self.source.refetch(offset, length)
            crc, end = extent_crcs([data])
            if end[0] < 0 or crc[0] != expected[j]:
                continue  # damaged in the store too: reported as a mismatch after the parse
            try:
                self.source.repair(offset, data)
            except OSError as exc:
                warnings.warn(
                    f"{self.url}: record {int(positions[j])} of the local copy "
                    f"{self.source.path} is damaged, and the copy cannot be written ({exc}): "
                    "it is reported as a checksum mismatch",
                    stacklevel=3,
                )

    def _read_local(self, view: memoryview, i: int) -> memoryview | bytes:
        """Record ``i``'s payload by ``read_record``: the exact checks and errors."""
        offset = int(self.offsets[i])
        try:
            return read_record(view, offset, path=self.url, record_index=i)[0]
        except CorruptRecordError as exc:
            key = int(self.keys[i])
            raise not_a_record_start(self.idx_url or self.url, key, offset, exc) from exc

    def describe(self, position: int, record_id: int | None = None) -> str:
        """Text for messages about one record: 'record id N (record P, at byte B of URL)'.

        Without ``record_id``, only the part in brackets.
        """
        where = f"record {position}, at byte {int(self.offsets[position])} of {self.url}"
        return f"record id {record_id} ({where})" if record_id is not None else where

    def close(self) -> None:
        """Close the file; payloads already read stay valid.

        A local file is unmapped at once, or, while payload views are still held, when
        the last of them goes. Reads raise ``ValueError`` from now on.
        """
        self.closed = True
        self.source.close()

    def __enter__(self) -> RecordFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict:
        return {
            "url": self.url,
            "idx_url": self.idx_url,
            "storage_options": self.storage_options,
            "fetch": self.fetch,
            "cache_dir": self.cache_dir,
            "cache_limit": self.cache_limit,
            "verify_checksums": self.verify_checksums,
        }

    def __setstate__(self, state: dict) -> None:
        self.__init__(
            state["url"],
            state["idx_url"],
            storage_options=state["storage_options"],
            fetch=state.get("fetch"),
            cache_dir=state.get("cache_dir"),
            cache_limit=state.get("cache_limit"),
            verify_checksums=state.get("verify_checksums", "auto"),
        )


def _put_problems(out: list, problems: dict[int, ChecksumError], bad: str) -> None:
    """Raise the first checksum problem of a read (``bad="raise"``) or mark its records."""
    if not problems:
        return
    if bad == "raise":
        raise problems[min(problems)]
    for j, error in problems.items():
        out[j] = MismatchedPayload(error)


def default_idx_path(rec_url: str) -> str:
    """The ``.idx`` beside a ``.rec``: ``.rec`` replaced by ``.idx`` (appended to other names)."""
    base = rec_url[:-4] if rec_url.endswith(".rec") else rec_url
    return base + ".idx"


def scan_source(source: storage.ByteSource) -> list[int]:
    """Record start offsets of a whole file, by walking its frame headers."""
    view = source.mapped_view()
    if view is not None:
        try:
            return scan_offsets(view, path=source.url)
        except TruncatedRecordError as exc:
            if len(view) < source.size:
                raise source.truncated(exc.offset or 0, len(view), exc.record_index) from exc
            raise
    cursor = RecordCursor(source)
    offsets = []
    offset = 0
    while offset < source.size:
        offsets.append(offset)
        _, offset = cursor.read_at(offset, len(offsets) - 1)
    return offsets


def batch_headers(
    records: RecordFile, positions: np.ndarray, payloads: Sequence[Any], label_width: int
) -> tuple[np.ndarray, np.ndarray, list[int], dict[int, RecordIOError]]:
    """Parse the IRHeaders of one batch read from ``records`` at ``positions``.

    Returns:
        Labels (float32, ``label_width`` each), record ids (int64; the ``.idx`` key where
        the header is unreadable), where each payload's image starts, and the records
        whose header cannot be read (slot -> error naming the file, byte offset and
        record): too short for an IRHeader, or more labels than bytes. Such a slot is a
        bad image for the iterator's ``on_error`` policy.

    Raises:
        ValueError: ``label_width`` > 1 for a record that has a single label (a setting
            that does not fit the data, whatever the policy).
    """
    n = len(payloads)
    headers = _Headers(n, label_width)
    headers.parse(records, positions, range(n), payloads)
    headers.check_width(records, positions)
    return headers.labels, headers.ids, headers.starts.tolist(), headers.problems


class BatchRecords(NamedTuple):
    """One batch's records, parsed: what the decoder and the consumer need of them.

    ``images`` holds each slot's encoded image (empty where the header is unreadable): a
    :class:`~recio.spans.Spans` of the file's map for a local file, else a list.
    """

    labels: np.ndarray  # float32 (n, label_width)
    ids: np.ndarray  # int64 (n,): the header's id; the .idx key where it is unreadable
    images: Spans | list
    problems: dict[int, RecordIOError]  # slot -> why its header is unreadable


def read_batch(
    records: RecordFile,
    positions: np.ndarray,
    label_width: int,
    payloads: Sequence[Any] | None = None,
) -> BatchRecords:
    """Read the records at ``positions`` (or take their ``payloads``) and parse their headers.

    A local batch is parsed from the map all at once (NOTE [batch parse]); with
    ``payloads`` (a remote batch fetched ahead), or from a remote file, record by record.
    Labels, ids and problems as :func:`batch_headers` gives them.

    Over a set of shards (:class:`recio.shards.ShardedRecords`), each shard's part is read
    so and the parts put together in slot order (see there).

    Raises:
        RecordIOError: framing problems, as :meth:`RecordFile.read_many` raises them.
        ValueError: ``label_width`` > 1 for a record with a single label.
    """
    if not isinstance(records, RecordFile):  # several shards: each read from its own map
        return records.read_batch(positions, label_width, payloads)
    positions = np.asarray(positions, dtype=np.int64)
    if payloads is None:
        records._check_open()
        if records._is_local:
            return _read_local_batch(records, positions, label_width)
        payloads = records.read_many(positions, bad="mark")
    labels, ids, starts, problems = batch_headers(records, positions, payloads, label_width)
    images = [payload[start:] for payload, start in zip(payloads, starts, strict=True)]
    for j in problems:
        images[j] = b""
    return BatchRecords(labels, ids, images, problems)


# NOTE [batch parse]: records start at 4-byte-aligned offsets, so the frame header and the
# IRHeader of every record of a batch are whole little-endian words of the map: one gather
# of 8 words per record (magic, lrec, flag, label, id as two words, id2) and a few array
# operations parse the batch, and the images come out as Spans of the map. A record goes
# the exact way (read_record, unpack_labels: the same checks, errors and byte offsets) unless
# it is plainly fine: one frame (cflag 0) with the magic, its payload inside the file, room
# for the IRHeader and the labels it announces, an id below 2**63 (a larger one is the
# int64 OverflowError of the exact way). A multi-frame record's payload is new bytes (the
# magics put back), outside the map: a batch with one has its images as a list.
_WORD_AT = np.arange((FRAME_HEADER_SIZE + IR_HEADER_SIZE) // 4)  # 0..7


def _words(view: memoryview) -> np.ndarray:
    return np.frombuffer(view, dtype="<u4", count=len(view) // 4)


def _gather(words: np.ndarray, offsets: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``count`` words at each offset (n x count), and where they are the record's own.

    A row is the record's own where its words are inside ``words`` and the offset is
    aligned; the other rows hold words from elsewhere, for the caller to refuse.
    """
    n = len(offsets)
    if len(words) < count:
        return np.zeros((n, count), dtype=words.dtype), np.zeros(n, dtype=bool)
    at = offsets >> 2
    safe = np.minimum(at, len(words) - count)
    own = safe == at
    misaligned = offsets & 3
    if misaligned.any():
        own &= misaligned == 0
    return words[safe[:, None] + _WORD_AT[:count]], own


def _read_local_batch(records: RecordFile, positions: np.ndarray, label_width: int) -> BatchRecords:
    """:func:`read_batch` of a local file (NOTE [batch parse])."""
    view = records._local_view(positions)
    offsets = records.offsets[positions]
    words = _words(view)
    head, fast = _gather(words, offsets, len(_WORD_AT))
    lrec, flag = head[:, 1], head[:, 2].astype(np.int64)
    ids = np.ascontiguousarray(head.view("<i8")[:, 2])  # words 4 and 5
    payload = offsets + FRAME_HEADER_SIZE
    ends = payload + (lrec & MAX_PAYLOAD)
    starts = payload + IR_HEADER_SIZE + (flag << 2)
    fast &= (head[:, 0] == MAGIC) & (lrec <= MAX_PAYLOAD) & (ends <= len(view))  # cflag 0
    fast &= (starts <= ends) & (ids >= 0)
    n = len(positions)
    headers = _Headers(n, label_width, ids)
    headers.labels[:] = head[:, 3:4].view("<f4")  # flag 0: the label, label_width times
    if flag.any():  # labels[j, k] = the k-th label word after the IRHeader, k < flag
        multi = np.flatnonzero(fast & (flag > 0))
        k = np.arange(label_width)
        has = k < flag[multi, None]
        at = np.where(has, (offsets[multi, None] >> 2) + len(_WORD_AT) + k, 0)
        headers.labels[multi] = np.where(has, words[at].view("<f4"), 0)
    if label_width > 1:
        headers.single[:] = fast & (flag == 0)
    lengths = ends - starts
    parts: dict[int, bytes] = {}  # slot -> the image of a multi-frame record
    if not fast.all():
        slow = np.flatnonzero(~fast).tolist()
        payloads = [records._read_local(view, int(positions[j])) for j in slow]
        headers.labels[slow] = 0
        headers.parse(records, positions, slow, payloads)
        for j, payload in zip(slow, payloads, strict=True):
            start = int(headers.starts[j])
            starts[j], lengths[j] = 0, 0
            if j in headers.problems:
                continue
            if isinstance(payload, memoryview):  # one frame: a span of the map
                starts[j] = int(offsets[j]) + FRAME_HEADER_SIZE + start
                lengths[j] = len(payload) - start
            else:
                parts[j] = payload[start:]
    for j, error in records.verify_view(view, positions).items():
        headers.problems[j] = error  # checked after the parse: its labels may be damaged too
        headers.labels[j], headers.single[j] = 0, False
        headers.ids[j] = int(records.keys[positions[j]])
        starts[j], lengths[j] = 0, 0
        parts.pop(j, None)
    headers.check_width(records, positions)
    images: Spans | list = Spans.inside(view, starts, lengths)
    if parts:
        images = [parts[j] if j in parts else images[j] for j in range(n)]
    return BatchRecords(headers.labels, headers.ids, images, headers.problems)


class _Headers:
    """The parsed IRHeaders of one batch, filled slot by slot or all at once."""

    def __init__(self, n: int, label_width: int, ids: np.ndarray | None = None) -> None:
        self.label_width = label_width
        self.labels = np.zeros((n, label_width), dtype=np.float32)
        self.ids = np.full(n, -1, dtype=np.int64) if ids is None else ids
        self.starts = np.zeros(n, dtype=np.int64)  # where the image starts in the payload
        self.single = np.zeros(n, dtype=bool)  # flag 0: one label
        self.problems: dict[int, RecordIOError] = {}

    def parse(
        self, records: RecordFile, positions: np.ndarray, slots: Sequence[int], payloads
    ) -> None:
        """Parse ``payloads`` (of ``slots``) with ``unpack_labels``: the exact way."""
        for j, payload in zip(slots, payloads, strict=True):
            if isinstance(payload, MismatchedPayload):  # its checksum did not match
                self.problems[j] = payload.error
                self.ids[j] = int(records.keys[int(positions[j])])
                continue
            try:
                self.labels[j], self.ids[j], self.starts[j] = unpack_labels(
                    payload, self.label_width
                )
            except RecordIOError as exc:  # this record's header: the policy's to handle
                position = int(positions[j])
                self.problems[j] = RecordIOError(
                    str(exc), path=records.url, offset=int(records.offsets[position]),
                    record_index=position,
                )  # fmt: skip
                self.ids[j] = int(records.keys[position])  # the .idx key: the best id there is
                continue
            self.single[j] = self.starts[j] == IR_HEADER_SIZE

    def check_width(self, records: RecordFile, positions: np.ndarray) -> None:
        """Raise for the first record with a single label when ``label_width`` > 1."""
        check_label_width(records, positions, self.single, self.label_width)


def check_label_width(
    records: RecordFile, positions: np.ndarray, single: np.ndarray, label_width: int
) -> None:
    """Raise ValueError for the first record with a single label (``single``) if width > 1."""
    if label_width > 1 and single.any():
        j = int(np.argmax(single))
        raise ValueError(
            f"label_width={label_width}, but {records.describe(int(positions[j]))} has "
            "a single label (flag 0): set label_width=1, or pack the records with several "
            "labels"
        )
