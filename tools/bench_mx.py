#!/usr/bin/env python3
"""recio.mx against MXNet 1.9.1 on InsightFace's verification-set path, per image.

    python tools/bench_mx.py recio
    MXNET_VENV/bin/python tools/bench_mx.py mxnet

Each image is what ``load_bin`` does to an LFW picture: ``mx.image.imdecode`` of a 250x250
JPEG, ``resize_short`` to 112 (bicubic), ``nd.transpose`` to CHW, ``mx.ndarray.flip``,
``asnumpy``. Prints the median of five runs of 100 images, in ms per image; run both on one
machine, side by side, and compare the ratio.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

IMAGE = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "mx_golden", "lfw420.jpg")


def main(which: str) -> None:
    if which == "mxnet":
        import mxnet as mx
        from mxnet import ndarray as nd
    else:
        import recio.mx as mx
        from recio.mx import ndarray as nd
    with open(IMAGE, "rb") as f:
        data = f.read()

    def one():
        img = mx.image.resize_short(mx.image.imdecode(data), 112)
        return mx.ndarray.flip(data=nd.transpose(img, axes=(2, 0, 1)), axis=2).asnumpy()

    one()
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(100):
            one()
        runs.append((time.perf_counter() - start) * 10)  # ms per image
    print(f"{which}: {statistics.median(runs):.2f} ms per image (median of 5 x 100)")


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("recio", "mxnet"):
        sys.exit(__doc__)
    main(sys.argv[1])
