"""``recio im2rec``: MXNet's ``tools/im2rec.py`` command line, and recio's additions."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Sequence

from .. import storage
from .._args import HelpFormatter, at_least, restart_interval, sigterm_as_interrupt
from .layout import LAYOUTS
from .lists import DEFAULT_EXTS, MXNET_SEED, find_lists, make_lists
from .optimize import DEFAULT_RESTART
from .pack import PackReport, TooManyErrors, output_names, pack_list
from .transcode import (
    EncodeOptions,
)

log = logging.getLogger("recio.im2rec")

# Exit codes of ``run`` (said in --help too). Argparse's usage errors are EXIT_FAILED too.
EXIT_OK, EXIT_SKIPPED, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 2, 130

DESCRIPTION = """\
List the images of a folder (--list), or pack a list's images into .rec/.idx: MXNet's
tools/im2rec.py, with the same options, .lst format, labels, shuffle and output names,
so lists and records move freely between the two.

PREFIX names the list: --list writes PREFIX.lst (or its splits); packing reads every
PREFIX*.lst (every .lst in PREFIX, if it is a folder) and writes NAME.rec and NAME.idx
for each NAME.lst. ROOT is the image folder that the list's paths are relative to."""

EPILOG = f"""\
examples:
  %(prog)s --list --recursive data/train images/     # images/ → data/train.lst
  %(prog)s --resize 256 --quality 90 data/train images/   # .lst → .rec/.idx

exit codes:
  {EXIT_OK:<4} every image written (or some skipped, with --allow-skips)
  {EXIT_SKIPPED:<4} written, but files or .lst lines were skipped (listed, and in the report)
  {EXIT_FAILED:<4} failed: a bad argument or input, no image packed, --max-errors exceeded,
       or an I/O error; nothing published, existing outputs left as they were
  {EXIT_INTERRUPTED:<4} interrupted (Ctrl-C, SIGTERM); nothing published"""


def _restart(args: argparse.Namespace) -> int | str:
    """--restart-interval, or its default: markers when re-encoding JPEGs, none otherwise."""
    if args.restart_interval is not None:
        return args.restart_interval
    return 0 if args.pass_through or args.encoding != ".jpg" else DEFAULT_RESTART


def _ratio(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, not {value:g}")
    return value


_ratio.__name__ = "float"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """MXNet im2rec's arguments, plus recio's (reports, error budget, shards, storage).

    Also sets the parser's help text and makes its errors one line (exit code 2).
    """
    parser.formatter_class = HelpFormatter
    parser.description, parser.epilog = DESCRIPTION, EPILOG
    parser.usage = "%(prog)s [options] PREFIX ROOT"

    def error(message: str):
        parser.exit(EXIT_FAILED, f"{parser.prog}: error: {message} (see --help)\n")

    parser.error = error  # one line, not the usage block and then the error
    parser.add_argument(
        "prefix",
        metavar="PREFIX",
        help="the list's name without .lst (path or URL); see above",
    )
    parser.add_argument(
        "root", metavar="ROOT", help="the image folder; the list's paths are relative to it"
    )
    c = parser.add_argument_group("Options for creating image lists")
    c.add_argument(
        "--list",
        action="store_true",
        help="list the images under ROOT into PREFIX.lst (split as the options below say) "
        "instead of packing",
    )
    c.add_argument(
        "--exts",
        nargs="+",
        default=list(DEFAULT_EXTS),
        metavar="EXT",
        help=f"file extensions that count as images (default: {' '.join(DEFAULT_EXTS)})",
    )
    c.add_argument(
        "--chunks",
        type=at_least(1),
        default=1,
        metavar="N",
        help="cut the list into N lists, PREFIX_0.lst ... PREFIX_{N-1}.lst",
    )
    c.add_argument(
        "--train-ratio",
        type=_ratio,
        default=1.0,
        metavar="R",
        help="share of each list for PREFIX_train.lst; below 1, --test-ratio goes to "
        "PREFIX_test.lst and the rest to PREFIX_val.lst",
    )
    c.add_argument(
        "--test-ratio",
        type=_ratio,
        default=0.0,
        metavar="R",
        help="share of each list for PREFIX_test.lst (only with --train-ratio below 1, "
        "as in MXNet)",
    )
    c.add_argument(
        "--recursive",
        action="store_true",
        help="list the images in every sub-folder of ROOT, one label per folder (0, 1, ... "
        "in sorted order); without it only ROOT's own images are listed, all with label 0",
    )
    c.add_argument(
        "--no-shuffle",
        dest="shuffle",
        action="store_false",
        help="write the list in the order of the folder walk (sorted); without it the list "
        "is shuffled (see --seed)",
    )
    c.add_argument(
        "--seed",
        type=int,
        default=MXNET_SEED,
        help="shuffle seed (MXNet's im2rec has no such option: it always uses 100)",
    )
    r = parser.add_argument_group("Options for creating database")
    r.add_argument(
        "--pass-through",
        action="store_true",
        help="store each file's bytes unchanged (headers checked, nothing decoded, so EXIF "
        "orientation is not applied)",
    )
    r.add_argument(
        "--resize",
        type=at_least(0),
        default=0,
        metavar="N",
        help="resize so that the shorter side is N pixels; 0 keeps the size",
    )
    r.add_argument("--center-crop", action="store_true", help="crop the centre square first")
    r.add_argument(
        "--quality",
        type=int,
        default=95,
        metavar="Q",
        help="JPEG quality 1-100, or PNG compression level 0-9 with --encoding .png",
    )
    r.add_argument(
        "--restart-interval",
        type=restart_interval(0),
        default=None,
        metavar="N",
        help="restart markers in every JPEG written: one every N MCUs (16x16 pixels in 4:2:0), "
        "or 'row'; 0: none. With --pass-through, JPEGs are transcoded losslessly to get them "
        f"(default: {DEFAULT_RESTART} when re-encoding, none with --pass-through)",
    )
    cpus = os.cpu_count() or 1
    r.add_argument(
        "--num-thread",
        type=at_least(1),
        default=cpus,
        metavar="N",
        help="workers that read, decode, resize and encode (see --pool; with --engine and no "
        "--address, the local cluster's worker processes); the output is the same for any "
        f"number (default: the number of CPUs, {cpus} here)",
    )
    r.add_argument(
        "--pool",
        choices=["process", "thread"],
        default=None,
        help="worker kind (default: threads for JPEG output and --pass-through, where the "
        "work runs in C without the GIL; processes for PNG output)",
    )
    r.add_argument(
        "--color",
        type=int,
        default=1,
        choices=[-1, 0, 1],
        help="1: colour, 0: grayscale, -1: as stored (alpha kept for .png)",
    )
    r.add_argument(
        "--encoding", default=".jpg", choices=[".jpg", ".png"], help="format of the stored images"
    )
    r.add_argument(
        "--pack-label",
        action="store_true",
        help="store every label column of the list (multi-label); without it only the first",
    )
    x = parser.add_argument_group("recio additions")
    x.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="mxnet",
        help="mxnet: records in .lst order, keyed by the .lst index. insightface: the "
        "face-recognition layout of InsightFace's sets (read by arcface_torch's "
        "MXFaceDataset): the images grouped by their first label, classes sorted by label "
        "value and each class in .lst order, keys 1..N in that order (not the .lst index; "
        "a skipped file moves the later keys down), then a header record (key 0) and one "
        "record per identity (keys N+1..N+K) with its images' key range. With --list, each "
        ".lst is written grouped the same way and numbered 1..N. One .rec: not with --shards",
    )
    x.add_argument(
        "--shards",
        type=at_least(1),
        default=1,
        metavar="N",
        help="write N .rec/.idx pairs per list, NAME-00000-of-0000N.rec ...: shard k holds "
        "the list's entries k, k + N, k + 2N, ... (less the skipped files)",
    )
    x.add_argument(
        "--engine",
        choices=["dask", "ray"],
        default=None,
        help="convert on a Dask cluster (ray: not implemented), one task per shard: each "
        "converts its slice of the list (entries k, k + N, ... of --shards N) and writes "
        "its shard straight to the output URL; the shards are byte-identical to this "
        "machine's run with the same --shards. A rerun reuses the shards that are complete "
        "and verified and redoes the rest. Workers must see ROOT under the same path and "
        "import recio. Needs the cluster extra",
    )
    x.add_argument(
        "--address",
        metavar="URL",
        help="with --engine: the scheduler of a running cluster, e.g. tcp://10.0.0.5:8786; "
        "without it, a local cluster of --num-thread worker processes is started and "
        "stopped",
    )
    x.add_argument(
        "--output",
        metavar="FOLDER",
        help="write the .rec/.idx/.report.json into FOLDER (path or URL), not beside the list",
    )
    x.add_argument(
        "--max-errors",
        type=at_least(0),
        default=None,
        metavar="N",
        help="abort, publishing nothing, once more than N files or list lines were skipped "
        "(default: no limit; a run that packs no image at all is always aborted)",
    )
    x.add_argument("--allow-skips", action="store_true", help="exit 0 even when files were skipped")
    x.add_argument(
        "--no-report",
        dest="report",
        action="store_false",
        help="do not write NAME.report.json beside the .rec (without it, it is written: counts, "
        "options, every skipped file and why)",
    )
    x.add_argument(
        "--storage-options",
        metavar="JSON",
        help='fsspec options as JSON, e.g. \'{"endpoint_url": "http://127.0.0.1:8333"}\'',
    )
    x.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar or progress messages: warnings and errors only",
    )
    x.add_argument(
        "--verbose",
        action="store_true",
        help="with --list: a line per class (label, folder, images) before the summary line",
    )


def _one_line(exc: BaseException) -> str:
    """An exception as one line: its message, or its type where it has none."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _absolute(url: str) -> str:
    return os.path.abspath(storage.local_path(url)) if storage.is_local(url) else url


def _write_report(report: PackReport, stem: str, storage_options: dict | None) -> bool:
    """Write STEM.report.json; False (and an error said) if it could not be written."""
    try:
        out = storage.AtomicOutput(stem + ".report.json", storage_options)
        out.write(report.to_json().encode())
        out.commit()
    except OSError as exc:
        log.error("could not write %s.report.json: %s", stem, exc)
        return False
    return True


def _pack_one(
    lst: str,
    root: str,
    stem: str,
    opts: EncodeOptions,
    args: argparse.Namespace,
    options: dict | None,
    client=None,
) -> int:
    """Pack one .lst into STEM.rec/.idx and write its report; the exit code for it.

    With a Dask ``client`` (``--engine``), on its cluster (:mod:`~recio.im2rec.engine`).
    """
    report = PackReport(list=lst, outputs=[])
    code = EXIT_OK
    try:
        if client is not None:
            from .engine import pack_on_cluster

            pack_on_cluster(
                lst,
                root,
                opts,
                client=client,
                out_stem=stem,
                shards=args.shards,
                max_errors=args.max_errors,
                storage_options=options,
                progress=not args.quiet,
                report=report,
            )
        else:
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
                layout=args.layout,
            )
    except TooManyErrors as exc:
        log.error("%s: nothing published (existing outputs left as they were): %s", lst, exc)
        code = EXIT_FAILED
    except KeyboardInterrupt:
        log.error("interrupted; partial output of %s removed", lst)
        code = EXIT_INTERRUPTED
    except (OSError, ValueError) as exc:  # a bad list, or reading/writing/publishing failed
        text = _one_line(exc)
        log.error("%s", text if lst in text else f"{lst}: {text}")
        code = EXIT_FAILED
    finally:
        if report.status == "running":  # it ended before pack_list could say how
            report.status = "failed"
        if args.report and not _write_report(report, stem, options) and code == EXIT_OK:
            code = EXIT_FAILED
    if code == EXIT_OK and report.skipped and not args.allow_skips:
        code = EXIT_SKIPPED
    summary = report.summary(report_path=stem + ".report.json" if args.report else None)
    if code == EXIT_SKIPPED:  # said even with --quiet: it is why the exit code is not 0
        log.warning("%s\n(exit code %d: files were skipped; --allow-skips exits 0)", summary, code)
    elif report.skipped and code == EXIT_OK:
        log.warning("%s", summary)
    else:  # complete without skips; or the error above said why it stopped
        log.info("%s", summary)
    return code


def run(args: argparse.Namespace) -> int:
    """Run im2rec as parsed by ``add_arguments``; returns the exit code (``EXIT_*``).

    Every error is said in one line (the ``recio.im2rec`` logger) and gives a non-zero
    exit code, even with ``--quiet``.
    """
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.WARNING if args.quiet else logging.INFO,
            format="im2rec: %(message)s",
            stream=sys.stderr,
        )
    try:
        return _run(args)
    except KeyboardInterrupt:
        log.error("interrupted")
        return EXIT_INTERRUPTED
    except (OSError, ValueError, ImportError) as exc:  # bad arguments, input, a missing extra
        log.error("%s", _one_line(exc))
        return EXIT_FAILED


def _run(args: argparse.Namespace) -> int:
    try:
        options = json.loads(args.storage_options) if args.storage_options else None
    except ValueError as exc:
        raise ValueError(f"--storage-options is not JSON: {exc}") from None
    prefix, root = _absolute(args.prefix), os.path.abspath(args.root)
    if args.list:
        _check_folder(prefix, "folder of PREFIX", parent=True)
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
            layout=args.layout,
            verbose=args.verbose,
        )
        return EXIT_OK
    opts = EncodeOptions(
        pass_through=args.pass_through,
        resize=args.resize,
        center_crop=args.center_crop,
        quality=args.quality,
        color=args.color,
        encoding=args.encoding,
        pack_label=args.pack_label,
        restart=_restart(args),
    )
    if args.layout == "insightface" and args.shards > 1:
        raise ValueError("--layout insightface writes one .rec (its index covers every image): "
                         "not with --shards")  # fmt: skip
    if args.engine:
        from .engine import check_engine

        check_engine(args.engine)
        if args.layout == "insightface":
            raise ValueError("--layout insightface writes one .rec (its index covers every "
                             "image): not with --engine")  # fmt: skip
    elif args.address:
        raise ValueError("--address names the cluster for --engine: give --engine dask")
    _check_folder(root, "image folder ROOT")
    lists = find_lists(prefix, options)
    if not lists:
        raise FileNotFoundError(f"no .lst file with prefix {prefix} (make one with --list)")
    if args.output:
        _check_folder(_absolute(args.output), "--output folder")
    code = EXIT_OK
    with sigterm_as_interrupt(), _cluster(args) as client:
        for lst in lists:
            stem = lst[: -len(".lst")]
            if args.output:
                stem = _absolute(args.output).rstrip("/") + "/" + stem.rsplit("/", 1)[-1]
            log.info("creating %s from %s", output_names(stem, args.shards)[0][0], lst)
            result = _pack_one(lst, root, stem, opts, args, options, client)
            if result not in (EXIT_OK, EXIT_SKIPPED):
                return result
            code = max(code, result)
    return code


@contextlib.contextmanager
def _cluster(args: argparse.Namespace):
    """The Dask client of ``--engine`` (one for every list), or None."""
    if not args.engine:
        yield None
        return
    from .engine import connect

    where = args.address or f"a local cluster of {args.num_thread} worker processes"
    log.info("converting on %s (--engine %s)", where, args.engine)
    with connect(args.engine, args.address, args.num_thread) as client:
        yield client


def _check_folder(url: str, what: str, parent: bool = False) -> None:
    """A local folder (or, with ``parent``, the folder a file goes in) must exist.

    Outputs go only into folders that exist, as with MXNet (a mistyped path then fails
    at once instead of growing a new tree); remote stores have no folders to check.
    """
    if not storage.is_local(url):
        return
    folder = os.path.dirname(storage.local_path(url)) if parent else storage.local_path(url)
    if not os.path.isdir(folder):
        state = "is not a folder" if os.path.exists(folder) else "does not exist"
        raise FileNotFoundError(f"{what} {folder} {state}")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m recio.im2rec PREFIX ROOT ...``, the same as ``recio im2rec``."""
    parser = argparse.ArgumentParser(prog="im2rec")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
