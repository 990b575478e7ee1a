"""Record layouts im2rec writes: MXNet's (``.lst`` order), or InsightFace's face layout.

NOTE [insightface layout]: InsightFace's face-recognition sets (MS1M, Glint360K,
WebFace) are .rec files that arcface_torch's ``MXFaceDataset`` reads by key:

- key 0, the header: IRHeader flag 2, labels ``[N + 1, N + 1 + K]``, no image;
- keys 1..N, the N images, the images of each identity consecutive, IRHeader id = key;
- keys N+1..N+K, one record per identity: flag 2, labels ``[first, end)``, the keys of
  its images, no image.

Readers find the header by its key (``read_idx(0)``), not by its place in the file, and
InsightFace's own writer puts it after the images, as recio does: N and K are known only
once every image has been read or skipped. The file holds the images, the header, then
the identities. Keys are given in written order, so a skipped file moves the keys after
it down by one, and an identity whose every image was skipped gets no record (readers
that sample from an identity's range would fail on an empty one). The labels are
float32, exact for keys up to 2**24 (16,777,216); above that im2rec warns.
"""

from __future__ import annotations

import logging
import math
import struct
from collections.abc import Iterable, Sequence

import numpy as np

from ..errors import RecordIOError
from ..records.format import IR_ID_OFFSET, IRHeader, ListEntry, pack

log = logging.getLogger("recio.im2rec")

#: ``mxnet``: records in ``.lst`` order, key = ``.lst`` index. ``insightface``: NOTE above.
LAYOUTS = ("mxnet", "insightface")

_ID = struct.Struct("<Q")  # the IRHeader's id, at IRIR_ID_OFFSET


def check_layout(layout: str) -> str:
    """``layout`` if it is one of :data:`LAYOUTS`.

    Raises:
        ValueError: any other name, with the ones there are.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, not {layout!r}")
    return layout


def check_classes(url: str, entries: Sequence[ListEntry], linenos: Sequence[int]) -> None:
    """Each entry's first label names its class, so it must be a finite number.

    Raises:
        RecordIOError: a NaN or infinite first label, naming the first such line.
    """
    bad = [(e, n) for e, n in zip(entries, linenos, strict=True) if not math.isfinite(e.labels[0])]
    if bad:
        (entry, lineno), count = bad[0], len(bad)
        raise RecordIOError(
            f"{url}:{lineno}: class label {entry.labels[0]:g} is not a finite number "
            f"({count} line{'' if count == 1 else 's'} like it): the insightface layout "
            "groups the images by their first label",
            path=url,
        )


def group_by_class(entries: Iterable[ListEntry]) -> list[ListEntry]:
    """``entries`` grouped by their first label, in increasing label value.

    Stable: within a class, entries keep their order.
    """
    return sorted(entries, key=lambda e: e.labels[0])


def numbered(entries: Iterable[ListEntry], start: int = 1) -> list[ListEntry]:
    """``entries`` with indices ``start``, ``start + 1``, ... in order."""
    return [e._replace(index=k) for k, e in enumerate(entries, start)]


def with_id(payload: bytes, key: int) -> bytes:
    """A packed record ``payload`` with its IRHeader id set to ``key``."""
    if _ID.unpack_from(payload, IR_ID_OFFSET)[0] == key:
        return payload
    buf = bytearray(payload)
    _ID.pack_into(buf, IR_ID_OFFSET, key)
    return bytes(buf)


def float32_inexact(values: Iterable[int]) -> list[int]:
    """The ``values`` that float32 does not hold exactly (above 2**24, some are rounded)."""
    values = list(values)
    stored = np.asarray(values, np.float32).astype(np.int64).tolist()
    return [v for v, s in zip(values, stored, strict=True) if v != s]


class FaceIndex:
    """The keys of a face-layout .rec, given as its images are written; then its index.

    Images come grouped by class (:func:`group_by_class`); ``add`` gives each the next key
    from 1, and :meth:`records` makes the header and the identity records.
    """

    def __init__(self) -> None:
        self.images = 0
        self._runs: list[list] = []  # [label, first key, end key] of each identity
        self._seen: set[float] = set()

    @property
    def identities(self) -> int:
        """Identities with at least one image written."""
        return len(self._runs)

    def add(self, label: float) -> int:
        """The key of the next image written, whose class is ``label``.

        Raises:
            ValueError: ``label``'s images came before, then another class's: the images
                of one identity must be consecutive.
        """
        key = self.images + 1
        if self._runs and self._runs[-1][0] == label:
            self._runs[-1][2] = key + 1
        elif label in self._seen:
            raise ValueError(f"class {label:g} is not consecutive: its images are split up")
        else:
            self._seen.add(label)
            self._runs.append([label, key, key + 1])
        self.images = key
        return key

    def ranges(self) -> list[tuple[float, int, int]]:
        """``(label, first key, end key)`` of each identity, in key order."""
        return [(label, first, end) for label, first, end in self._runs]

    def records(self) -> list[tuple[int, bytes]]:
        """``(key, payload)`` of the header (key 0), then of each identity (N+1..N+K)."""
        n, k = self.images, len(self._runs)
        out = [(0, _index_record(n + 1, n + 1 + k, 0))]
        for key, (_, first, end) in enumerate(self._runs, n + 1):
            out.append((key, _index_record(first, end, key)))
        return out

    def inexact(self) -> list[int]:
        """The label values of :meth:`records` that float32 would round, sorted, once each."""
        n, k = self.images, len(self._runs)
        keys = {n + 1, n + 1 + k, *(x for _, a, b in self._runs for x in (a, b))}
        return float32_inexact(sorted(keys))


def _index_record(first: int, end: int, key: int) -> bytes:
    """A header or identity record: flag 2, labels ``[first, end]``, id ``key``, no image."""
    return pack(IRHeader(2, np.array([first, end], np.float32), key, 0), b"")


def lost_classes(entries: Sequence[ListEntry], index: FaceIndex) -> list[float]:
    """The classes of ``entries`` that got no identity (every image skipped), sorted."""
    kept = {label for label, _, _ in index.ranges()}
    return sorted({e.labels[0] for e in entries} - kept)


def warn_index(lst: str, entries: Sequence[ListEntry], index: FaceIndex) -> None:
    """Warn about classes that lost every image, and index labels that float32 rounds."""
    lost = lost_classes(entries, index)
    if lost:
        log.warning(
            "%s: %d class%s had every image skipped (first: label %g), so no identity "
            "record: %d identities",
            lst, len(lost), "" if len(lost) == 1 else "es", lost[0], index.identities,
        )  # fmt: skip
    inexact = index.inexact()
    if inexact:
        log.warning(
            "%s: %d key%s in the identity index (first: %d) beyond float32's exact "
            "integers (2**24), as in InsightFace's own sets of that size: readers see "
            "them rounded",
            lst, len(inexact), "" if len(inexact) == 1 else "s", inexact[0],
        )  # fmt: skip
