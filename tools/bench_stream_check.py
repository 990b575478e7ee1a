#!/usr/bin/env python3
"""What the whole-stream check (NOTE [whole-stream check] in native/streamcheck.h) costs the
optimized-input decode, side by side in one run.

    python tools/bench_stream_check.py [--images 200] [--rounds 5]

JPEGs of photo-like size (500x375, 4:2:0, quality 90; recio bench's sample images) are
optimized with a restart marker every MCU, then decoded on one native thread with
RandomResizedCrop(224) + flip drawn as they decode, as the optimized iterator does:

* first epoch: each JPEG new to the pool, so read whole (no cut, every row);
* later epochs: each known whole, so cut; the check's work there is a CRC32C of the bytes
  and a set lookup, timed alone over the same bytes (recio._crc32c, the same SSE4.2 code).

Prints medians of the rounds as JSON: CPU per image of each, and the steady check's share.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from recio._crc32c import crc32c  # noqa: E402
from recio.augment import CropSpec, KeyedDraw  # noqa: E402
from recio.bench.sample import sample_image  # noqa: E402
from recio.decode import DecodePool  # noqa: E402
from recio.im2rec import JpegEncoder  # noqa: E402


def cpu_per_image(fn, n: int) -> float:
    start = time.process_time()  # the pool's thread and the waiting caller, together
    fn()
    return (time.process_time() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    sources = []
    for i in range(args.images):
        out = io.BytesIO()
        sample_image(rng, i % 10, (500, 375)).save(out, "JPEG", quality=90)
        sources.append(out.getvalue())
    with DecodePool(1, backend="native") as pool:
        status, marked = JpegEncoder(pool).optimize_jpeg(sources, restart=1)
        assert not np.any(status)
    spec = CropSpec(224, 224, random_resized_crop=True, rand_mirror=True)
    records = np.arange(len(marked), dtype=np.int64)
    out = np.zeros((len(marked), 224, 224, 3), np.uint8)
    first, steady, check = [], [], []
    for r in range(args.rounds):
        # a new pool: every JPEG new to it
        with DecodePool(1, backend="native") as pool:

            def epoch(e: int, pool=pool, r=r) -> None:
                pool.decode_batch(marked, out, draw=KeyedDraw(spec, r, e), records=records)

            first.append(cpu_per_image(lambda: epoch(0), len(marked)))
            steady.append(
                statistics.median(
                    cpu_per_image(lambda e=e: epoch(e), len(marked)) for e in range(1, 4)
                )
            )
        check.append(cpu_per_image(lambda: [crc32c(m) for m in marked], len(marked)))
    med = {
        k: statistics.median(v) * 1e6
        for k, v in (("first_epoch_us", first), ("steady_us", steady), ("crc32c_us", check))
    }
    med["check_share_of_steady"] = med["crc32c_us"] / med["steady_us"]
    med["first_epoch_over_steady"] = med["first_epoch_us"] / med["steady_us"]
    med["mean_bytes"] = float(np.mean([len(m) for m in marked]))
    print(json.dumps(med, indent=1))


if __name__ == "__main__":
    main()
