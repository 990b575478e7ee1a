"""Which records of a ``.rec`` are samples, and which carry only metadata.

Face-recognition datasets (InsightFace's MS1MV2/MS1MV3, Glint360K, WebFace42M) use
MXNet's format with records that are not images:

* the record with key 0 is a header: ``flag`` ≥ 2 labels, ``label[0]`` the first key
  after the images and ``label[1]`` the end of the identity keys, and no image;
* the images are keys ``1 .. label[0] - 1``;
* keys ``label[0] .. label[1] - 1`` are identity records, one per class: their labels are
  the ``[first, end)`` image keys of that class.

:func:`detect_layout` recognises this exactly as InsightFace's ``MXFaceDataset`` does
(the samples are keys ``1 .. label[0] - 1``, in key order), and, in any other file,
records that hold labels but no image. Neither kind is a sample: iterators never decode
them and never count them as bad images.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..errors import RecordIOError
from .format import FRAME_HEADER_SIZE, IR_HEADER_SIZE, MAGIC, MAX_PAYLOAD, IRHeader, unpack

if TYPE_CHECKING:
    from .file import RecordFile
    from .protocol import Records

__all__ = [
    "INSIGHTFACE",
    "PLAIN",
    "RecordLayout",
    "detect_layout",
    "layout_of_file",
    "sample_classes",
]

PLAIN = "plain"
INSIGHTFACE = "insightface"

# Records this small are checked for an empty image: a frame header, an IRHeader and up
# to 64 labels. Real images are larger (the smallest JPEG has ~125 bytes of markers), so
# a file of images costs a few reads at most.
_MAX_LABEL_ONLY_EXTENT = FRAME_HEADER_SIZE + IR_HEADER_SIZE + 4 * 64


@dataclass
class RecordLayout:
    """The records of a file that are samples, and what the others say.

    Attributes:
        kind: ``"insightface"`` (a header record at key 0) or ``"plain"``.
        samples: record positions (into the file's index) of the samples, int64; in key
            order for the InsightFace layout (sample ``i`` is key ``i + 1``), in index
            order otherwise.
        metadata: positions of the records that are not samples (header, identity and
            other label-only records), int64, ascending.
        header: the header record's IRHeader (InsightFace layout), else None.
        identity_positions: positions of the identity records, in key order (InsightFace
            layout; empty otherwise).
    """

    records: RecordFile = field(repr=False)
    kind: str
    samples: np.ndarray
    metadata: np.ndarray
    header: IRHeader | None = None
    identity_positions: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    _identities: np.ndarray | None = field(default=None, repr=False)

    @property
    def num_samples(self) -> int:
        """Records that are samples."""
        return len(self.samples)

    @property
    def num_classes(self) -> int | None:
        """Identities the header announces (InsightFace layout), else None."""
        if self.header is None:
            return None
        return len(self.identity_positions)

    @property
    def identities(self) -> np.ndarray:
        """Identity ``i``'s image keys ``[start, end)`` as an int64 (num_classes, 2) array.

        Read from the identity records on first use (one small read each). Empty for a
        file without a header.

        Raises:
            RecordIOError: an identity record has fewer than two labels.
        """
        if self._identities is None:
            first = _header_range(self.header)[0] if self.header is not None else 1
            self._identities = _read_identities(self.records, self.identity_positions, first)
        return self._identities

    def describe(self) -> str:
        """One line for ``recio info``."""
        if self.kind == INSIGHTFACE:
            first, end = _header_range(self.header)
            return (
                f"InsightFace: header record (key 0), {self.num_samples} images "
                f"(keys 1..{first - 1}), {self.num_classes} identity records "
                f"(keys {first}..{end - 1})"
                + _others(len(self.metadata) - 1 - self.num_classes, "other")
            )
        if len(self.metadata):
            return f"plain: {self.num_samples} images" + _others(len(self.metadata), "label-only")
        return f"plain: {self.num_samples} images"


def sample_classes(records: Records, layout: RecordLayout, chunk: int = 4096) -> np.ndarray:
    """Each sample's class (identity), int64, in the order of ``layout.samples``.

    The InsightFace layout's from its identity records (no image record is read); any
    other file's from each sample's first label, read a batch of headers at a time.
    """
    if layout.kind == INSIGHTFACE and layout.num_classes:
        ends = layout.identities[:, 1]
        keys = np.arange(1, layout.num_samples + 1)  # sample i is key i + 1
        return np.searchsorted(ends, keys, side="right").astype(np.int64)
    out = np.empty(layout.num_samples, dtype=np.int64)
    for lo in range(0, layout.num_samples, chunk):
        batch = records.read_batch(layout.samples[lo : lo + chunk], 1)
        out[lo : lo + len(batch.labels)] = batch.labels[:, 0].astype(np.int64)
    return out


def _others(n: int, what: str) -> str:
    if n <= 0:
        return ""
    return f", {n} {what} record{'s' if n != 1 else ''} (not samples)"


def detect_layout(records: Records) -> RecordLayout:
    """Find which records of ``records`` are samples: ``records.detect_layout()``.

    For one file, :func:`layout_of_file`; over a set of shards
    (:class:`~.shards.ShardedRecords`), each shard's layout, put together (its samples in
    shard order).
    """
    return records.detect_layout()


def layout_of_file(records: RecordFile) -> RecordLayout:
    """Find which records of one file are samples.

    A record with key 0 that holds two or more labels and no image makes the file an
    InsightFace one. Otherwise every record is a sample except those with labels and no
    image (only records of at most ~290 bytes are looked at, so this costs at most a few
    small reads for a file of images).

    Raises:
        RecordIOError: an InsightFace header whose ranges are not keys of the index.
    """
    n = len(records)
    key0 = np.flatnonzero(records.keys == 0)
    if len(key0):
        position = int(key0[0])
        header = _header_record(records, position)
        if header is not None:
            return _insightface(records, position, header)
    metadata = _label_only(records, np.arange(n, dtype=np.int64))
    samples = np.arange(n, dtype=np.int64)
    if len(metadata):
        samples = np.delete(samples, metadata)  # metadata is ascending and unique
    return RecordLayout(records, PLAIN, samples, metadata)


def _header_record(records: RecordFile, position: int) -> IRHeader | None:
    """The IRHeader at ``position`` if it is an InsightFace header (labels, no image)."""
    if not len(_label_only(records, np.array([position], dtype=np.int64))):
        return None
    header, _ = unpack(records.read(position))
    return header if header.flag >= 2 else None


def _header_range(header: IRHeader) -> tuple[int, int]:
    return int(header.label[0]), int(header.label[1])


def _checked_header_range(records: RecordFile, position: int, header: IRHeader) -> tuple[int, int]:
    """The header's ``[first, end)``, refused unless they are keys this file can hold.

    Checked before anything is sized by them: a hostile header claiming 3e9 identities
    would otherwise have the key lookup allocate tens of GB, and a NaN label fail in
    ``int()`` without naming the file. Keys ``1 .. end - 1`` are distinct records besides
    the header, so ``end`` is at most the number of records.
    """
    first, end = (float(v) for v in header.label[:2])
    n = len(records)
    problem = None
    if not all(math.isfinite(v) and v == int(v) for v in (first, end)):
        problem = f"labels [{first!r}, {end!r}] that are not whole numbers"
    elif not 1 <= first <= end:
        problem = f"image keys 1..{int(first) - 1} and identity keys {int(first)}..{int(end) - 1}"
    elif end > n:
        problem = (
            f"{int(end) - 1} image and identity keys (1..{int(end) - 1}), but the file holds "
            f"{n} records"
        )
    if problem is not None:
        raise RecordIOError(
            f"the header record (key 0) of {records.url} gives {problem}: not an "
            "InsightFace header",
            path=records.url,
            offset=int(records.offsets[position]),
            record_index=position,
        )
    return int(first), int(end)


def _insightface(records: RecordFile, position: int, header: IRHeader) -> RecordLayout:
    first, end = _checked_header_range(records, position, header)
    where = records.idx_url or records.url
    lookup = _KeyLookup(records.keys)
    samples = lookup.positions(1, first, where, "image")
    identities = lookup.positions(first, end, where, "identity")
    is_sample = np.zeros(len(records), dtype=bool)
    is_sample[samples] = True
    return RecordLayout(
        records,
        INSIGHTFACE,
        samples,
        np.flatnonzero(~is_sample).astype(np.int64),
        header=header,
        identity_positions=identities,
    )


class _KeyLookup:
    """Positions of keys in an index (the first position where a key repeats).

    Keys ``0..~n`` in any order (InsightFace's index lists key 0 after the images) go
    through a table indexed by key, in one pass; other keys through a sort.
    """

    def __init__(self, keys: np.ndarray) -> None:
        self.table: np.ndarray | None = None
        self.order: np.ndarray | None = None
        if len(keys) and keys.min() >= 0 and keys.max() < 2 * len(keys) + 16:
            self.table = np.full(int(keys.max()) + 1, -1, dtype=np.int64)
            self.table[keys[::-1]] = np.arange(len(keys) - 1, -1, -1, dtype=np.int64)
        else:
            self.order = np.argsort(keys, kind="stable")
            self.sorted = keys[self.order]

    def positions(self, lo: int, hi: int, where: str, what: str) -> np.ndarray:
        """The positions of keys ``lo .. hi - 1`` (int64), or an error naming the index."""
        if self.table is not None:
            at = self.table[lo:hi]  # a view: no gather over the keys
            if len(at) < hi - lo:
                at = np.append(at, np.full(hi - lo - len(at), -1, dtype=np.int64))
            found = at >= 0
        else:
            wanted = np.arange(lo, hi, dtype=np.int64)
            at = np.searchsorted(self.sorted, wanted)
            found = at < len(self.sorted)
            found[found] = self.sorted[at[found]] == wanted[found]
            at = self.order[np.minimum(at, len(self.order) - 1)] if len(self.order) else at
        if not found.all():
            missing = lo + int(np.argmin(found))
            raise RecordIOError(
                f"the header record (key 0) announces {what} keys {lo}..{hi - 1}, but "
                f"{int(np.count_nonzero(~found))} of them are not in the index "
                f"(first: key {missing})",
                path=where,
            )
        return at.astype(np.int64)


def _label_only(records: RecordFile, positions: np.ndarray) -> np.ndarray:
    """Those of ``positions`` whose record holds an IRHeader and its labels, and no image.

    Such a record is one frame whose payload is exactly ``24 + 4 * flag`` bytes; its
    extent in the file is then that plus the frame header (no padding: the payload is a
    multiple of 4). Only records that small are read: 12 bytes each.
    """
    extents = records.lengths[positions]
    small = positions[(extents <= _MAX_LABEL_ONLY_EXTENT) & (extents >= 32)]
    if not len(small):
        return small
    heads = records.head_words(small, 3)  # magic, lrec, flag
    magic, lrec, flag = heads[:, 0], heads[:, 1], heads[:, 2].astype(np.uint64)
    single_frame = (lrec >> 29) == 0
    length = (lrec & MAX_PAYLOAD).astype(np.uint64)
    empty = (magic == MAGIC) & single_frame & (length == IR_HEADER_SIZE + 4 * flag)
    return small[empty]


# Word indices in a single-frame record: frame header (2 words), then the IRHeader.
_FLAG_WORD = FRAME_HEADER_SIZE // 4
_LABELS_WORD = (FRAME_HEADER_SIZE + IR_HEADER_SIZE) // 4


def _read_identities(records: RecordFile, positions: np.ndarray, first: int) -> np.ndarray:
    """Each identity record's ``[start, end)`` image keys, (n, 2) int64.

    Raises:
        RecordIOError: a record without two labels, or whose labels are not whole numbers
            with ``1 <= start <= end <= first`` (the image keys the header gives).
    """
    words = records.head_words(positions, _LABELS_WORD + 2)
    flags = words[:, _FLAG_WORD]
    short = np.flatnonzero(flags < 2)
    if len(short):
        p = int(positions[short[0]])
        raise RecordIOError(
            f"identity record key {int(records.keys[p])} has {int(flags[short[0]])} labels, "
            "not the [first, end) image keys of its class",
            path=records.url,
            offset=int(records.offsets[p]),
            record_index=p,
        )
    ranges = words[:, _LABELS_WORD:].copy().view("<f4").reshape(-1, 2).astype(np.float64)
    with np.errstate(invalid="ignore"):
        good = np.isfinite(ranges).all(axis=1) & (ranges == np.round(ranges)).all(axis=1)
        good &= (ranges[:, 0] >= 1) & (ranges[:, 0] <= ranges[:, 1]) & (ranges[:, 1] <= first)
    if not good.all():
        j = int(np.argmin(good))
        p = int(positions[j])
        raise RecordIOError(
            f"identity record key {int(records.keys[p])} gives image keys "
            f"[{ranges[j, 0]!r}, {ranges[j, 1]!r}), not whole numbers within the images' "
            f"keys 1..{first - 1}",
            path=records.url,
            offset=int(records.offsets[p]),
            record_index=p,
        )
    return ranges.astype(np.int64)
