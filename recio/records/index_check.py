"""An ``.idx`` against a walk of its ``.rec``: what ``recio info``, ``verify`` and ``index`` say.

A walk (:func:`~recio.records.scan.walk_records`) finds every complete record of a file;
:func:`check_idx` compares the ``.idx`` with it entry by entry (offsets past the end, in
the damaged part, at no record start, records not listed, offsets or keys listed twice),
:func:`records_left_out` counts the records an ``.idx`` leaves out (NOTE [index gaps] in
:mod:`.index`), :func:`index_keys` chooses the keys of a rebuilt ``.idx`` and
:func:`damaged_tail` says what an index of a damaged file's intact part leaves out.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from .. import storage
from ..errors import RecordIOError
from .format import parse_idx, parse_idx_arrays
from .index import default_idx_path
from .scan import Walk

__all__ = ["check_idx", "counted", "damaged_tail", "index_keys", "records_left_out"]


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """``n`` and the noun, singular or plural: "1 record", "3 records"."""
    return f"{n} {singular if n == 1 else plural or singular + 's'}"


def index_keys(walk: Walk, renumber: bool = False) -> tuple[list[int], str]:
    """The ``.idx`` keys for the walked records and a phrase saying what they are.

    The records' IRHeader ids (im2rec writes the ``.lst`` index there and as the key) when
    every record has one and they are unique; else positions 0..N-1, and the phrase says why.
    """
    n = len(walk.offsets)
    positions = list(range(n))
    if renumber:
        return positions, f"keys 0..{n - 1} by position (--renumber)"
    if n == 0:
        return positions, "no records"
    for position, header in enumerate(walk.headers):
        if header is None:
            return positions, (
                f"keys 0..{n - 1} by position: record {position} (at byte "
                f"{walk.offsets[position]}) has no image header, so header ids cannot be the keys"
            )
    ids = [header[2] for header in walk.headers]  # type: ignore[index]
    counts = Counter(ids)
    if len(counts) < n:
        rid, times = counts.most_common(1)[0]
        return positions, (
            f"keys 0..{n - 1} by position: the records' header ids are not unique "
            f"(id {rid} is in {times} records)"
        )
    return ids, f"keys = the records' header ids ({min(ids)}..{max(ids)})"


def check_idx(
    idx_url: str, options: dict | None, walk: Walk, rec: str, size: int
) -> tuple[list[tuple[int, int]], str | None]:
    """Read the ``.idx`` at ``idx_url`` and compare it with the walked ``.rec``.

    Returns its entries (empty if unreadable) and what is wrong, or None when it lists
    exactly the file's complete records, each once, under distinct keys. Offsets are
    byte offsets in the ``.rec`` and the text says so.
    """
    try:
        entries = parse_idx(storage.read_text(idx_url, options), path=idx_url)
    except (RecordIOError, UnicodeDecodeError) as exc:
        return [], f"{idx_url} cannot be read as an .idx: {exc}"
    starts = set(walk.offsets)
    damage = walk.end if walk.error is not None else None
    past_end, damaged, not_start = [], [], []
    for key, offset in entries:
        if offset >= size or offset < 0:
            past_end.append((key, offset))
        elif damage is not None and offset >= damage:
            damaged.append((key, offset))
        elif offset not in starts:
            not_start.append((key, offset))
    listed = Counter(offset for _, offset in entries)
    missing = sorted(starts - listed.keys())
    twice = sum(1 for c in listed.values() if c > 1)
    keys = Counter(key for key, _ in entries)
    same_key = [key for key, c in keys.items() if c > 1]

    def first(found: list[tuple[int, int]]) -> str:
        key, offset = found[0]
        return f"first: key {key} at byte {offset} of {rec}"

    parts = []
    if past_end:
        parts.append(f"{len(past_end)} past its end ({size} bytes; {first(past_end)})")
    if damaged:
        parts.append(
            f"{len(damaged)} in its damaged part, from byte {damage} on ({first(damaged)})"
        )
    if not_start:
        parts.append(f"{len(not_start)} at bytes that are no record start ({first(not_start)})")
    if missing:
        parts.append(
            f"{counted(len(missing), 'record')} not listed (first at byte {missing[0]} of {rec})"
        )
    if twice:
        parts.append(f"{twice} offsets listed more than once")
    if same_key:
        parts.append(f"{len(same_key)} keys listed more than once (first: key {same_key[0]})")
    if not parts:
        return entries, None
    return entries, (
        f"{idx_url} has {counted(len(entries), 'entry', 'entries')} for the "
        f"{counted(len(walk.offsets), 'complete record')} of {rec}: " + "; ".join(parts)
    )


def damaged_tail(walk: Walk, rec: str, size: int, old: list[tuple[int, int]]) -> str:
    """What an index of the intact part of a damaged ``.rec`` leaves out."""
    there = sum(1 for _, offset in old if offset >= walk.end)
    records = (
        f"the old .idx listed {counted(there, 'record')} there" if there else "at least 1 record"
    )
    return (
        f"left out: the last {size - walk.end} bytes of {rec} (from byte {walk.end}; "
        f"{records}), where {walk.error}"
    )


def records_left_out(rec: str, offsets: list[int], options: dict | None) -> str | None:
    """What ``recio verify`` says of an ``.idx`` beside ``rec`` that leaves out records it holds.

    Readers see only the records an ``.idx`` lists, so one that skips some loses them in
    silence (NOTE [index gaps] in :mod:`recio.records.index`): a FAIL, with the count.
    """
    idx_url = default_idx_path(rec)
    if not storage.exists(idx_url, options):
        return None
    try:
        _, listed = parse_idx_arrays(storage.read_bytes(idx_url, options), path=idx_url)
    except RecordIOError as exc:
        return f"{idx_url} cannot be read as an .idx: {exc}; `recio index {rec}` rebuilds it"
    missing = np.setdiff1d(np.asarray(offsets, dtype=np.int64), listed)
    if not missing.size:
        return None
    return (
        f"{idx_url} leaves out {missing.size} of the {len(offsets)} records (first at byte "
        f"{int(missing[0])} of {rec}): readers do not see them; `recio index {rec}` "
        "rebuilds it"
    )
