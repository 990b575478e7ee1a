"""Rewrite a .rec (or a set of shards) with its JPEGs losslessly restart-marked.

Every JPEG is transcoded into a baseline JPEG with restart markers: the same DCT
coefficients, so each image decodes to exactly the pixels it did, and a decoder can start
a crop's decode at the segment that covers it.
Progressive JPEGs become baseline. Keys, IRHeaders, labels, the records' order, non-JPEG
records (PNGs, InsightFace's header and identity records) and damaged JPEGs are kept as
they are; the .idx is written, and the checksum sidecar where the source has one.

SRC is a .rec URL or a shard pattern; DST the output .rec, or a folder for shards (they
keep their names). Outputs publish only when whole: a failed or interrupted run leaves
DST as it was.
"""

from __future__ import annotations

import argparse
import logging
import sys

from .. import storage
from .._args import add_storage_option, at_least, restart_interval, sigterm_as_interrupt

log = logging.getLogger("recio.optimize")

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 2, 130

EPILOG = f"""\
examples:
  recio optimize data/train.rec data/train-opt.rec
  recio optimize 'data/train-*-of-00008.rec' data/optimized/
  recio optimize --restart-interval row s3://bucket/train.rec s3://bucket/opt/train.rec

exit codes:
  {EXIT_OK:<4} written (JPEGs libjpeg warns about are copied as they were, and listed)
  {EXIT_FAILED:<4} failed: a bad argument, an unreadable or damaged source, an I/O error;
       nothing published, existing outputs left as they were
  {EXIT_INTERRUPTED:<4} interrupted (Ctrl-C, SIGTERM); nothing published"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``recio optimize``'s arguments."""
    from ..im2rec.optimize import DEFAULT_RESTART

    parser.epilog = EPILOG
    parser.add_argument("src", metavar="SRC", help="the .rec (or a shard pattern) to rewrite")
    parser.add_argument("dst", metavar="DST", help="the output .rec, or a folder (ending in /)")
    parser.add_argument(
        "--restart-interval",
        type=restart_interval(1),
        default=DEFAULT_RESTART,
        metavar="N",
        help="a restart marker every N MCUs (an MCU is 16x16 pixels in 4:2:0), or 'row'",
    )
    parser.add_argument("--num-thread", type=at_least(1), default=2, help="threads transcoding")
    parser.add_argument("--report", metavar="PATH", help="also write the report as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    add_storage_option(parser)


def run(args: argparse.Namespace) -> int:
    """Run ``recio optimize`` as parsed by ``add_arguments``; the exit code."""
    from ..im2rec.optimize import OptimizeReport, optimize

    report = OptimizeReport([], [])
    code = EXIT_OK
    try:
        with sigterm_as_interrupt():
            optimize(
                args.src, args.dst, restart=args.restart_interval, num_thread=args.num_thread,
                storage_options=args.storage_options, progress=not args.quiet, report=report,
            )  # fmt: skip
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    finally:
        if args.report and report.status != "running":
            _write_report(args.report, report.to_json(), args.storage_options)
    if code == EXIT_INTERRUPTED:
        print(f"recio optimize: interrupted, nothing published ({args.dst})", file=sys.stderr)
    elif not args.quiet:
        print(report.summary(), file=sys.stderr)
    return code


def _write_report(url: str, text: str, storage_options: dict | None) -> None:
    out = storage.AtomicOutput(url, storage_options)
    try:
        out.write(text.encode())
        out.commit()
    except BaseException:
        out.abort()
        raise
