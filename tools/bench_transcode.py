#!/usr/bin/env python3
"""im2rec's per-image work, one thread: recio's JPEG → JPEG in C against libjpeg-turbo's floor.

    python tools/bench_transcode.py CORPUS [--images 300] [--resize 256] [--rounds 7]

"floor" is PyTurboJPEG decoding each JPEG to YUV planes (no colour conversion, no
upsampling, like recio's plane decode) plus encoding the resized result at the same
quality: the two libjpeg-turbo steps any im2rec has to run, with no resize in between.
"recio via RGB" is the transcode done in RGB with recio's own native steps, as CMYK JPEGs
are: decode (DCT scaling, upsampling, colour conversion) and resize to the output size in
RGB, then encode from RGB (colour conversion and chroma downsampling again); the plane
path skips what it adds. Rounds alternate; the medians of CPU ms per image and their
ratios are printed.

First, the quality of both recio paths: the mean PSNR (dB) of each one's output, decoded,
against Pillow's LANCZOS resize of the full decode of the source.
"""

from __future__ import annotations

import argparse
import glob
import io
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from recio.decode import DecodePool  # noqa: E402
from recio.im2rec.encoder import JpegEncoder  # noqa: E402
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
    encoder = JpegEncoder(pool)
    _, small = encoder.transcode_jpeg(datas, sizes, quality=args.quality)
    resized = [tj.decode(j, pixel_format=TJPF_RGB) for j in small]  # what the floor encodes

    def psnr(a: np.ndarray, b: np.ndarray) -> float:
        mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
        return 99.0 if mse == 0 else float(10 * np.log10(255**2 / mse))

    def rgb_jpeg(data: bytes, w: int, h: int) -> bytes:
        rgb = np.empty((1, h, w, 3), np.uint8)
        pool.decode_batch([data], rgb)
        return encoder.resize_encode(rgb[0], (w, h), quality=args.quality)

    scores: dict[str, list[float]] = {"planes": [], "via RGB": []}
    for data, jpeg, (w, h) in zip(datas, small, sizes.tolist(), strict=True):
        with Image.open(io.BytesIO(data)) as im:
            ref = np.asarray(im.convert("RGB").resize((w, h), Image.Resampling.LANCZOS))
        for name, out in (("planes", jpeg), ("via RGB", rgb_jpeg(data, w, h))):
            with Image.open(io.BytesIO(out)) as im:
                scores[name].append(psnr(np.asarray(im.convert("RGB")), ref))
    for name, values in scores.items():
        print(f"PSNR vs Pillow LANCZOS, {name:8s} {statistics.mean(values):.2f} dB (mean)")

    def recio() -> None:
        encoder.transcode_jpeg(datas, sizes, quality=args.quality)

    def via_rgb() -> None:
        for data, (w, h) in zip(datas, sizes.tolist(), strict=True):
            rgb_jpeg(data, w, h)  # resize_encode at the same size: the encode only

    def floor() -> None:
        for data, pixels in zip(datas, resized, strict=True):
            tj.decode_to_yuv_planes(data)
            tj.encode(pixels, quality=args.quality, jpeg_subsample=TJSAMP_420)

    fns = {"recio transcode": recio, "recio via RGB": via_rgb, "libjpeg-turbo floor": floor}
    runs: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(args.rounds):
        for name, fn in fns.items():
            start = time.process_time()
            fn()
            runs[name].append((time.process_time() - start) / len(datas) * 1e3)
    medians = {name: statistics.median(v) for name, v in runs.items()}
    for name, value in medians.items():
        print(f"{name:22s} {value:.3f} ms/image (median of {args.rounds})")
    ratio = medians["recio transcode"] / medians["libjpeg-turbo floor"]
    rgb = medians["recio via RGB"] / medians["recio transcode"]
    print(f"recio / floor: {ratio:.2f}  via RGB / recio: {rgb:.2f}")
    print(f"({len(datas)} JPEGs, resize {args.resize}, quality {args.quality})")


if __name__ == "__main__":
    main()
