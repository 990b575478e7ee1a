"""One ``.rec`` read by position in its index: :class:`RecordFile`.

``RecordFile`` takes record offsets from the ``.idx`` (or a walk of the file when there is
none) and reads payloads zero-copy from local files, by ranged reads from remote ones.
Several shards are :class:`~.shards.ShardedRecords`; :func:`~.shards.open_records` opens
either.
"""

from __future__ import annotations

import errno
import warnings
from collections.abc import Sequence
from typing import Any

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
from .batch import BatchRecords, gather_words, map_words, read_file_batch
from .checksum import Checksums, MismatchedPayload, resolve_verify
from .cursor import RecordCursor
from .format import (
    FRAME_HEADER,
    FRAME_HEADER_SIZE,
    MAGIC,
    MAX_PAYLOAD,
    parse_idx_arrays,
    read_record,
)
from .index import check_offsets, default_idx_path, first_gap, not_a_record_start, warn_gap
from .open_options import OpenOptions
from .protocol import RecordsBase
from .samples import RecordLayout, layout_of_file
from .scan import scan_source
from .shard_names import is_shard_spec
from .verified import SidecarChecks, put_problems

__all__ = ["RecordFile"]

_scanned: set[str] = set()  # the .rec files already warned about (once each per process)


def _missing(exc: FileNotFoundError, url: str, fix: str) -> FileNotFoundError:
    """``exc`` (a file that is not there) as one sentence that names ``url`` and the fix."""
    what = exc.strerror or ("no such file" if storage.is_local(url) else "no such file or bucket")
    return FileNotFoundError(errno.ENOENT, f"{what} ({fix})", url)


def _warn_scan(url: str) -> None:
    """Say, once per file, that a ``.rec`` without ``.idx`` is read whole to find its records.

    On a large or remote file the scan takes minutes; the warning comes before it, so the
    wait is explained while it happens.
    """
    if url in _scanned:
        return
    _scanned.add(url)
    warnings.warn(
        f"{url} has no index ({default_idx_path(url)}): reading the whole file to find its "
        f"records; `recio index {url}` writes the index once",
        IndexWarning,
        stacklevel=5,  # the caller of RecordFile()
    )


class RecordFile(RecordsBase):
    """Random access to every record of a ``.rec``, by position in its index.

    Offsets come from ``idx_url`` (default: the ``.rec`` name with ``.idx``) or,
    when there is no ``.idx``, from a scan of the file. ``read(i)`` returns the
    payload of the i-th record in index order: a zero-copy memoryview for local
    files. ``read_many`` fetches several records, concurrently for remote files.
    Keys must fit in int64. Several keys may share an offset (a warning says so):
    each reads the record there.

    One file only: a list of URLs, a shard pattern or a glob is a ``TypeError`` (they
    are for :func:`~.shards.open_records`, which opens one file or several).

    ``verify_checksums``: check every record read against the checksum sidecar beside the
    ``.idx`` (NOTE [checksum sidecar] in :mod:`.checksum`). True: the sidecar must be
    there; "auto" (default): checked wherever it has one, local files included (NOTE
    [checksums by default] in :mod:`.checksum`); False: never. A remote record that does
    not match is fetched again once; if it still does not,
    :class:`~recio.errors.ChecksumError` (or, for batch readers, a bad slot for their
    ``on_error``). ``checksum_stats`` counts records
    fetched again and mismatches. A sidecar of another write (its count or ``.rec`` size
    differs) is an ``IndexMismatchError`` at open.

    ``storage_options``, ``fetch``, ``cache_dir``, ``cache_limit`` and ``verify_checksums``
    are the fields of :class:`~.open_options.OpenOptions`: give them one by one, or as one
    value, ``options=`` (``self.options``).
    """

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
        options: OpenOptions | None = None,
    ) -> None:
        options = OpenOptions.given(
            options,
            storage_options=storage_options,
            fetch=fetch,
            cache_dir=cache_dir,
            cache_limit=cache_limit,
            verify_checksums=verify_checksums,
        )
        if is_shard_spec(url):
            raise TypeError(
                f"RecordFile opens one .rec, not several ({url!r} is a list, a shard pattern "
                "or a glob): recio.records.open_records opens a set of shards"
            )
        self.url = str(url)
        self.options = options
        self.storage_options, self.fetch = options.storage_options, options.fetch
        self.cache_dir, self.cache_limit = options.cache_dir, options.cache_limit
        self.verify_checksums = options.verify_checksums
        mode = resolve_verify(self.verify_checksums, self.url)
        self.closed = False
        self._gap_seen = False  # NOTE [index gaps]: warned once per file
        self.sidecar = SidecarChecks(None)  # loaded with the index, below
        with storage.one_client():  # the .rec, .idx and sidecar through one client
            try:
                self.source = storage.open_source(
                    self.url,
                    self.storage_options,
                    fetch=self.fetch,
                    cache_dir=self.cache_dir,
                    cache_limit=self.cache_limit,
                )
            except FileNotFoundError as exc:
                raise _missing(
                    exc,
                    self.url,
                    "check the path, or make a .rec from an image folder with `recio im2rec`",
                ) from exc
            try:
                self._load_index(idx_url)
                self.sidecar = SidecarChecks.load(self, mode)
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
            try:
                data = storage.read_bytes(idx_url, self.storage_options)
            except FileNotFoundError as exc:
                raise _missing(
                    exc,
                    idx_url,
                    f"the .idx given for {self.url}: check the path, leave it "
                    f"out to use the one beside the .rec, or write it with `recio index "
                    f"{self.url}`",
                ) from exc
            self.keys, self.offsets = parse_idx_arrays(data, path=idx_url)
            del data  # the text of a 40M-line .idx is ~800 MB
            check_offsets(idx_url, self.keys, self.offsets, self.source)
        else:
            _warn_scan(self.url)
            self.offsets = np.array(scan_source(self.source), dtype=np.int64)
            self.keys = np.arange(len(self.offsets), dtype=np.int64)
        self.lengths = self._extents()

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

    def check_record_ends(self, positions: Any, ends: Any, mask: np.ndarray | None = None) -> None:
        """Warn once if a record read ends before the next one the ``.idx`` lists.

        ``positions`` of records just read, ``ends`` where their frames end (bytes of the
        file), ``mask`` which of them to look at (NOTE [index gaps]: the ``.idx`` leaves
        out the records in between; an :class:`~recio.errors.IndexWarning` counts them).
        """
        if self._gap_seen or self.idx_url is None:
            return
        positions, ends = np.asarray(positions, dtype=np.int64), np.asarray(ends, np.int64)
        # the common case in few array operations (a batch's consumer runs this)
        stops = self.offsets[positions]
        stops += self.lengths[positions]
        padded = ends + 3
        padded &= ~3
        gap = padded < stops
        if mask is not None:
            gap &= mask
        if not gap.any():
            return
        found = positions[gap]  # then the exact look, at these only
        j = first_gap(self.offsets[found], self.lengths[found], ends[gap], self.size)
        if j is not None:
            self._gap_seen = True
            p = int(found[j])
            start = (int(ends[gap][j]) + 3) & ~3
            stop = int(self.offsets[p] + self.lengths[p])
            warn_gap(self.idx_url, self.source, start, stop, int(self.keys[p]))

    def read(self, i: int) -> memoryview | bytes:
        """The payload of the ``i``-th record in index order (zero-copy for local files).

        Raises:
            IndexMismatchError: the ``.idx`` gives an offset that is not a record start.
            TruncatedRecordError: the file ends inside the record (for a local file, also
                one truncated while open: its size is checked on every read).
            ValueError: the file is closed.
        """
        self.check_open()
        offset = int(self.offsets[i])
        # a whole-file copy is mended before the parse: a damaged header would stop it
        view = self.local_view(np.array([i])) if self.sidecar.repairs(self) else None
        try:
            if self.is_local:
                payload, end = self._cursor.read_at(offset, i)
            else:
                payload, end = self._read_remote(i)
                end += offset  # the extent's own offsets
        except CorruptRecordError as exc:
            key = int(self.keys[i])
            raise not_a_record_start(self.idx_url or self.url, key, offset, exc) from exc
        if end < offset + self.lengths[i] and not self._gap_seen:
            self.check_record_ends([i], [end])
        if self.checksums is not None and self.is_local:
            positions = np.array([i])
            view = self.local_view(positions) if view is None else view
            problems = self.verify_view(view, positions)
            if problems:
                raise problems[0]
        return payload

    @property
    def is_local(self) -> bool:
        """Whether the file is local (mapped): reads are zero-copy slices of the map."""
        return self.source.mapped

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
            problems = self.sidecar.check_extents(self, [i], datas)
            if problems:
                raise problems[0]
            data = datas[0]
        return self._parse_extent(i, data)

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
        match, or whose frames are damaged, becomes: "raise" (its error) or "mark" (a
        :class:`~recio.records.checksum.MismatchedPayload` carrying it, for a batch's
        ``on_error``).
        """
        self.check_open()
        if bad not in ("raise", "mark"):
            raise ValueError(f'bad must be "raise" or "mark", not {bad!r}')
        if self.is_local:
            positions = np.asarray(indices, dtype=np.int64)
            problems: dict = {}
            out = self._read_many_local(positions, problems)
            if self.checksums is not None:  # the read's own finding first (say, the .idx's fault)
                for j, error in self.verify_view(self.local_view(positions), positions).items():
                    problems.setdefault(j, error)
            if problems:  # read from a map that changed: truncation, whatever it read as
                problems.update(self.lost(positions))
            put_problems(out, problems, bad)
            return out
        datas, problems = self._fetch_extents(indices, until)
        out: list = [None] * len(datas)
        for j, (i, data) in enumerate(zip(indices, datas, strict=False)):
            if j not in problems:
                try:
                    out[j] = self.framed(int(i), data)
                except RecordIOError as exc:
                    problems[j] = self.bad_record(int(i), exc)
        put_problems(out, problems, bad)
        return out

    def read_extents(self, indices: Sequence[int], *, until: int | None = None) -> list[bytes]:
        """Remote records as stored: each one's frames as the ``.idx`` bounds them, unparsed.

        One concurrent ranged fetch, as ``read_many``, for a caller that parses the frames
        itself (the native decoder). Checked against the sidecar where there is one: a
        record that does not match (fetched once more) comes as a
        :class:`~recio.records.checksum.MismatchedPayload`.
        """
        self.check_open()
        datas, problems = self._fetch_extents(indices, until)
        put_problems(datas, problems, "mark")
        if not self._gap_seen:  # NOTE [index gaps]: where each one-frame record ends
            ends = [_one_frame_end(data) for data in datas]
            positions = np.asarray(indices, dtype=np.int64)
            self.check_record_ends(positions, self.offsets[positions] + ends)
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
        problems = {}
        if self.checksums is not None:
            problems = self.sidecar.check_extents(self, positions, datas, until)
        return datas, problems

    def framed(self, i: int, data) -> memoryview | bytes:
        """Record ``i``'s payload parsed from its extent ``data`` (errors as ``read``)."""
        try:
            payload, end = self._parse_extent(i, data)
        except CorruptRecordError as exc:
            key, offset = int(self.keys[i]), int(self.offsets[i])
            raise not_a_record_start(self.idx_url or self.url, key, offset, exc) from exc
        if end < len(data) and not self._gap_seen:
            self.check_record_ends([i], [int(self.offsets[i]) + end])
        return payload

    def _read_many_local(self, positions: np.ndarray, problems: dict) -> list[memoryview | bytes]:
        """The payloads at ``positions``; a record that does not parse into ``problems``."""
        view = self.local_view(positions, keep_lost=True)
        offsets = self.offsets[positions]
        words = map_words(view)
        head, plain = gather_words(words, offsets, 2)  # magic, lrec
        lrec = head[:, 1]
        starts = offsets + FRAME_HEADER_SIZE
        ends = starts + (lrec & MAX_PAYLOAD)
        plain &= (head[:, 0] == MAGIC) & (lrec <= MAX_PAYLOAD) & (ends <= len(view))  # cflag 0
        self.check_record_ends(positions, ends, plain)
        out = [view[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
        for j in np.flatnonzero(~plain).tolist():
            try:
                out[j] = self.read_from_view(view, int(positions[j]))
            except RecordIOError as exc:
                problems[j] = self.bad_record(int(positions[j]), exc)
        return out

    def local_view(self, positions: np.ndarray, *, keep_lost: bool = False) -> memoryview:
        """The map as far as it holds the file's bytes now (parsing it cannot fault).

        Of a whole-file copy of remote data, with a checksum sidecar, the records at
        ``positions`` are checked first and any damaged one mended
        (:meth:`SidecarChecks.mend_copy`).
        ``keep_lost``: a record the view no longer holds is the caller's to find (a batch
        reader's bad slot, :meth:`lost`), not an error here.

        Raises:
            TruncatedRecordError: the file, truncated while open, lost a record of
                ``positions`` (unless ``keep_lost``).
        """
        view = self.source.current_view()  # parsing it cannot touch a page past the end
        if len(view) < self.source.size and not keep_lost:
            gone = np.flatnonzero(self.offsets[positions] + self.lengths[positions] > len(view))
            if gone.size:
                i = int(positions[gone[0]])
                raise self.source.truncated(int(self.offsets[i]), len(view), i)
        if self.sidecar.repairs(self):
            self.sidecar.mend_copy(self, view, np.asarray(positions, dtype=np.int64))
        return view

    @property
    def checksums(self) -> Checksums | None:
        """The checksum sidecar reads are checked against (None: not checked)."""
        return self.sidecar.checksums

    @property
    def checksum_stats(self) -> dict[str, int]:
        """Records fetched again after a checksum mismatch, and mismatches, so far."""
        return self.sidecar.stats

    def verify_view(self, view: memoryview, positions: np.ndarray) -> dict[int, RecordIOError]:
        """:meth:`SidecarChecks.verify_view` of this file's records at ``positions``."""
        return self.sidecar.verify_view(self, view, positions)

    def crcs_match(self, positions: np.ndarray, crcs: np.ndarray) -> bool:
        """:meth:`SidecarChecks.crcs_match`: whether every record there has its checksum."""
        return self.sidecar.crcs_match(positions, crcs)

    def mapped_batch(self, positions: np.ndarray) -> tuple[memoryview, np.ndarray]:
        """A local batch's first read step: the map, and the offsets of ``positions`` in it.

        The file checked open; records the map lost are kept (:meth:`local_view` with
        ``keep_lost``), for the batch reader's :meth:`view_problems` and :meth:`lost` to
        make bad slots of once the records are parsed.
        """
        self.check_open()
        return self.local_view(positions, keep_lost=True), self.offsets[positions]

    def view_problems(self, view: memoryview, positions: np.ndarray) -> dict[int, RecordIOError]:
        """A local batch's check after its parse: slot -> why the record there is bad.

        The records that fail their checksum or whose frames do not chain
        (:meth:`verify_view`), with, where there are any, those the map lost (what they
        read is not the file's bytes: :meth:`lost`); each error names the file, byte
        offset and key. Empty without a sidecar.
        """
        return self._named_problems(positions, self.verify_view(view, positions))

    def crcs_problems(self, positions: np.ndarray, crcs: np.ndarray) -> dict[int, RecordIOError]:
        """:meth:`view_problems` of records whose frames' CRC32C the decode threads took.

        ``crcs``: theirs (NOTE [one pass per record] in native/bind_pool.c); the records
        whose checksum is not the sidecar's, with those the map lost where there are any.
        """
        return self._named_problems(positions, self.sidecar.crcs_problems(self, positions, crcs))

    def _named_problems(
        self, positions: np.ndarray, problems: dict[int, RecordIOError]
    ) -> dict[int, RecordIOError]:
        """A batch's checksum problems, named; with them the records the map lost, if any.

        Each error names the file, byte offset and key.
        """
        if not problems:
            return {}
        problems = {**problems, **self.lost(positions)}
        return {j: self.bad_record(int(positions[j]), e) for j, e in problems.items()}

    def lost(self, positions: np.ndarray) -> dict[int, TruncatedRecordError]:
        """The records of ``positions`` the map no longer holds in full: slot -> error.

        Asked after a read from the map (NOTE [map guard] in :mod:`recio.storage.mapped`):
        what a record read there past a truncation, or from a page that faulted, is not
        its bytes. Costs an fstat where nothing is lost; nothing for a remote file.
        """
        if not self.is_local:
            return {}
        readable = self.source.readable()
        if readable >= self.source.size:
            return {}
        positions = np.asarray(positions, dtype=np.int64)
        ends = self.offsets[positions] + self.lengths[positions]
        lost = {}
        for j in np.flatnonzero(ends > readable).tolist():
            i = int(positions[j])
            lost[j] = self.bad_record(i, self.source.truncated(int(self.offsets[i]), readable, i))
        return lost

    def head_words(self, positions: np.ndarray, count: int) -> np.ndarray:
        """The first ``count`` little-endian uint32 words of the records at ``positions``.

        (n, count); words past the end of the file are 0. From the map of a local file,
        else ``count * 4`` bytes fetched per record.
        """
        offsets = self.offsets[positions]
        view = self.source.mapped_view()
        if view is not None:
            words = np.frombuffer(view, dtype="<u4", count=len(view) // 4)
            at = offsets // 4  # record starts are 4-byte aligned
            inside = at + count <= len(words)
            out = np.zeros((len(offsets), count), dtype=np.uint32)
            out[inside] = words[at[inside, None] + np.arange(count)]
            return out
        size = 4 * count
        datas = self.source.read_ranges([(int(o), size) for o in offsets])
        joined = b"".join(bytes(d).ljust(size, b"\0")[:size] for d in datas)
        return np.frombuffer(joined, dtype="<u4").reshape(-1, count)

    def bad_record(self, i: int, exc: RecordIOError) -> RecordIOError:
        """``exc``, a problem of record ``i``, as a batch reader reports it: naming the key too.

        The same class, file and byte offset; an ``IndexMismatchError`` (it names the key
        already) as it is.
        """
        if isinstance(exc, IndexMismatchError) or exc.key is not None:
            return exc
        error = type(exc)(
            exc.message,
            path=exc.path or self.url,
            offset=int(self.offsets[i]) if exc.offset is None else exc.offset,
            record_index=i,
            key=int(self.keys[i]),
        )
        error.__cause__ = exc.__cause__
        return error

    def read_from_view(self, view: memoryview, i: int) -> memoryview | bytes:
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

    def read_batch(
        self, positions: Any, label_width: int, payloads: Sequence[Any] | None = None
    ) -> BatchRecords:
        """One batch's records read and parsed (:func:`~.batch.read_file_batch`)."""
        return read_file_batch(self, positions, label_width, payloads)

    def detect_layout(self) -> RecordLayout:
        """Which records are samples (:func:`~.samples.detect_layout`)."""
        return layout_of_file(self)

    def close(self) -> None:
        """Close the file; payloads already read stay valid.

        A local file is unmapped at once, or, while payload views are still held, when
        the last of them goes. Reads raise ``ValueError`` from now on.
        """
        self.closed = True
        self.source.close()

    _PLACE = ("url", "idx_url")

    def _place(self) -> dict[str, Any]:
        return {"url": self.url, "idx_url": self.idx_url}


def _one_frame_end(extent: Any) -> int:
    """Where a one-frame record ends in its fetched ``extent`` (its length where unknown)."""
    if isinstance(extent, MismatchedPayload):
        return 1 << 62  # damaged: not looked at
    if len(extent) < FRAME_HEADER_SIZE:
        return len(extent)
    magic, lrec = FRAME_HEADER.unpack_from(extent, 0)
    if magic != MAGIC or lrec >> 29:  # not a record, or several frames: the parse's to say
        return len(extent)
    return FRAME_HEADER_SIZE + (lrec & MAX_PAYLOAD)
