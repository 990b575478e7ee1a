#!/usr/bin/env python3
"""The golden vector of `recio optimize` against MXNet 1.9.1's decoder.

    python tools/make_optimize_golden.py make tests/data/optimize_golden
    MXNET_VENV/bin/python tools/make_optimize_golden.py mxnet tests/data/optimize_golden

``make`` (recio's Python) writes ``src.rec``/``.idx``: small JPEGs of every sampling
(4:4:4, 4:2:2, 4:2:0, greyscale), odd sizes and a progressive one, and ``opt.rec``/``.idx``:
``recio optimize`` of it (a restart marker every MCU). ``mxnet`` (a Python with mxnet 1.9.1,
numpy < 1.24; nothing of recio is imported) decodes every record of both with
``mx.image.imdecode``, the OpenCV decode of MXNet's ``ImageRecordIter``, and writes
``mxnet_pixels.json``: per key the shape and the SHA-256 of the RGB pixels from each file.
tests/im2rec/test_optimize_golden.py checks the two agree and that ``recio optimize`` still
writes ``opt.rec`` from ``src.rec``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys

# (width, height, Pillow subsampling: 0 = 4:4:4, 1 = 4:2:2, 2 = 4:2:0, None = grey,
# "p" = progressive 4:2:0)
SHAPES = [(61, 45, 2), (64, 48, 1), (33, 70, 0), (50, 37, None), (97, 23, 2), (40, 56, "p")]


def make(folder: str) -> None:
    import numpy as np
    from PIL import Image

    from recio.im2rec.optimize import optimize
    from recio.records.recordio import IRHeader, MXIndexedRecordIO, pack

    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(36)
    src = os.path.join(folder, "src.rec")
    with MXIndexedRecordIO(src[:-4] + ".idx", src, "w", checksums=False) as w:
        for key, (width, height, sub) in enumerate(SHAPES):
            grey = sub is None
            # smooth gradients plus noise: photo-like enough for every coefficient to matter
            y, x = np.mgrid[0:height, 0:width]
            base = np.stack([x * 4, y * 5, (x + y) * 3], -1) % 256
            pixels = (base + rng.integers(0, 40, base.shape)).clip(0, 255).astype(np.uint8)
            image = Image.fromarray(pixels[..., 0] if grey else pixels, "L" if grey else "RGB")
            extra = {} if grey else {"subsampling": 2 if sub == "p" else sub}
            out = io.BytesIO()
            image.save(out, "JPEG", quality=90, progressive=sub == "p", **extra)
            w.write_idx(key, pack(IRHeader(0, float(key % 3), key, 0), out.getvalue()))
    optimize(src, os.path.join(folder, "opt.rec"))
    crc = os.path.join(folder, "opt.crc")
    if os.path.exists(crc):
        os.remove(crc)


def mxnet_digests(folder: str) -> None:
    import mxnet as mx

    result = {"mxnet": mx.__version__, "decoder": "mx.image.imdecode (OpenCV), RGB", "records": {}}
    for name in ("src", "opt"):
        rec = mx.recordio.MXIndexedRecordIO(
            os.path.join(folder, f"{name}.idx"), os.path.join(folder, f"{name}.rec"), "r"
        )
        for key in sorted(rec.keys):
            header, jpeg = mx.recordio.unpack(rec.read_idx(key))
            pixels = mx.image.imdecode(jpeg, flag=1, to_rgb=1).asnumpy()
            entry = result["records"].setdefault(str(key), {"shape": list(pixels.shape)})
            entry[name] = hashlib.sha256(pixels.tobytes()).hexdigest()
        rec.close()
    with open(os.path.join(folder, "mxnet_pixels.json"), "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("make", "mxnet"):
        sys.exit(__doc__)
    (make if sys.argv[1] == "make" else mxnet_digests)(sys.argv[2])
