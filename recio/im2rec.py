"""im2rec: image folder → ``.lst`` → ``.rec``/``.idx``, MXNet's ``tools/im2rec.py`` remade.

Same command line, ``.lst`` format, ``--recursive`` labels, shuffle (``random.seed(100)``
unless ``--seed``) and output names as MXNet 1.9.1, so lists and records move freely
between the two. Beyond MXNet: a pool of threads (libjpeg-turbo and Pillow release the
GIL) with output in ``.lst`` order through a bounded reorder window; bad files skipped
and reported (``--max-errors``, exit code); ``--shards``; any fsspec URL as output;
EXIF orientation applied when re-encoding; writers that publish only complete files.

NOTE [output order]: records are written in ``.lst`` order whatever ``--num-thread`` is,
and each image's bytes depend only on its file and the options, so the same input and
seed give byte-identical ``.rec``/``.idx`` files.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import random
import signal
import sys
import threading
import time
import warnings
from collections import deque
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from . import storage
from .format import ListEntry, format_lst_line, parse_lst
from .recordio import MXIndexedRecordIO
from .transcode import (  # noqa: F401  (also im2rec's public names, as before the split)
    EncodeOptions,
    JpegHeader,
    SkipImage,
    check_image,
    crop_box,
    encode_image,
    jpeg_header,
    jpeg_info,
    make_record,
    make_records,
    native_available,
    output_size,
    record_header,
)

log = logging.getLogger(__name__)

DEFAULT_EXTS = (".jpeg", ".jpg", ".png")
#: MXNet's im2rec hard-codes this shuffle seed.
MXNET_SEED = 100

# Exit codes of ``run``.
EXIT_OK, EXIT_SKIPPED, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 2, 130


# --- .lst making ----------------------------------------------------------------------


def list_images(root: str, recursive: bool = False, exts: Iterable[str] = DEFAULT_EXTS):
    """``(index, relpath, label)`` for every image under ``root``, as MXNet lists them.

    Recursive: a top-down walk with sorted sub-folders and files; each folder that
    holds an image gets the next label when its first image is seen.
    """
    exts = {e.lower() for e in exts}
    items: list[ListEntry] = []
    if recursive:
        cat: dict[str, int] = {}
        for path, dirs, files in os.walk(root, followlinks=True):
            dirs.sort()  # in place: os.walk descends in this order
            files.sort()
            for fname in files:
                fpath = os.path.join(path, fname)
                if os.path.splitext(fname)[1].lower() in exts and os.path.isfile(fpath):
                    label = cat.setdefault(path, len(cat))
                    items.append(
                        ListEntry(len(items), (float(label),), os.path.relpath(fpath, root))
                    )
        for path, label in cat.items():
            log.info("label %d: %s", label, os.path.relpath(path, root))
    else:
        for fname in sorted(os.listdir(root)):
            fpath = os.path.join(root, fname)
            if os.path.splitext(fname)[1].lower() in exts and os.path.isfile(fpath):
                items.append(ListEntry(len(items), (0.0,), os.path.relpath(fpath, root)))
    return items


def split_list(
    items: Sequence[ListEntry],
    prefix: str,
    *,
    chunks: int = 1,
    train_ratio: float = 1.0,
    test_ratio: float = 0.0,
) -> list[tuple[str, list[ListEntry]]]:
    """``(lst_name, entries)`` for each file MXNet's ``make_list`` writes, same names and cuts."""
    if chunks < 1:
        raise ValueError(f"chunks must be >= 1, not {chunks}")
    n = len(items)
    chunk_size = (n + chunks - 1) // chunks
    out = []
    for i in range(chunks):
        chunk = list(items[i * chunk_size : (i + 1) * chunk_size])
        suffix = f"_{i}" if chunks > 1 else ""
        # MXNet cuts by the nominal chunk size, not len(chunk): kept for equal outputs.
        sep = int(chunk_size * train_ratio)
        sep_test = int(chunk_size * test_ratio)
        if train_ratio == 1.0:
            out.append((f"{prefix}{suffix}.lst", chunk))
            continue
        if test_ratio:
            out.append((f"{prefix}{suffix}_test.lst", chunk[:sep_test]))
        if train_ratio + test_ratio < 1.0:
            out.append((f"{prefix}{suffix}_val.lst", chunk[sep_test + sep :]))
        out.append((f"{prefix}{suffix}_train.lst", chunk[sep_test : sep_test + sep]))
    return out


def make_lists(
    prefix: str,
    root: str,
    *,
    recursive: bool = False,
    exts: Iterable[str] = DEFAULT_EXTS,
    chunks: int = 1,
    train_ratio: float = 1.0,
    test_ratio: float = 0.0,
    shuffle: bool = True,
    seed: int = MXNET_SEED,
    storage_options: dict[str, Any] | None = None,
) -> list[str]:
    """Write the ``.lst`` file(s) for the images under ``root``; returns their names."""
    items = list_images(root, recursive, exts)
    if shuffle:
        random.Random(seed).shuffle(items)  # same sequence as random.seed(seed); shuffle()
    written = []
    for name, entries in split_list(
        items, prefix, chunks=chunks, train_ratio=train_ratio, test_ratio=test_ratio
    ):
        out = storage.AtomicOutput(name, storage_options)
        try:
            out.write("".join(format_lst_line(e) for e in entries).encode())
        except BaseException:
            out.abort()
            raise
        out.commit()
        written.append(name)
        log.info("wrote %s (%d images)", name, len(entries))
    return written


def find_lists(prefix: str, storage_options: dict[str, Any] | None = None) -> list[str]:
    """The ``.lst`` files MXNet would pack for ``prefix``: every ``PREFIX*.lst`` in its folder.

    A prefix that is a folder means every ``.lst`` in it.
    """
    if storage.is_local(prefix):
        prefix = os.path.abspath(storage.local_path(prefix))
        folder = prefix if os.path.isdir(prefix) else os.path.dirname(prefix)
        names = [os.path.join(folder, f) for f in sorted(os.listdir(folder))]
        names = [n for n in names if os.path.isfile(n)]
    else:
        fs, path = storage.filesystem(prefix, storage_options)
        protocol = storage.split_protocol(prefix)[0]
        folder = path if fs.isdir(path) else path.rsplit("/", 1)[0]
        names = sorted(f"{protocol}://{p}" for p in fs.ls(folder, detail=False))
        prefix = f"{protocol}://{path}"
    return [n for n in names if n.startswith(prefix) and n.endswith(".lst")]


# --- .lst → .rec/.idx ------------------------------------------------------------------


class TooManyErrors(RuntimeError):
    """More files were skipped than ``max_errors`` allows."""


@dataclasses.dataclass
class PackReport:
    """What packing one ``.lst`` did; ``status`` is complete, aborted or interrupted."""

    list: str
    outputs: list[str]
    images: int = 0
    written: int = 0
    bytes: int = 0
    seconds: float = 0.0
    skipped: list[dict] = dataclasses.field(default_factory=list)
    status: str = "running"
    options: dict = dataclasses.field(default_factory=dict)

    @property
    def images_per_second(self) -> float:
        return (self.written + len(self.skipped)) / self.seconds if self.seconds else 0.0

    def to_json(self) -> str:
        d = dataclasses.asdict(self)
        d["images_per_second"] = round(self.images_per_second, 1)
        d["seconds"] = round(self.seconds, 3)
        return json.dumps(d, indent=1) + "\n"

    def summary(self) -> str:
        s = (
            f"{self.list}: {self.status}; {self.written} of {self.images} images written "
            f"({self.bytes / 1e6:.1f} MB) in {self.seconds:.1f} s "
            f"({self.images_per_second:.0f} images/s), {len(self.skipped)} skipped"
        )
        return s + "".join(f"\n  skipped {x['path']}: {x['reason']}" for x in self.skipped)


def output_names(stem: str, shards: int = 1) -> list[tuple[str, str]]:
    """``(rec, idx)`` names: ``STEM.rec`` or ``STEM-00000-of-00004.rec`` ... for shards."""
    if shards == 1:
        return [(stem + ".rec", stem + ".idx")]
    return [
        (f"{stem}-{k:05d}-of-{shards:05d}.rec", f"{stem}-{k:05d}-of-{shards:05d}.idx")
        for k in range(shards)
    ]


def read_list(url: str, storage_options: dict[str, Any] | None = None):
    """``(entries, bad_lines)`` of a .lst; bad lines are kept to report, as MXNet skips them."""
    entries, bad = [], []
    for lineno, line in enumerate(storage.read_text(url, storage_options).splitlines(), 1):
        try:
            entries.extend(parse_lst([line], path=url))
        except ValueError as exc:
            bad.append({"index": None, "path": f"{url}:{lineno}", "reason": str(exc)})
    return entries, bad


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
    """Threads where the work releases the GIL (pass-through, JPEG → JPEG in C); else
    processes, as Pillow's Python-level work would serialise threads."""
    if opts.pass_through or (opts.encoding == ".jpg" and native_available()):
        return "thread"
    return "process"


def _paired(entries: Sequence[ListEntry], results: list) -> Iterable[tuple]:
    return ((e, payload, reason) for e, (payload, reason) in zip(entries, results, strict=True))


def _record_stream(
    entries: Sequence[ListEntry],
    root: str,
    opts: EncodeOptions,
    num_thread: int,
    pool: str = "process",
) -> Iterable[tuple[ListEntry, bytes | None, str | None]]:
    """Records in ``entries`` order, made by ``num_thread`` workers (NOTE [output order]).

    Work goes out in small batches; at most ``4 * num_thread`` batches are in flight
    or waiting to be written, so memory does not grow with the dataset.
    """
    # Batches amortise the hand-off (and, for processes, the pickling).
    batch = 8
    batches = (entries[i : i + batch] for i in range(0, len(entries), batch))
    if num_thread <= 1:
        for chunk in batches:
            yield from _paired(chunk, make_records(chunk, root, opts))
        return
    window = max(4, 4 * num_thread)
    with _make_pool(pool, num_thread) as executor:
        pending: deque[tuple[Sequence[ListEntry], Future]] = deque()
        try:
            for chunk in batches:
                pending.append((chunk, executor.submit(make_records, chunk, root, opts)))
                if len(pending) >= window:
                    chunk, future = pending.popleft()
                    yield from _paired(chunk, future.result())
            while pending:
                chunk, future = pending.popleft()
                yield from _paired(chunk, future.result())
        finally:  # on error or Ctrl-C: drop queued work; running batches finish quickly
            for _, future in pending:
                future.cancel()


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
) -> PackReport:
    """Pack the images of ``lst`` (relative to ``root``) into ``out_stem``.rec/.idx.

    ``out_stem`` defaults to the list's name without ``.lst`` (MXNet's naming). With
    ``shards`` > 1 the k-th written record goes to shard k mod ``shards``. Bad files are
    skipped and listed in the report; past ``max_errors`` skips, TooManyErrors is raised.
    On any exception (Ctrl-C too) every writer is aborted, so no output looks whole,
    and ``report.status`` says why (pass ``report`` to read it after an exception).
    ``pool`` is "process" or "thread" (default: :func:`default_pool`).
    """
    if shards < 1:
        raise ValueError(f"shards must be >= 1, not {shards}")
    opts = opts or EncodeOptions()
    if out_stem is None:
        out_stem = lst[: -len(".lst")] if lst.endswith(".lst") else lst
    stem = out_stem
    names = output_names(stem, shards)
    if report is None:
        report = PackReport(list=lst, outputs=[])
    report.list, report.outputs = lst, [n for pair in names for n in pair]
    report.options = dataclasses.asdict(opts)
    start = time.perf_counter()
    entries, bad_lines = read_list(lst, storage_options)
    report.images = len(entries)
    report.skipped.extend(bad_lines)
    from tqdm import tqdm

    writers: list[MXIndexedRecordIO] = []
    bar = tqdm(
        total=len(entries),
        unit="img",
        desc=os.path.basename(stem),
        disable=not progress,
        dynamic_ncols=True,
        mininterval=0.5,
        file=sys.stderr,
    )
    try:
        for rec, idx in names:
            writers.append(MXIndexedRecordIO(idx, rec, "w", storage_options=storage_options))
        with warnings.catch_warnings():
            # libjpeg-turbo warns on recoverable damage (as OpenCV accepts it); keep quiet
            warnings.filterwarnings("ignore", module="turbojpeg")
            kind = pool or default_pool(opts)
            for entry, payload, reason in _record_stream(entries, root, opts, num_thread, kind):
                if payload is None:
                    report.skipped.append(
                        {"index": entry.index, "path": entry.path, "reason": reason}
                    )
                    log.debug("skipped %s: %s", entry.path, reason)
                    if max_errors is not None and len(report.skipped) > max_errors:
                        raise TooManyErrors(
                            f"{len(report.skipped)} files skipped, more than --max-errors "
                            f"{max_errors} (last: {entry.path}: {reason})"
                        )
                else:
                    writers[report.written % shards].write_idx(entry.index, payload)
                    report.written += 1
                bar.update(1)
    except BaseException as exc:
        for w in writers:
            w.abort()
        report.status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "aborted"
        report.seconds = time.perf_counter() - start
        raise
    finally:
        bar.close()
    report.bytes = sum(w.tell() for w in writers)
    for w in writers:
        w.close()
    report.seconds = time.perf_counter() - start
    report.status = "complete"
    return report


# --- command line -----------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """MXNet im2rec's arguments, plus recio's (reports, error budget, shards, storage)."""
    parser.formatter_class = argparse.ArgumentDefaultsHelpFormatter
    parser.add_argument("prefix", help="prefix of input/output lst and rec files (path or URL)")
    parser.add_argument("root", help="path to folder containing images")
    c = parser.add_argument_group("Options for creating image lists")
    c.add_argument(
        "--list",
        action="store_true",
        help="create image list(s) from ROOT as PREFIX.lst instead of packing",
    )
    c.add_argument(
        "--exts", nargs="+", default=list(DEFAULT_EXTS), help="list of acceptable image extensions"
    )
    c.add_argument("--chunks", type=int, default=1, help="number of chunks")
    c.add_argument(
        "--train-ratio", type=float, default=1.0, help="ratio of images to use for training"
    )
    c.add_argument("--test-ratio", type=float, default=0, help="ratio of images to use for testing")
    c.add_argument(
        "--recursive",
        action="store_true",
        help="walk sub-folders, one label per folder (sorted); else ROOT only, label 0",
    )
    c.add_argument(
        "--no-shuffle", dest="shuffle", action="store_false", help="keep the walk order in the .lst"
    )
    c.add_argument(
        "--seed", type=int, default=MXNET_SEED, help="shuffle seed (MXNet's im2rec always uses 100)"
    )
    r = parser.add_argument_group("Options for creating database")
    r.add_argument(
        "--pass-through",
        action="store_true",
        help="store the file bytes as they are (checked, not decoded)",
    )
    r.add_argument(
        "--resize",
        type=int,
        default=0,
        help="resize the shorter edge to this size; 0 keeps the size",
    )
    r.add_argument("--center-crop", action="store_true", help="crop the centre square first")
    r.add_argument(
        "--quality", type=int, default=95, help="JPEG quality 1-100, or PNG compression 0-9"
    )
    r.add_argument(
        "--num-thread",
        type=int,
        default=os.cpu_count() or 1,
        help="workers that decode/resize/encode (see --pool); output order never changes",
    )
    r.add_argument(
        "--pool",
        choices=["process", "thread"],
        default=None,
        help="worker kind; default: threads for JPEG output (encoded in C, GIL released) and "
        "--pass-through, processes for PNG output",
    )
    r.add_argument(
        "--color",
        type=int,
        default=1,
        choices=[-1, 0, 1],
        help="1: colour, 0: grayscale, -1: as stored (alpha kept for .png)",
    )
    r.add_argument(
        "--encoding", default=".jpg", choices=[".jpg", ".png"], help="encoding of the stored images"
    )
    r.add_argument(
        "--pack-label",
        action="store_true",
        help="store every label column of the .lst (multi-label)",
    )
    x = parser.add_argument_group("recio additions")
    x.add_argument(
        "--shards",
        type=int,
        default=1,
        help="write N balanced .rec/.idx pairs (STEM-0000k-of-0000N.rec)",
    )
    x.add_argument(
        "--output",
        metavar="FOLDER",
        help="write .rec/.idx/.report.json here (path or URL), not beside the .lst",
    )
    x.add_argument(
        "--max-errors",
        type=int,
        default=None,
        help="abort (and write nothing) once more than N files were skipped",
    )
    x.add_argument("--allow-skips", action="store_true", help="exit 0 even when files were skipped")
    x.add_argument(
        "--no-report", dest="report", action="store_false", help="do not write STEM.report.json"
    )
    x.add_argument(
        "--storage-options",
        metavar="JSON",
        help='fsspec options as JSON, e.g. \'{"endpoint_url": "http://127.0.0.1:8333"}\'',
    )
    x.add_argument("--quiet", action="store_true", help="no progress bar, warnings only")


def _absolute(url: str) -> str:
    return os.path.abspath(storage.local_path(url)) if storage.is_local(url) else url


def _write_report(report: PackReport, stem: str, storage_options: dict | None) -> None:
    out = storage.AtomicOutput(stem + ".report.json", storage_options)
    out.write(report.to_json().encode())
    out.commit()


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """SIGTERM stops like Ctrl-C, so writers are aborted rather than left half-written."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(args: argparse.Namespace) -> int:
    """Run im2rec as parsed by ``add_arguments``; returns the exit code."""
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.WARNING if args.quiet else logging.INFO,
            format="im2rec: %(message)s",
            stream=sys.stderr,
        )
    options = json.loads(args.storage_options) if args.storage_options else None
    prefix, root = _absolute(args.prefix), os.path.abspath(args.root)
    if args.list:
        make_lists(
            prefix,
            root,
            recursive=args.recursive,
            exts=args.exts,
            chunks=args.chunks,
            train_ratio=args.train_ratio,
            test_ratio=args.test_ratio,
            shuffle=args.shuffle,
            seed=args.seed,
            storage_options=options,
        )
        return EXIT_OK
    try:
        opts = EncodeOptions(
            pass_through=args.pass_through,
            resize=args.resize,
            center_crop=args.center_crop,
            quality=args.quality,
            color=args.color,
            encoding=args.encoding,
            pack_label=args.pack_label,
        )
    except ValueError as exc:
        log.error("%s", exc)
        return EXIT_FAILED
    lists = find_lists(prefix, options)
    if not lists:
        log.error("no .lst file with prefix %s (make one with --list)", prefix)
        return EXIT_FAILED
    code = EXIT_OK
    with _sigterm_as_interrupt():
        for lst in lists:
            stem = lst[: -len(".lst")]
            if args.output:
                stem = _absolute(args.output).rstrip("/") + "/" + stem.rsplit("/", 1)[-1]
            log.info("creating %s from %s", output_names(stem, args.shards)[0][0], lst)
            report = PackReport(list=lst, outputs=[])
            try:
                pack_list(
                    lst,
                    root,
                    opts,
                    out_stem=stem,
                    num_thread=args.num_thread,
                    pool=args.pool,
                    shards=args.shards,
                    max_errors=args.max_errors,
                    storage_options=options,
                    progress=not args.quiet,
                    report=report,
                )
            except TooManyErrors as exc:
                log.error("%s; nothing written for %s", exc, lst)
                code = EXIT_FAILED
            except KeyboardInterrupt:
                log.error("interrupted; partial output of %s removed", lst)
                code = EXIT_INTERRUPTED
            finally:
                if args.report:
                    _write_report(report, stem, options)
            log.info("%s", report.summary())
            if code != EXIT_OK:
                return code
            if report.skipped and not args.allow_skips:
                code = EXIT_SKIPPED
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m recio.im2rec PREFIX ROOT ...``, the same as ``recio im2rec``."""
    parser = argparse.ArgumentParser(prog="im2rec", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
