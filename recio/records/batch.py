"""Batches of records read and parsed: labels, ids and where each image starts.

:func:`read_batch` reads the records of one batch and parses their IRHeaders. A local
file's batch is parsed from the map all at once (NOTE [batch parse], the path without the
native decoder); other batches record by record with :func:`~.format.unpack_labels`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..errors import RecordIOError
from .checksum import MismatchedPayload
from .format import FRAME_HEADER_SIZE, IR_HEADER_SIZE, MAGIC, MAX_PAYLOAD, unpack_labels
from .spans import Spans

if TYPE_CHECKING:
    from .file import RecordFile
    from .protocol import Records

__all__ = [
    "BatchRecords",
    "batch_headers",
    "check_label_width",
    "gather_words",
    "map_words",
    "read_batch",
    "read_file_batch",
]


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
    :class:`~recio.records.spans.Spans` of the file's map for a local file, else a list.
    """

    labels: np.ndarray  # float32 (n, label_width)
    ids: np.ndarray  # int64 (n,): the header's id; the .idx key where it is unreadable
    images: Spans | list
    problems: dict[int, RecordIOError]  # slot -> why its header is unreadable


def read_batch(
    records: Records,
    positions: np.ndarray,
    label_width: int,
    payloads: Sequence[Any] | None = None,
) -> BatchRecords:
    """Read the records at ``positions`` (or take their ``payloads``) and parse their headers.

    ``records.read_batch``: for one file :func:`read_file_batch`; over a set of shards
    (:class:`~.shards.ShardedRecords`), each shard's part read so and the parts put
    together in slot order.

    Raises:
        RecordIOError: framing problems, as ``records.read_many`` raises them.
        ValueError: ``label_width`` > 1 for a record with a single label.
    """
    return records.read_batch(positions, label_width, payloads)


def read_file_batch(
    records: RecordFile,
    positions: np.ndarray,
    label_width: int,
    payloads: Sequence[Any] | None = None,
) -> BatchRecords:
    """:func:`read_batch` of one file.

    A local batch is parsed from the map all at once (NOTE [batch parse]); with
    ``payloads`` (a remote batch fetched ahead), or from a remote file, record by record.
    Labels, ids and problems as :func:`batch_headers` gives them.
    """
    positions = np.asarray(positions, dtype=np.int64)
    if payloads is None:
        records.check_open()
        if records.is_local:
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


def map_words(view: memoryview) -> np.ndarray:
    """The map as little-endian uint32 words (record starts are word-aligned)."""
    return np.frombuffer(view, dtype="<u4", count=len(view) // 4)


def gather_words(
    words: np.ndarray, offsets: np.ndarray, count: int
) -> tuple[np.ndarray, np.ndarray]:
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
    view, offsets = records.mapped_batch(positions)  # lost records: bad slots below
    words = map_words(view)
    head, fast = gather_words(words, offsets, len(_WORD_AT))
    lrec, flag = head[:, 1], head[:, 2].astype(np.int64)
    ids = np.ascontiguousarray(head.view("<i8")[:, 2])  # words 4 and 5
    payload = offsets + FRAME_HEADER_SIZE
    ends = payload + (lrec & MAX_PAYLOAD)
    starts = payload + IR_HEADER_SIZE + (flag << 2)
    fast &= (head[:, 0] == MAGIC) & (lrec <= MAX_PAYLOAD) & (ends <= len(view))  # cflag 0
    fast &= (starts <= ends) & (ids >= 0)
    records.check_record_ends(positions, ends, fast)  # NOTE [index gaps]
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
        payloads = [_framed(records, view, int(positions[j])) for j in slow]
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
    problems = {  # a frame the parse found damaged keeps the parse's finding (the .idx's fault)
        j: e for j, e in records.view_problems(view, positions).items() if j not in headers.problems
    }
    problems.update(records.lost(positions))  # last: what the map lost, whatever it read as
    for j, error in problems.items():
        # checked after the parse: its labels may be damaged too
        headers.problems[j] = records.bad_record(int(positions[j]), error)
        headers.labels[j], headers.single[j] = 0, False
        headers.ids[j] = int(records.keys[positions[j]])
        starts[j], lengths[j] = 0, 0
        parts.pop(j, None)
    headers.check_width(records, positions)
    images: Spans | list = Spans.inside(view, starts, lengths)
    if parts:
        images = [parts[j] if j in parts else images[j] for j in range(n)]
    return BatchRecords(headers.labels, headers.ids, images, headers.problems)


def _framed(records: RecordFile, view: memoryview, i: int) -> Any:
    """Record ``i``'s payload from the map, or, where its frames are damaged, the error marked.

    A damaged frame (magic, length word, continuation flag) is a bad record for the
    reader's ``on_error``: the ``.idx`` finds the records after it.
    """
    try:
        return records.read_from_view(view, i)
    except RecordIOError as exc:
        return MismatchedPayload(records.bad_record(i, exc))


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
                self.problems[j] = records.bad_record(position, exc)  # its file, byte and key
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
