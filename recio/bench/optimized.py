"""The bench's optimized-input row: would the file gain from ``recio optimize``?

A JPEG with restart markers lets recio's crop path entropy-decode only the segments that
cover the crop (NOTE [restart markers] in :mod:`recio.im2rec.optimize`). The bench looks
for them in a sample of the records; where they are missing it optimizes a copy of a
local file that is small enough into a temporary folder and measures the same iterator
on it: the same images and the same work, so its "vs Pillow" ratio compares like with
like, in the same interleaved rounds (:mod:`~recio.bench.noise`). :func:`optimize_verdict`
says in one line what that showed, or that the machine was too busy to tell.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from .. import storage
from ..im2rec.optimize import optimize
from ..records.shards import expand_shards
from .noise import compare, rounds_of

#: The stage row measured on the optimized copy.
OPTIMIZED = "iterator end to end, optimized input"
#: A local file is copied and optimized for the row up to this size (MB) by default.
DEFAULT_LIMIT_MB = 300.0
_SAMPLED = 32  # records whose JPEG headers are read: the files are written by one tool
_SEQUENTIAL = (0xC0, 0xC1)  # baseline and extended Huffman frames: those crops can skip
_STANDALONE = {0x01, *range(0xD0, 0xD8)}  # markers with no length after them


def restart_interval(jpeg: Any) -> int | None:
    """The restart interval (in MCUs) a JPEG sets before its first scan; 0 for none.

    Only the header's marker segments are read, up to the first SOS. A frame recio's crop
    path does not cut into segments (progressive, arithmetic-coded, lossless) counts as
    none: ``recio optimize`` would make it baseline. None when ``jpeg`` is not a JPEG or
    its header cannot be walked (cut short, a bad segment length).
    """
    b = memoryview(jpeg).cast("B") if not isinstance(jpeg, bytes | bytearray) else jpeg
    n = len(b)
    if n < 4 or b[0] != 0xFF or b[1] != 0xD8:
        return None
    pos, interval, frame = 2, 0, None
    while pos < n:
        if b[pos] != 0xFF:
            return None
        while pos < n and b[pos] == 0xFF:  # fill bytes
            pos += 1
        if pos >= n:
            return None
        marker = b[pos]
        pos += 1
        if marker == 0xDA:  # SOS: the header is over
            return interval if frame in _SEQUENTIAL else 0
        if marker in _STANDALONE:
            continue
        if marker == 0xD9 or pos + 2 > n:  # EOI before any scan, or cut short
            return None
        length = (b[pos] << 8) | b[pos + 1]
        if length < 2 or pos + length > n:
            return None
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            frame = marker
        elif marker == 0xDD:  # DRI
            if length < 4:
                return None
            interval = (b[pos + 2] << 8) | b[pos + 3]
        pos += length
    return None


class MarkerCensus(NamedTuple):
    """What a sample of a file's records holds: records read, JPEGs, JPEGs with markers."""

    sampled: int
    jpegs: int
    marked: int

    def as_dict(self) -> dict:
        """The census for the JSON result."""
        return self._asdict()


def marker_census(images: list, sampled: int = _SAMPLED) -> MarkerCensus:
    """Read the JPEG headers of up to ``sampled`` of ``images``, spread over the file."""
    n = len(images)
    if n == 0:
        return MarkerCensus(0, 0, 0)
    positions = sorted({i * n // min(n, sampled) for i in range(min(n, sampled))})
    intervals = [restart_interval(images[i]) for i in positions]
    found = [v for v in intervals if v is not None]
    return MarkerCensus(len(positions), len(found), sum(1 for v in found if v > 0))


def why_not_optimize(
    rec: Any, storage_options: dict | None, census: MarkerCensus, limit_mb: float | None
) -> str | None:
    """Why the bench measures no optimized copy of ``rec`` (None: it does).

    ``limit_mb`` None copies a local file of any size (the built-in sample); 0 never.
    """
    if census.jpegs == 0:
        return (
            f"no JPEG among the {census.sampled} records sampled: recio optimize transcodes JPEGs"
        )
    if census.marked == census.jpegs:
        return "its JPEGs carry restart markers already"
    urls = expand_shards(rec, storage_options)
    if not all(storage.is_local(u) for u in urls):
        return (
            "a remote file: the bench optimizes a copy of local files only (run `recio "
            "optimize` into a local file and bench that)"
        )
    if limit_mb == 0:
        return "--optimize-limit 0: no optimized copy"
    if limit_mb is not None:
        size = sum(os.path.getsize(storage.local_path(u)) for u in urls)
        if size > limit_mb * 1e6:
            return (
                f"{size / 1e6:,.0f} MB is more than the bench copies "
                f"(--optimize-limit {limit_mb:g} MB); run `recio optimize` and bench the copy"
            )
    return None


def optimized_copy(rec: Any, folder: str, threads: int) -> tuple[Any, dict]:
    """Optimize the local ``rec`` (one file or shards) into ``folder``: its spec and figures."""
    urls = expand_shards(rec)
    single = len(urls) == 1
    dst = os.path.join(folder, "optimized.rec") if single else folder + os.sep
    report = optimize(urls[0] if single else urls, dst, num_thread=threads)
    if report.transcoded == 0:
        raise ValueError(f"no JPEG of {rec} could be transcoded ({len(report.kept)} kept)")
    figures = {
        "seconds": report.seconds,
        "transcoded": report.transcoded,
        "bytes_change": report.bytes_out / report.bytes_in - 1 if report.bytes_in else 0.0,
        "restart": report.restart,
    }
    return (report.outputs[0] if single else tuple(report.outputs)), figures


def optimize_verdict(stages: dict, census: MarkerCensus, why_not: str | None) -> str:
    """One line: whether ``recio optimize`` would speed the iterator on this file, and why."""
    if census.jpegs == 0:
        return f"not measured: {why_not}"
    if census.marked == census.jpegs:
        return (
            f"the JPEGs carry restart markers already ({census.marked} of {census.jpegs} "
            "sampled): recio's crops decode only the segments that cover them; recio "
            "optimize has nothing to add"
        )
    lead = (
        "the JPEGs carry no restart markers"
        if census.marked == 0
        else f"{census.jpegs - census.marked} of the {census.jpegs} JPEGs sampled carry no "
        "restart markers"
    )
    if OPTIMIZED not in stages:
        return f"{lead}; recio optimize would add them (not measured: {why_not or 'skipped'})"
    versus = compare(rounds_of(stages[OPTIMIZED]), rounds_of(stages["iterator end to end"]))
    if not versus.decided and not versus.same:
        what = "whether recio optimize would speed the iterator"
        return f"{lead}; " + versus.cannot_tell(what, "on the optimized copy it ran at")
    if versus.same:
        return (
            f"{lead}, but recio optimize would not change the iterator's speed here "
            f"({versus.ratio:.2f}x, {versus.spread()}: the crops cover most of these images, "
            "or another stage bounds it)"
        )
    if versus.ratio > 1:
        return (
            f"{lead}: recio optimize would make the iterator {versus.ratio:.2f}x as fast here "
            f"({versus.spread()}; its crops skip the entropy decode of the image outside "
            "them; lossless, the same pixels)"
        )
    return (
        f"{lead}, but recio optimize would slow the iterator here ({versus.ratio:.2f}x as "
        f"fast, {versus.spread()})"
    )
