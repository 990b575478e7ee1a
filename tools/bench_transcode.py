#!/usr/bin/env python3
"""im2rec's per-image work, one thread: recio's JPEG → JPEG in C against libjpeg-turbo's floor.

    python tools/bench_transcode.py CORPUS [--images 300] [--resize 256] [--rounds 7]

"floor" is PyTurboJPEG decoding each JPEG to YUV planes (no colour conversion, no
upsampling, like recio's plane decode) plus encoding the resized result at the same
quality: the two libjpeg-turbo steps any im2rec has to run, with no resize in between.
Rounds alternate; the medians of CPU ms per image and their ratio are printed.
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from recio.decode import DecodePool  # noqa: E402
from recio.im2rec.transcode import jpeg_header, output_size  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", help="folder of class folders of images")
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--resize", type=int, default=256)
    parser.add_argument("--quality", type=int, default=90)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    from turbojpeg import TJPF_RGB, TJSAMP_420, TurboJPEG

    tj = TurboJPEG()
    files = sorted(glob.glob(os.path.join(args.corpus, "*", "*.jp*g")))[: args.images]
    datas = [Path(f).read_bytes() for f in files]
    datas = [d for d in datas if len(jpeg_header(d).sampling) == 3]  # YCbCr (tj's planes)
    heads = [jpeg_header(d) for d in datas]
    sizes = np.array([output_size(h.width, h.height, args.resize) for h in heads], np.int32)
    pool = DecodePool(1, backend="native")
    _, small = pool.transcode_jpeg(datas, sizes, quality=args.quality)
    resized = [tj.decode(j, pixel_format=TJPF_RGB) for j in small]  # what the floor encodes

    def recio() -> None:
        pool.transcode_jpeg(datas, sizes, quality=args.quality)

    def floor() -> None:
        for data, pixels in zip(datas, resized, strict=True):
            tj.decode_to_yuv_planes(data)
            tj.encode(pixels, quality=args.quality, jpeg_subsample=TJSAMP_420)

    runs: dict[str, list[float]] = {"recio transcode": [], "libjpeg-turbo floor": []}
    for _ in range(args.rounds):
        for name, fn in (("recio transcode", recio), ("libjpeg-turbo floor", floor)):
            start = time.process_time()
            fn()
            runs[name].append((time.process_time() - start) / len(datas) * 1e3)
    medians = {name: statistics.median(v) for name, v in runs.items()}
    for name, value in medians.items():
        print(f"{name:22s} {value:.3f} ms/image (median of {args.rounds})")
    ratio = medians["recio transcode"] / medians["libjpeg-turbo floor"]
    print(f"recio / floor: {ratio:.2f}  ({len(datas)} JPEGs, resize {args.resize})")


if __name__ == "__main__":
    main()
