"""Every ``mx.`` call InsightFace's data code makes, through ``recio.mx``, against MXNet 1.9.1.

tests/data/mx_golden holds the inputs (JPEGs of every sampling, a PNG) and what MXNet 1.9.1
made of them (tools/make_mx_golden.py): per call the shape, dtype and SHA-256 of the pixels.
"""

import hashlib
import json

import numpy as np
import pytest

import recio.mx as mx
from recio.mx import ndarray as nd

from .._paths import REPO

GOLDEN = REPO / "tests" / "data" / "mx_golden"
CALLS = json.loads((GOLDEN / "mxnet_calls.json").read_text())


def _run(call: str, name: str, kwargs: dict) -> np.ndarray:
    data = (GOLDEN / name).read_bytes()
    args = dict(kwargs)
    flag = args.pop("flag", 1)
    if call in ("pack_img", "unpack_img"):  # as RecBuilder packs a decoded (BGR) face
        bgr = mx.image.imdecode(data, to_rgb=0).asnumpy()
        record = mx.recordio.pack_img(
            mx.recordio.IRHeader(0, 3.0, 7, 0), bgr, img_fmt=".jpg", **args
        )
        if call == "pack_img":
            return np.frombuffer(record, dtype=np.uint8)
        return mx.recordio.unpack_img(record)[1]
    if call == "imdecode":
        return mx.image.imdecode(data, flag=flag, **args).asnumpy()
    image = mx.image.imdecode(data, flag=flag)
    if call == "resize_short":
        image = mx.image.resize_short(image, **args)
    elif call == "imresize":
        image = mx.image.imresize(image, **args)
    elif call == "copyMakeBorder":
        image = mx.image.copyMakeBorder(image, **args)
    elif call == "transpose_flip":
        image = mx.ndarray.flip(data=nd.transpose(image, axes=(2, 0, 1)), axis=2)
    return image.asnumpy()


def _id(case: dict) -> str:
    args = ",".join(f"{k}={v}" for k, v in sorted(case["kwargs"].items()))
    return f"{case['call']}-{case['input']}-{args}"


def test_the_golden_is_mxnet_1_9_1s_and_covers_every_call():
    assert CALLS["mxnet"] == "1.9.1"
    made = {case["call"] for case in CALLS["calls"]}
    assert made == {
        "imdecode", "resize_short", "imresize", "copyMakeBorder", "transpose_flip", "pack_img",
        "unpack_img",
    }  # fmt: skip
    interps = {c["kwargs"].get("interp", 1) for c in CALLS["calls"] if c["call"] == "imresize"}
    assert interps == {0, 1, 2, 3, 4}


# a PNG's grey: libpng's RGB-to-grey (which OpenCV asks for) against Pillow's luma
WITHIN_A_LEVEL = {"imdecode-face.png-flag=0"}


@pytest.mark.parametrize("case", CALLS["calls"], ids=_id)
def test_recio_mx_gives_mxnets_pixels(case):
    pixels = _run(case["call"], case["input"], case["kwargs"])
    assert list(pixels.shape) == case["shape"] and str(pixels.dtype) == case["dtype"]
    if _id(case) in WITHIN_A_LEVEL:
        mxnet = np.load(GOLDEN / "face_png_grey.npy")
        assert np.abs(mxnet.astype(int) - pixels.astype(int)).max() <= 1
        return
    assert hashlib.sha256(pixels.tobytes()).hexdigest() == case["sha256"]
