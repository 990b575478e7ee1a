"""Weighted mixing of several datasets: each epoch a deterministic mix of their records.

A :class:`Mixture` of sources (:class:`Source`) is given to an iterator as ``path_imgrec``. Each
source is a ``.rec`` (or a set of shards, :mod:`recio.records.shards`) and says how many of its
samples an epoch takes, in one of three ways (as Mosaic Streaming's ``Stream`` does):

* ``weight``: a share of the mixture's ``epoch_size`` (default: all sources' samples
  together); every source has one, or none does;
* ``repeat``: a multiple of the source's own size (``2``: every record twice; ``0.5``: a
  half of them), the default being 1;
* ``choose``: a number of samples.

The sources' records are one numbered union, source after source (as shards are), and the
epoch's sample list is a function of ``(seed, epoch)`` alone (:meth:`MixPlan.epoch`): a
source that takes ``c`` of its ``n`` samples gives ``c // n`` whole copies of them plus a
seeded subset of ``c % n`` (a new one each epoch), and the iterator's shuffle permutes
that list. The counts are exact every epoch (the shares of ``weight`` are apportioned by
largest remainders), so a batch, or a rank's part of an epoch, holds them up to the
sampling of the permutation. Everything after that list is the sampler's usual work:
ranks take equal slices of the global stream, and a resume on any world size continues
it (NOTE [stream position]).

The crop and flip of a sample are keyed by its record and its copy
(:meth:`MixPlan.epoch`'s keys): the first copy of record ``r`` draws as record ``r`` does
outside a mixture, the ``c``-th from key ``r + c × records``, so two copies of a record in
one epoch get different windows.

Sources must have the same label width (the number of labels in a record's header; 1 for
flag 0), unless a source maps its labels: ``Source(..., labels=fn)`` reads the source's
records with its own width and passes their labels, float32 (n, width), to ``fn``, which
returns (n, label_width) for the iterator's ``label_width``.

An epoch's sample list is held in memory (16 bytes a sample), so the counts are bounded
before anything is drawn: a source gives at most ``MAX_COPIES`` (2**20) copies of its
samples an epoch (``repeat``, and ``choose`` or a weight's share against its size), and
``choose``, ``epoch_size`` and the whole epoch at most ``MAX_EPOCH_SAMPLES`` (2**40).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from .. import storage
from ..errors import RecordIOError
from ..records.batch import BatchRecords, read_batch
from ..records.format import unpack
from ..records.open_options import OpenOptions
from ..records.shards import ShardedRecords, expand_shards, pair_indexes

__all__ = [
    "MAX_COPIES",
    "MAX_EPOCH_SAMPLES",
    "LabelMap",
    "MixPlan",
    "Mixture",
    "Source",
    "open_mixture",
    "plan_mixture",
    "read_mapped_batch",
]

MAX_COPIES = 1 << 20
"""The most copies of its samples one source gives an epoch (``repeat``'s upper bound)."""

MAX_EPOCH_SAMPLES = 1 << 40
"""The most samples an epoch holds (``choose``, ``epoch_size`` and their sum): 16 TiB of
positions and keys, so a bound on hostile values, not on what fits in memory."""

# Keeps the subset draws apart from the epoch order's (which seeds with [seed, epoch]).
_SUBSET_STREAM = 0x6D6978


def _spec_name(path: Any) -> str:
    if isinstance(path, str | os.PathLike):
        return os.fspath(path)
    return " + ".join(os.fspath(p) for p in path)


@dataclass(frozen=True)
class Source:
    """One dataset of a :class:`Mixture`, and how much of it an epoch takes.

    Args:
        path: a ``.rec`` URL, a shard pattern, glob or ``STEM``, or a list of them.
        weight: the source's share of the mixture's epoch (relative to the others').
        repeat: samples per epoch as a multiple of the source's own (float, 0 to MAX_COPIES).
        choose: samples per epoch (int, 0 to MAX_EPOCH_SAMPLES).
        idx: the ``.idx`` (default: beside each ``.rec``).
        labels: maps this source's labels, float32 (n, its label width), to
            (n, label_width); needed where the sources' label widths differ. A module-level
            function (not a lambda) keeps the source picklable for DALI's workers.
        name: how stats and messages name the source (default: ``path``).
    """

    path: str | tuple[str, ...]
    weight: float | None = None
    repeat: float | None = None
    choose: int | None = None
    idx: str | tuple[str, ...] | None = None
    labels: Callable[[np.ndarray], np.ndarray] | None = field(default=None, compare=False)
    name: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.path, list | tuple):
            object.__setattr__(self, "path", tuple(os.fspath(p) for p in self.path))
        elif isinstance(self.path, os.PathLike):
            object.__setattr__(self, "path", os.fspath(self.path))
        if not self.path or not isinstance(self.path, str | tuple):
            raise TypeError(f"Source path must be a .rec URL or a list of them, not {self.path!r}")
        given = [k for k in ("weight", "repeat", "choose") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(
                f"source {self.label}: give one of weight, repeat, choose, not {given}"
            )
        for key in ("weight", "repeat"):
            value = getattr(self, key)
            if value is not None and not (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and math.isfinite(value)
                and value >= 0
            ):
                raise ValueError(f"source {self.label}: {key} must be a number >= 0, not {value!r}")
        if self.repeat is not None and self.repeat > MAX_COPIES:
            raise ValueError(
                f"source {self.label}: repeat must be at most {MAX_COPIES} (copies of its "
                f"samples per epoch), not {self.repeat!r}"
            )
        if self.weight is not None and self.weight == 0:
            raise ValueError(f"source {self.label}: weight must be positive (leave it out)")
        if self.choose is not None and (
            isinstance(self.choose, bool) or not isinstance(self.choose, int) or self.choose < 0
        ):
            raise ValueError(
                f"source {self.label}: choose must be an int >= 0, not {self.choose!r}"
            )
        if self.choose is not None and self.choose > MAX_EPOCH_SAMPLES:
            raise ValueError(
                f"source {self.label}: choose must be at most {MAX_EPOCH_SAMPLES} (2**40 "
                f"samples per epoch), not {self.choose}"
            )
        if self.labels is not None and not callable(self.labels):
            raise TypeError(f"source {self.label}: labels must be callable, not {self.labels!r}")

    @property
    def label(self) -> str:
        """The source's name in stats and messages."""
        return self.name or _spec_name(self.path)


@dataclass(frozen=True)
class Mixture:
    """Several sources read as one dataset whose epochs mix them (see the module docstring).

    Args:
        sources: the sources, in the order their records are numbered.
        epoch_size: samples per epoch when the sources have weights (default: all the
            sources' samples together); not allowed otherwise.
    """

    sources: tuple[Source, ...]
    epoch_size: int | None = None

    def __post_init__(self) -> None:
        sources = tuple(self.sources)
        object.__setattr__(self, "sources", sources)
        if not sources or not all(isinstance(s, Source) for s in sources):
            raise TypeError(f"a Mixture needs a list of Source, not {self.sources!r}")
        weighted = [s.weight is not None for s in sources]
        if any(weighted) and not all(weighted):
            missing = [s.label for s, w in zip(sources, weighted, strict=True) if not w]
            raise ValueError(
                f"every source of a Mixture has a weight, or none does: {missing} have none"
            )
        if self.epoch_size is not None:
            if not all(weighted):
                raise ValueError("epoch_size goes with weights (else each source's own count)")
            if isinstance(self.epoch_size, bool) or not isinstance(self.epoch_size, int):
                raise TypeError(f"epoch_size must be an int, not {self.epoch_size!r}")
            if self.epoch_size < 1:
                raise ValueError(f"epoch_size must be at least 1, not {self.epoch_size}")
            if self.epoch_size > MAX_EPOCH_SAMPLES:
                raise ValueError(
                    f"epoch_size must be at most {MAX_EPOCH_SAMPLES} (2**40), not {self.epoch_size}"
                )
        names = [s.label for s in sources]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"two sources are named {twice[0]!r}: give them name=")

    @property
    def name(self) -> str:
        """The whole mixture, for messages: its sources joined."""
        return " + ".join(s.label for s in self.sources)

    def counts(self, sizes: Sequence[int]) -> list[int]:
        """Samples each source gives an epoch, for sources of ``sizes`` samples.

        Raises:
            ValueError: a source that gives samples but has none, or more than
                ``MAX_COPIES`` copies of them; an epoch over ``MAX_EPOCH_SAMPLES``.
        """
        sources = self.sources
        if sources[0].weight is not None:
            total = self.epoch_size if self.epoch_size is not None else sum(sizes)
            weights = np.array([s.weight for s in sources], dtype=np.float64)
            weights /= weights.max()  # shares in (0, 1]: their sum cannot overflow (1e308s)
            exact = total * (weights / weights.sum())
            counts = np.floor(exact).astype(np.int64)
            # largest remainders first, ties in source order: the counts add up to total
            extra = np.argsort(-(exact - counts), kind="stable")[: total - int(counts.sum())]
            counts[extra] += 1
            counts = counts.tolist()
        else:
            counts = [
                s.choose if s.choose is not None else round(_repeat(s) * n)
                for s, n in zip(sources, sizes, strict=True)
            ]
        for source, n, c in zip(sources, sizes, counts, strict=True):
            if c and not n:
                raise ValueError(f"source {source.label} has no samples, but is to give {c}")
            if c > MAX_COPIES * n:
                given = next(k for k in ("choose", "weight", "repeat") if getattr(source, k))
                raise ValueError(
                    f"source {source.label}: {given} asks for {c} samples per epoch of its "
                    f"{n}, more than {MAX_COPIES} copies of each"
                )
        if sum(counts) > MAX_EPOCH_SAMPLES:
            raise ValueError(
                f"the mixture {self.name} gives {sum(counts)} samples per epoch, more than "
                f"{MAX_EPOCH_SAMPLES} (2**40)"
            )
        if not sum(counts):
            raise ValueError(f"the mixture {self.name} gives no samples per epoch")
        return [int(c) for c in counts]


def _repeat(source: Source) -> float:
    return 1.0 if source.repeat is None else float(source.repeat)


class LabelMap(NamedTuple):
    """How one source's labels become the iterator's: read ``width`` of them, then ``fn``."""

    width: int
    fn: Callable[[np.ndarray], np.ndarray]
    source: str

    def apply(self, labels: np.ndarray, label_width: int) -> np.ndarray:
        """``fn(labels)``, checked to be float32 (n, label_width).

        Raises:
            ValueError: ``fn`` gave another shape.
        """
        mapped = np.asarray(self.fn(labels), dtype=np.float32)
        if mapped.ndim == 1 and label_width == 1:
            mapped = mapped[:, None]
        if mapped.shape != (len(labels), label_width):
            raise ValueError(
                f"source {self.source}: its labels= function turned labels of shape "
                f"{labels.shape} into {mapped.shape}, not ({len(labels)}, {label_width})"
            )
        return mapped


@dataclass(frozen=True, eq=False)  # arrays inside: compare describe()s
class MixPlan:
    """A mixture over its opened records: each epoch's samples, and whose they are.

    Pure integers (and picklable), as the sampler is. ``samples[k]`` are source ``k``'s
    sample positions in the union, ``counts[k]`` how many it gives an epoch, ``bounds``
    the union's record positions where each source begins (and the end), ``records`` the
    union's record count (the stride of the copies' draw keys).
    """

    names: tuple[str, ...]
    samples: tuple[np.ndarray, ...]
    counts: tuple[int, ...]
    bounds: np.ndarray
    records: int
    label_maps: tuple[LabelMap | None, ...] = ()  # per shard of the union, where mapped

    @property
    def epoch_size(self) -> int:
        """Samples per epoch, all sources together."""
        return sum(self.counts)

    def epoch(self, seed: int, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """Epoch ``epoch``'s samples, source after source: record positions and draw keys.

        Source ``k`` gives ``counts[k] // n`` whole copies of its samples, then a subset of
        ``counts[k] % n`` drawn from ``(seed, epoch, k)`` (in record order). A copy ``c``'s
        key is ``position + c × records``.
        """
        positions, keys = [], []
        for k, (samples, count) in enumerate(zip(self.samples, self.counts, strict=True)):
            n = len(samples)
            if not count:
                continue
            whole, rest = divmod(count, n)
            copies = [samples] * whole
            if rest:
                rng = np.random.default_rng([seed % (1 << 63), epoch, _SUBSET_STREAM, k])
                copies.append(samples[np.sort(rng.choice(n, rest, replace=False))])
            for c, chosen in enumerate(copies):
                positions.append(chosen)
                keys.append(chosen + c * self.records)
        return np.concatenate(positions), np.concatenate(keys)

    def source_of(self, positions: np.ndarray) -> np.ndarray:
        """The source (index) of each record position of the union."""
        return np.searchsorted(self.bounds, positions, side="right") - 1

    def tally(self, positions: np.ndarray) -> dict[str, int]:
        """Samples per source name among ``positions`` (every source named, 0 included)."""
        counts = np.bincount(self.source_of(positions), minlength=len(self.names))
        return dict(zip(self.names, counts.tolist(), strict=True))

    def describe(self) -> list[list[Any]]:
        """``[name, samples, per epoch]`` of each source: what a saved state checks."""
        rows = zip(self.names, self.samples, self.counts, strict=True)
        return [[name, len(samples), count] for name, samples, count in rows]


def open_mixture(
    mixture: Mixture,
    *,
    storage_options: dict[str, Any] | None = None,
    fetch: storage.FetchOptions | None = None,
    cache_dir: str | None = None,
    cache_limit: int | None = None,
    verify_checksums: bool | str = "auto",
    options: OpenOptions | None = None,
) -> tuple[ShardedRecords, list[int]]:
    """The records of every source as one union, and the number of shards of each source.

    ``storage_options``, ``fetch``, ``cache_dir``, ``cache_limit`` and ``verify_checksums``,
    or all of them as ``options``, as for :func:`recio.records.shards.open_records`.

    Raises:
        FileNotFoundError, ValueError: as :func:`recio.records.shards.open_records` for a source.
    """
    options = OpenOptions.given(
        options,
        storage_options=storage_options,
        fetch=fetch,
        cache_dir=cache_dir,
        cache_limit=cache_limit,
        verify_checksums=verify_checksums,
    )
    urls: list[str] = []
    idx_urls: list[str] = []
    shards: list[int] = []
    for source in mixture.sources:
        mine = expand_shards(source.path, options.storage_options)
        urls += mine
        idx_urls += pair_indexes(mine, source.idx, options.storage_options)
        shards.append(len(mine))
    records = ShardedRecords(urls, idx_urls, name=mixture.name, options=options)
    return records, shards


def plan_mixture(
    mixture: Mixture,
    records: ShardedRecords,
    shards: Sequence[int],
    samples: np.ndarray,
    label_width: int,
) -> MixPlan:
    """The :class:`MixPlan` of ``mixture`` over its opened ``records``.

    ``shards`` are each source's shard count (:func:`open_mixture`), ``samples`` the
    union's sample positions (its layout's).

    Raises:
        ValueError: label widths that differ between sources without a ``labels=`` map
            (naming each source and its width), or counts a source cannot give.
    """
    cuts = np.concatenate([[0], np.cumsum(shards)]).astype(np.int64)
    bounds = records.starts[cuts]
    edges = np.searchsorted(samples, bounds)
    per_source = tuple(
        samples[edges[k] : edges[k + 1]].astype(np.int64) for k in range(len(mixture.sources))
    )
    counts = mixture.counts([len(s) for s in per_source])
    widths = [_label_width(records, s) for s in per_source]
    maps = _label_maps(mixture, widths, label_width)
    shard_maps = tuple(m for k, m in enumerate(maps) for _ in range(shards[k]))
    return MixPlan(
        tuple(s.label for s in mixture.sources),
        per_source,
        tuple(counts),
        bounds,
        len(records),
        shard_maps if any(shard_maps) else (),
    )


def _label_width(records: Any, samples: np.ndarray) -> int | None:
    """A source's label width: its first sample's header flag (1 for flag 0); None if empty."""
    if not len(samples):
        return None
    position = int(samples[0])
    try:
        header, _ = unpack(records.read(position))
    except RecordIOError as exc:
        raise RecordIOError(
            f"cannot read the label width of {records.describe(position)}: {exc}",
            path=records.url,
        ) from exc
    return max(1, int(header.flag))


def _label_maps(
    mixture: Mixture, widths: list[int | None], label_width: int
) -> list[LabelMap | None]:
    """Per source, how its labels are read, or None: as every source's, at ``label_width``."""
    sources = mixture.sources
    plain = {w for s, w in zip(sources, widths, strict=True) if s.labels is None and w is not None}
    if len(plain) > 1:  # a source with labels= is read at its own width
        listed = ", ".join(
            f"{s.label}: {w}" for s, w in zip(sources, widths, strict=True) if w is not None
        )
        raise ValueError(
            f"the sources have different label widths ({listed}): give the sources whose "
            f"width is not label_width={label_width} a labels= function that maps their "
            f"labels (n, width) to (n, {label_width})"
        )
    return [
        None if s.labels is None or w is None else LabelMap(w, s.labels, s.label)
        for s, w in zip(sources, widths, strict=True)
    ]


def read_mapped_batch(
    records: Any, positions: np.ndarray, label_width: int, label_maps: Sequence[LabelMap | None]
) -> BatchRecords:
    """:func:`recio.records.batch.read_batch` of a mixture's union, each source's labels mapped.

    The shards of a source with a :class:`LabelMap` are read at that source's width and
    their labels passed through its function; the others at ``label_width``.
    """
    if not label_maps:
        return read_batch(records, positions, label_width)
    groups = records.split(positions)
    n = len(positions)
    labels = np.zeros((n, label_width), dtype=np.float32)
    ids = np.empty(n, dtype=np.int64)
    images: list[Any] = [b""] * n
    problems: dict[int, Any] = {}
    for group in groups:
        mapping = label_maps[group.shard]
        width = label_width if mapping is None else mapping.width
        part = read_batch(group.records, group.positions, width)
        mine = part.labels if mapping is None else mapping.apply(part.labels, label_width)
        labels[group.slots], ids[group.slots] = mine, part.ids
        for j, image in zip(group.slots.tolist(), part.images, strict=True):
            images[j] = image
        problems.update({int(group.slots[j]): e for j, e in part.problems.items()})
    if len(groups) == 1 and not problems:
        images = part.images  # one shard's Spans, as read_batch gives them
    return BatchRecords(labels, ids, images, dict(sorted(problems.items())))
