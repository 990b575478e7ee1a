#!/usr/bin/env python3
"""The golden values of ``recio.mx`` against MXNet 1.9.1's own calls.

    python tools/make_mx_golden.py make tests/data/mx_golden
    MXNET_VENV/bin/python tools/make_mx_golden.py mxnet tests/data/mx_golden

``make`` (recio's Python) writes the inputs: small JPEGs of every sampling (4:2:0, 4:2:2,
4:4:4, greyscale, progressive), a PNG, sized as aligned faces (112x112) and verification
images (250x250, 96x112). ``mxnet`` (a Python with mxnet 1.9.1, numpy < 1.24; nothing of
recio is imported) runs the calls InsightFace's recognition code makes (``mx.image.imdecode``,
``resize_short``, ``imresize``, ``copyMakeBorder``, ``mx.nd.transpose``, ``mx.ndarray.flip``,
``mx.recordio.pack_img`` / ``unpack_img`` as ``RecBuilder`` packs a decoded face)
on them and writes ``mxnet_calls.json``: per call its arguments, the result's shape, dtype and
the SHA-256 of its bytes (and ``face_png_grey.npy``, the one call recio matches within a
level: a PNG's grey). tests/mx/test_golden.py replays every call through ``recio.mx``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

# name, (width, height), Pillow's JPEG subsampling (0 4:4:4, 1 4:2:2, 2 4:2:0), "grey",
# "progressive" or "png"
INPUTS = [
    ("face420.jpg", (112, 112), 2),
    ("lfw420.jpg", (250, 250), 2),
    ("odd422.jpg", (97, 61), 1),
    ("tall444.jpg", (96, 112), 0),
    ("grey.jpg", (80, 64), "grey"),
    ("prog.jpg", (120, 90), "progressive"),
    ("face.png", (112, 112), "png"),
]


def make(folder: str) -> None:
    import io

    import numpy as np
    from PIL import Image

    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(45)
    for name, (width, height), kind in INPUTS:
        # smooth gradients plus noise: photo-like enough for every filter tap to matter
        y, x = np.mgrid[0:height, 0:width]
        base = np.stack([x * 3 + y, y * 4, (x * y) // 7], -1) % 256
        pixels = (base + rng.integers(0, 48, base.shape)).clip(0, 255).astype(np.uint8)
        grey = kind == "grey"
        image = Image.fromarray(pixels[..., 0] if grey else pixels, "L" if grey else "RGB")
        out = io.BytesIO()
        if kind == "png":
            image.save(out, "PNG")
        elif grey:
            image.save(out, "JPEG", quality=90)
        else:
            sub = 2 if kind == "progressive" else kind
            image.save(out, "JPEG", quality=90, subsampling=sub, progressive=kind == "progressive")
        with open(os.path.join(folder, name), "wb") as f:
            f.write(out.getvalue())


def calls() -> list[tuple[str, str, dict]]:
    """(call, input file, keyword arguments): what InsightFace's code and its tools call."""
    out = []
    for name, _, _ in INPUTS:
        out.append(("imdecode", name, {}))
        out.append(("imdecode", name, {"flag": 0}))
        out.append(("imdecode", name, {"to_rgb": 0}))
        out.append(("resize_short", name, {"size": 112}))  # load_bin: 250x250 -> 112
        out.append(("resize_short", name, {"size": 150, "interp": 1}))
        out.append(("transpose_flip", name, {}))  # load_bin: HWC -> CHW, then mirrored
    for interp in range(5):
        out.append(("imresize", "lfw420.jpg", {"w": 112, "h": 112, "interp": interp}))
        out.append(("imresize", "face420.jpg", {"w": 160, "h": 130, "interp": interp}))
    out.append(("imresize", "odd422.jpg", {"w": 50, "h": 90}))
    out.append(("imresize", "grey.jpg", {"w": 30, "h": 33, "flag": 0}))
    for border, value in ((0, 0), (0, 127), (1, 0), (2, 0), (3, 0), (4, 0)):
        args = {"top": 3, "bot": 5, "left": 2, "right": 7, "type": border, "value": value}
        out.append(("copyMakeBorder", "odd422.jpg", args))
    # RecBuilder: a decoded BGR face packed again as JPEG (the record's bytes), and read back
    for name, quality in (("face420.jpg", 95), ("odd422.jpg", 80), ("grey.jpg", 95)):
        out.append(("pack_img", name, {"quality": quality}))
        out.append(("unpack_img", name, {"quality": quality}))
    return out


def mxnet_calls(folder: str) -> None:
    import mxnet as mx
    import numpy as np
    from mxnet import ndarray as nd

    results = []
    for call, name, kwargs in calls():
        with open(os.path.join(folder, name), "rb") as f:
            data = f.read()
        args = dict(kwargs)
        flag = args.pop("flag", 1)
        if call in ("pack_img", "unpack_img"):
            bgr = mx.image.imdecode(data, to_rgb=0).asnumpy()
            header = mx.recordio.IRHeader(0, 3.0, 7, 0)
            record = mx.recordio.pack_img(header, bgr, img_fmt=".jpg", **args)
            if call == "pack_img":
                image = mx.nd.array(np.frombuffer(record, dtype=np.uint8), dtype=np.uint8)
            else:
                image = mx.nd.array(mx.recordio.unpack_img(record)[1], dtype=np.uint8)
        elif call == "imdecode":
            image = mx.image.imdecode(data, flag=flag, **args)
        else:
            image = mx.image.imdecode(data, flag=flag)
        if call == "resize_short":
            image = mx.image.resize_short(image, **args)
        elif call == "imresize":
            image = mx.image.imresize(image, **args)
        elif call == "copyMakeBorder":
            image = mx.image.copyMakeBorder(image, **args)
        elif call == "transpose_flip":
            image = mx.ndarray.flip(data=nd.transpose(image, axes=(2, 0, 1)), axis=2)
        pixels = image.asnumpy()
        results.append(
            {
                "call": call,
                "input": name,
                "kwargs": kwargs,
                "shape": list(pixels.shape),
                "dtype": str(pixels.dtype),
                "sha256": hashlib.sha256(pixels.tobytes()).hexdigest(),
            }
        )
        if call == "imdecode" and name.endswith(".png") and flag == 0:
            # recio's grey of a PNG is within a level of libpng's: the pixels are kept

            np.save(os.path.join(folder, "face_png_grey.npy"), pixels)
        if os.environ.get("MX_GOLDEN_DUMP"):  # the arrays themselves, to look at a mismatch
            np.save(os.path.join(os.environ["MX_GOLDEN_DUMP"], f"{len(results) - 1}.npy"), pixels)
    golden = {"mxnet": mx.__version__, "calls": results}
    with open(os.path.join(folder, "mxnet_calls.json"), "w") as f:
        json.dump(golden, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("make", "mxnet"):
        sys.exit(__doc__)
    (make if sys.argv[1] == "make" else mxnet_calls)(sys.argv[2])
