"""What reusing batch arrays saves: the iterator end to end with and without reuse.

    python tools/bench_batch_buffers.py [REC] [--batch-size 64] [--shape 3,224,224]
                                        [--dtype float32] [--rounds 5] [--epochs 2]

Without REC it packs the built-in sample dataset. The two variants take turns, round after
round, so load on a shared machine hits both alike; each round iterates ``--epochs``
epochs. "fresh" replaces ``BatchBuffers.take`` with an allocation per batch (what the
iterator would do without reuse); the time of a bare allocation + first write of one batch
array is printed beside it. Medians of the rounds, and the median of per-round ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from recio.bench.sample import build_sample_rec  # noqa: E402
from recio.pipeline.iterator import BatchBuffers, ImageRecordIter  # noqa: E402


def fresh_take(self: BatchBuffers) -> np.ndarray:
    self.allocated += 1
    return np.empty(self.shape, dtype=self.dtype)


def run_round(rec: str, args, shape) -> tuple[float, int]:
    kwargs = dict(
        batch_size=args.batch_size, shuffle=True, random_resized_crop=True, rand_mirror=True,
        dtype=args.dtype, preprocess_threads=args.threads,
    )  # fmt: skip
    if args.dtype != "uint8":
        kwargs.update(mean_r=123.7, mean_g=116.3, mean_b=103.5, std_r=58.4, std_g=57.1, std_b=57.4)
    images = 0
    with ImageRecordIter(rec, shape, **kwargs) as it:
        start = time.perf_counter()
        for _ in range(args.epochs):
            for batch in it:
                images += len(batch.index) - batch.pad
        return images / (time.perf_counter() - start), it.buffers.allocated


def first_touch_ms(shape, dtype, repeats: int = 10) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        a = np.empty(shape, dtype=dtype)
        a[...] = 1
        times.append(time.perf_counter() - start)
        del a
    return statistics.median(times) * 1e3


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rec", nargs="?")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--shape", default="3,224,224")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--num-images", type=int, default=400)
    args = p.parse_args()
    shape = tuple(int(v) for v in args.shape.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        rec = args.rec or build_sample_rec(tmp, args.num_images)
        rates: dict[str, list[float]] = {"reuse": [], "fresh": []}
        allocated = {}
        real_take = BatchBuffers.take
        for _ in range(args.rounds):
            for name in rates:
                BatchBuffers.take = fresh_take if name == "fresh" else real_take
                rate, allocated[name] = run_round(rec, args, shape)
                rates[name].append(rate)
        BatchBuffers.take = real_take
    batch = (args.batch_size, *shape)
    touch = first_touch_ms(batch, args.dtype)
    ratios = [a / b for a, b in zip(rates["reuse"], rates["fresh"], strict=True)]
    size = np.prod(batch) * np.dtype(args.dtype).itemsize / 1e6
    print(f"batch {batch} {args.dtype} ({size:.0f} MB), {args.epochs} epochs a round")
    for name, r in rates.items():
        print(
            f"{name:>6}: {statistics.median(r):8.1f} images/s (min {min(r):.1f}, max "
            f"{max(r):.1f}), {allocated[name]} batch arrays allocated in the last round"
        )
    print(f"reuse / fresh: {statistics.median(ratios):.3f} (median of {len(ratios)} rounds)")
    print(f"one fresh batch array, allocated and first written: {touch:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
