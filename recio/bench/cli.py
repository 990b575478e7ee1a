"""``recio bench``: the command line."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from .report import print_report, save_plot
from .run import run_bench
from .sample import build_sample_rec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``recio bench``'s arguments to ``parser``."""
    parser.add_argument("rec", nargs="?", help=".rec path or URL (default: built-in sample)")
    parser.add_argument("--num-images", type=int, default=400, help="size of the built-in sample")
    parser.add_argument("--threads", type=int, help="decode threads (default: usable cores)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--shape", default="3,224,224", help="C,H,W of the output")
    parser.add_argument("--dtype", default="uint8", choices=["uint8", "float32", "float16"])
    parser.add_argument("--seconds", type=float, default=2.0, help="per repeat of each stage")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--storage-options", metavar="JSON", help="fsspec options as JSON")
    parser.add_argument("--mxnet-python", help="a Python with mxnet 1.9.1, for its baseline")
    parser.add_argument("--json", metavar="FILE", help="write all figures and machine info")
    parser.add_argument("--trace", metavar="FILE", help="Chrome/Perfetto trace of the iterator")
    parser.add_argument("--plot", metavar="FILE.png", help="bar chart (needs matplotlib)")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark ``args`` describe (on a built-in sample without a .rec); exit status."""
    shape = tuple(int(v) for v in args.shape.split(","))
    if len(shape) != 3:
        raise SystemExit(f"--shape must be C,H,W, not {args.shape!r}")
    options = json.loads(args.storage_options) if args.storage_options else None
    with tempfile.TemporaryDirectory(prefix="recio-bench-") as workdir:
        rec = args.rec
        if rec is None:
            start = time.perf_counter()
            rec = build_sample_rec(workdir, args.num_images)
            print(
                f"built the sample dataset: {args.num_images} JPEGs packed into "
                f"{os.path.basename(rec)} in {time.perf_counter() - start:.1f}s"
            )
        result = run_bench(
            rec,
            storage_options=options,
            threads=args.threads,
            batch_size=args.batch_size,
            shape=shape,
            seconds=args.seconds,
            repeats=args.repeats,
            dtype=args.dtype,
            mxnet_python=args.mxnet_python,
            trace_path=args.trace,
        )
    print_report(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.plot:
        save_plot(result, args.plot)
    return 0
