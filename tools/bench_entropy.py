#!/usr/bin/env python3
"""recio's Huffman decoder against libjpeg-turbo's, side by side in one process.

    python tools/bench_entropy.py FILE.rec [--rounds 60] [--images 150]

Two one-thread decode pools, one started with RECIO_STOCK_ENTROPY=1 (libjpeg's entropy
decoder for every scan, NOTE [entropy decode] in native/entropy.h), decode the same images
in turn, round after round, alternating which goes first: RandomResizedCrop(224) + flip
and the centre crop of evaluation (shorter side 256, 224). Prints the CPU time per image of
each (median over the rounds) and the median of the per-round ratios, which a busy machine
moves far less than either time. Run it on a file as it came and on its `recio optimize`d
copy: without restart markers libjpeg takes its fast path, with them its bit-by-bit one.

    valgrind --tool=callgrind python tools/bench_entropy.py FILE.rec --only recio --rounds 2

decodes the images with one of the two only (RandomResizedCrop, no clock), for an instruction
count, which load does not move: the inclusive count of decode_task in callgrind_annotate's
output, divided by rounds x images, is the instructions an image.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from recio.augment import CropSpec, KeyedDraw  # noqa: E402
from recio.bench.stages import Data  # noqa: E402
from recio.decode import DecodePool  # noqa: E402

DRAWS = {
    "RRC-224+flip": CropSpec(224, 224, random_resized_crop=True, rand_mirror=True),
    "centre-crop-224": CropSpec(224, 224, resize=256),
}


def pool(stock: bool) -> DecodePool:
    """A one-thread pool; its worker reads RECIO_STOCK_ENTROPY as it starts."""
    os.environ["RECIO_STOCK_ENTROPY"] = "1" if stock else "0"
    try:
        return DecodePool(1, backend="native")
    finally:
        del os.environ["RECIO_STOCK_ENTROPY"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rec")
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--images", type=int, default=150)
    parser.add_argument("--only", choices=("recio", "libjpeg"), help="one decoder, untimed")
    args = parser.parse_args()
    images = Data(args.rec, None, 128).images[: args.images]
    records = np.arange(len(images), dtype=np.int64)
    out = np.empty((len(images), 224, 224, 3), np.uint8)
    if args.only:
        with pool(args.only == "libjpeg") as only:
            for r in range(args.rounds):
                draw = KeyedDraw(DRAWS["RRC-224+flip"], 0, r)
                only.decode_batch(images, out, draw=draw, records=records)
        print(f"{args.only}: {args.rounds} rounds of {len(images)} images")
        return 0
    pools = {"libjpeg": pool(True), "recio": pool(False)}
    us: dict = {(s, k): [] for s in DRAWS for k in pools}
    ratios: dict = {s: [] for s in DRAWS}
    try:
        for r in range(args.rounds):
            for stage, spec in DRAWS.items():
                draw = KeyedDraw(spec, 0, r)
                took = {}
                for name in ("libjpeg", "recio") if r % 2 else ("recio", "libjpeg"):
                    start = time.process_time()
                    pools[name].decode_batch(images, out, draw=draw, records=records)
                    took[name] = (time.process_time() - start) / len(images) * 1e6
                    us[(stage, name)].append(took[name])
                ratios[stage].append(took["libjpeg"] / took["recio"])
    finally:
        for p in pools.values():
            p.close()
    for stage in DRAWS:
        print(
            f"{stage}: recio {statistics.median(us[(stage, 'recio')]):.0f} us/image, "
            f"libjpeg {statistics.median(us[(stage, 'libjpeg')]):.0f} us/image; "
            f"libjpeg/recio per round: median {statistics.median(ratios[stage]):.3f} "
            f"(min {min(ratios[stage]):.3f}, max {max(ratios[stage]):.3f}, "
            f"{args.rounds} rounds of {len(images)} images)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
