""".lst → .rec/.idx: a pool encodes the images, writers publish only complete files.

NOTE [output order]: records are written in ``.lst`` order whatever ``--num-thread`` is
(in the insightface layout: the list grouped by class, then the index records, NOTE
[insightface layout] in :mod:`~recio.im2rec.layout`), and each image's bytes depend
only on its file and the options, so the same input and seed give byte-identical
``.rec``/``.idx`` files.

NOTE [shard slices]: with ``--shards S``, shard k holds the list's entries k, k + S,
k + 2S, ... (:func:`shard_slice`), whatever was skipped before them, so each shard is a
function of its own slice of the list alone: a cluster task converts one slice into one
shard (:mod:`~recio.im2rec.engine`) and writes the same bytes as this single-machine run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from ..records.format import ListEntry, unpack
from ..records.recordio import MXIndexedRecordIO
from .batches import FramedRuns, batch_stream, default_pool
from .layout import (
    FaceIndex,
    check_layout,
    group_by_class,
    numbered,
    warn_index,
    with_id,
)
from .lists import check_list, read_list, read_list_into
from .report import PackReport, TooManyErrors, nothing_written, reported_run
from .transcode import (
    EncodeOptions,
    RecordBatch,
    exif_orientation,
    make_batch,
    make_records,
)

__all__ = ["output_names", "pack_list", "read_list", "shard_slice"]

log = logging.getLogger("recio.im2rec")


def output_names(stem: str, shards: int = 1) -> list[tuple[str, str]]:
    """``(rec, idx)`` names: ``STEM.rec`` or ``STEM-00000-of-00004.rec`` ... for shards."""
    if shards == 1:
        return [(stem + ".rec", stem + ".idx")]
    return [
        (f"{stem}-{k:05d}-of-{shards:05d}.rec", f"{stem}-{k:05d}-of-{shards:05d}.idx")
        for k in range(shards)
    ]


def shard_slice(entries: Sequence[ListEntry], shard: int, shards: int) -> list[ListEntry]:
    """The entries of ``shard`` of ``shards``: every ``shards``-th from the ``shard``-th.

    NOTE [shard slices]: a shard's records are its slice's images, in list order.
    """
    return list(entries[shard::shards])


def pack_list(
    lst: str,
    root: str,
    opts: EncodeOptions | None = None,
    *,
    out_stem: str | None = None,
    num_thread: int = 1,
    pool: str | None = None,
    shards: int = 1,
    max_errors: int | None = None,
    storage_options: dict[str, Any] | None = None,
    progress: bool = False,
    report: PackReport | None = None,
    layout: str = "mxnet",
) -> PackReport:
    """Pack the images of ``lst`` (relative to ``root``) into ``out_stem``.rec/.idx.

    ``out_stem`` defaults to the list's name without ``.lst`` (MXNet's naming). With
    ``shards`` > 1 the list's k-th entry goes to shard k mod ``shards`` (NOTE [shard
    slices]); a skipped file leaves its shard one record short.
    ``layout="insightface"`` writes InsightFace's face layout (NOTE [insightface layout]
    in :mod:`~recio.im2rec.layout`): the entries grouped by their first label, classes
    in increasing label value, each in ``.lst`` order; keys 1..N in that order (the
    ``.lst`` index is not used); then the header and identity records. Bad files are
    skipped and listed in the report; past ``max_errors`` skips, or when no image at all
    could be packed (a wrong ``root``, say), TooManyErrors is raised and nothing is published.
    On any exception (Ctrl-C too) every writer is aborted, so no output looks whole,
    and ``report.status`` says why (pass ``report`` to read it after an exception).
    ``pool`` is "process" or "thread" (default: :func:`default_pool`).
    """
    if shards < 1:
        raise ValueError(f"shards must be >= 1, not {shards}")
    face = check_layout(layout) == "insightface"
    if face and shards > 1:
        raise ValueError(
            f"the insightface layout makes one .rec (its index covers every image), "
            f"not {shards} shards"
        )
    opts = opts or EncodeOptions()
    if out_stem is None:
        out_stem = lst[: -len(".lst")] if lst.endswith(".lst") else lst
    stem = out_stem
    names = output_names(stem, shards)
    if report is None:
        report = PackReport(list=lst, outputs=[])
    report.list, report.outputs = lst, [n for pair in names for n in pair]
    report.options = dataclasses.asdict(opts)
    report.layout = layout
    from tqdm import tqdm

    writers: list[MXIndexedRecordIO] = []
    rotated: tuple[str, int] | None = None  # pass-through: the first EXIF-rotated JPEG
    n_rotated = 0
    with reported_run(report) as run:
        try:
            entries, linenos, _ = read_list_into(report, lst, storage_options, max_errors)
            check_list(lst, entries, linenos, root, opts, layout)
            index = None
            if face:  # NOTE [insightface layout]: index = the key the image gets if none is skipped
                grouped = group_by_class(entries)
                lst_index = [e.index for e in grouped]  # what the report names a skipped file by
                entries = numbered(grouped)
                index = FaceIndex()
            bar = run.bar = tqdm(
                total=len(entries),
                unit="img",
                desc=os.path.basename(stem),
                disable=not progress,
                dynamic_ncols=True,
                mininterval=0.5,
                file=sys.stderr,
            )
            for rec, idx in names:
                writers.append(MXIndexedRecordIO(idx, rec, "w", storage_options=storage_options))
            with warnings.catch_warnings(), _frozen_heap():
                # libjpeg-turbo warns on recoverable damage (as OpenCV accepts it); keep quiet
                warnings.filterwarnings("ignore", module="turbojpeg")
                kind = pool or default_pool(opts)
                # the face layout renumbers each record as it is written: Python makes them all
                make = make_records if face else make_batch
                stream = batch_stream(entries, root, opts, num_thread, kind, make)
                pos = 0
                for chunk, batch in stream:
                    if isinstance(batch, RecordBatch):
                        runs, others = FramedRuns(batch), batch.others
                    else:
                        runs, others = None, batch
                    for j, entry in enumerate(chunk):
                        shard = (pos + j) % shards  # NOTE [shard slices]
                        if others[j] is None:  # made in C: written with its run
                            runs.add(shard, j, entry.index)
                            report.written += 1
                            continue
                        payload, reason = others[j]
                        if payload is None:
                            number = entry.index if index is None else lst_index[entry.index - 1]
                            report.skipped.append(
                                {"index": number, "path": entry.path, "reason": reason}
                            )
                            log.debug("skipped %s: %s", entry.path, reason)
                            if max_errors is not None and len(report.skipped) > max_errors:
                                raise TooManyErrors(
                                    f"{len(report.skipped)} skipped, more than --max-errors "
                                    f"{max_errors} (last: {entry.path}: {reason})"
                                )
                        elif index is not None:  # keys in written order: skips move them down
                            key = index.add(entry.labels[0])
                            writers[0].write_idx(key, with_id(payload, key))
                            report.written += 1
                        else:
                            if runs is not None:  # this shard's records before it first
                                runs.flush(writers, shard)
                            writers[shard].write_idx(entry.index, payload)
                            report.written += 1
                            if opts.pass_through and (turn := _jpeg_orientation(payload)) != 1:
                                rotated = rotated or (entry.path, turn)
                                n_rotated += 1
                    if runs is not None:
                        runs.flush(writers)
                    pos += len(chunk)
                    bar.update(len(chunk))
            if not report.written:  # publishing would replace good outputs with empty ones
                raise TooManyErrors(nothing_written(report, lst, root))
            if index is not None:
                for key, payload in index.records():
                    writers[0].write_idx(key, payload)
                report.identities = index.identities
                warn_index(lst, entries, index)
            if rotated:
                path, turn = rotated
                log.warning(
                    "%d JPEG%s with an EXIF orientation other than 1 (first: %s, orientation %d): "
                    "--pass-through keeps their bytes, and recio's and MXNet's decoders ignore "
                    "EXIF, so they will be decoded unrotated; pack without --pass-through to "
                    "store them rotated",
                    n_rotated, "" if n_rotated == 1 else "s", path, turn,
                )  # fmt: skip
            report.bytes = sum(w.tell() for w in writers)
            for w in writers:
                w.close()
        except BaseException:
            published = [rec for (rec, _), w in zip(names, writers, strict=False) if not w.is_open]
            for w in writers:
                w.abort()
            if published:  # publishing failed part way: say what was replaced
                report.status = "failed"
                log.error(
                    "%s published before the error, the other outputs not: they do not all "
                    "come from this run; run it again",
                    ", ".join(published),
                )
            raise
    return report


@contextlib.contextmanager
def _frozen_heap():
    """Leaves the objects alive now (the list's entries above all) out of garbage collection.

    They live until the run ends, and the collector's passes over tens of thousands of
    entries, while the images make and drop objects, are CPU for nothing (up to 1 %).
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_orientation(payload: bytes) -> int:
    """The EXIF orientation of the JPEG in a record payload; 1 if upright, none or no JPEG.

    Reads the marker segments before the frame header only (where EXIF lives).
    """
    _, img = unpack(memoryview(payload))
    if img[:3] != b"\xff\xd8\xff":
        return 1
    pos, n = 2, len(img)
    while pos + 4 <= n and img[pos] == 0xFF:
        marker = img[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in _SOF or marker == 0xDA:  # past the headers: no EXIF
            return 1
        length = int.from_bytes(img[pos + 2 : pos + 4], "big")
        if marker == 0xE1 and img[pos + 4 : pos + 10] == b"Exif\0\0":
            return exif_orientation(bytes(img[pos + 10 : pos + 2 + length]))
        pos += 2 + length
    return 1
