"""A dataset as a set of shards: several ``.rec`` files, each with its own ``.idx``, read as one.

A dataset is given as one of:

* a list of URLs (each may itself be a pattern or glob below);
* a shard pattern, ``train-{00000..00063}-of-00064.rec`` (``{A..B}`` a range of integers,
  zero-padded when ``A`` or ``B`` is; ``{a,b,c}`` alternatives);
* a glob, ``data/train-*.rec`` (``*``, ``?``, ``[...]``; matches in name order, ``.idx``
  files left out);
* ``STEM``, when no file ``STEM`` exists and ``STEM-*-of-*.rec`` do (what ``recio im2rec
  --shards N`` writes).

``STEM`` and a glob ending in ``-*-of-N.rec`` (or ``-*-of-*.rec``) mean every shard: all
``N`` must be there, else the first missing one is named.

:func:`~.shard_names.expand_shards` turns that into the list of shard URLs, and
:func:`open_records` opens it: a plain :class:`~.file.RecordFile` for one file (the
single-file path is untouched), a :class:`ShardedRecords` for several. Records are
numbered globally in shard order (shard 0's records, then shard 1's, ...), so the sampler,
the sharding across ranks and the resume state work over the union exactly as over one
file. Each shard's
``.idx`` is required; remote shards are opened concurrently (their ``.idx``, size and pair
check fetched by a thread each), and a remote shard holds no connection of its own until
it is read (fsspec's client is shared).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

import numpy as np

from .. import storage
from ..errors import RecordIOError
from .batch import BatchRecords, read_batch
from .file import RecordFile
from .index import default_idx_path
from .open_options import OpenOptions
from .protocol import RecordsBase
from .samples import INSIGHTFACE, PLAIN, RecordLayout
from .shard_names import Spec, expand_shards, is_shard_spec

__all__ = [
    "ShardGroup",
    "ShardedLayout",
    "ShardedRecords",
    "expand_shards",
    "is_shard_spec",
    "open_records",
    "pair_indexes",
]

_T = TypeVar("_T")

# Shards opened at once (remote: each a few requests: size, .idx, the pair check).
_OPEN_THREADS = 16


def open_records(
    spec: Spec,
    idx: Spec | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
    fetch: storage.FetchOptions | None = None,
    cache_dir: str | None = None,
    cache_limit: int | None = None,
    verify_checksums: bool | str = "auto",
    options: OpenOptions | None = None,
) -> RecordFile | ShardedRecords:
    """Open the records ``spec`` names: a ``RecordFile`` for one file, else the union.

    Args:
        spec: a ``.rec`` URL, a list of them, a shard pattern, a glob or ``STEM``.
        idx: the ``.idx`` (one file), or one per shard (a list or pattern of as many);
            default: beside each ``.rec`` (one file: else a scan; shards: required).
        storage_options: fsspec options for remote URLs.
        fetch: request sizes and retries of remote reads.
        cache_dir: keep remote data in this local folder: their blocks up to
            ``cache_limit`` bytes, or (without a limit) each file copied whole first.
        cache_limit: the most bytes of blocks ``cache_dir`` holds (NOTE [block cache]).
        verify_checksums: check reads against each file's checksum sidecar
            (:class:`~.file.RecordFile`).
        options: all of the above as one value (then give none of them one by one).

    Raises:
        FileNotFoundError: a shard, or a shard's ``.idx``, that does not exist (naming it).
        ValueError: ``idx`` names a different number of files than ``spec``.
    """
    options = OpenOptions.given(
        options,
        storage_options=storage_options,
        fetch=fetch,
        cache_dir=cache_dir,
        cache_limit=cache_limit,
        verify_checksums=verify_checksums,
    )
    urls = expand_shards(spec, options.storage_options)
    if len(urls) == 1 and not is_shard_spec(spec):
        if idx is not None and not isinstance(idx, str | os.PathLike):
            idx = expand_shards(idx, options.storage_options)
            if len(idx) != 1:
                raise ValueError(f"one .rec ({urls[0]}) but {len(idx)} .idx files: {idx}")
            idx = idx[0]
        return RecordFile(urls[0], None if idx is None else os.fspath(idx), options=options)
    idx_urls = pair_indexes(urls, idx, options.storage_options)
    return ShardedRecords(urls, idx_urls, name=_name(spec), options=options)


def _name(spec: Spec) -> str:
    if isinstance(spec, str | os.PathLike):
        return os.fspath(spec)
    return " + ".join(os.fspath(s) for s in spec)


def pair_indexes(urls: list[str], idx: Spec | None, options: dict[str, Any] | None) -> list[str]:
    """Each shard's ``.idx``: beside it (``idx`` None), or those ``idx`` names, one per shard.

    Raises:
        ValueError: ``idx`` names a different number of files than ``urls``.
    """
    if idx is None:
        return [default_idx_path(u) for u in urls]
    idx_urls = expand_shards(idx, options) if is_shard_spec(idx) else [os.fspath(idx)]
    if len(idx_urls) != len(urls):
        raise ValueError(
            f"{len(urls)} shards but {len(idx_urls)} .idx files ({_name(idx)}): give one "
            "per shard, or none (each .idx beside its .rec)"
        )
    return idx_urls


def _open_shard(url: str, idx_url: str, options: OpenOptions) -> RecordFile:
    try:
        return RecordFile(url, idx_url, options=options)
    except FileNotFoundError as exc:
        if exc.filename != idx_url:
            raise
        raise FileNotFoundError(
            errno.ENOENT,
            f"shard {url} has no .idx (each shard needs its own; `recio index {url}` writes it)",
            idx_url,
        ) from exc


class ShardGroup(NamedTuple):
    """The records of one batch that are in one shard."""

    shard: int  # which shard
    records: RecordFile  # that shard
    positions: np.ndarray  # int64: the records' positions in the shard's index
    slots: np.ndarray  # int64: where they are in the batch


class ShardedRecords(RecordsBase):
    """Several ``.rec`` files read as one: :class:`~.protocol.Records`, as a ``RecordFile`` is.

    Record ``i`` of the union is record ``i - starts[k]`` of shard ``k``, where ``starts``
    are the cumulative record counts. ``keys``, ``offsets`` and ``lengths`` are the
    shards' own, concatenated (offsets are bytes of each record's own shard); each shard's
    ``RecordFile`` keeps views of them, so the union holds 24 bytes per record, as one
    file does. Reads go to the shard's file; errors name the shard, its byte offset and
    the record's position in it. ``read_batch`` over the union is each shard's batch read
    (its local records parsed from its own map), put together in slot order: the images
    are that shard's :class:`~recio.records.spans.Spans` when the whole batch is in one shard,
    else a list (spans of different maps cannot be one Spans).

    Args:
        urls: the shards, in order.
        idx_urls: each shard's ``.idx`` (default: beside it).
        name: how messages name the whole set (default: the first URL and a count).
        storage_options, fetch, cache_dir, cache_limit, verify_checksums, options: how
            each shard is opened (:class:`~.open_options.OpenOptions`, as ``open_records``).
    """

    def __init__(
        self,
        urls: Sequence[str],
        idx_urls: Sequence[str] | None = None,
        *,
        name: str | None = None,
        storage_options: dict[str, Any] | None = None,
        fetch: storage.FetchOptions | None = None,
        cache_dir: str | None = None,
        cache_limit: int | None = None,
        verify_checksums: bool | str = "auto",
        options: OpenOptions | None = None,
    ) -> None:
        self.options = options = OpenOptions.given(
            options,
            storage_options=storage_options,
            fetch=fetch,
            cache_dir=cache_dir,
            cache_limit=cache_limit,
            verify_checksums=verify_checksums,
        )
        self.urls = [os.fspath(u) for u in urls]
        self.verify_checksums = options.verify_checksums
        if not self.urls:
            raise ValueError("no shards")
        self.idx_urls = list(idx_urls) if idx_urls is not None else None
        if self.idx_urls is not None and len(self.idx_urls) != len(self.urls):
            raise ValueError(f"{len(self.urls)} shards but {len(self.idx_urls)} .idx files")
        self.storage_options, self.fetch = options.storage_options, options.fetch
        self.cache_dir, self.cache_limit = options.cache_dir, options.cache_limit
        self.url = name or f"{self.urls[0]} and {len(self.urls) - 1} more shards"
        self.idx_url = None  # each shard has its own: idx_urls
        self.closed = False
        self._pool: ThreadPoolExecutor | None = None
        self._remote = not all(storage.is_local(u) for u in self.urls)
        self.shards = self._open_all()
        counts = np.array([len(s) for s in self.shards], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.keys = _concat([s.keys for s in self.shards])
        self.offsets = _concat([s.offsets for s in self.shards])
        self.lengths = _concat([s.lengths for s in self.shards])
        for k, shard in enumerate(self.shards):  # views: the shards' own arrays go
            lo, hi = int(self.starts[k]), int(self.starts[k + 1])
            shard.keys, shard.offsets = self.keys[lo:hi], self.offsets[lo:hi]
            shard.lengths = self.lengths[lo:hi]

    def _open_all(self) -> list[RecordFile]:
        idx_urls = self.idx_urls or [default_idx_path(u) for u in self.urls]
        jobs = list(zip(self.urls, idx_urls, strict=True))
        if not self._remote or len(jobs) == 1:
            opened: list[RecordFile] = []
            try:
                for url, idx_url in jobs:
                    opened.append(_open_shard(url, idx_url, self.options))
            except BaseException:
                for shard in opened:
                    shard.close()
                raise
            return opened
        with ThreadPoolExecutor(min(_OPEN_THREADS, len(jobs)), "recio-open") as pool:
            futures = [
                pool.submit(_open_shard, url, idx_url, self.options) for url, idx_url in jobs
            ]
        results, error = [], None
        for future in futures:  # the first error in shard order; every opened one closed
            exc = future.exception()
            if exc is None:
                results.append(future.result())
            elif error is None:
                error = exc
        if error is not None:
            for shard in results:
                shard.close()
            raise error
        return results

    # --- what RecordFile has (Records) ---------------------------------------------------

    def __len__(self) -> int:
        return int(self.starts[-1])

    @property
    def is_local(self) -> bool:
        """Whether every shard is a local (mapped) file."""
        return all(s.is_local for s in self.shards)

    @property
    def size(self) -> int:
        """The shards' sizes in bytes, added up."""
        return sum(s.size for s in self.shards)

    @property
    def checksum_stats(self) -> dict[str, int]:
        """The shards' ``checksum_stats`` (records fetched again, mismatches), added up."""
        total = {"refetched": 0, "mismatched": 0}
        for shard in self.shards:
            for key, value in shard.checksum_stats.items():
                total[key] += value
        return total

    def locate(self, position: int) -> tuple[int, int]:
        """``(shard, position in the shard)`` of record ``position`` of the union.

        Raises:
            IndexError: ``position`` is not a record of the union.
        """
        position = int(position)
        if not 0 <= position < len(self):
            raise IndexError(f"record {position} of {self.url} ({len(self)} records)")
        k = int(np.searchsorted(self.starts, position, side="right")) - 1
        return k, position - int(self.starts[k])

    def split(self, positions: Any) -> list[ShardGroup]:
        """A batch's global ``positions`` as per-shard groups, in shard order.

        Each group's ``slots`` say where its records are in the batch (ascending), its
        ``positions`` which records of its shard they are.

        Raises:
            IndexError: a position that is not a record of the union.
        """
        positions = np.asarray(positions, dtype=np.int64).reshape(-1)
        n = len(positions)
        if n == 0:
            return []
        if positions.min() < 0 or positions.max() >= len(self):
            bad = positions[(positions < 0) | (positions >= len(self))][0]
            raise IndexError(f"record {bad} of {self.url} ({len(self)} records)")
        which = np.searchsorted(self.starts, positions, side="right") - 1
        first = int(which[0])
        if (which == first).all():
            local = positions - self.starts[first]
            return [ShardGroup(first, self.shards[first], local, np.arange(n, dtype=np.int64))]
        order = np.argsort(which, kind="stable")  # slots ascending within each shard
        ordered = which[order]
        cuts = np.flatnonzero(np.diff(ordered)) + 1
        groups = []
        for slots in np.split(order.astype(np.int64), cuts):
            k = int(which[slots[0]])
            local = positions[slots] - self.starts[k]
            groups.append(ShardGroup(k, self.shards[k], local, slots))
        return groups

    def read(self, i: int) -> memoryview | bytes:
        """The payload of record ``i`` of the union (as :meth:`RecordFile.read`)."""
        self.check_open()
        k, local = self.locate(i)
        return self.shards[k].read(local)

    def read_many(
        self, indices: Sequence[int], *, until: int | None = None, bad: str = "raise"
    ) -> list[memoryview | bytes]:
        """Payloads of several records; remote shards are fetched concurrently.

        ``until`` and ``bad``: as :meth:`RecordFile.read_many`.
        """
        self.check_open()
        groups = self.split(indices)
        out: list[Any] = [None] * sum(len(g.slots) for g in groups)
        results = self._map(
            lambda g: g.records.read_many(g.positions, until=until, bad=bad), groups
        )
        for group, payloads in zip(groups, results, strict=True):
            for j, payload in zip(group.slots.tolist(), payloads, strict=True):
                out[j] = payload
        return out

    def read_extents(self, indices: Sequence[int], *, until: int | None = None) -> list:
        """Records as stored, unparsed (as :meth:`RecordFile.read_extents`), in slot order."""
        self.check_open()
        groups = self.split(indices)
        out: list[Any] = [None] * sum(len(g.slots) for g in groups)
        results = self._map(lambda g: g.records.read_extents(g.positions, until=until), groups)
        for group, extents in zip(groups, results, strict=True):
            for j, extent in zip(group.slots.tolist(), extents, strict=True):
                out[j] = extent
        return out

    @property
    def cached(self) -> bool:
        """Whether any shard is read through a bounded block cache."""
        return any(s.cached for s in self.shards)

    def schedule_reads(self, steps: Sequence[tuple[int, Any]]) -> None:
        """:meth:`RecordFile.schedule_reads` over the union: each shard its own part."""
        if not self.cached:
            return
        per_shard: list[list[tuple[int, np.ndarray]]] = [[] for _ in self.shards]
        for when, positions in steps:
            for group in self.split(positions):
                per_shard[group.shard].append((when, group.positions))
        for shard, mine in zip(self.shards, per_shard, strict=True):
            shard.schedule_reads(mine)

    def read_batch(
        self, positions: Any, label_width: int, payloads: Sequence[Any] | None = None
    ) -> BatchRecords:
        """:func:`~.batch.read_batch` over the union: each shard's part, in slot order.

        Problems are keyed by the batch's slots and name the shard file, its byte offset
        and the record's position in that shard.
        """
        self.check_open()
        groups = self.split(positions)

        def one(group: ShardGroup) -> BatchRecords:
            mine = None if payloads is None else [payloads[j] for j in group.slots.tolist()]
            return read_batch(group.records, group.positions, label_width, mine)

        parts = self._map(one, groups)
        if len(parts) == 1:
            return parts[0]
        n = sum(len(g.slots) for g in groups)
        labels = np.zeros((n, label_width), dtype=np.float32)
        ids = np.empty(n, dtype=np.int64)
        images: list[Any] = [b""] * n
        problems: dict[int, RecordIOError] = {}
        for group, part in zip(groups, parts, strict=True):
            slots = group.slots
            labels[slots], ids[slots] = part.labels, part.ids
            for j, image in zip(slots.tolist(), part.images, strict=True):
                images[j] = image
            problems.update({int(slots[j]): e for j, e in part.problems.items()})
        return BatchRecords(labels, ids, images, dict(sorted(problems.items())))

    def _map(self, fn: Callable[[ShardGroup], _T], groups: list[ShardGroup]) -> list[_T]:
        """``fn`` of each group: concurrently for remote shards, else one after another."""
        if len(groups) < 2 or not self._remote:
            return [fn(g) for g in groups]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(min(_OPEN_THREADS, len(self.shards)), "recio-shards")
        return list(self._pool.map(fn, groups))

    def describe(self, position: int, record_id: int | None = None) -> str:
        """'record id N (record P: record p of shard k, at byte B of URL)' for messages."""
        k, local = self.locate(position)
        shard = self.shards[k]
        where = (
            f"record {position}: record {local} of shard {k}, at byte "
            f"{int(shard.offsets[local])} of {shard.url}"
        )
        return f"record id {record_id} ({where})" if record_id is not None else where

    def detect_layout(self) -> ShardedLayout:
        """Each shard's layout (:func:`~.samples.detect_layout`), put together.

        Raises:
            RecordIOError: shards of different kinds (InsightFace and plain), naming one
                of each; or a shard's own layout error.
        """
        groups = [
            ShardGroup(k, s, np.empty(0, np.int64), np.empty(0, np.int64))
            for k, s in enumerate(self.shards)
        ]
        parts = self._map(lambda g: g.records.detect_layout(), groups)
        kinds = {p.kind for p in parts}
        if len(kinds) > 1:
            face = next(k for k, p in enumerate(parts) if p.kind == INSIGHTFACE)
            plain = next(k for k, p in enumerate(parts) if p.kind == PLAIN)
            raise RecordIOError(
                f"shards of different layouts: {self.urls[face]} is an InsightFace file (a "
                f"header record at key 0), {self.urls[plain]} is not",
                path=self.urls[face],
            )
        starts = self.starts

        def union(arrays: list[np.ndarray]) -> np.ndarray:
            return _concat([a + starts[k] for k, a in enumerate(arrays)])

        return ShardedLayout(
            self,
            kinds.pop(),
            union([p.samples for p in parts]),
            union([p.metadata for p in parts]),
            identity_positions=union([p.identity_positions for p in parts]),
            parts=parts,
        )

    def close(self) -> None:
        """Close every shard (payloads already read stay valid); reads raise from now on."""
        self.closed = True
        for shard in self.shards:
            shard.close()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    _PLACE = ("urls", "idx_urls")
    _NAMED = ("name",)

    def _place(self) -> dict[str, Any]:
        return {"urls": self.urls, "idx_urls": self.idx_urls, "name": self.url}

    def __repr__(self) -> str:
        return f"ShardedRecords({self.url!r}: {len(self.shards)} shards, {len(self)} records)"


def _concat(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays).astype(np.int64, copy=False) if arrays else np.empty(0, np.int64)


@dataclass
class ShardedLayout(RecordLayout):
    """The layout of a set of shards: each shard's (``parts``), positions made global.

    ``samples`` and ``metadata`` are the shards' own, in shard order. For InsightFace
    shards, ``num_classes`` is the sum of theirs and ``identities`` their identity ranges
    one after another (the keys of each range are its own shard's).
    """

    parts: list[RecordLayout] = field(default_factory=list, repr=False)

    @property
    def num_classes(self) -> int | None:
        """Identities the shards' headers announce, together (InsightFace), else None."""
        if self.kind != INSIGHTFACE:
            return None
        return sum(p.num_classes or 0 for p in self.parts)

    @property
    def identities(self) -> np.ndarray:
        """Every shard's identity ranges, in shard order (keys of their own shard)."""
        if self._identities is None:
            found = [p.identities for p in self.parts]
            self._identities = np.concatenate(found) if found else np.empty((0, 2), np.int64)
        return self._identities

    def describe(self) -> str:
        """One line for ``recio info``: the kind and counts over every shard."""
        shards = f"{len(self.parts)} shards"
        if self.kind == INSIGHTFACE:
            return (
                f"InsightFace ({shards}, a header record each): {self.num_samples} images, "
                f"{self.num_classes} identity records"
            )
        others = len(self.metadata)
        extra = f", {others} label-only record{'s' if others != 1 else ''} (not samples)"
        return f"plain ({shards}): {self.num_samples} images" + (extra if others else "")
