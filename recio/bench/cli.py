"""``recio bench``: the command line."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time

from .._install import install_hint
from ..cli import add_storage_option, at_least, positive_float
from .report import print_report, save_plot
from .run import run_bench
from .sample import build_sample_rec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``recio bench``'s arguments to ``parser``."""
    parser.add_argument("rec", nargs="?", help=".rec path or URL (default: built-in sample)")
    parser.add_argument(
        "--num-images", type=at_least(1), default=400, help="size of the built-in sample"
    )
    parser.add_argument(
        "--threads", type=at_least(1), help="decode threads (default: usable cores)"
    )
    parser.add_argument("--batch-size", type=at_least(1), default=64)
    parser.add_argument("--shape", type=_shape, default="3,224,224", help="C,H,W of the output")
    parser.add_argument("--dtype", default="uint8", choices=["uint8", "float32", "float16"])
    parser.add_argument(
        "--seconds", type=positive_float, default=2.0, help="per repeat of each stage"
    )
    parser.add_argument("--repeats", type=at_least(1), default=3)
    add_storage_option(parser)
    parser.add_argument(
        "--keep",
        metavar="DIR",
        help="build the built-in sample in DIR (new or empty) and keep it there; by default "
        "it is built in a temporary directory that is removed at the end",
    )
    parser.add_argument("--mxnet-python", help="a Python with mxnet 1.9.1, for its baseline")
    parser.add_argument("--json", metavar="FILE", help="write all figures and machine info")
    parser.add_argument("--trace", metavar="FILE", help="Chrome/Perfetto trace of the iterator")
    parser.add_argument("--plot", metavar="FILE.png", help="bar chart (needs matplotlib)")


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
    return shape  # type: ignore[return-value]


def run(args: argparse.Namespace) -> int:
    """Run the benchmark ``args`` describe (on a built-in sample without a .rec); exit status."""
    shape = _shape(args.shape) if isinstance(args.shape, str) else tuple(args.shape)
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
