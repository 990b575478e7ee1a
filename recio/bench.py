"""Throughput of every pipeline stage, measured side by side on the same data.

With no argument, builds the built-in sample dataset (coloured shapes, JPEG),
packs it as .rec/.idx, and measures it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable

from .format import IRHeader, pack
from .recordio import MXIndexedRecordIO, RecordFile
from .sample import make_sample_folder


def build_sample_rec(workdir: str, num_images: int = 400, seed: int = 0) -> str:
    """Make the sample image folder and pack it (original JPEG bytes) into workdir/sample.rec."""
    root = make_sample_folder(os.path.join(workdir, "images"), num_images, seed=seed)
    rec = os.path.join(workdir, "sample.rec")
    classes = sorted(os.listdir(root))
    with MXIndexedRecordIO(os.path.join(workdir, "sample.idx"), rec, "w") as writer:
        key = 0
        for label, name in enumerate(classes):
            for fname in sorted(os.listdir(os.path.join(root, name))):
                with open(os.path.join(root, name, fname), "rb") as f:
                    writer.write_idx(key, pack(IRHeader(0, float(label), key, 0), f.read()))
                key += 1
    return rec


def measure(work: Callable[[], int], repeats: int = 5, warmup: int = 1) -> dict:
    """Run ``work`` (returns items done) after a warm-up; median and spread of items/s."""
    for _ in range(warmup):
        work()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        items = work()
        rates.append(items / (time.perf_counter() - start))
    return {
        "median": statistics.median(rates),
        "min": min(rates),
        "max": max(rates),
        "repeats": repeats,
    }


def bench_raw_read(rec: str, storage_options: dict | None = None) -> dict:
    with RecordFile(rec, storage_options=storage_options) as rf:
        total_bytes = int(rf.lengths.sum())

        def read_all() -> int:
            for i in range(len(rf)):
                rf.read(i)
            return len(rf)

        result = measure(read_all)
        result["MB_per_s"] = result["median"] * total_bytes / len(rf) / 1e6
        result["records"] = len(rf)
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rec", nargs="?", help=".rec path or URL (default: built-in sample)")
    parser.add_argument("--num-images", type=int, default=400, help="size of the built-in sample")


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="recio-bench-") as workdir:
        rec = args.rec
        if rec is None:
            start = time.perf_counter()
            rec = build_sample_rec(workdir, args.num_images)
            print(
                f"built sample dataset: {args.num_images} JPEGs packed into "
                f"{os.path.basename(rec)} in {time.perf_counter() - start:.1f}s"
            )
        raw = bench_raw_read(rec)
        print(
            f"raw record read: {raw['median']:,.0f} records/s "
            f"({raw['MB_per_s']:,.0f} MB/s; {raw['records']} records; "
            f"min {raw['min']:,.0f}, max {raw['max']:,.0f})"
        )
    return 0
