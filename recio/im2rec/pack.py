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
import functools
import gc
import json
import logging
import math
import os
import signal
import sys
import time
import warnings
from collections import deque
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from .. import storage
from ..errors import RecordIOError
from ..records.format import ListEntry, parse_lst, unpack
from ..records.recordio import MXIndexedRecordIO
from .layout import (
    FaceIndex,
    check_classes,
    check_layout,
    group_by_class,
    numbered,
    warn_index,
    with_id,
)
from .transcode import (
    EncodeOptions,
    RecordBatch,
    _exif_orientation,
    make_batch,
    make_records,
    native_available,
    native_batches,
)

log = logging.getLogger("recio.im2rec")


class TooManyErrors(RuntimeError):
    """More files were skipped than ``max_errors`` allows, or no image could be packed.

    Either way the writers are aborted: nothing is published, and outputs that already
    exist under the same names are left as they were.
    """


@dataclasses.dataclass
class PackReport:
    """What packing one ``.lst`` did.

    ``status``: ``running`` until it ends, then ``complete`` (published), ``aborted`` (the
    input was refused: too many bad files, none packed, a bad list), ``interrupted``
    (Ctrl-C, SIGTERM) or ``failed`` (an error reading, writing or publishing).
    """

    list: str
    outputs: list[str]
    images: int = 0
    written: int = 0
    bytes: int = 0
    seconds: float = 0.0
    skipped: list[dict] = dataclasses.field(default_factory=list)
    status: str = "running"
    options: dict = dataclasses.field(default_factory=dict)
    layout: str = "mxnet"
    identities: int | None = None  # insightface layout: identity records written
    # on a cluster (recio.im2rec.engine): each shard's outcome; None for a single machine
    shards: list[dict] | None = None

    @property
    def images_per_second(self) -> float:
        """Files handled (written or skipped) per second; 0 before any time is counted."""
        return (self.written + len(self.skipped)) / self.seconds if self.seconds else 0.0

    def to_json(self) -> str:
        """The report as indented JSON, with the rate, and times rounded."""
        d = dataclasses.asdict(self)
        if self.shards is None:
            del d["shards"]
        d["images_per_second"] = round(self.images_per_second, 1)
        d["seconds"] = round(self.seconds, 3)
        return json.dumps(d, indent=1) + "\n"

    def summary(self, shown: int = 20, report_path: str | None = None) -> str:
        """The report for people: a line of counts and rates, then the first skipped files.

        Args:
            shown: how many skipped files to list.
            report_path: where the whole report is, to say so when some are not listed.
        """
        n = len(self.skipped)
        if self.status == "complete":
            s = (
                f"{self.list}: complete; {self.written} of {self.images} images written "
                f"({self.bytes / 1e6:.1f} MB) in {self.seconds:.1f} s "
                f"({self.images_per_second:.0f} images/s), {n} skipped"
            )
            if self.identities is not None:
                s += f"; {self.identities} identities"
            if self.shards is not None:
                reused = sum(x["status"] == "reused" for x in self.shards)
                s += f"; {len(self.shards) - reused} shards converted, {reused} reused"
        else:  # the writers were aborted: what was packed is gone
            published = "" if self.status == "failed" else ", nothing published"
            s = (
                f"{self.list}: {self.status}{published}; {self.written} of {self.images} "
                f"images packed before it stopped, {n} skipped, in {self.seconds:.1f} s"
            )
        s += "".join(f"\n  skipped {x['path']}: {x['reason']}" for x in self.skipped[:shown])
        if n > shown:
            where = f" (all in {report_path})" if report_path else ""
            s += f"\n  ... and {n - shown} more{where}"
        return s


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


def read_list(url: str, storage_options: dict[str, Any] | None = None):
    """``(entries, bad_lines)`` of a .lst; bad lines are kept to report, as MXNet skips them."""
    entries, _, bad = _read_list(url, storage_options)
    return entries, bad


def _read_list_into(
    report: PackReport, lst: str, storage_options: dict[str, Any] | None, max_errors: int | None
) -> tuple[list[ListEntry], list[int], list[dict]]:
    """:func:`_read_list` of ``lst``, its unreadable lines also put into ``report``.

    Raises:
        TooManyErrors: more unreadable lines than ``max_errors``.
    """
    entries, linenos, bad_lines = _read_list(lst, storage_options)
    report.images = len(entries)
    report.skipped.extend(bad_lines)
    if max_errors is not None and len(bad_lines) > max_errors:
        raise TooManyErrors(
            f"{len(bad_lines)} lines of the list unreadable, more than --max-errors "
            f"{max_errors} (first: {bad_lines[0]['path']}: {bad_lines[0]['reason']})"
        )
    return entries, linenos, bad_lines


def _read_list(url: str, storage_options: dict[str, Any] | None):
    """``(entries, line numbers of the entries, bad_lines)`` of a .lst."""
    entries: list[ListEntry] = []
    linenos: list[int] = []
    bad: list[dict] = []
    for lineno, line in enumerate(_list_text(url, storage_options).splitlines(), 1):
        try:
            # no path in the message: the report names the line as FILE:LINE
            for entry in parse_lst([line], start=lineno):
                entries.append(entry)
                linenos.append(lineno)
        except ValueError as exc:
            bad.append({"index": None, "path": f"{url}:{lineno}", "reason": str(exc)})
    return entries, linenos, bad


def _list_text(url: str, storage_options: dict[str, Any] | None) -> str:
    """A .lst's text (UTF-8, as MXNet's Python 3 writes it; a leading BOM is dropped).

    Raises:
        RecordIOError: the file is not UTF-8, naming the line and byte.
    """
    try:
        text = storage.read_text(url, storage_options)
    except UnicodeDecodeError:
        if storage.is_local(url):
            with open(storage.local_path(url), "rb") as f:
                data = f.read()
        else:
            fs, path = storage.filesystem(url, storage_options)
            data = fs.cat_file(path)
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            err = RecordIOError(
                f"{url}:{line}: not UTF-8 text (byte {exc.start} is "
                f"0x{data[exc.start]:02x}: {exc.reason}); save the list as UTF-8"
            )
            err.path, err.offset = url, exc.start
            raise err from None
        raise  # it decodes now: the file changed under us; say what read_text said
    return text.removeprefix("\ufeff")


def _check_list(
    url: str,
    entries: Sequence[ListEntry],
    linenos: Sequence[int],
    root: str,
    opts: EncodeOptions,
    layout: str = "mxnet",
) -> None:
    """Refuse a list with repeated indices; warn (once per kind) about odd but packable lines.

    A repeated index is refused, not skipped: it is the record's key in the ``.idx`` (and
    its id), so the reader keeps one record per index and the other image vanishes
    silently; which of the two lines is meant cannot be known, and a repeat usually means
    lists were concatenated or edited by hand, which the user should look at. In the
    insightface layout the keys are given anew (the index is not used), so repeats are
    fine there, but each first label names a class and must be a finite number.
    """
    if layout == "insightface":
        check_classes(url, entries, linenos)
    else:
        _refuse_repeats(url, entries, linenos)
    width = None if opts.pack_label else 1  # the labels that are stored
    odd = [(e, n) for e, n in zip(entries, linenos, strict=True) if not _finite(e.labels[:width])]
    if odd:
        (entry, lineno), count = odd[0], len(odd)
        log.warning(
            "%s:%d: label %s is not finite (%d line%s with NaN or infinite labels): "
            "packed as they are",
            url, lineno, ",".join(f"{x:g}" for x in entry.labels[:width]),
            count, "" if count == 1 else "s",
        )  # fmt: skip
    # MXNet reads these too (os.path.join drops ROOT before an absolute path): warned only
    outside = [(e, n) for e, n in zip(entries, linenos, strict=True) if _outside(e.path)]
    if outside:
        (entry, lineno), count = outside[0], len(outside)
        log.warning(
            "%s:%d: %s is outside ROOT %s (%d path%s outside it): read anyway, as MXNet does",
            url, lineno, entry.path, root, count, "" if count == 1 else "s",
        )  # fmt: skip


def _refuse_repeats(url: str, entries: Sequence[ListEntry], linenos: Sequence[int]) -> None:
    seen: dict[int, int] = {}
    repeats = []
    for e, lineno in zip(entries, linenos, strict=True):
        first = seen.setdefault(e.index, lineno)
        if first != lineno:
            repeats.append((e.index, first, lineno))
    if repeats:
        index, first, again = repeats[0]
        err = RecordIOError(
            f"{url}:{again}: index {index} is already on line {first} "
            f"({len(repeats)} repeated {'index' if len(repeats) == 1 else 'indices'} in all): "
            "each image needs its own index, its record's key in the .idx; "
            "renumber the first column"
        )
        err.path = url
        raise err


def _outside(path: str) -> bool:
    """Whether a .lst path leaves ROOT: absolute, or climbing out with ``..``."""
    if os.path.isabs(path) or ".." not in path:
        return os.path.isabs(path)
    path = os.path.normpath(path)
    return path == os.pardir or path.startswith(os.pardir + os.sep)


def _finite(labels: Sequence[float]) -> bool:
    return all(math.isfinite(x) for x in labels)


def _ignore_sigint() -> None:
    # Ctrl-C is the parent's to handle: it cancels the work and aborts the writers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _make_pool(kind: str, workers: int):
    if kind == "thread":
        return ThreadPoolExecutor(workers, thread_name_prefix="im2rec")
    import multiprocessing  # only here: its import costs ~20 ms of every command's start-up
    from concurrent.futures import ProcessPoolExecutor

    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    return ProcessPoolExecutor(workers, mp_context=context, initializer=_ignore_sigint)


def default_pool(opts: EncodeOptions) -> str:
    """The worker kind for ``opts``: ``"thread"`` or ``"process"``.

    Threads where the work releases the GIL (pass-through, JPEG → JPEG in C); else
    processes, as Pillow's Python-level work would serialise threads.
    """
    if opts.pass_through or (opts.encoding == ".jpg" and native_available()):
        return "thread"
    return "process"


# Entries per batch: batches amortise the hand-off (and, for processes, the pickling); the
# C batches (NOTE [im2rec in C]) hold the GIL only to start and to hand their frames over,
# so the larger batch halves the hand-offs where the per-batch Python is most of what is left.
_BATCH = 8
_NATIVE_BATCH = 16
# NOTE [batch callers]: with the C batches, --num-thread N is N native threads, fed by 2N
# Python threads that each wait on one queued batch (N = 1 too: its thread works while the
# writer writes). A caller needs the GIL only between
# its batches (to hand the frames over, to make what C left to it), so the native threads
# wait for Python only when every caller does; with one caller per thread, one caller that
# waits for the GIL (held by the writer, or by a thread the OS has descheduled on a busy
# machine) leaves its thread with nothing queued.
_CALLERS_PER_THREAD = 2


def _batch_stream(
    entries: Sequence[ListEntry],
    root: str,
    opts: EncodeOptions,
    num_thread: int,
    pool: str = "process",
    make=make_records,
) -> Iterable[tuple[Sequence[ListEntry], Any]]:
    """``(chunk, make(chunk, root, opts))`` per batch of ``entries``, in order.

    ``num_thread`` workers run them (``make_batch``'s: NOTE [batch callers]); at most four
    batches a worker are in flight or waiting to be written, so memory does not grow with
    the dataset.
    """
    batch, workers = _BATCH, num_thread
    if make is make_batch and native_batches(opts):
        batch = _NATIVE_BATCH
        # the threads queue their batches on one native pool (processes: one thread each)
        make = functools.partial(make_batch, threads=num_thread if pool == "thread" else 1)
        if pool == "thread":  # NOTE [batch callers]
            workers = _CALLERS_PER_THREAD * num_thread
    batches = (entries[i : i + batch] for i in range(0, len(entries), batch))
    if workers <= 1:
        for chunk in batches:
            yield chunk, make(chunk, root, opts)
        return
    window = max(4, 4 * workers)
    with _make_pool(pool, workers) as executor:
        pending: deque[tuple[Sequence[ListEntry], Future]] = deque()
        try:
            for chunk in batches:
                pending.append((chunk, executor.submit(make, chunk, root, opts)))
                if len(pending) >= window:
                    chunk, future = pending.popleft()
                    yield chunk, future.result()
            while pending:
                chunk, future = pending.popleft()
                yield chunk, future.result()
        finally:  # on error or Ctrl-C: drop queued work; running batches finish quickly
            for _, future in pending:
                future.cancel()


class _FramedRuns:
    """A batch's C-made records, gathered per writer and written with one call each.

    A writer's run is written before any other record goes to it (:meth:`flush`), so
    every output keeps the list's order.
    """

    def __init__(self, batch: RecordBatch) -> None:
        self.batch = batch
        self.lengths = batch.lengths.tolist()
        ends = np.cumsum(batch.lengths).tolist()
        self.starts = [end - n for end, n in zip(ends, self.lengths, strict=True)]
        self.runs: dict[int, list[int]] = {}  # writer -> its entries (in the batch)
        self.keys: dict[int, list] = {}  # writer -> their keys

    def add(self, writer: int, j: int, key: int) -> None:
        """Entry ``j`` of the batch (in ``frames``) goes to ``writer`` under ``key``."""
        self.runs.setdefault(writer, []).append(j)
        self.keys.setdefault(writer, []).append(key)

    def flush(self, writers: Sequence[MXIndexedRecordIO], writer: int | None = None) -> None:
        """Write the runs gathered for ``writer`` (every writer: None)."""
        for k in list(self.runs) if writer is None else [writer]:
            run = self.runs.pop(k, None)
            if not run:
                continue
            frames = memoryview(self.batch.frames)
            first, last = run[0], run[-1]
            lengths = [self.lengths[j] for j in run]
            if last - first + 1 == len(run):  # one span of frames: no copy
                start = self.starts[first]
                data = frames[start : start + sum(lengths)]
                crcs = self.batch.crcs[first : last + 1]
            else:
                starts = self.starts
                data = b"".join(frames[starts[j] : starts[j] + self.lengths[j]] for j in run)
                crcs = self.batch.crcs[run]
            writers[k].write_framed(self.keys.pop(k), data, lengths, crcs)


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
    start = time.perf_counter()
    from tqdm import tqdm

    writers: list[MXIndexedRecordIO] = []
    bar = None
    rotated: tuple[str, int] | None = None  # pass-through: the first EXIF-rotated JPEG
    n_rotated = 0
    try:
        entries, linenos, _ = _read_list_into(report, lst, storage_options, max_errors)
        _check_list(lst, entries, linenos, root, opts, layout)
        index = None
        if face:  # NOTE [insightface layout]: index = the key the image gets if none is skipped
            grouped = group_by_class(entries)
            lst_index = [e.index for e in grouped]  # what the report names a skipped file by
            entries = numbered(grouped)
            index = FaceIndex()
        bar = tqdm(
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
            stream = _batch_stream(entries, root, opts, num_thread, kind, make)
            pos = 0
            for chunk, batch in stream:
                if isinstance(batch, RecordBatch):
                    runs, others = _FramedRuns(batch), batch.others
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
            raise TooManyErrors(_nothing_written(report, lst, root))
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
    except BaseException as exc:
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
        else:
            report.status = _failed_status(exc)
        raise
    finally:
        if bar is not None:
            bar.close()
        report.seconds = time.perf_counter() - start
    report.status = "complete"
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


def _failed_status(exc: BaseException) -> str:
    """A report's status for a run that ``exc`` ended."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, (TooManyErrors, ValueError)):  # the input was refused
        return "aborted"
    return "failed"  # reading, writing or publishing failed


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
            return _exif_orientation(bytes(img[pos + 10 : pos + 2 + length]))
        pos += 2 + length
    return 1


def _nothing_written(report: PackReport, lst: str, root: str) -> str:
    """Why a run that packed no image is aborted, naming the first failure."""
    if not report.skipped:
        return "the list has no entries: nothing to pack"
    if not report.images:  # every line was bad
        first = report.skipped[0]
        return f"no line of the list could be read (first: {first['path']}: {first['reason']})"
    files = [s for s in report.skipped if s["index"] is not None]
    where = os.path.join(root, files[0]["path"])
    message = f"every file failed (first: {where}: {files[0]['reason']})"
    if any(s["reason"] == "file not found" for s in files):
        message += f": is ROOT ({root}) right?"
    return message
