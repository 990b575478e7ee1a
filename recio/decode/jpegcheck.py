"""Is an encoded image whole? Cheap checks that catch what stops a DALI pipeline.

DALI ends the whole pipeline on one bad image (a JPEG cut short by two bytes is
enough), so the DALI stage checks every image first: the JPEG marker structure
(segments, scans, an end-of-image marker after the last scan, table sanity)
walked with one vectorised search, or Pillow's ``verify()`` for other formats.
"""

from __future__ import annotations

import io
from typing import Any, NamedTuple

import numpy as np

from .status import Status


class Problem(NamedTuple):
    """What is wrong with an encoded image: the decoder status it maps to, and why."""

    status: Status
    reason: str


_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
_STANDALONE = {0x01, *range(0xD0, 0xD8)}
# Segments libjpeg reads: frames it decodes, DHT, DAC, SOS, DQT, DNL, DRI, APPn, COM.
_KNOWN = {*_SOF - {0xC5, 0xC6, 0xC7, 0xCD, 0xCE, 0xCF}, 0xC4, 0xCC, *range(0xDA, 0xDE)}
_KNOWN |= {*range(0xE0, 0xF0), 0xFE}


def jpeg_structure_problem(buf: Any) -> Problem | None:
    """Why the marker structure of a JPEG is broken, or None if it is whole.

    Walks SOI, the marker segments and every scan up to EOI, using one vectorised search
    for the markers inside entropy-coded data. A buffer cut anywhere loses its EOI (or a
    segment) and is reported; this is the truncation DALI's decoders stop the pipeline on.
    """
    a = np.frombuffer(buf, dtype=np.uint8)
    n = len(a)
    if n < 4 or a[0] != 0xFF or a[1] != 0xD8:
        return Problem(Status.CORRUPT, "not a JPEG (no start-of-image marker)")
    # Real markers: 0xFF followed by neither a stuffed 0x00, a restart marker, nor fill 0xFF.
    ff = np.flatnonzero(a[:-1] == 0xFF)
    nxt = a[ff + 1]
    markers = ff[(nxt != 0) & ((nxt < 0xD0) | (nxt > 0xD7)) & (nxt != 0xFF)]
    pos, have_scan = 2, False
    frame: dict[int, int] = {}  # component id -> quantisation table
    progressive = False
    qtables: set[int] = set()
    htables: set[tuple[int, int]] = set()  # (0 DC | 1 AC, table)
    while True:
        if pos >= n:
            return Problem(
                Status.TRUNCATED, f"truncated: ends at byte {n} before the end-of-image marker"
            )
        if a[pos] != 0xFF:
            return Problem(Status.CORRUPT, f"corrupt: no marker at byte {pos}")
        while pos < n and a[pos] == 0xFF:  # fill bytes
            pos += 1
        if pos >= n:
            return Problem(Status.TRUNCATED, f"truncated: ends at byte {n} inside a marker")
        m = int(a[pos])
        pos += 1
        if m == 0xD9:
            if not have_scan:
                return Problem(Status.CORRUPT, "corrupt: end-of-image before any scan")
            return None
        if m in _STANDALONE:
            continue
        if m not in _KNOWN:  # libjpeg and DALI's parser both refuse unknown markers
            return Problem(Status.CORRUPT, f"corrupt: unknown marker 0xFF{m:02X} at byte {pos - 2}")
        if pos + 2 > n:
            return Problem(
                Status.TRUNCATED, f"truncated: ends at byte {n} inside marker 0xFF{m:02X}"
            )
        length = (int(a[pos]) << 8) | int(a[pos + 1])
        if length < 2:
            return Problem(
                Status.CORRUPT, f"corrupt: marker 0xFF{m:02X} at byte {pos - 2} has length {length}"
            )
        end = pos + length
        if end > n:
            return Problem(
                Status.TRUNCATED,
                f"truncated: marker 0xFF{m:02X} segment runs past the end ({end} > {n})",
            )
        if m in _SOF:
            if length < 8:
                return Problem(Status.CORRUPT, f"corrupt: frame header of {length} bytes")
            height = (int(a[pos + 3]) << 8) | int(a[pos + 4])
            width = (int(a[pos + 5]) << 8) | int(a[pos + 6])
            if width == 0 or height == 0:
                return Problem(Status.CORRUPT, f"corrupt: frame header gives {width}x{height}")
            count = int(a[pos + 7])
            if count == 0 or length != 8 + 3 * count:
                return Problem(
                    Status.CORRUPT,
                    f"corrupt: frame header of {length} bytes for {count} components",
                )
            sampling = a[pos + 9 : pos + 8 + 3 * count : 3]
            hs, vs = (sampling >> 4).astype(int), (sampling & 0x0F).astype(int)
            if hs.min() < 1 or vs.min() < 1 or hs.max() > 4 or vs.max() > 4:
                return Problem(Status.CORRUPT, "corrupt: bad sampling factors in the frame header")
            if (hs.max() % hs).any() or (vs.max() % vs).any():
                return Problem(
                    Status.CORRUPT, "corrupt: fractional sampling factors (libjpeg refuses them)"
                )
            for c in range(count):
                frame[int(a[pos + 8 + 3 * c])] = int(a[pos + 10 + 3 * c])
            if not set(frame.values()) <= qtables:
                return Problem(
                    Status.CORRUPT, "corrupt: frame uses an undefined quantisation table"
                )
            progressive = m in (0xC2, 0xC6, 0xCA, 0xCE)
        elif m == 0xDB:
            q = pos + 2
            while q < end:  # one or more tables: Pq/Tq byte, then 64 or 128 bytes
                qtables.add(int(a[q]) & 0x0F)
                q += 1 + (128 if a[q] >> 4 else 64)
            if q != end:
                return Problem(
                    Status.CORRUPT, "corrupt: quantisation table segment has the wrong length"
                )
        elif m == 0xC4:
            q = pos + 2
            while q + 17 <= end:  # Tc/Th byte, 16 code counts, then the symbols
                kind, counts = int(a[q]) >> 4, a[q + 1 : q + 17].astype(np.int64)
                if _bogus_huffman(kind, counts, a[q + 17 : q + 17 + int(counts.sum())]):
                    return Problem(Status.CORRUPT, "corrupt: bogus Huffman table definition")
                htables.add((kind, int(a[q]) & 0x0F))
                q += 17 + int(counts.sum())
            if q != end:
                return Problem(
                    Status.CORRUPT, "corrupt: Huffman table segment has the wrong length"
                )
        if m == 0xDA:
            if not frame:
                return Problem(Status.CORRUPT, "corrupt: scan before the frame header")
            count = int(a[pos + 2]) if length > 2 else 0
            if count == 0 or length != 6 + 2 * count:
                return Problem(
                    Status.CORRUPT, f"corrupt: scan header of {length} bytes for {count} components"
                )
            ss = int(a[pos + 3 + 2 * count])
            for c in range(count):
                cid, tables = int(a[pos + 3 + 2 * c]), int(a[pos + 4 + 2 * c])
                if cid not in frame:
                    return Problem(
                        Status.CORRUPT,
                        f"corrupt: scan names component {cid}, which the frame lacks",
                    )
                # Progressive scans use only DC tables (Ss = 0) or only AC ones.
                need = [(1, tables & 0x0F)] if progressive and ss else [(0, tables >> 4)]
                if not progressive:
                    need.append((1, tables & 0x0F))
                if not set(need) <= htables:
                    return Problem(
                        Status.CORRUPT,
                        f"corrupt: scan uses an undefined Huffman table for component {cid}",
                    )
            have_scan = True
            k = np.searchsorted(markers, end)
            if k == len(markers):
                return Problem(
                    Status.TRUNCATED,
                    f"truncated: scan data runs to byte {n} with no end-of-image marker",
                )
            end = int(markers[k])
        pos = end


def _bogus_huffman(kind: int, counts: np.ndarray, symbols: np.ndarray) -> bool:
    """Whether a Huffman table fails libjpeg's checks (jdhuff.c), run only once decoding starts."""
    code = 0
    for length in range(1, 17):
        code += int(counts[length - 1])
        if code >= 1 << length:  # more codes than fit, or an all-ones code
            return True
        code <<= 1
    return kind == 0 and bool((symbols > 15).any())  # DC symbols are bit counts 0..15


def _pil_problem(buf: Any) -> Problem | None:
    from PIL import Image

    try:
        with Image.open(io.BytesIO(buf)) as img:
            img.verify()
    except Exception as exc:  # noqa: BLE001 - any Pillow failure means "bad image"
        return Problem(Status.CORRUPT, f"{type(exc).__name__}: {exc}")
    return None


def image_problem(buf: Any, validate: str = "structure") -> Problem | None:
    """Why DALI would fail on ``buf`` (one encoded image), or None (header and structure only).

    JPEGs get :func:`jpeg_structure_problem`; other formats Pillow's ``verify()``. The
    libjpeg header parse and the ``"decode"`` level run batched in :class:`RecioSource`.
    """
    if validate == "none":
        return None
    if len(buf) == 0:
        return Problem(Status.EMPTY, "empty image")
    if bytes(buf[:2]) == b"\xff\xd8":
        return jpeg_structure_problem(buf) if validate != "header" else None
    return _pil_problem(buf)
