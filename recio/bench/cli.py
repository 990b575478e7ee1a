"""``recio bench``: the command line."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import tempfile
import time

from .._args import add_storage_option, at_least, positive_float
from .._install import install_hint
from .bottleneck import measure_step, print_bottleneck
from .optimized import DEFAULT_LIMIT_MB
from .report import print_report, save_plot
from .run import check_settings, run_bench
from .sample import build_sample_rec

EPILOG = """\
columns: images/s is the median of the repeats, min and max beside it; MB/s counts the
encoded (compressed) bytes a stage consumes, not decoded pixels; "vs Pillow" divides a
stage's images/s by the Pillow + thread pool baseline's (decode, the same random crop,
resize and flip, from memory, on the same threads), for the stages that do that same work
only: read, full-size decode and the training step have none (-). The report explains
each again.

examples:
  recio bench                                  # the built-in sample, removed afterwards
  recio bench --keep /tmp/sample               # ... kept in /tmp/sample
  recio bench data/train.rec --threads 8 --batch-size 128 --shape 3,224,224
  recio bench data/train.rec --dtype float32 --json bench.json --plot bench.png
  recio bench data/train.rec --step-ms 120       # which stage limits a 120 ms training step
  recio bench s3://bucket/train.rec --storage-options '{"endpoint_url": "http://127.0.0.1:8333"}'"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``recio bench``'s arguments (and its examples, as the epilog) to ``parser``."""
    if parser.epilog is None:
        parser.epilog = EPILOG
    parser.add_argument(
        "rec",
        nargs="?",
        help=".rec path or URL to measure, or shards (a pattern, a quoted glob, or STEM for "
        "STEM-*-of-*.rec; MXNet's and DALI's baselines then skipped) (default: the built-in "
        "sample, built for the run)",
    )
    parser.add_argument(
        "--num-images",
        type=at_least(1),
        default=400,
        metavar="N",
        help="images in the built-in sample",
    )
    parser.add_argument(
        "--threads",
        type=at_least(1),
        metavar="N",
        help=f"decode threads of every stage (default: the usable cores, here {_usable_cores()})",
    )
    parser.add_argument(
        "--batch-size", type=at_least(1), default=64, metavar="B", help="images per batch"
    )
    parser.add_argument(
        "--shape",
        type=_shape,
        default="3,224,224",
        metavar="C,H,W",
        help="shape of each output image, channels first",
    )
    parser.add_argument(
        "--dtype",
        default="uint8",
        choices=["uint8", "float32", "float16"],
        help="pixel type of the decoded batches",
    )
    parser.add_argument(
        "--seconds",
        type=positive_float,
        default=2.0,
        metavar="S",
        help="measuring time of each repeat of each stage",
    )
    parser.add_argument(
        "--repeats",
        type=at_least(1),
        default=3,
        metavar="R",
        help="interleaved rounds, each measuring every stage once; the figures are their "
        "median, min and max, and a verdict needs an effect larger than their spread",
    )
    parser.add_argument(
        "--optimize-limit",
        type=_non_negative,
        default=DEFAULT_LIMIT_MB,
        metavar="MB",
        help="the largest local .rec whose JPEGs lack restart markers that the bench optimizes "
        "a copy of (recio optimize, in a temporary folder) to measure the iterator on it too; "
        "0: never (the built-in sample is optimized whatever its size, unless 0)",
    )
    add_storage_option(parser)
    parser.add_argument(
        "--keep",
        metavar="DIR",
        help="build the built-in sample in DIR (new or empty) and keep it there; by default "
        "it is built in a temporary directory that is removed at the end",
    )
    parser.add_argument(
        "--mxnet-python",
        metavar="PYTHON",
        help="a Python that has mxnet 1.9.1, to measure MXNet's ImageRecordIter as a baseline "
        "(default: this Python, if it can import mxnet)",
    )
    parser.add_argument(
        "--json",
        metavar="FILE",
        help="write every figure, the configuration and the machine's details as JSON",
    )
    parser.add_argument(
        "--step-ms",
        type=positive_float,
        metavar="MS",
        help="a training step's time: run the iterator under it and name the stage that "
        "limits (storage, decode+augment, recio's hand-over, the step) and the setting that "
        "would move it, instead of the stage-by-stage table (--threads default: auto)",
    )
    parser.add_argument(
        "--trace", metavar="FILE", help="write a Chrome/Perfetto trace of the iterator's threads"
    )
    parser.add_argument(
        "--plot", metavar="FILE.png", help="write a bar chart (needs matplotlib: the plot extra)"
    )


def _run_step(args: argparse.Namespace, rec: str, options, shape) -> int:
    """``--step-ms``: the bottleneck of a training job with that step (recio.bench.bottleneck)."""
    figures = measure_step(
        rec, args.step_ms, threads=args.threads, batch_size=args.batch_size, shape=shape,
        dtype=args.dtype, seconds=max(args.seconds, 2.0), storage_options=options,
    )  # fmt: skip
    print()
    print_bottleneck(figures)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
        print(f"wrote {args.json}: the figures, as JSON")
    return 0


def _optimize_limit(args: argparse.Namespace) -> float | None:
    """The built-in sample is always optimized for the row; a given file up to the limit."""
    limit = getattr(args, "optimize_limit", DEFAULT_LIMIT_MB)
    return None if args.rec is None and limit else limit


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number of at least 0, not {text!r}")
    return value


def _usable_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _shape(text: str) -> tuple[int, int, int]:
    try:
        shape = tuple(int(v) for v in text.split(","))
    except ValueError:
        shape = ()
    if len(shape) != 3 or min(shape) < 1:
        raise argparse.ArgumentTypeError(f"expected C,H,W (three positive integers), not {text!r}")
    if shape[0] != 3:
        # channels last (H,W,3) is the likely slip: the same image, channels first
        height, width = shape[:2] if shape[2] == 3 else shape[1:]
        raise argparse.ArgumentTypeError(
            f"{text}: the shape is C,H,W and the batches are RGB, so C must be 3 "
            f"(give 3,{height},{width})"
        )
    return shape  # type: ignore[return-value]


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before anything is measured, what would fail only at the end of the run."""
    for option in ("json", "trace", "plot"):
        path = getattr(args, option, None)
        if path is None:
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise ValueError(
                f"--{option} {path}: no directory {folder} to write it in; create it first"
            )
        if os.path.isdir(path):
            raise ValueError(f"--{option} {path} is a directory; give a file name in it")
    python = getattr(args, "mxnet_python", None)
    if python is not None and shutil.which(python) is None:
        raise ValueError(
            f"--mxnet-python {python}: no such executable; give the path of a Python that "
            "has mxnet 1.9.1"
        )


def run(args: argparse.Namespace) -> int:
    """Run the benchmark ``args`` describe (on a built-in sample without a .rec); exit status.

    Every argument is checked before the sample is built or a stage runs.
    """
    shape = _shape(args.shape) if isinstance(args.shape, str) else tuple(args.shape)
    check_settings(shape, args.batch_size, args.dtype, args.threads)
    _check_outputs(args)
    options = args.storage_options
    if isinstance(options, str):
        options = json.loads(options)
    if args.plot:  # fail now, not after the whole run
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ImportError(f"--plot needs matplotlib: {install_hint('plot')}") from None
    keep = getattr(args, "keep", None)
    if keep is not None and args.rec is not None:
        raise ValueError("--keep is for the built-in sample; drop it when a .rec is given")
    if keep is not None:
        keep = os.path.abspath(keep)
        if os.path.isdir(keep) and os.listdir(keep):
            raise ValueError(
                f"--keep {keep}: the directory is not empty; give a new or empty one (a sample "
                f"kept earlier is measured again with `recio bench {keep}/sample.rec`)"
            )
        os.makedirs(keep, exist_ok=True)
        where = contextlib.nullcontext(keep)
    else:
        where = tempfile.TemporaryDirectory(prefix="recio-bench-")
    with where as workdir:
        rec = args.rec
        if rec is None:
            start = time.perf_counter()
            rec = build_sample_rec(workdir, args.num_images)
            kept = (
                f"kept: measure it again with `recio bench {rec}`"
                if keep is not None
                else "a temporary directory, removed when the benchmark ends; --keep DIR keeps it"
            )
            print(
                f"built the sample dataset: {args.num_images} JPEGs (coloured shapes on noise, "
                f"in {os.path.join(workdir, 'images')}) packed into {rec} in "
                f"{time.perf_counter() - start:.1f}s ({kept})"
            )
        if getattr(args, "step_ms", None):
            return _run_step(args, rec, options, shape)
        threads = args.threads or _usable_cores()
        result = run_bench(
            rec,
            storage_options=options,
            threads=threads,
            batch_size=args.batch_size,
            shape=shape,
            seconds=args.seconds,
            repeats=args.repeats,
            dtype=args.dtype,
            mxnet_python=args.mxnet_python,
            trace_path=args.trace,
            optimize_limit_mb=_optimize_limit(args),
        )
    print()
    print_report(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
        print(f"wrote {args.json}: every figure, the configuration and the machine, as JSON")
    if args.trace:
        print(f"wrote {args.trace}: a Chrome/Perfetto trace of the iterator's threads")
    if args.plot:
        save_plot(result, args.plot)
        print(f"wrote {args.plot}: the bar chart")
    return 0
